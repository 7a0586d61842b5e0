"""Time and cost in the Serve mode, and the Memory page's link to it."""

from tests.apptest_helpers import open_app


def test_cost_page_in_serve_mode_shows_throughput_latency_and_cost_per_million_tokens():
    app = open_app("app_pages/cost.py", mode="inference", gpu="H100-SXM5-80GB", conc="8")
    metrics = {metric.label: metric.value for metric in app.metric}
    for label in ("Output tokens/s per GPU", "Time to first token (ms)", "Time per output token (ms)"):
        assert label in metrics
    assert metrics["Concurrent sequences"] == "8"
    assert len(app.get("plotly_chart")) == 1
    table = next(frame.value for frame in app.dataframe if "USD per million output tokens" in frame.value.columns)
    assert len(table) > 0 and (table["USD per million output tokens"] > 0).all()
    assert "None" not in table.astype(str).to_numpy()


def test_throughput_optimal_concurrency_and_a_precision_the_gpu_cannot_run():
    app = open_app("app_pages/cost.py", mode="inference", gpu="V100-SXM2-32GB")
    app.checkbox(key="serve_best_concurrency").check().run()
    assert not app.exception
    app.selectbox(key="s_weight_precision").set_value("fp4").run()
    assert not app.exception
    assert any("runs no fp4 serving kernel" in error.value for error in app.error)


def test_memory_serve_verdict_links_to_time_and_cost():
    app = open_app(mode="inference", gpu="H100-SXM5-80GB")
    links = [element for element in app.get("page_link")]
    assert links, "the Serve verdict links to the Time and cost page"


def test_the_cost_table_bills_whole_instances():
    """Llama-2-7B fits one GPU: an 8-GPU instance bills its whole price and runs 8 replicas, never one
    GPU's share of it."""
    from calculators.cost.prices import load_prices

    app = open_app("app_pages/cost.py", mode="inference", model="llama-2-7b", gpu="H100-SXM5-80GB", conc="8")
    table = next(frame.value for frame in app.dataframe if "USD per million output tokens" in frame.value.columns)
    sheet: dict[tuple[str, str], set[float]] = {}  # an instance type may be priced in several regions
    for price in load_prices():
        sheet.setdefault((price.provider, price.instance_type), set()).add(round(price.on_demand_usd_per_hour, 2))
    on_demand = table[(table["pricing"] == "on demand") & (table["GPUs per instance"] == 8)]
    assert len(on_demand) > 0
    for row in on_demand.to_dict("records"):
        assert row["replicas per instance"] == 8  # 8 GPUs // 1 GPU per replica
        assert row["USD per hour"] in sheet[(row["provider"], row["instance"])]


def test_time_and_cost_reads_the_sidebars_context_as_memory_does():
    """Llama-3.1-8B in bf16 on an H100 (80 GiB): its KV cache is 2 x 32 layers x 8 kv-heads x 128 x 2 B
    = 131,072 B per token, 1 GiB at 8,192 tokens; the weights 14.96 GiB, activations 0.20 and overhead
    1.05 GiB leave 63.8 GiB, so 63 sequences of the sidebar's 8,192 tokens fit. Time and cost's requests
    of 1,024 + 1,024 tokens fit more (a quarter of the KV cache each), and it says both, with the same
    63 the Memory page shows."""
    memory = open_app(mode="inference", model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    assert {metric.label: metric.value for metric in memory.metric}["Most sequences that fit"] == "63"
    app = open_app("app_pages/cost.py", mode="inference", model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    captions = " ".join(caption.value for caption in app.caption)
    assert "input 1,024 + output 1,024 = 2,048 tokens" in captions
    assert "context of 8,192 tokens" in captions
    assert "63 at the full context of 8,192 tokens" in captions
    metrics = {metric.label: metric.value for metric in app.metric}
    assert metrics["Concurrent sequences"] == "1"
    # at one sequence the group's rate is the sequence's rate: the two figures read alike
    assert metrics["Output tokens/s per GPU"] == metrics["Output tokens/s per sequence"]
    # one decode step of one 8B model is bound by reading its weights, named as Memory names it
    memory_bound = {metric.label: metric.value for metric in memory.metric}["Bound by"]
    assert metrics["Decode step bound by"] == memory_bound == "memory bandwidth"


def test_requests_longer_than_the_sidebars_context_are_refused_in_words():
    """A deployment sized for 1,024 tokens per sequence cannot take requests of 1,024 + 1,024 tokens
    (vLLM rejects them beyond --max-model-len): one line in words, no speed and no cost table."""
    app = open_app("app_pages/cost.py", mode="inference", model="llama-3.1-8b", gpu="H100-SXM5-80GB", ctx="1024")
    errors = [error.value for error in app.error]
    assert any("2,048 tokens per request is longer than the context of 1,024 tokens" in error for error in errors)
    assert not app.metric and not app.dataframe


def test_the_cost_table_puts_the_answers_first_with_units():
    app = open_app("app_pages/cost.py", mode="inference", model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    table = next(frame.value for frame in app.dataframe if "USD per million output tokens" in frame.value.columns)
    assert list(table.columns[:4]) == [
        "GPU",
        "USD per million output tokens",
        "USD per million input tokens",
        "USD per hour",
    ]
    assert "ms per output token" in table.columns


def test_the_throughput_chart_has_readable_ticks_in_its_units():
    """Concurrency 1 to the most that fit on a log axis with 1-2-5 ticks; the time per output token on
    its own axis in ms, not ticks aligned to the left axis' grid (5.46, 13.05, ...)."""
    from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue
    from calculators.models.presets import get_preset
    from calculators.timing.serving import ServingRequest, serving_speeds
    from calculators.workload.serving import ServingSettings
    from ui.serve_cost_view import throughput_latency_figure

    gpu = find_gpu("H100-SXM5-80GB", load_gpu_catalogue())
    speeds = serving_speeds(
        get_preset("llama-3.1-8b"), ServingSettings(), gpu, ServingRequest(input_len=1024, output_len=1024)
    )
    layout = throughput_latency_figure(speeds).layout
    assert layout.xaxis.type == "log"
    assert list(layout.xaxis.ticktext[:7]) == ["1", "2", "5", "10", "20", "50", "100"]
    right = layout.yaxis2
    assert right.overlaying == "y" and right.side == "right"
    assert right.ticksuffix == " ms" or all(text.endswith(" ms") for text in right.ticktext)
    assert right.tickvals is not None or right.tickmode == "auto"
