"""Communication per parallel dimension, with the bytes worked out by hand in the comments."""

from __future__ import annotations

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.models.presets import get_preset
from calculators.timing.communication import (
    allgather_bytes,
    allreduce_bytes,
    bubble_fraction,
    dimension_crossings,
    dp_bytes,
    link_gbytes_per_s,
    moe_alltoall_bytes_per_micro,
    pp_bytes_per_micro,
    ring_factor,
    ring_nics_in_flight,
    tp_bytes_per_micro,
    trainable_parameters_per_rank,
)
from calculators.timing.estimate import estimate_time
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

LLAMA2_7B = get_preset("llama-2-7b")  # 32 layers, h 4096, MLP 11008, vocab 32000, untied head
H100 = find_gpu("H100-SXM5-80GB")


def settings(**changes) -> TrainingSettings:
    return TrainingSettings(**({"micro_batch": 1, "seq_len": 4096, "precision": "bf16-mixed"} | changes))


# --- collectives -------------------------------------------------------------------------


def test_ring_allreduce_sends_2_n_minus_1_over_n():
    # nccl-tests: busbw = algbw x 2(n-1)/n. 8 GPUs: 2 x 7/8 = 1.75; 2 GPUs: 1.0.
    assert ring_factor(8) == 1.75
    assert ring_factor(2) == 1.0
    assert allreduce_bytes(1e9, 8) == 1.75e9
    # an all-gather or a reduce-scatter sends half: 7/8 of the buffer
    assert allgather_bytes(1e9, 8) == 0.875e9


# --- data parallel: the trainable per-rank parameters -------------------------------------


def test_full_training_reduces_every_parameter():
    # Llama-2-7B has 6,738,415,616 parameters; bf16 gradients over 16 GPUs:
    # 2 x 15/16 x 6,738,415,616 x 2 bytes = 25,269,058,560 bytes, once per step (ZeRO-1).
    assert trainable_parameters_per_rank(LLAMA2_7B, settings()) == 6_738_415_616
    assert dp_bytes(LLAMA2_7B, settings(gpus=16, zero=1)) == (0.0, pytest.approx(25_269_058_560))


def test_lora_reduces_only_the_adapters():
    """LoRA r=16 on all linears: per layer q, k, v, o: 16 x (4096 + 4096) = 131,072 each (524,288);
    gate, up: 16 x (4096 + 11008) = 241,664 each and down the same (724,992); 1,249,280 per layer
    x 32 = 39,976,960. All-reduce over 16 GPUs: 2 x 15/16 x 39,976,960 x 2 bytes = 149,913,600
    bytes (0.15 GB, where the whole model would be 25.3 GB)."""
    lora = settings(method="lora", lora_rank=16, lora_targets="all-linear", gpus=16)
    assert trainable_parameters_per_rank(LLAMA2_7B, lora) == 39_976_960
    assert dp_bytes(LLAMA2_7B, lora) == (0.0, pytest.approx(149_913_600))


def test_zero3_lora_gathers_the_frozen_base_too():
    """ZeRO-3 shards the frozen base as well, so it gathers it in forward and backward. Llama-2-7B,
    LoRA r=16 on q, k, v, o: 32 x 4 x 16 x (4096 + 4096) = 16,777,216 adapter parameters, gathered
    twice and reduced once in 2-byte weights and grads (6 bytes each: 100,663,296), and the bf16 base
    of 6,738,415,616 parameters gathered twice (26,953,662,464 bytes); 7/8 of it over 8 GPUs:
    7/8 x 27,054,325,760 = 23,672,535,040 bytes per micro-batch (ZeRO-1 would send the adapters only)."""
    lora = settings(method="lora", lora_rank=16, lora_targets="attention", gpus=8, zero=3, precision="bf16-mixed")
    assert trainable_parameters_per_rank(LLAMA2_7B, lora) == 16_777_216
    assert dp_bytes(LLAMA2_7B, lora) == (pytest.approx(23_672_535_040), 0.0)


def test_frozen_layers_and_embedding_are_not_reduced():
    # 16 of 32 layers frozen (and the embedding): 16 x 202,383,360 (matmuls 202,375,168 + 2 norms
    # 8,192) + head 131,072,000 + final norm 4,096 = 3,369,209,856.
    frozen = settings(frozen_layers=16)
    assert trainable_parameters_per_rank(LLAMA2_7B, frozen) == 3_369_209_856


