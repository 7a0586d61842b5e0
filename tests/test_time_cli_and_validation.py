"""`python -m calculators time`, the new step flags on every command, and the throughput table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calculators.validation.throughput import load_rows, row_inputs, summary, throughput_table
from tests.cli_helpers import run_cli


def test_time_json_prints_the_step_breakdown(capsys):
    code, out, _ = run_cli(
        capsys, "time", "--model", "llama-2-7b", "--gpu", "H100-SXM5-80GB", "--seq-len", "4096",
        "--gpus", "2", "--tensor-parallel", "4", "--pipeline-parallel", "2", "--virtual-stages", "2",
        "--grad-accum", "8", "--gpus-per-node", "8", "--overlap", "0.5", "--json",
    )  # fmt: skip
    result = json.loads(out)
    assert code == 0
    assert {"step_s", "tokens_per_s_per_gpu", "mfu", "hfu", "bubble_s"} <= set(result)
    assert set(result["comm_exposed_by_dimension_s"]) == {"dp", "tp", "pp", "ep", "cp"}
    assert "gemm" in result["compute_by_class_s"]
    # TP 4 x DP 2 fill the 8-GPU node; the second pipeline stage is on the next node
    assert result["crosses_nodes"] == {"tp": False, "dp": False, "pp": True, "ep": False}
    # the bubble (p - 1) / (v m) = 1 / 16 of the busy time (compute, what hidden traffic takes of it,
    # and the exposed tensor, pipeline and expert traffic)
    busy = sum(result["compute_by_class_s"].values()) + result["overlap_contention_s"]
    busy += sum(result["comm_exposed_by_dimension_s"][dim] for dim in ("tp", "pp", "ep"))
    assert result["bubble_s"] == pytest.approx(busy / 16)


@pytest.mark.parametrize("flag", ["--compile", "--tf32", "--attention-kernel=flash1"])
def test_step_flags_reach_every_command(capsys, flag):
    for command in (["memory"], ["fit"], ["time", "--gpu", "A100-SXM4-80GB"]):
        code, _, err = run_cli(capsys, *command, "--model", "gpt2", flag, "--virtual-stages", "1", "--json")
        assert code == 0, err


def test_fp8_precision_is_accepted_and_runs_at_the_fp8_rate(capsys):
    code, out, _ = run_cli(capsys, "time", "--model", "gpt2", "--gpu", "H100-SXM5-80GB", "--precision", "fp8", "--json")
    assert code == 0 and json.loads(out)["compute_format"] == "fp8"
    code, out, _ = run_cli(capsys, "memory", "--model", "gpt2", "--precision", "fp8", "--json")
    assert code == 0 and json.loads(out)["peak_gib"] > 0


def test_time_without_the_rate_is_one_error_line(capsys):
    code, _, err = run_cli(capsys, "time", "--model", "gpt2", "--gpu", "V100-SXM2-16GB", "--precision", "fp8")
    assert code == 2 and err.startswith("error:") and err.count("\n") == 1


def test_cost_json_options_carry_the_step(capsys):
    _, out, _ = run_cli(capsys, "cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--fits-only", "--json")
    option = json.loads(out)[0]
    assert option["step_s"] > 0 and option["tokens_per_s_per_gpu"] > 0 and 0 < option["mfu"] < 1


def test_throughput_rows_map_the_published_settings():
    rows = {row["id"]: row for row in load_rows()}
    spec, settings, time_settings, _ = row_inputs(rows["LF-A100-40-MPT70B-128"])
    # FSDP FULL_SHARD 128, bf16 PURE, full checkpointing, 200 Gb/s per GPU (1600 Gb/s per 8-GPU node)
    assert (settings.gpus, settings.zero, settings.precision, settings.checkpointing) == (128, 3, "bf16", "full")
    assert time_settings.inter_node_gbps == 200 and spec.n_layers == 80
    _, settings, time_settings, _ = row_inputs(rows["TT-H100-70B-FSDP32-TP8"])
    assert (settings.gpus, settings.tensor_parallel, time_settings.compile) == (32, 8, True)
    _, settings, time_settings, _ = row_inputs(rows["MB-H100-L3-8B-FP8"])
    assert settings.precision == "fp8" and time_settings.attention_kernel == "flash2"
    # Megatron-LM's own runs use its unfused vocab-parallel loss (no --cross-entropy-loss-fusion),
    # Megatron-Bridge's the fused one
    _, _, time_settings, assumptions = row_inputs(rows["MCORE-1.7B-48"])
    assert time_settings.loss_kernel == "vocab-parallel" and "unfused vocab-parallel" in assumptions[0]
    assert row_inputs(rows["MB-H100-L3-8B-FP8"])[2].loss_kernel == "auto"
    # llm-foundry's benchmark runs used MPT's Triton FlashAttention (attn_impl: triton)
    _, _, time_settings, assumptions = row_inputs(rows["LF-H100-MPT7B-32k"])
    assert time_settings.attention_kernel == "flash1" and "Triton FlashAttention" in assumptions[0]


def rows_by_id(table):
    return {row.id: row for row in table}


def test_throughput_table_has_every_published_row():
    table = throughput_table()
    assert len(table) == 17
    figures = summary(table)
    # the target: every row within +-20%, the median within +-10% (1.019 since attention is timed at its
    # kernel's published figures, data/attention_kernels.csv). Closest to the edges: llm-foundry's MPT-7B at
    # 32k tokens (0.812) and torchtitan's 500 W H100 8B run (1.181); Megatron's 1.7B weak-scaling row 1.160.
    assert all(0.8 <= row.ratio <= 1.2 for row in table)
    assert rows_by_id(table)["MCORE-1.7B-48"].ratio == pytest.approx(1.160, abs=0.005)
    assert 0.9 <= figures["median_ratio"] <= 1.1


def test_llm_foundry_tables_beyond_the_validation_page():
    """All 216 runs of llm-foundry's MPT tables (bench/llm_foundry_table.py): median 0.973, A100
    runs 135 of 139 within +-20%, H100 runs at a median 1.018 (1.165 while attention was one fraction of
    peak); the 64k-token H100 runs are the lowest (0.78: FlashAttention's published figures stop at 16k)."""
    path = Path(__file__).resolve().parent.parent / "data" / "llm_foundry_throughput_table.csv"
    rows = {row["id"]: row for row in load_rows(path)}
    table = throughput_table(path)
    assert len(table) == 216
    assert 0.95 < summary(table)["median_ratio"] < 1.1
    a100 = [row.ratio for row in table if rows[row.id]["gpu"].startswith("A100")]
    assert len(a100) == 139 and sum(abs(ratio - 1) <= 0.2 for ratio in a100) >= 135
    assert all(0.75 < row.ratio < 1.4 for row in table)
