"""The serving rows (data/serving_throughput.csv): how each is read and what is left out, and why."""

from calculators.validation.serving import load_rows, row_inputs, serving_table, summary_by_source


def _row(row_id: str) -> dict:
    return next(row for row in load_rows() if row["id"] == row_id)


def test_a_tensorrt_llm_row_is_read_as_its_notes_say():
    """S408: Llama 3.3 70B FP8 on two H100s, 128 in / 128 out, offline: the throughput-optimal concurrency."""
    model, gpu, settings, request, assumptions = row_inputs(_row("S408"))
    assert (model, gpu) == ("meta-llama/Llama-3.3-70B-Instruct", "H100-SXM5-80GB")
    assert (settings.weight_precision, settings.kv_cache_precision, settings.tensor_parallel) == ("fp8", "fp8", 2)
    assert (request.input_len, request.output_len, request.concurrency) == (128, 128, 0)
    assert any("Whole tensor-parallel group" in line for line in assumptions)


def test_a_nim_row_keeps_its_concurrency_and_latencies():
    model, gpu, settings, request, _ = row_inputs(_row("S507"))
    assert (request.input_len, request.output_len, request.concurrency) == (5000, 500, 25)
    row = next(row for row in serving_table() if row.id == "S507")
    assert row.measured_ttft_ms == 688.69 and row.measured_tpot_ms == 38.75
    assert row.estimate_ttft_ms is not None and row.estimate_tpot_ms is not None


def test_rows_that_cannot_be_estimated_say_why():
    table = {row.id: row for row in serving_table()}
    assert "not among the bundled models" in table["S513"].why_not
    assert "variable request lengths" in table["S522"].why_not
    assert table["S513"].estimate is None and table["S513"].ratio is None


def test_a_concurrency_beyond_what_fits_runs_what_fits():
    """NIM at 250 users on two H100s: the KV cache holds fewer, the rest wait in the queue (its TTFT of 88 s)."""
    row = next(row for row in serving_table() if row.id == "S512")
    assert row.concurrency < 250
    assert any("queues the others" in line for line in row.assumptions)


def test_summary_by_source_counts_every_row():
    table = serving_table()
    summaries = {summary.source_kind: summary for summary in summary_by_source(table)}
    assert summaries["all"].rows == len(table) == 118
    assert summaries["vLLM (Vultr)"].estimated == 0 and summaries["vLLM (Vultr)"].median_ratio is None
    assert summaries["TensorRT-LLM"].estimated == 100


def test_validation_page_shows_the_serving_table():
    from tests.apptest_helpers import open_app

    app = open_app("app_pages/validation.py")
    assert not app.exception
    assert "Serving throughput" in [header.value for header in app.header]
    frames = [frame.value for frame in app.table]
    rows = next(frame for frame in frames if "estimate output tokens/s" in frame.columns)
    assert len(rows) == 118
    assert "None" not in rows.astype(str).to_numpy()
    summaries = [frame for frame in frames if "median estimate / measured" in frame.columns]  # image models' too
    assert any(set(frame.index) >= {"TensorRT-LLM", "NVIDIA NIM", "all"} for frame in summaries)
