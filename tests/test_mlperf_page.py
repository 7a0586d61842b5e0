"""AppTest of the Compare page's MLPerf Training section."""

from tests.apptest_helpers import open_app


def mlperf_table(app):
    return next(frame.value for frame in app.dataframe if "predicted / published" in frame.value.columns)


def test_best_results_of_the_picked_gpus_with_system_link_and_cost():
    app = open_app("app_pages/compare.py")
    app.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB", "MI300X-192GB"]).run()
    assert not app.exception
    table = mlperf_table(app)
    assert set(table["GPU"]) == {"H100-SXM5-80GB", "MI300X-192GB"}
    h100 = table[(table["GPU"] == "H100-SXM5-80GB") & (table["benchmark"] == "Llama 2 70B LoRA")]
    assert list(h100["scale"]) == ["8 accelerators", "largest scale"]
    at_eight = h100.iloc[0]
    assert at_eight["accelerators"] == 8 and at_eight["result"].startswith("https://github.com/mlcommons/")
    assert at_eight["cost to reproduce (USD, on demand)"].startswith("$")
    assert not table.astype(str).apply(lambda column: column.str.contains("None")).any().any()
    assert any(chart for chart in app.get("plotly_chart"))


def test_closed_the_section_draws_nothing_until_opened():
    """Drawn only while open: its table, benchmark box and chart are not sent on every sidebar change."""
    app = open_app("app_pages/compare.py", open_sections=False)
    (section,) = [box for box in app.expander if box.label.startswith("MLPerf Training")]
    assert list(section.children.values()) == []
    assert not [frame for frame in app.dataframe if "predicted / published" in frame.value.columns]
    app.session_state["compare_mlperf_open"] = True
    app.run()
    assert not app.exception and len(mlperf_table(app)) > 0


def test_the_chart_follows_the_benchmark_chosen():
    app = open_app("app_pages/compare.py")
    app.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB", "B200-SXM-180GB"]).run()
    app.selectbox(key="cmp_mlperf_benchmark").set_value("gpt3").run()
    assert not app.exception
    assert app.selectbox(key="cmp_mlperf_benchmark").value == "gpt3"


def test_gpus_without_results_get_a_hint():
    app = open_app("app_pages/compare.py")
    app.multiselect(key="cmp_pick").set_value(["V100-SXM2-16GB", "T4-16GB"]).run()
    assert any("MLPerf Training result" in info.value for info in app.info)


def test_validation_page_groups_the_ratios_by_benchmark_and_accelerator():
    app = open_app("app_pages/validation.py")
    grouped = next(frame.value for frame in app.dataframe if "median predicted / published" in frame.value.columns)
    lora_h100 = grouped[(grouped["benchmark"] == "Llama 2 70B LoRA") & (grouped["accelerator"] == "H100-SXM5-80GB")]
    assert len(lora_h100) == 1 and float(lora_h100.iloc[0]["median predicted / published"]) > 0
    assert "MLPerf Training time-to-train" in [header.value for header in app.header]


def test_the_chart_opens_on_a_benchmark_with_predictions():
    # the review found BERT-large, which has no prediction, chosen by default (first alphabetically)
    app = open_app("app_pages/compare.py")  # the default sidebar model, llama-3.1-8b
    app.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB", "B200-SXM-180GB"]).run()
    assert app.selectbox(key="cmp_mlperf_benchmark").value == "llama31_8b"
    vision = open_app("app_pages/compare.py", model="resnet50")
    vision.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB"]).run()
    assert vision.selectbox(key="cmp_mlperf_benchmark").value == "resnet"


def test_default_benchmark_follows_the_model_else_llama2_lora():
    from ui.mlperf_view import default_benchmark

    predicted = ["gpt3", "llama2_70b_lora", "llama31_8b", "resnet"]
    assert default_benchmark("meta-llama/Llama-2-70b-hf", predicted) == "llama2_70b_lora"
    assert default_benchmark("resnet50", predicted) == "resnet"
    assert default_benchmark("bert-large-uncased", predicted) == "llama2_70b_lora"  # no BERT prediction
    assert default_benchmark("Qwen/Qwen3-0.6B", predicted) == "llama2_70b_lora"
    assert default_benchmark(None, ["gpt3"]) == "gpt3"


def test_validation_shows_a_dash_and_the_reason_where_nothing_is_predicted():
    app = open_app("app_pages/validation.py")
    grouped = next(frame.value for frame in app.dataframe if "median predicted / published" in frame.value.columns)
    bert = grouped[grouped["benchmark"] == "BERT-large"]
    assert len(bert) > 0
    assert set(bert["predicted"]) == {"-"}  # not "0"
    assert (bert["not predicted because"].str.len() > 0).all()  # each group says why
    assert bert["not predicted because"].str.contains("no encoder time model").any()
    assert set(bert["median predicted / published"]) == {"-"}
