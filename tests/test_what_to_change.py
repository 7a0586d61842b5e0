"""What to change: combinations of up to three changes that fit, ranked by what they cost
(calculators/plan/changes.py), in the CLI and on the Memory page."""

import json

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.memory.engine import estimate_memory
from calculators.models.geometry import parameter_count
from calculators.models.presets import get_preset
from calculators.plan.changes import ChangeSearch, RankedChange, best_few, rank_key, ranked_changes
from calculators.timing.settings import TimeSettings
from calculators.units import GIB
from calculators.workload.training import TrainingSettings
from tests.apptest_helpers import light_tables, open_app
from tests.cli_helpers import run_cli

LLAMA_2_7B = get_preset("llama-2-7b")
LLAMA_8B = get_preset("llama-3.1-8b")
RTX_4090 = find_gpu("RTX-4090-24GB")  # 24 GB, read as 24 GiB (calculators.memory.fit_matrix.gpu_memory_gib)
H100 = find_gpu("H100-SXM5-80GB")
# A flat utilisation makes compute time per token = executed FLOPs per token / (peak x 0.4): the slowdowns
# below are then ratios of FLOPs per token, worked out by hand.
FLAT = TimeSettings(dataset_tokens=1e9, utilisation=0.4)
CHECKPOINTING_AND_OFFLOAD = {"checkpointing": "full", "offload_optimizer": True}


def option_with(options: list[RankedChange], update: dict) -> tuple[int, RankedChange]:
    return next((i, option) for i, option in enumerate(options) if option.update == update)


@pytest.fixture(scope="module")
def seven_b_on_a_4090() -> list[RankedChange]:
    """Llama-2-7B, every weight trained (bf16-mixed AdamW, micro-batch 1 x 2048), on one RTX 4090."""
    return ranked_changes(LLAMA_2_7B, TrainingSettings(), 24.0, RTX_4090, FLAT)


def test_full_checkpointing_and_optimizer_offload_fit_a_7b_full_fine_tune_on_24_gb(seven_b_on_a_4090):
    """One change at a time only QLoRA or ZeRO-3 over many GPUs fit; together, full checkpointing and
    ZeRO-Offload do. P = 6,738,415,616 parameters.
    GPU: the bf16 weights stay, 2 x P = 13,476,831,232 B = 12.55 GiB, so the peak is at least
    12.55 x 1.10 (allocator reserve) + 0.53 (CUDA context, cuBLAS) = 14.34 GiB, and it fits 24 GiB.
    Host (Ren et al. 2021 Sec. 4.1; DeepSpeed stage_1_and_2.py): fp32 master 4 + its fp32 gradient 4 +
    Adam m and v 8 + a pinned bf16 copy 2 = 18 bytes per parameter = 121,291,481,088 B, plus a pinned
    staging buffer of the largest parameter in bf16, the 32,000 x 4,096 embedding: 262,144,000 B;
    121,553,625,088 B / 2^30 = 113.21 GiB."""
    assert parameter_count(LLAMA_2_7B).total == 6_738_415_616
    _, option = option_with(seven_b_on_a_4090, CHECKPOINTING_AND_OFFLOAD)
    assert option.change == "full checkpointing + optimizer offload"
    assert option.host_memory_gib == pytest.approx(121_553_625_088 / GIB) == pytest.approx(113.21, abs=0.01)
    assert 12.55 * 1.10 + 0.53 < option.peak_gib <= 24.0
    estimate = estimate_memory(LLAMA_2_7B, TrainingSettings(**CHECKPOINTING_AND_OFFLOAD))
    assert estimate.components_gib["weights"] == pytest.approx(2 * 6_738_415_616 / GIB)
    assert option.peak_gib == pytest.approx(estimate.peak_gib)
    assert option.gpus == 1 and option.extra_gpus == 0 and not option.changes_method
    # Full recomputation runs the forward again: 8N + 16*L*s*d executed FLOPs per token against
    # 6N + 12*L*s*d (Korthikanti et al. 2022), exactly 4/3; moving the optimizer to the host adds no FLOPs
    # on the GPU (its host-link time, where the time model counts it, only adds).
    assert option.slowdown >= 4 / 3 - 1e-9
    assert "fits at" in option.sentence() and "113 GiB host RAM" in option.sentence()


