"""The inference mode in the CLI and the pages."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from calculators.interface.cli import main
from tests.apptest_helpers import open_app


def test_cli_inference_mode_reports_the_kv_cache_and_the_concurrency(capsys):
    """Llama-3.1-8B, bf16 KV cache at 8192 tokens: 2 x 32 x 8 x 128 x 8192 x 2 B = 1 GiB per sequence."""
    code = main(["memory", "--model", "llama-3.1-8b", "--mode", "inference", "--gpu-memory-gib", "24", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert result["kv_cache_per_sequence_gib"] == pytest.approx(1.0)
    assert result["components_gib"]["weights"] == pytest.approx(8_030_261_248 * 2 / 2**30)
    assert result["peak_gib"] == pytest.approx(sum(result["components_gib"].values()))
    assert result["fit"]["max_concurrency"] == 7  # (24 - 16.2 fixed) / 1.0 GiB per sequence


def test_cli_inference_rejects_a_tensor_parallel_that_does_not_divide_the_heads(capsys):
    code = main(["memory", "--model", "llama-3.1-8b", "--mode", "inference", "--tensor-parallel", "3"])
    assert code == 2 and "tensor parallel 3 does not divide the 32 attention heads" in capsys.readouterr().err


def test_memory_page_in_inference_mode_shows_concurrency_and_decode_speed():
    app = open_app(mode="inference", gpu="RTX-4090-24GB")
    assert any(e.value.startswith("Fits:") for e in app.success)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Most sequences that fit"] == "7"
    assert metrics["KV cache per sequence"] == "1.000 GiB"
    assert "Decode tokens/s per sequence" in metrics


def test_memory_page_in_serve_mode_writes_counts_and_gib_with_their_units():
    """One sequence is 'sequence', not 'sequence(s)'; the parts table says GiB per GPU (the KV cache is
    1 GiB at 8,192 tokens, drawn to 3 decimals as the metric writes it)."""
    app = open_app(mode="inference", gpu="RTX-4090-24GB")
    verdict = next(e.value for e in app.success if e.value.startswith("Fits:"))
    assert "for 1 sequence of 8,192 tokens" in verdict and "(s)" not in verdict
    parts = next(frame for frame in app.dataframe if "part" in frame.value.columns)
    assert list(parts.value.columns) == ["part", "GiB per GPU"]
    assert parts.value.set_index("part").loc["KV cache", "GiB per GPU"] == pytest.approx(1.0)
    assumptions = " ".join(m.value for m in app.markdown)
    assert "one prefill chunk of 2,048 tokens" in assumptions
    assert "1 sequence, an estimate" in assumptions and "sequence(s)" not in assumptions


def test_switching_to_inference_and_back_keeps_the_training_settings():
    app = open_app(mb="4", zero="2", gpus="4")
    app.selectbox(key="mode").set_value("inference").run()
    app.selectbox(key="mode").set_value("train").run()
    assert not app.exception
    assert app.number_input(key="micro_batch").value == 4
    assert app.selectbox(key="zero").value == 2


def test_compare_page_matrix_follows_the_inference_mode():
    app = open_compare_inference()
    table = app.dataframe[0].value.set_index("name")
    assert {"max_concurrency", "max_context_len", "decode_tokens_per_s"} <= set(table.columns)
    assert table.loc["RTX-4090-24GB", "max_concurrency"] == 7
    assert table.loc["H100-SXM5-80GB", "decode_tokens_per_s"] > table.loc["A100-SXM4-80GB", "decode_tokens_per_s"]


def open_compare_inference() -> AppTest:
    return open_app("app_pages/compare.py", mode="inference")


def test_cost_page_answers_for_serving_in_inference_mode():
    """Issue 33: Time and cost serves the inference mode (tests/test_serve_cost_page.py has the details)."""
    app = open_app("app_pages/cost.py", mode="inference")
    assert "Time per output token (ms)" in [metric.label for metric in app.metric]


def test_the_serve_verdict_links_to_its_cost_and_its_plan():
    app = open_app(mode="inference")
    links = {link.proto.label: link.proto.page for link in app.get("page_link")}
    assert links["Throughput, latency and cost per million tokens"] == "cost"
    assert links["Cheapest way to serve it within latency targets"] == ""  # the landing page: Plan a run
