"""Tests for calculators.timing.estimate, with the numbers worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from calculators.hardware.catalogue import find_gpu
from calculators.models.geometry import active_matmul_parameters, parameter_count
from calculators.models.presets import get_preset
from calculators.models.spec import ModelSpec
from calculators.timing.communication import allreduce_bytes, dp_bytes
from calculators.timing.estimate import estimate_time, exposed_comm_s
from calculators.timing.flops import attention_flops_per_token, training_flops_per_token
from calculators.timing.operations import matmul_fraction
from calculators.timing.rates import achieved_tflops, peak_tflops
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

LLAMA2_7B = get_preset("llama-2-7b")
H100 = find_gpu("H100-SXM5-80GB")

# Llama-2-7B: 32 layers, hidden 4096, 32 heads x 128, MLP 11008 (SwiGLU), vocab 32000, untied head.
# Matmul weights per layer: attention 4 x 4096^2 = 67,108,864; MLP 3 x 4096 x 11008 = 135,266,304.
# N = 32 x 202,375,168 + head 32000 x 4096 (131,072,000) = 6,607,077,376.
LLAMA2_7B_N = 6_607_077_376
# PaLM attention term at s = 4096: 12 x 32 x 4096 x 4096 = 6,442,450,944 FLOPs per token.
LLAMA2_7B_ATTENTION_4K = 6_442_450_944
# Total parameters (embedding included): 6,738,415,616 (the model card's 6.74B).
LLAMA2_7B_PARAMS = 6_738_415_616


def settings(**changes) -> TrainingSettings:
    base = {"micro_batch": 1, "seq_len": 4096, "precision": "bf16-mixed"}
    return TrainingSettings(**(base | changes))


def tokens(**changes) -> TimeSettings:
    return TimeSettings(**({"dataset_tokens": 1e9} | changes))


# --- FLOPs per token -------------------------------------------------------------


def test_matmul_parameters_of_llama2_7b_include_the_lm_head():
    assert active_matmul_parameters(LLAMA2_7B) == LLAMA2_7B_N == parameter_count(LLAMA2_7B).matmul_total


def test_llama2_7b_flops_per_token_is_6n_plus_palm_attention():
    # 6N = 6 x 6,607,077,376 = 39,642,464,256; + 6,442,450,944 = 46,084,915,200 FLOPs per token.
    assert attention_flops_per_token(LLAMA2_7B, 4096) == LLAMA2_7B_ATTENTION_4K
    assert training_flops_per_token(LLAMA2_7B, settings()) == 46_084_915_200


def test_full_checkpointing_adds_one_forward():
    # One more forward: 2N = 13,214,154,752 plus a third of the attention term, 2,147,483,648.
    # 46,084,915,200 + 15,361,638,400 = 61,446,553,600 (8N + 16*L*s*h instead of 6N + 12*L*s*h).
    assert training_flops_per_token(LLAMA2_7B, settings(checkpointing="full")) == 61_446_553_600


def test_selective_recomputation_reruns_attention_only():
    # 46,084,915,200 + 2,147,483,648 = 48,232,398,848.
    assert training_flops_per_token(LLAMA2_7B, settings(checkpointing="selective")) == 48_232_398_848


def test_attention_term_grows_with_sequence_length():
    short = training_flops_per_token(LLAMA2_7B, settings(seq_len=2048))
    long = training_flops_per_token(LLAMA2_7B, settings(seq_len=4096))
    # Doubling s adds 12 x 32 x 2048 x 4096 = 3,221,225,472 FLOPs per token.
    assert long - short == 3_221_225_472


def test_mixture_of_experts_counts_only_active_experts():
    # 2 layers, h 64, 4 heads (kv 4), f 128, vocab 100, 4 experts with 2 per token.
    spec = ModelSpec(
        n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=4, ffn_hidden_size=128, vocab_size=100,
        n_experts=4, experts_per_token=2,
    )  # fmt: skip
    # Per layer: attention 4 x 64^2 = 16,384; 2 experts x 3 x 64 x 128 = 49,152; router 64 x 4 = 256.
    # Active = 2 x 65,792 + head 100 x 64 = 131,584 + 6,400 = 137,984.
    assert active_matmul_parameters(spec) == 137_984
    assert active_matmul_parameters(spec) < parameter_count(spec).matmul_total


def test_mixtral_active_parameters_are_about_13b():
    # Mixtral 8x7B: 46.7B parameters, about 12.9B active per token (Mistral AI model card).
    active = active_matmul_parameters(get_preset("mixtral-8x7b"))
    assert 12.5e9 < active < 13.0e9


# --- utilisation and peak -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("H100-SXM5-80GB", 794.5 / 989),
        ("H200-SXM-141GB", 794.5 / 989),  # Hopper: the H100 measurement ("H200 is the same")
        ("A100-SXM4-80GB", 271.2 / 312),
        ("B200-SXM-180GB", 1745.0 / 2250),
        ("MI300X-192GB", 668.4 / 1307.4),  # MAMF over the catalogue's peak (the table's is 1300)
        ("MI325X-256GB", 784.9 / 1307.4),  # its own measurement, at 1000 W
        ("Gaudi2-96GB", 418.7 / 432),
        ("T4-16GB", 0.80),  # no measurement: 0.80 assumed
    ],
)
def test_matmul_fraction_is_the_parts_mamf_finder_figure(name, expected):
    assert matmul_fraction(find_gpu(name)) == pytest.approx(expected)


def test_achieved_tflops_picks_the_format_of_each_precision():
    # H100 SXM dense: bf16 989, fp16 989, tf32 494.5, fp32 67.
    assert achieved_tflops(H100, "bf16-mixed", 0.5) == pytest.approx(494.5)
    assert achieved_tflops(H100, "amp-bf16", 0.5) == pytest.approx(494.5)
    assert achieved_tflops(H100, "fp16-mixed", 0.5) == pytest.approx(494.5)
    # PyTorch keeps TF32 off for matmuls by default (torch.backends.cuda.matmul.allow_tf32 = False).
    assert achieved_tflops(H100, "fp32", 0.5) == pytest.approx(33.5)
    assert achieved_tflops(H100, "fp32", 0.5, fp32_uses_tf32=True) == pytest.approx(247.25)  # TF32
    assert achieved_tflops(H100, "fp8", 0.5) == pytest.approx(989.5)  # fp8 dense 1979


def test_fp32_falls_back_to_the_fp32_rate_without_tf32():
    v100 = find_gpu("V100-SXM2-16GB")  # Volta: no TF32, FP32 15.7
    assert peak_tflops(v100, "fp32") == 15.7


def test_missing_rate_is_a_clear_error():
    with pytest.raises(ValueError, match="V100-SXM2-16GB has no bf16 rate"):
        achieved_tflops(find_gpu("V100-SXM2-16GB"), "bf16-mixed", 0.5)


@pytest.mark.parametrize("utilisation", [0, -0.1, 1.5])
def test_utilisation_outside_0_1_is_rejected(utilisation):
    with pytest.raises(ValueError, match="utilisation"):
        achieved_tflops(H100, "bf16-mixed", utilisation)


# --- communication ---------------------------------------------------------------------


def test_ring_allreduce_volume():
    # 8 GPUs: each sends 2 x 7/8 = 1.75 times the buffer.
    assert allreduce_bytes(1e9, 8) == 1.75e9
    assert allreduce_bytes(1e9, 2) == 1e9
    assert allreduce_bytes(1e9, 1) == 0


def test_zero_stages_communication_volume_for_llama2_7b_on_8_gpus():
    # bf16-mixed gradients and weights: 2 bytes. All-reduce of 6,738,415,616 x 2 bytes:
    # 1.75 x 13,476,831,232 = 23,584,454,656 bytes per GPU per step.
    dp = 23_584_454_656
    assert dp_bytes(LLAMA2_7B, settings(gpus=8, zero=0)) == (0, pytest.approx(dp))
    assert dp_bytes(LLAMA2_7B, settings(gpus=8, zero=1)) == (0, pytest.approx(dp))
    # ZeRO-2: reduce-scatter per micro-batch + all-gather per step, half each.
    assert dp_bytes(LLAMA2_7B, settings(gpus=8, zero=2)) == (pytest.approx(dp / 2), pytest.approx(dp / 2))
    # ZeRO-3: 7/8 x P x (2 + 2 + 2) bytes per micro-batch = 35,376,681,984 = 1.5 x the DP volume.
    per_micro, per_step = dp_bytes(LLAMA2_7B, settings(gpus=8, zero=3))
    assert per_micro == pytest.approx(1.5 * dp) and per_step == 0


def test_one_gpu_sends_nothing():
    assert dp_bytes(LLAMA2_7B, settings(gpus=1, zero=3)) == (0, 0)


def test_exposed_communication_never_hides_more_than_the_compute():
    assert exposed_comm_s(1.0, 10.0, 0.5) == 0.5
    assert exposed_comm_s(1.0, 0.2, 0.5) == pytest.approx(0.8)
    assert exposed_comm_s(1.0, 10.0, 0.0) == 1.0


# --- the whole estimate -------------------------------------------------------------------


def test_single_gpu_step_time_by_hand():
    # 46,084,915,200 FLOPs/token x 4096 tokens = 1.88764e14 FLOPs per step.
    # H100 at utilisation 0.5: 494.5 TFLOPS -> 1.88764e14 / 4.945e14 = 0.381727 s; no communication.
    estimate = estimate_time(LLAMA2_7B, settings(), H100, tokens(utilisation=0.5))
    assert estimate.compute_s == pytest.approx(0.381727, rel=1e-5)
    assert estimate.comm_s == 0 and estimate.step_s == estimate.compute_s
    assert estimate.tokens_per_step == 4096
    assert estimate.tokens_per_s == pytest.approx(4096 / 0.381727, rel=1e-5)
    # 1e9 tokens / 4096 per step = 244,140.6 -> 244,141 steps x 0.381727 s = 25.8875 h.
    assert estimate.steps_per_epoch == 244_141
    assert estimate.hours_total == pytest.approx(25.8875, rel=1e-4)


def test_eight_gpu_step_adds_the_exposed_allreduce():
    # Compute per GPU is unchanged (each GPU does its own 4096 tokens): 0.381727 s.
    # DDP all-reduces 25 MiB buckets; 8 x H100 on NVLink 4 run NVLS, whose measured curve (8 x H200,
    # same NVLink 4) reads 219.89 GB/s at 16 MiB and 275.84 at 32 MiB: at 25 MiB, log2(25/16) =
    # 0.643856 of the way, 255.914 GB/s. All-reduce 23,584,454,656 bytes / 255.914e9 = 0.092158 s.
    # The last bucket (26,214,400 x 1.75 / 255.914e9 = 0.000179 s) starts after backward; of the
    # rest, 0.091979 s, overlap 0.5 hides half (under the backward's 2/3 x 0.381727 = 0.254485 s):
    # exposed 0.000179 + 0.045989 = 0.046169 s.
    given = tokens(utilisation=0.5, overlap_fraction=0.5, nccl_sm_share=0)  # contention: the next test
    estimate = estimate_time(LLAMA2_7B, settings(gpus=8), H100, given)
    assert estimate.comm_gbytes_per_s == pytest.approx(255.914, rel=1e-5)
    assert estimate.comm_s == pytest.approx(0.092158, rel=1e-4)
    assert estimate.comm_exposed_s == pytest.approx(0.046169, rel=1e-4)
    assert estimate.step_s == pytest.approx(0.427896, rel=1e-4)
    assert estimate.tokens_per_step == 8 * 4096


def test_hidden_traffic_takes_its_share_of_the_sms():
    """The all-reduce of the step above: 0.092158 s, of which 0.045989 s hides under compute while
    NCCL holds 24 of the H100's 132 SMs (the forum measurement of NCCL_SM_SHARE): the compute loses
    0.045989 x 24 / 132 = 0.0083616 s; step 0.381727 + 0.0083616 + 0.046169 = 0.436258 s."""
    estimate = estimate_time(LLAMA2_7B, settings(gpus=8), H100, tokens(utilisation=0.5, overlap_fraction=0.5))
    assert estimate.overlap_contention_s == pytest.approx(0.0083616, rel=1e-3)
    assert estimate.step_s == pytest.approx(0.436258, rel=1e-4)


def test_more_gpus_than_a_node_use_the_network():
    # 16 GPUs with 8 per node, 400 Gb/s = 50 GB/s per GPU. A 25 MiB bucket's hierarchical all-reduce
    # sends 2 x 1/2 x 25 MiB / 8 = 3,276,800 bytes per NIC, as the measured 2-node H100 sweep's
    # (16 ranks, 25 GB/s NICs) 25 MiB payload does: busbw 32.18 at 16 MiB, 59.36 at 32 MiB ->
    # 49.680 GB/s; per NIC 49.680 / 15 = 3.3120 GB/s of 25, 13.248%. On 50 GB/s NICs: 3,276,800 /
    # 6.624e9 s, as busbw 25 MiB x 1.875 / that = 99.36 GB/s (under NVLink's 255.9).
    # All-reduce 2 x 15/16 x 13.48e9 bytes = 25,269,058,560 bytes / 99.36e9 = 0.254318 s.
    # With one GPU per node each NIC carries 2 x 15/16 x 25 MiB = 49,152,000 bytes, what the sweep's
    # 375 MiB payload puts on a NIC: busbw 213.19 at 256 MiB, 263.69 at 512 MiB -> 241.00 GB/s,
    # 64.27% of a NIC: 49,152,000 / (50e9 x 0.6427) = 1.5296 ms, busbw 32.134 GB/s, 0.78637 s.
    estimate = estimate_time(LLAMA2_7B, settings(gpus=16), H100, tokens(utilisation=0.5))
    assert estimate.comm_gbytes_per_s == pytest.approx(99.36, rel=1e-4)
    assert estimate.comm_s == pytest.approx(0.254318, rel=1e-5)
    one_per_node = estimate_time(LLAMA2_7B, settings(gpus=16), H100, tokens(utilisation=0.5, gpus_per_node=1))
    assert one_per_node.comm_gbytes_per_s == pytest.approx(32.134, rel=1e-4)
    assert one_per_node.comm_s == pytest.approx(0.78637, rel=1e-4)
    assert estimate.crosses_nodes == {"tp": False, "dp": True, "pp": False, "ep": False}


def test_allreduce_overlaps_only_the_last_micro_batch():
    # A 1 Gb/s network (0.125 GB/s): each NIC carries 2 x 7/8 x 25 MiB = 45,875,200 bytes per
    # bucket, the measured sweep's 350 MiB payload: 235.976 GB/s busbw, 62.927% of a NIC, 0.583216
    # s per bucket, busbw 0.0786587 GB/s: the all-reduce takes 299.83 s, far longer than a
    # micro-batch. With grad_accum 4 only the last micro-batch's backward, 2/3 x 0.381727 =
    # 0.254485 s, can hide it (overlap 1.0).
    slow = tokens(utilisation=0.5, inter_node_gbps=1, gpus_per_node=1, overlap_fraction=1.0, nccl_sm_share=0)
    estimate = estimate_time(LLAMA2_7B, settings(gpus=8, grad_accum=4), H100, slow)
    comm = 23_584_454_656 / 0.0786587e9
    assert estimate.comm_s == pytest.approx(comm, rel=1e-5)
    comm = estimate.comm_s
    assert estimate.comm_s == pytest.approx(comm)
    assert estimate.comm_exposed_s == pytest.approx(comm - 0.254485, rel=1e-6)
    assert estimate.step_s == pytest.approx(4 * 0.381727 + comm - 0.254485, rel=1e-6)


def test_epochs_and_samples_set_the_run_length():
    one = estimate_time(LLAMA2_7B, settings(), H100, tokens(utilisation=0.5))
    two = estimate_time(LLAMA2_7B, settings(), H100, tokens(utilisation=0.5, epochs=2))
    assert two.hours_total == pytest.approx(2 * one.hours_total)
    assert two.hours_per_epoch == one.hours_per_epoch
    # 244,141 samples of 4096 tokens = 1,000,001,536 tokens -> 244,141 steps, as for 1e9 tokens.
    samples = estimate_time(LLAMA2_7B, settings(), H100, TimeSettings(dataset_samples=244_141, utilisation=0.5))
    assert samples.dataset_tokens == 244_141 * 4096
    assert samples.steps_per_epoch == one.steps_per_epoch


def test_without_a_utilisation_the_step_is_built_from_its_operations():
    """MFU = tokens/s per GPU x model FLOPs per token / dense peak, whatever the compute path."""
    estimate = estimate_time(LLAMA2_7B, settings(), H100, tokens())
    assert set(estimate.compute_by_class_s) == {"gemm", "attention", "elementwise", "loss", "recompute", "optimizer"}
    assert estimate.compute_s == pytest.approx(sum(estimate.compute_by_class_s.values()))
    # model FLOPs per token without recomputation: 46,084,915,200 (see above)
    assert estimate.model_flops_per_token == 46_084_915_200
    assert estimate.mfu == pytest.approx(estimate.tokens_per_s_per_gpu * 46_084_915_200 / 989e12)
    assert estimate.hfu == pytest.approx(estimate.mfu)  # nothing recomputed
    assert 0.3 < estimate.mfu < 0.8


def test_gpu_without_interconnect_figure_uses_the_network():
    # No per-chip ICI figure in the catalogue: each chip's 50 GB/s NIC carries 2 x 3/4 x 25 MiB =
    # 39,321,600 bytes per bucket, the measured sweep's 300 MiB payload: 224.74 GB/s busbw, 59.93%
    # of a NIC: 29.97 GB/s.
    tpu_v4 = find_gpu("TPU-v4")
    estimate = estimate_time(LLAMA2_7B, settings(gpus=4), tpu_v4, tokens())
    assert estimate.comm_gbytes_per_s == pytest.approx(29.97, rel=1e-3)


@pytest.mark.parametrize("fields", [{}, {"dataset_tokens": 1e9, "dataset_samples": 10}])
def test_exactly_one_dataset_size(fields):
    with pytest.raises(ValidationError, match="exactly one"):
        TimeSettings(**fields)


def test_llama31_8b_on_8_h100_zero3_sample():
    # Llama-3.1-8B: N = 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) + 128256 x 4096 = 7,504,658,432;
    # 6N = 45.03e9, attention 12 x 32 x 4096 x 4096 = 6.44e9 -> 51.47e9 FLOPs per token.
    # Per GPU per step 4 x 4096 = 16,384 tokens -> 8.433e14 FLOPs / (989 x 0.4818 = 476.5 TFLOPS) = 1.770 s.
    # ZeRO-3: 7/8 x 8.03e9 x 6 bytes = 42.16 GB, gathered a layer at a time: 8.03e9 / 32 x 2 bytes =
    # 501,891,328 (478.6 MiB), where the NVLink 4 curve reads 448.91 of its 482.26 GB/s plateau
    # (0.93085); an all-gather runs the ring's 361.4 GB/s plateau: 336.41 GB/s -> 0.12532 s, half
    # exposed -> step 1.8324 s. 1e9 tokens / 131,072 per step -> 7,630 steps x 1.8324 s = 3.8837 h.
    spec = get_preset("llama-3.1-8b")
    given = tokens(utilisation=0.4818, overlap_fraction=0.5, nccl_sm_share=0)
    estimate = estimate_time(spec, settings(micro_batch=4, gpus=8, zero=3), H100, given)
    assert estimate.flops_per_token == pytest.approx(51.47e9, rel=1e-3)
    assert estimate.compute_s == pytest.approx(1.770, rel=1e-3)
    assert estimate.comm_s == pytest.approx(0.12532, rel=1e-3)
    assert estimate.step_s == pytest.approx(1.8324, rel=1e-3)
    assert estimate.steps_per_epoch == 7630
    assert estimate.hours_total == pytest.approx(3.8837, rel=1e-3)
    assert math.isclose(estimate.tokens_per_s, 131_072 / estimate.step_s)


def test_a_frozen_lora_base_costs_4n_instead_of_6n():
    """Llama-2-7B, no recomputation: 6N - 4N = 2N FLOPs per token saved by skipping weight gradients."""
    from calculators.models.presets import get_preset
    from calculators.timing.flops import training_flops_per_token
    from calculators.workload.training import TrainingSettings

    spec = get_preset("llama-2-7b")
    full = training_flops_per_token(spec, TrainingSettings())
    lora = training_flops_per_token(spec, TrainingSettings(method="lora"))
    assert full - lora == pytest.approx(2 * active_matmul_parameters(spec))


def test_tensor_and_pipeline_parallel_split_the_work_and_pay_the_bubble():
    """TP 2 x PP 4 with 8 micro-batches: compute / 8 GPUs x (1 + 3/8) bubble."""
    from calculators.hardware.catalogue import find_gpu
    from calculators.models.presets import get_preset
    from calculators.timing.estimate import estimate_time
    from calculators.timing.settings import TimeSettings
    from calculators.workload.training import TrainingSettings

    spec, gpu = get_preset("llama-2-7b"), find_gpu("H100-SXM5-80GB")
    one = estimate_time(spec, TrainingSettings(grad_accum=8), gpu, TimeSettings(dataset_tokens=1e9, utilisation=0.5))
    split = estimate_time(
        spec,
        TrainingSettings(grad_accum=8, tensor_parallel=2, pipeline_parallel=4),
        gpu,
        TimeSettings(dataset_tokens=1e9, utilisation=0.5),
    )
    assert split.compute_s == pytest.approx(one.compute_s / 8)
    # bubble (p - 1) / m = 3/8 of the compute plus the exposed per-micro-batch traffic
    busy = split.compute_s + split.comm_exposed_by_dimension_s["tp"] + split.comm_exposed_by_dimension_s["pp"]
    assert split.bubble_s == pytest.approx(3 / 8 * busy)


def test_the_last_micro_batch_hides_its_own_and_the_step_traffic_in_one_window():
    """ZeRO-2 sends a reduce-scatter each micro-batch and an all-gather once per step; with one
    micro-batch both can hide only under that micro-batch's compute, once: the step is never
    shorter than max(compute, traffic), as for ZeRO-1's all-reduce of the same bytes, and never
    longer than compute + traffic: GPT-2 on two RTX 6000 Ada, 1 x 512 tokens per GPU (found by
    the planner's property test, where ZeRO-2 was counted as hiding its traffic twice)."""
    from calculators.hardware.catalogue import find_gpu

    gpu = find_gpu("RTX-6000-Ada-48GB")
    run = TimeSettings(dataset_tokens=1e8, gpus_per_node=2, overlap_fraction=1.0)
    estimates = {
        zero: estimate_time(get_preset("gpt2"), TrainingSettings(seq_len=512, gpus=2, zero=zero), gpu, run)
        for zero in (1, 2)
    }
    for estimate in estimates.values():
        assert max(estimate.compute_s, estimate.comm_s) <= estimate.step_s <= estimate.compute_s + estimate.comm_s
    assert estimates[2].comm_bytes_per_gpu == estimates[1].comm_bytes_per_gpu
