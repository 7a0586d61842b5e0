"""Context parallel: the ring's bytes, its overlap with attention, a rank's share of the work,
and the flags, with the numbers worked out by hand in the comments."""

from __future__ import annotations

import json

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.models.presets import get_preset
from calculators.timing.context_parallel import kv_chunk_bytes, rank_settings, ring_crosses_nodes, ring_seconds
from calculators.timing.estimate import estimate_time
from calculators.timing.operations import step_kernels
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings
from tests.apptest_helpers import open_app
from tests.cli_helpers import run_cli

LLAMA31_8B = get_preset("llama-3.1-8b")  # 32 layers, 32 heads x 128 = 4096, 8 KV heads x 128 = 1024
H100 = find_gpu("H100-SXM5-80GB")


def settings(**changes) -> TrainingSettings:
    base = {"micro_batch": 1, "seq_len": 8192, "gpus": 8, "precision": "bf16-mixed", "zero": 3}
    return TrainingSettings(**(base | changes))


def time_settings(**changes) -> TimeSettings:
    return TimeSettings(**({"dataset_tokens": 1e9} | changes))


def test_a_rank_holds_its_share_of_each_sequence():
    # 8,192 tokens over 4 ranks: 2,048 each (two chunks of 1,024 for the causal load balance)
    assert rank_settings(settings(), 4).seq_len == 2048
    assert rank_settings(settings(), 1) == settings()


def test_kv_chunk_bytes():
    # b 1 x 2,048 tokens x (K and V) 2 x 1,024 x 2 bytes (bf16) = 8,388,608 bytes, 8 MiB
    assert kv_chunk_bytes(LLAMA31_8B, rank_settings(settings(), 4)) == 8_388_608
    # TP 2 splits the KV heads: 4 MiB
    assert kv_chunk_bytes(LLAMA31_8B, rank_settings(settings(tensor_parallel=2), 4)) == 4_194_304


def test_a_rank_runs_a_quarter_of_the_causal_attention():
    # the whole causal forward: 4 x b x s^2 x 4,096 / 2 = 4 x 8,192^2 x 4,096 / 2 = 549,755,813,888
    # FLOPs; each of 4 load-balanced ranks runs a quarter, 137,438,953,472, in kernels over 2,048
    # tokens: FlashAttention-2's published forward there, 298 TFLOPS (H100, head dim 128, causal)
    rank = rank_settings(settings(), 4)
    kernels = step_kernels(LLAMA31_8B, rank, H100, time_settings(context_parallel=4), 989.0, "bf16")
    assert kernels.attention_s(LLAMA31_8B, rank)[0] == pytest.approx(137_438_953_472 / 298e12)


def test_ring_sends_hide_under_their_attention_steps():
    # N 4: 3 sends per layer; forward attention 8 ms per layer, 2 ms per step, backward 5 ms per step.
    # A 1 ms send hides in forward (1 < 2) and backward (2 x 1 < 5): all 2 x 3 x (1 + 2) = 18 ms hidden
    hidden = ring_seconds(0.001, 0.008, 4, forward_layers=2, backward_layers=2)
    assert hidden.total_s == pytest.approx(0.018)
    assert hidden.exposed_s == 0.0
    # a 3 ms send: forward 3 x (3 - 2) = 3 ms and backward 3 x (6 - 5) = 3 ms exposed per layer, 12 ms
    # over 2 layers; in all 2 x 3 x (3 + 6) = 54 ms
    slow = ring_seconds(0.003, 0.008, 4, forward_layers=2, backward_layers=2)
    assert slow.total_s == pytest.approx(0.054)
    assert slow.exposed_s == pytest.approx(0.012)
    assert ring_seconds(0.003, 0.008, 1, 2, 2).total_s == 0.0


def test_the_ring_leaves_the_node_past_eight_gpus():
    # tp 1 x cp 8 fill one 8-GPU node; tp 2 x cp 8 span two
    assert not ring_crosses_nodes(settings(), 8, 8)
    assert ring_crosses_nodes(settings(tensor_parallel=2), 8, 8)


def test_cp_shares_sequences_between_data_parallel_gpus():
    # 8 GPUs, micro-batch 1 of 8,192 tokens: 8 sequences a step without CP, 4 with CP 2
    plain = estimate_time(LLAMA31_8B, settings(), H100, time_settings())
    split = estimate_time(LLAMA31_8B, settings(), H100, time_settings(context_parallel=2))
    assert plain.tokens_per_step == 8 * 8192
    assert split.tokens_per_step == 4 * 8192
    assert plain.comm_by_dimension_s["cp"] == 0.0
    assert split.comm_by_dimension_s["cp"] > 0.0
    # model FLOPs per token keep the whole sequence's attention
    assert split.model_flops_per_token == plain.model_flops_per_token


