"""AppTest of the Compare GPUs page: table, fit matrix, side by side, user GPUs."""

from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue
from calculators.memory.fit_matrix import fit_matrix
from calculators.models.presets import get_preset
from calculators.workload.training import TrainingSettings
from tests.apptest_helpers import light_tables, open_app


def test_table_holds_every_gpu_with_the_fit_matrix_of_the_workload():
    app = open_compare(model="gpt2")
    table = app.dataframe[0].value
    assert len(table) == len(load_gpu_catalogue())
    h100 = table.set_index("name").loc["H100-SXM5-80GB"]
    expected = fit_matrix(get_preset("gpt2"), TrainingSettings(), [find_gpu("H100-SXM5-80GB")])[0]
    # the fit columns are text for reading ("none fits" where nothing fits): the same number, written out
    assert h100["verdict"] == "fits" and h100["max_micro_batch"] == f"{expected.max_micro_batch:,}"
    assert h100["memory_bandwidth_tbps"] == 3.35 and h100["bf16_tflops"] == 989


def test_filters_narrow_the_table():
    app = open_compare()
    app.multiselect(key="cmp_vendors").set_value(["AMD"]).run()
    table = app.dataframe[0].value
    assert set(table["vendor"]) == {"AMD"} and len(table) >= 3
    app.number_input(key="cmp_min_memory").set_value(256).run()
    assert (app.dataframe[0].value["memory_gb"] >= 256).all()


def test_fits_only_keeps_gpus_that_fit_the_workload():
    app = open_compare(model="llama-3.1-8b", prec="bf16", ckpt="full", impl="fused")
    app.checkbox(key="cmp_fits_only").check().run()
    table = app.dataframe[0].value
    assert len(table) > 0 and (table["verdict"] != "does not fit").all()
    assert "RTX-4090-24GB" not in set(table["name"])


def test_side_by_side_shows_the_picked_gpus_as_columns():
    app = open_compare()
    app.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB", "MI300X-192GB", "RTX-4090-24GB"]).run()
    side = light_tables(app)[0].set_index("")
    assert list(side.columns) == ["H100-SXM5-80GB", "MI300X-192GB", "RTX-4090-24GB"]
    assert side.loc["memory (GB, vendor's figure)", "MI300X-192GB"] == "192"
    assert side.loc["memory bandwidth (TB/s)", "H100-SXM5-80GB"] == "3.35"
    assert side.loc["link bandwidth (GB/s, both ways)", "H100-SXM5-80GB"] == "900"
    assert not any("_" in label for label in side.index)  # no raw field names
    # one Markdown table: an empty cell is an escaped "-", drawn as "-", not a bullet point
    app.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB", "A100-SXM4-80GB"]).run()
    side = light_tables(app)[0].set_index("")
    assert side.loc["FP8 TFLOPS", "A100-SXM4-80GB"] == "-" and side.loc["FP8 TFLOPS", "H100-SXM5-80GB"] == "1,979"
    assert "| FP8\u00a0TFLOPS | 1,979 | \\- |" in [m.value for m in app.markdown if m.value.startswith("| ")][0]


def test_a_user_gpu_is_added_and_used_by_the_matrix_and_the_sidebar():
    app = open_compare(model="gpt2")
    app.text_input(key="user_gpu_name").input("My-Card-48GB")
    app.number_input(key="ug_memory_gb").set_value(48.0)
    app.button[0].click().run()  # the form's submit button
    assert not app.exception
    table = app.dataframe[0].value.set_index("name")
    assert table.loc["My-Card-48GB", "yours"] and table.loc["My-Card-48GB", "verdict"] == "fits"
    app.switch_page("app_pages/memory.py").run()
    app.selectbox(key="gpu").set_value("My-Card-48GB").run()
    assert any("My-Card-48GB" in element.value for element in app.success)


def test_a_bad_user_gpu_gets_a_clear_message_and_the_page_keeps_working():
    app = open_compare()
    app.text_input(key="user_gpu_name").input("Bad,Name")
    app.button[0].click().run()
    assert not app.exception
    assert any("name" in element.value and "comma" in element.value for element in app.error)
    assert len(app.dataframe[0].value) == len(load_gpu_catalogue())


def test_a_host_without_a_gpu_driver_is_no_news_to_a_visitor():
    app = open_compare()
    shown = [element.value for element in [*app.caption, *app.info, *app.warning, *app.error]]
    assert not any("NVML" in text or "driver" in text for text in shown)


def _catalogue_csv(name: str, memory_gb: str = "64") -> bytes:
    """The H100 row of the catalogue under another name, as a user's CSV."""
    import csv
    import io

    from calculators.hardware.catalogue import COLUMNS, DEFAULT_CATALOGUE_PATH

    with open(DEFAULT_CATALOGUE_PATH, newline="") as handle:
        row = next(r for r in csv.DictReader(handle) if r["name"] == "H100-SXM5-80GB")
    row |= {"name": name, "memory_gb": memory_gb}
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerow(row)
    return buffer.getvalue().encode()