def test_tensor_parallel_rank_reduces_its_share():
    """TP 8: per layer attention 4 x 4096^2 / 8 = 8,388,608, MLP 3 x 4096 x 11008 / 8 = 16,908,288,
    norms 8,192 replicated -> 25,305,088 x 32 = 809,762,816; embedding and head 32000 x 4096 / 8 =
    16,384,000 each; final norm 4,096: 842,534,912 per rank (not 6.74e9)."""
    assert trainable_parameters_per_rank(LLAMA2_7B, settings(tensor_parallel=8)) == 842_534_912


def test_pipeline_stage_reduces_its_layers_and_one_end():
    """PP 4: 8 layers x 202,383,360 = 1,619,066,880 plus the larger end, the last stage's head
    131,072,000 + final norm 4,096 = 131,076,096: 1,750,142,976."""
    assert trainable_parameters_per_rank(LLAMA2_7B, settings(pipeline_parallel=4)) == 1_750_142_976


def test_zero_stages_traffic():
    # P = 6,738,415,616, bf16 (2 bytes), 8 GPUs: (n-1)/n x P x 2 = 11,792,227,328.
    half = 11_792_227_328
    assert dp_bytes(LLAMA2_7B, settings(gpus=8, zero=2)) == (pytest.approx(half), pytest.approx(half))
    # ZeRO-3: all-gather forward and backward + reduce-scatter per micro-batch: 3 x 11.79e9.
    assert dp_bytes(LLAMA2_7B, settings(gpus=8, zero=3)) == (pytest.approx(3 * half), 0.0)


# --- tensor and pipeline parallel -----------------------------------------------------------


def test_tensor_parallel_all_reduces_per_layer():
    """b x s x h = 1 x 4096 x 4096 x 2 bytes = 33,554,432; TP 8 ring: x 1.75 = 58,720,256 per
    all-reduce; 4 per layer (2 forward, 2 backward) x 32 layers = 7,516,192,768 bytes per
    micro-batch; full recomputation adds 2 per layer: 6 x 32 x 58,720,256 = 11,274,289,152."""
    assert tp_bytes_per_micro(LLAMA2_7B, settings(tensor_parallel=8)) == pytest.approx(7_516_192_768)
    full = settings(tensor_parallel=8, checkpointing="full")
    assert tp_bytes_per_micro(LLAMA2_7B, full) == pytest.approx(11_274_289_152)
    assert tp_bytes_per_micro(LLAMA2_7B, settings()) == 0


def test_tensor_parallel_time_on_nvlink():
    # Each all-reduce carries 1 x 4096 x 4096 x 2 = 32 MiB, where the measured NVLink 4 curve (8 x
    # H200, NVLS) reads 275.84 GB/s: 7,516,192,768 bytes / 275.84e9 = 0.027248 s per micro-batch,
    # not hidden.
    estimate = estimate_time(LLAMA2_7B, settings(tensor_parallel=8), H100, TimeSettings(dataset_tokens=1e9))
    assert estimate.comm_by_dimension_s["tp"] == pytest.approx(0.027248, rel=1e-4)
    assert estimate.comm_exposed_by_dimension_s["tp"] == estimate.comm_by_dimension_s["tp"]


def test_pipeline_point_to_point_bytes():
    # forward activation and backward gradient, 1 x 4096 x 4096 x 2 bytes each: 67,108,864;
    # interleaved with 2 virtual stages crosses twice as many boundaries: 134,217,728.
    assert pp_bytes_per_micro(LLAMA2_7B, settings(pipeline_parallel=4)) == 67_108_864
    assert pp_bytes_per_micro(LLAMA2_7B, settings(pipeline_parallel=4), virtual_stages=2) == 134_217_728


def test_pipeline_bubble():
    # 1F1B: (p - 1) / m = 3 / 8; interleaved with v = 2: 3 / 16.
    assert bubble_fraction(4, 8) == 0.375
    assert bubble_fraction(4, 8, virtual_stages=2) == 0.1875
    assert bubble_fraction(1, 8) == 0


# --- placement --------------------------------------------------------------------------------


def test_placement_tensor_inside_data_then_pipeline():
    # TP 8 fills an 8-GPU node; DP 2 and PP 4 leave it.
    big = settings(tensor_parallel=8, gpus=2, pipeline_parallel=4)
    assert dimension_crossings(big, 8) == {"tp": False, "dp": True, "pp": True, "ep": False}
    # TP 4 x DP 2 = 8 stay in the node; the pipeline's next stage is 8 ranks away: another node.
    small = settings(tensor_parallel=4, gpus=2, pipeline_parallel=2)
    assert dimension_crossings(small, 8) == {"tp": False, "dp": False, "pp": True, "ep": False}
    # expert parallel 4 inside data parallel 8, TP 4: 16 ranks, beyond an 8-GPU node
    assert dimension_crossings(settings(tensor_parallel=4, gpus=8), 8, expert_parallel=4)["ep"] is True
    # A 384-GPU run with DP 8 x TP 4 x PP 12: DP spans 32 GPUs, more than a node.
    bloom = settings(tensor_parallel=4, gpus=8, pipeline_parallel=12)
    assert dimension_crossings(bloom, 8)["dp"] is True