def test_recomputed_attention_sends_its_ring_again():
    # per layer: forward sends 1 x, backward 2 x the bytes; full checkpointing reruns the forward
    # in backward: (1 + 1 + 2) / (1 + 2) = 4/3 of the ring's seconds
    plain = estimate_time(LLAMA31_8B, settings(), H100, time_settings(context_parallel=4))
    full = estimate_time(LLAMA31_8B, settings(checkpointing="full"), H100, time_settings(context_parallel=4))
    assert full.comm_by_dimension_s["cp"] == pytest.approx(plain.comm_by_dimension_s["cp"] * 4 / 3)


def test_a_long_sequence_inside_a_node_hides_its_ring():
    # 131,072 tokens over 8 ranks of one node: each ring step's attention (16,384 queries against
    # 16,384 keys) takes far longer than its 64 MiB send over NVLink; every GPU does the
    # same work as one GPU training its own whole sequence, so tokens/s per GPU stays within 2%
    long = settings(seq_len=131_072, checkpointing="full")
    plain = estimate_time(LLAMA31_8B, long, H100, time_settings())
    split = estimate_time(LLAMA31_8B, long, H100, time_settings(context_parallel=8))
    assert split.comm_exposed_by_dimension_s["cp"] == 0.0
    assert split.tokens_per_s_per_gpu == pytest.approx(plain.tokens_per_s_per_gpu, rel=0.02)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--gpus", "3", "--context-parallel", "2"], "data-parallel GPUs (3) to be a multiple"),
        (["--seq-len", "8190", "--context-parallel", "2"], "seq_len 8190 is not a multiple of 4"),
        (["--context-parallel", "0"], "context"),
    ],
)
def test_time_refuses_a_context_parallel_it_cannot_take(capsys, flags, words):
    base = ["time", "--model", "llama-3.1-8b", "--gpu", "H100-SXM5-80GB", "--gpus", "8", "--seq-len", "8192"]
    code, _, err = run_cli(capsys, *base, *flags, "--dataset-tokens", "1e9")
    assert code == 2
    assert err.startswith("error: ") and words in err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["memory", "fit"])
def test_memory_commands_refuse_context_parallel(capsys, command):
    code, _, err = run_cli(capsys, command, "--model", "llama-3.1-8b", "--seq-len", "8192", "--context-parallel", "2")
    assert code == 2
    assert f"`{command}` does not model context parallel" in err


def test_cost_holds_a_ranks_tokens(capsys):
    # under CP 8 each GPU holds 16,384 of the 131,072 tokens: the peak is the engine's at 16,384
    args = ["--model", "llama-3.1-8b", "--gpus", "8", "--zero", "3", "--checkpointing", "full"]
    code, out, _ = run_cli(
        capsys, "cost", *args, "--seq-len", "131072", "--context-parallel", "8", "--dataset-tokens", "1e9"
    )
    assert code == 0
    code, memory_out, _ = run_cli(capsys, "memory", *args, "--seq-len", "16384", "--json")
    assert code == 0
    peak = json.loads(memory_out)["peak_gib"]
    assert out.splitlines()[0].startswith(f"llama-3.1-8b: peak {peak:.1f} GiB per GPU")


def test_plan_refuses_context_parallel(capsys):
    code, _, err = run_cli(
        capsys, "plan", "--model", "llama-3.1-8b", "--seq-len", "8192", "--context-parallel", "2",
        "--dataset-tokens", "1e9",
    )  # fmt: skip
    assert code == 2
    assert "does not search context-parallel" in err


def test_the_cost_page_takes_context_parallel():
    # 131,072-token sequences over 8 GPUs, CP 8: each GPU holds 16,384 tokens and the run fits
    # where whole sequences per GPU do not
    whole = open_app("app_pages/cost.py", model="llama-3.1-8b", zero="3", gpus="8", ckpt="full", seq="131072")
    split = open_app("app_pages/cost.py", model="llama-3.1-8b", zero="3", gpus="8", ckpt="full", seq="131072", cp="8")
    assert not split.exception and not split.error
    assert split.number_input(key="cost_context_parallel").value == 8
    fits_whole = set(whole.dataframe[0].value["gpu"])
    assert "H100-SXM5-80GB" in set(split.dataframe[0].value["gpu"]) - fits_whole
    bad = open_app("app_pages/cost.py", model="llama-3.1-8b", gpus="3", cp="2")
    assert not bad.exception
    assert any("data-parallel GPUs (3) to be a multiple" in w.value for w in bad.warning)