def test_an_uploaded_csv_adds_its_gpus():
    app = open_compare()
    app.file_uploader(key="user_gpu_upload").set_value(("mine.csv", _catalogue_csv("Lab-Card-64GB"), "text/csv"))
    app.run()
    assert not app.exception
    table = app.dataframe[0].value.set_index("name")
    assert table.loc["Lab-Card-64GB", "memory_gb"] == 64 and table.loc["Lab-Card-64GB", "yours"]


def test_a_malformed_upload_names_the_row_and_field_and_keeps_earlier_gpus():
    app = open_compare()
    app.file_uploader(key="user_gpu_upload").set_value(("a.csv", _catalogue_csv("Lab-Card-64GB"), "text/csv"))
    app.run()
    app.file_uploader(key="user_gpu_upload").set_value(("b.csv", _catalogue_csv("Broken", "-1"), "text/csv"))
    app.run()
    assert not app.exception
    assert any("b.csv row 1 (Broken): memory_gb" in element.value for element in app.error)
    assert "Lab-Card-64GB" in set(app.dataframe[0].value["name"])


def open_compare(**query: str):
    return open_app("app_pages/compare.py", **query)


def test_gpus_whose_software_cannot_run_the_workload_are_marked_and_filtered():
    """QLoRA needs bitsandbytes' NF4 kernels: TPUs and Trainium cannot run it, and the
    'fits and runs' filter leaves them out; Inferentia trains nothing."""
    app = open_compare(model="llama-2-7b", mode="finetune-qlora", ckpt="full")
    table = app.dataframe[0].value.set_index("name")
    assert "bitsandbytes" in table.loc["TPU-v5p", "stack_problem"]
    assert table.loc["H100-SXM5-80GB", "stack_problem"] == "-"  # runs: nothing to say, and no "None"
    assert "serving only" in table.loc["Inferentia2-32GB", "stack_problem"]
    app.checkbox(key="cmp_fits_only").check().run()
    shown = set(app.dataframe[0].value["name"])
    assert "H100-SXM5-80GB" in shown and not shown & {"TPU-v5p", "Trainium2-96GB", "Inferentia2-32GB"}


def test_serve_mode_says_does_not_fit_where_no_decode_speed_and_agrees_with_memory():
    """Llama-3.1-8B in bf16: 16.1 GB of weights do not fit a T4-16GB, which has no decode speed ("does not
    fit", never "None"). On an H100 one decode step at 8,192 tokens reads the weights less the embedding
    table (8.03 B - 0.53 B parameters x 2 B = 15.0 GB) and a 1 GiB KV cache (1.07 GB) at 0.8 x 3.35 TB/s:
    6.0 ms, 167 tokens/s, written alike on Compare and on Memory."""
    app = open_compare(mode="inference", model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    table = app.dataframe[0].value.set_index("name")
    assert table.loc["T4-16GB", "decode_tokens_per_s"] == "does not fit"
    assert "None" not in table["decode_tokens_per_s"].astype(str).to_list()
    app.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB", "T4-16GB"]).run()
    side = light_tables(app)[0].set_index("")
    assert side.loc["decode tokens/s per sequence", "H100-SXM5-80GB"] == "167"
    assert side.loc["decode tokens/s per sequence", "T4-16GB"] == "does not fit"
    memory = open_app(mode="inference", model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    assert {metric.label: metric.value for metric in memory.metric}["Decode tokens/s per sequence"] == "167"


def test_a_change_of_the_workload_changes_the_fit_columns_and_leaves_the_charts_as_sent():
    """The two scatters draw the catalogue, not the workload: after a change of the micro-batch each is sent
    exactly as before (same figure, same element id), so the browser keeps it instead of drawing it again."""
    app = open_app("app_pages/compare.py", open_sections=False, model="gpt2")  # the roofline, closed, not drawn
    sent = [(chart.proto.id, chart.proto.spec) for chart in app.get("plotly_chart")]
    headroom_gib = app.dataframe[0].value.set_index("name").loc["H100-SXM5-80GB", "headroom_gib"]
    micro_batch = next(box for box in app.sidebar.number_input if box.label == "Micro-batch")
    micro_batch.set_value(32).run()  # GPT-2's activations at 32 x 1,024 tokens take most of an H100's 80 GB
    assert app.dataframe[0].value.set_index("name").loc["H100-SXM5-80GB", "headroom_gib"] < headroom_gib - 50
    assert [(chart.proto.id, chart.proto.spec) for chart in app.get("plotly_chart")] == sent
    assert len(sent) == 2 and all(chart_id for chart_id, _ in sent)
