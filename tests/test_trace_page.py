"""AppTest of the Memory page's "Trace exactly" action and the trace CLI."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from calculators.interface.cli import main
from tests.apptest_helpers import APP_PATH

pytest.importorskip("torch")


def test_the_page_traces_on_request_and_shows_both_results_side_by_side():
    app = AppTest.from_file(APP_PATH, default_timeout=120)
    app.query_params["model"] = "gpt2"
    app.query_params["seq"] = "128"
    app.query_params["impl"] = "fused"
    app.session_state["memory_trace_open"] = True  # its section is drawn only while open, as a reader opens it
    app.switch_page("app_pages/memory.py").run()  # the Plan page is the landing page
    assert not any(m.label == "Traced peak (allocated)" for m in app.metric)  # nothing runs on load
    next(b for b in app.button if b.label == "Trace this step").click().run()
    assert not app.exception
    metrics = {m.label: m for m in app.metric}
    assert "Traced peak (allocated)" in metrics and "Estimate (allocated)" in metrics
    difference = metrics["Estimate against the trace"].value
    assert difference == "same to 0.01%" or abs(float(difference.rstrip("%"))) < 3.0
    assert metrics["Compute per token"].value.endswith("FLOP")


def test_a_configuration_the_tracer_cannot_run_gives_a_clear_message(capsys):
    code = main(["trace", "--model", "gpt2", "--seq-len", "64", "--optimizer", "adamw-8bit"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: could not trace this configuration: ")


def test_trace_cli_json_has_the_estimate_beside_the_trace(capsys):
    code = main(["trace", "--model", "gpt2", "--seq-len", "64", "--optimizer-impl", "fused", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"peak_gib", "phases_gib", "flops_total", "flops_per_token", "estimate_allocated_gib"} <= set(result)
    assert abs(result["estimate_error_fraction"]) < 0.03
