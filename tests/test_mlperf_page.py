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
