"""The training pages read the same workload the same way: no cost for a layout that does not fit,
the Memory and Compare pages' fewest GPUs in the same words, counts in the right number."""

from __future__ import annotations

from tests.apptest_helpers import light_tables, open_app

# Llama-3.1-8B in bf16-mixed with AdamW on one H100: 8.03e9 parameters x 16 bytes (bf16 weights and
# gradients, fp32 master copy, two fp32 Adam states) = 119.7 GiB before any activation, over the 80 GiB of
# an H100. Without ZeRO every data-parallel GPU holds all of it, so no count of GPUs fits: "needs ZeRO".
TOO_BIG = {"model": "llama-3.1-8b", "gpu": "H100-SXM5-80GB", "zero": "0"}


def _metric(app, label: str) -> str:
    (value,) = [metric.value for metric in app.metric if metric.label == label]
    return value


def test_memory_and_compare_give_the_same_fewest_gpus():
    memory = open_app("app_pages/memory.py", **TOO_BIG)
    assert _metric(memory, "Fewest GPUs") == "needs ZeRO"
    compare = open_app("app_pages/compare.py", **TOO_BIG)
    table = compare.dataframe[0].value.set_index("name")
    assert table.loc["H100-SXM5-80GB", "min_gpus"] == "needs ZeRO"
    assert table.loc["A100-SXM4-80GB", "min_gpus"] == "needs ZeRO"
    compare.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB", "A100-SXM4-80GB"]).run()
    side = light_tables(compare)[0].set_index("")
    assert list(side.loc["fewest GPUs"]) == ["needs ZeRO", "needs ZeRO"]


def _open_steps(**query: str):
    app = open_app("app_pages/cost.py", **query)
    app.session_state["cost_unfit_step_open"] = True
    app.session_state["cost_step_open"] = True
    return app.run()


def test_a_layout_that_does_not_fit_gets_no_cost_and_says_it_is_for_reference():
    app = _open_steps(**TOO_BIG)
    (label,) = [e.label for e in app.expander if "does not fit" in e.label and "1 x H100" in e.label]
    assert label.startswith("For reference only")
    assert any(
        w.value.startswith("Does not fit on 1 x H100-SXM5-80GB: these figures are for reference only")
        for w in app.warning
    )
    assert not [c.value for c in app.caption if "Cost at the cheapest" in c.value]


def test_a_layout_that_fits_is_costed_with_gpu_counts_in_words():
    # GPT-2 (124M parameters) takes about 2 GiB of state on an 80 GiB H100: it fits, so its scaling is costed
    app = _open_steps(model="gpt2", gpu="H100-SXM5-80GB", tokens_b="2")
    (costs,) = [c.value for c in app.caption if "Cost at the cheapest" in c.value]
    assert "1 GPU \\$" in costs and "1 GPUs" not in costs and "8 GPUs \\$" in costs


def test_the_assumptions_keep_formulas_as_written():
    app = open_app("app_pages/cost.py", model="gpt2", gpu="H100-SXM5-80GB", tokens_b="2")
    (assumptions,) = [block.value for block in app.markdown if "model FLOPs/token" in block.value]
    # markdown would read "*L*" and "*heads*" as italics: the asterisks and underscore are escaped
    assert "12\\*L\\*s\\*heads\\*head\\_dim" in assumptions


def test_wording_for_a_visitor_on_calibration_validation_and_plan():
    calibration = open_app("app_pages/calibration.py")
    shown = " ".join(block.value for block in [*calibration.info, *calibration.warning, *calibration.markdown])
    assert "NVML" not in shown and "Shared Library" not in shown
    validation = open_app("app_pages/validation.py")
    labels = [expander.label for expander in validation.expander]
    assert not [label for label in labels if "(1 rows)" in label]
    plan = open_app("app_pages/plan.py", model="gpt2", tokens_b="2")
    next(button for button in plan.button if button.label == "Find plans").click().run()
    (files,) = [block.value for block in plan.markdown if block.value.startswith("Files to start the chosen plan")]
    downloads = [button.label for button in plan.get("download_button") if "." in button.label]
    # every launch file the section offers is named with what it is (the cheapest here is a TPU: a note)
    assert downloads and all(f"- `{name}`: " in files for name in downloads)
    assert "`launch_note.txt`: how to run this plan on its accelerator" in files


def test_memory_tables_read_whole_with_units():
    app = open_app("app_pages/memory.py", **TOO_BIG)
    (changes,) = [table for table in light_tables(app) if "peak (GiB)" in table.columns]
    # ZeRO-3 over 3 GPUs: 8.03e9 x 16 bytes / 3 = 39.9 GiB of state per GPU plus activations: it fits
    zero3 = changes[changes["change"].str.startswith("ZeRO-3")]
    assert list(zero3["fits"]) == ["yes"] and "." in zero3["peak (GiB)"].iloc[0]
    (breakdown,) = [frame for frame in app.dataframe if "component" in frame.value.columns]
    assert '"label": "size (GiB)"' in breakdown.proto.columns and '"%.2f"' in breakdown.proto.columns


def test_sidebar_choices_are_short_with_the_detail_in_help():
    app = open_app("app_pages/memory.py")
    boxes = {box.label: box for box in app.selectbox}
    precision, zero = boxes["Precision"], boxes["ZeRO stage"]
    # about 24 characters fit a sidebar select box; the long names were cut ("BF16 mixed (bf16 weights + fp32")
    assert max(len(option) for option in [*precision.options, *zero.options]) <= 24
    assert "**BF16 mixed**: bf16 weights + fp32 master" in precision.help
    assert "ZeRO-1 in PyTorch FSDP: optimizer only (ZeroRedundancyOptimizer)" in zero.help