def test_every_weight_trained_ranks_before_qlora_although_qlora_is_faster(seven_b_on_a_4090):
    """QLoRA trains 4N FLOPs per token with its frozen base (calculators.timing.flops): (4N + 12Lsd) /
    (6N + 12Lsd) < 1, faster than the current step, yet it changes what is trained, so every option
    that trains all weights on the same GPU comes first."""
    index_full, full = option_with(seven_b_on_a_4090, CHECKPOINTING_AND_OFFLOAD)
    index_qlora, qlora = option_with(seven_b_on_a_4090, {"method": "qlora"})
    assert qlora.changes_method and qlora.slowdown < 1 < full.slowdown
    assert index_full < index_qlora
    same_gpus_full = [i for i, o in enumerate(seven_b_on_a_4090) if not o.changes_method and not o.extra_gpus]
    adapters = [i for i, o in enumerate(seven_b_on_a_4090) if o.changes_method]
    assert same_gpus_full and adapters and max(same_gpus_full) < min(adapters)


def test_a_full_fidelity_option_with_a_lower_slowdown_ranks_before_qlora():
    """rank_key on two options priced by hand: 1.2x against QLoRA's 1.5x (and the same for any speed)."""
    common = {"peak_gib": 20.0, "host_memory_gib": 0.0, "gpus": 1, "extra_gpus": 0}
    full = RankedChange(change="a", steps=["a"], update={}, slowdown=1.2, gpu_hours_factor=1.2,
                        changes_method=False, **common)  # fmt: skip
    qlora = RankedChange(change="QLoRA", steps=["q"], update={"method": "qlora"}, slowdown=1.5,
                         gpu_hours_factor=1.5, changes_method=True, **common)  # fmt: skip
    assert sorted([qlora, full], key=rank_key) == [full, qlora]


def test_the_combinations_are_minimal_and_the_best_few_offer_more_gpus_and_adapters(seven_b_on_a_4090):
    """No option contains another option's changes on the same GPUs; the few shown include the best
    option with more GPUs (ZeRO-3 shards the states, 16 bytes per parameter, over the GPUs) and QLoRA."""
    same_gpus = [o for o in seven_b_on_a_4090 if not o.extra_gpus]
    for option in same_gpus:
        for other in same_gpus:
            if other is not option:
                assert not set(other.update.items()) < set(option.update.items()), (option.change, other.change)
    shown = best_few(seven_b_on_a_4090)
    assert shown[0] == seven_b_on_a_4090[0] and len(shown) <= 5
    assert any(o.extra_gpus for o in shown) and any(o.changes_method for o in shown)
    more = next(o for o in shown if o.extra_gpus)
    assert "ZeRO-3 over" in more.change and more.gpus == more.extra_gpus + 1 and more.peak_gib <= 24.0


def test_one_change_that_suffices_ranks_before_combinations():
    """Llama-3.1-8B, ZeRO-3 over 8 H100s, micro-batch 4 x 4096 tokens, no checkpointing: 158 GiB, mostly
    activations. Micro-batch 1 with accumulation 4 keeps the global batch and fits alone; at a flat
    utilisation the executed FLOPs per token do not depend on the micro-batch and the data-parallel
    traffic hides under compute but for FSDP's first gather and last reduce-scatter, now paid for each of
    4 micro-batches: slowdown within 1% of 1.0. Full checkpointing also fits alone, at (8N + 16Lsd) /
    (6N + 12Lsd) = 4/3 (the SMs hidden traffic holds are left out here, so the ratio is the FLOPs')."""
    settings = TrainingSettings(micro_batch=4, seq_len=4096, zero=3, gpus=8)
    ranked = ranked_changes(LLAMA_8B, settings, 80.0, H100, FLAT.model_copy(update={"nccl_sm_share": 0.0}))
    assert ranked[0].update == {"micro_batch": 1, "grad_accum": 4}
    assert ranked[0].slowdown == pytest.approx(1.0, rel=0.01) and len(ranked[0].steps) == 1
    assert any(len(o.steps) > 1 for o in ranked[1:])
    _, checkpointing = option_with(ranked, {"checkpointing": "full"})
    assert checkpointing.slowdown == pytest.approx(4 / 3, rel=1e-3)  # less FSDP's exposed first and last unit
    assert not any({"micro_batch": 1, "grad_accum": 4}.items() <= o.update.items() for o in ranked[1:])


