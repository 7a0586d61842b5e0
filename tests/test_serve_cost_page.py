"""Time and cost in the Serve mode, and the Memory page's link to it."""

from tests.apptest_helpers import open_app


def test_cost_page_in_serve_mode_shows_throughput_latency_and_cost_per_million_tokens():
    app = open_app("app_pages/cost.py", mode="inference", gpu="H100-SXM5-80GB", conc="8")
    metrics = {metric.label: metric.value for metric in app.metric}
    for label in ("Output tokens/s per GPU", "Time to first token (ms)", "Time per output token (ms)"):
        assert label in metrics
    assert metrics["Concurrent sequences"].startswith("8 of ")
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
        assert row["USD per hour (one instance)"] in sheet[(row["provider"], row["instance"])]