def test_link_rates():
    # NVLink4: 900 GB/s bidirectional / 2 x 0.88 = 396 GB/s; across nodes 400 Gb/s / 8 = 50 GB/s.
    assert link_gbytes_per_s(900, False, 400, 0.88) == pytest.approx(396)
    assert link_gbytes_per_s(900, True, 400, 0.88) == 50
    assert link_gbytes_per_s(None, False, 200, 0.88) == 25


def test_a_ring_across_nodes_runs_on_every_nic_of_the_node():
    """stas00/ml-engineering network/README.md @744d01e: 4 nodes of 8 x B200, 8 x 50 GB/s NICs per
    node. A ring over all 32 ranks crosses at 8 NICs at once: min(8 x 50, NVLink5 1800 / 2 x 0.88
    = 792) = 400 GB/s. A 4 GiB all-reduce: 2 x 31/32 x 4 x 2^30 B / 400e9 B/s = 20.80 ms (the
    README's model 2; 22.05 ms measured)."""
    rate = link_gbytes_per_s(1800, True, 400, 0.88, nics_in_flight=8)
    assert rate == 400
    assert allreduce_bytes(4 * 2**30, 32) / (rate * 1e9) == pytest.approx(20.80e-3, rel=1e-3)
    # never above the intra-node rate: 8 x 100 GB/s NICs on NVLink4 (396 GB/s) stay at 396
    assert link_gbytes_per_s(900, True, 800, 0.88, nics_in_flight=8) == pytest.approx(396)
    # data parallel with TP 8 has one rank per node: one NIC, 50 GB/s; DP 48 with TP 1 has eight
    assert ring_nics_in_flight(settings(tensor_parallel=8, gpus=32), 8) == {"tp": 8, "dp": 1, "pp": 1, "ep": 1}
    assert ring_nics_in_flight(settings(gpus=48), 8)["dp"] == 8
    assert ring_nics_in_flight(settings(tensor_parallel=2, gpus=16), 8)["dp"] == 4


# --- mixture of experts -------------------------------------------------------------------------

MIXTRAL = get_preset("mixtral-8x7b")  # 32 layers, h 4096, 8 experts of 3 x 4096 x 14336, top-2


def test_expert_parallel_rank_reduces_its_experts_only():
    """EP 8: per layer attention 2 x 4096^2 + 2 x 4096 x 1024 = 41,943,040; experts
    8 x 3 x 4096 x 14336 / 8 = 176,160,768; router 4096 x 8 = 32,768; norms 8,192 ->
    218,144,768 x 32 = 6,980,632,576 + embedding and head 131,072,000 each + final norm 4,096
    = 7,242,780,672 per rank (46.7e9 without expert parallelism)."""
    assert trainable_parameters_per_rank(MIXTRAL, settings(), expert_parallel=8) == 7_242_780_672


def test_moe_all_to_all_bytes():
    """b x s x k x h = 1 x 4096 x 2 x 4096 x 2 bytes = 67,108,864; 4 all-to-alls (dispatch and
    combine, forward and backward) x 7/8 leave the GPU = 234,881,024 per layer x 32 =
    7,516,192,768 bytes per micro-batch. Each all-to-all carries 64 MiB: on the NVLink 4 curve 346.51
    of its 482.26 plateau (0.718509) x the all-gather's ring plateau 361.4 = 259.67 GB/s, 0.028945 s."""
    assert moe_alltoall_bytes_per_micro(MIXTRAL, settings(), 8) == pytest.approx(7_516_192_768)
    assert moe_alltoall_bytes_per_micro(MIXTRAL, settings(), 1) == 0
    assert moe_alltoall_bytes_per_micro(LLAMA2_7B, settings(), 8) == 0  # dense: no experts
    estimate = estimate_time(MIXTRAL, settings(gpus=8), H100, TimeSettings(dataset_tokens=1e9, expert_parallel=8))
    assert estimate.comm_by_dimension_s["ep"] == pytest.approx(0.028945, rel=1e-4)