def test_the_search_is_bounded():
    """At most 15 blocks + 105 pairs + 455 triples + 64 x 7 bisections could be estimated; the pruning
    (open, non-redundant pairs only) keeps the 7B case to a few hundred estimates."""
    search = ChangeSearch(LLAMA_2_7B, TrainingSettings(), 24.0, RTX_4090)
    search.search()
    assert len(search.blocks) <= 20 and search.estimates < 400


def test_nothing_to_change_when_it_fits():
    assert ranked_changes(get_preset("gpt2"), TrainingSettings(), 80.0, H100) == []


def test_without_a_gpu_to_time_the_slowdowns_are_unknown_but_the_options_remain():
    ranked = ranked_changes(LLAMA_2_7B, TrainingSettings(), 24.0)
    assert ranked and all(o.slowdown is None and o.gpu_hours_factor is None for o in ranked)
    assert not ranked[0].changes_method


def test_cli_memory_json_lists_the_ranked_changes_and_keeps_its_keys(capsys):
    code, out, _ = run_cli(capsys, "memory", "--model", "llama-2-7b", "--gpu", "RTX-4090-24GB", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["fit"]["gpu_memory_gib"] == 24.0 and result["fit"]["verdict"] == "does not fit"
    assert result["suggestions"] and result["peak_gib"] > 24
    option = next(o for o in result["changes"] if o["update"] == CHECKPOINTING_AND_OFFLOAD)
    assert option["host_memory_gib"] == pytest.approx(113.21, abs=0.01) and option["slowdown"] > 1


def test_cli_fit_lists_the_combinations_for_the_named_gpu(capsys):
    code, out, _ = run_cli(capsys, "fit", "--model", "llama-2-7b", "--gpu", "RTX-4090-24GB", "--json")
    assert code == 0
    rows = json.loads(out)
    with_changes = [row for row in rows if "changes" in row]
    assert [row["gpu"] for row in with_changes] == ["RTX-4090-24GB"]
    assert {"gpu", "verdict", "peak_gib", "min_gpus"} <= set(with_changes[0])
    assert any(o["change"] == "full checkpointing + optimizer offload" for o in with_changes[0]["changes"])
    code, out, _ = run_cli(capsys, "fit", "--model", "llama-2-7b", "--gpu", "RTX-4090-24GB")
    assert code == 0 and "Changes that fit, cheapest first:" in out and "host RAM" in out


def test_cli_memory_verdict_names_the_host_ram_the_offload_needs(capsys):
    code, out, _ = run_cli(
        capsys, "memory", "--model", "llama-2-7b", "--gpu-memory-gib", "24", "--checkpointing", "full",
        "--offload-optimizer",
    )  # fmt: skip
    assert code == 0
    assert "On 24 GiB: fits (headroom" in out and "needs 113 GiB host RAM per GPU" in out


def test_cli_unknown_gpu_is_one_error_line(capsys):
    code, _, err = run_cli(capsys, "fit", "--model", "llama-2-7b", "--gpu", "no-such-gpu")
    assert code == 2 and err.startswith("error: unknown GPU") and err.count("\n") == 1


def test_memory_page_shows_the_ranked_changes_with_units_and_host_ram_in_the_verdict():
    app = open_app(model="llama-2-7b", gpu="RTX-4090-24GB")
    verdict = next(e.value for e in app.error if e.value.startswith("Does not fit"))
    assert "Cheapest change that fits:" in verdict and "GiB host RAM per GPU" in verdict
    table = next(t for t in light_tables(app) if "speed" in t.columns)
    assert list(table.columns) == ["change", "fits at", "speed", "host RAM", "GPUs", "trains"]
    assert table["fits at"].str.endswith(" GiB").all()
    assert table["speed"].str.contains(r"x slower$|x faster$|^about as fast$").all()
    assert "QLoRA adapters (4-bit base)" in set(table["trains"])


def test_memory_page_verdict_says_the_host_ram_of_a_setup_that_fits_by_offloading():
    app = open_app(model="llama-2-7b", gpu="RTX-4090-24GB", ckpt="full", off_opt="1")
    verdict = next(e.value for e in app.success if e.value.startswith("Fits"))
    assert "needs **113 GiB of host RAM** per GPU" in verdict
