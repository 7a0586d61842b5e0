"""The Memory page's trace table and figures in words: step order, "-" for a phase the estimate has
no figure for, FLOPs in SI units, no "-0.00%"."""

from types import SimpleNamespace

from ui.trace_view import difference_text, flops_text, trace_table


def test_phases_read_in_step_order_with_a_dash_where_the_estimate_has_none():
    # the figures of the review's Llama-3.1-8B trace (GiB), given in alphabetical order as a dict may hold them
    traced = SimpleNamespace(
        phases_gib={
            "backward, embeddings": 119.676,
            "backward, middle layers": 118.94,
            "end of forward": 119.242,
            "forward": 120.221,
            "optimizer step": 179.49,
        }
    )
    estimate = SimpleNamespace(
        phases_gib={"backward, embeddings": 119.661, "end of forward": 119.242, "optimizer step": 179.49}
    )
    table = trace_table(traced, estimate)
    assert list(table["phase"]) == [
        "forward", "end of forward", "backward, middle layers", "backward, embeddings", "optimizer step"
    ]  # fmt: skip
    assert list(table["traced (GiB)"]) == ["120.22", "119.24", "118.94", "119.68", "179.49"]
    assert list(table["estimate (GiB)"]) == ["-", "119.24", "-", "119.66", "179.49"]
    assert "None" not in table.to_string()


def test_flops_and_differences_read_for_a_person():
    assert flops_text(4.88e10) == "48.8 GFLOP"  # 6 x 8.03e9 parameters ~ 4.8e10 per token
    assert flops_text(1.234e12) == "1.23 TFLOP"
    assert difference_text(-0.000001) == "same to 0.01%"
    assert difference_text(-0.0123) == "-1.23%"
