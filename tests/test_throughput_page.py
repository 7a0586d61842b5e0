"""The Validation page's throughput section and the Time and cost page's step view."""

from __future__ import annotations

from apptest_helpers import open_app


def test_validation_page_shows_the_throughput_table():
    app = open_app("app_pages/validation.py")
    assert not app.exception
    assert "Training throughput" in [header.value for header in app.header]
    table = next(frame.value for frame in app.table if "estimate / measured" in frame.value.columns)
    assert len(table) == 17
    assert {"measured tokens/s/GPU", "estimate tokens/s/GPU"} <= set(table.columns)
    labels = [metric.label for metric in app.metric]
    assert "Median estimate / measured" in labels and "Worst row" in labels


def test_cost_page_shows_mfu_and_the_step_charts():
    app = open_app("app_pages/cost.py")
    assert not app.exception
    # the time-cost chart (CPU vs GPU vs mixed precision is drawn for image models only); the step's
    # charts wait for their section
    assert len(app.get("plotly_chart")) == 1
    # the reader opens the step of the sidebar's layout (a section of its own when that layout does not
    # fit, as with the defaults) and "Step breakdown and scaling" in it
    app.session_state["cost_unfit_step_open"] = True
    app.session_state["cost_step_open"] = True
    app.run()
    assert "MFU" in [metric.label for metric in app.metric]
    assert len(app.get("plotly_chart")) >= 3  # time-cost, step breakdown, scaling


def test_validation_page_shows_each_throughput_rows_command():
    """The same `python -m calculators time ...` line that `validation --json` gives as cli_command."""
    from calculators.validation.throughput import throughput_table

    app = open_app("app_pages/validation.py")
    shown = {block.value for block in app.code}
    assert {row.command for row in throughput_table()} <= shown
