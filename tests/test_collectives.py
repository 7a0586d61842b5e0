"""Collectives on measured curves (calculators.timing.collectives), worked by hand from the rows of
data/collective_curves.csv."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from calculators.hardware.catalogue import find_gpu
from calculators.models.presets import get_preset
from calculators.timing.collectives import (
    HOP_LATENCY_S,
    bus_gbytes_per_s,
    collective_seconds,
    curve_from_points,
    curve_ranks,
    fabric_hop_latency_s,
    nic_bytes,
    published_curves,
    volume_factor,
)
from calculators.timing.estimate import estimate_time
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

H100 = find_gpu("H100-SXM5-80GB")
A100 = find_gpu("A100-SXM4-80GB")
L4 = find_gpu("L4-24GB")
NVLINK = 0.88  # the flat efficiency of fabrics with no curve

# Llama-3.1-8B's layer: 2 x 4096^2 (q, o) + 2 x 4096 x 1024 (k, v) + 3 x 4096 x 14336 (MLP) + 2 x 4096
# (norms) = 218,112,000 parameters, 436,224,000 bytes in bf16 (416.02 MiB).
LLAMA_8B_LAYER_BYTES = 436_224_000


def _seconds(collective, size, ranks, nodes, gpu=H100, gbps=400.0):
    bus = bus_gbytes_per_s(gpu, collective, size, ranks, nodes, gbps, NVLINK)
    return collective_seconds(collective, size, ranks, bus, curve_ranks(gpu, nodes))


def test_every_curve_is_sorted_and_positive():
    for curve in published_curves().values():
        sizes = [point.bytes for point in curve.points]
        assert sizes == sorted(sizes) and all(point.bus_gbytes_per_s > 0 for point in curve.points)


def test_all_gather_of_one_llama_8b_layer_inside_a_node():
    """8 x H100: 416.02 MiB lies log2(416.02 / 256) = 0.70045 of the way from 256 MiB (436.15
    GB/s) to 512 MiB (450.29) on the NVLink 4 all-reduce sweep: 446.054 of its 482.26 plateau,
    0.924924; an all-gather runs the ring's 361.4 GB/s plateau: 334.27 GB/s. 436,224,000 x 7/8
    / 334.27e9 = 1.1419 ms."""
    bus = bus_gbytes_per_s(H100, "all_gather", LLAMA_8B_LAYER_BYTES, 8, 1, 400, NVLINK)
    assert bus == pytest.approx(334.27, rel=1e-4)
    assert _seconds("all_gather", LLAMA_8B_LAYER_BYTES, 8, 1) == pytest.approx(1.1419e-3, rel=1e-4)


def test_all_gather_of_one_llama_8b_layer_across_16_nodes():
    """128 ranks on 16 nodes of 8, 400 Gb/s (50 GB/s) per GPU. Each NIC carries 15/16 x
    436,224,000 / 8 = 51,120,000 bytes, what the 2-node H100 sweep's 408,960,000-byte payload puts
    on a NIC (2 x 1/2 x payload / 8): log2(408,960,000 / 2^28) = 0.607385 from 213.19 GB/s to
    263.69, 243.863 GB/s busbw, per NIC / 15 = 16.258 of its 25 GB/s, 65.030%. On 50 GB/s:
    32.515 GB/s, 1.57219 ms; the ring's 127 steps are 112 more than the sweep's 16 ranks had:
    112 x 4.1 us = 0.45920 ms. 2.0314 ms, 1.78x the gather inside one node."""
    assert nic_bytes("all_gather", LLAMA_8B_LAYER_BYTES, 128, 16) == pytest.approx(51_120_000)
    across = _seconds("all_gather", LLAMA_8B_LAYER_BYTES, 128, 16)
    assert HOP_LATENCY_S * 112 == pytest.approx(0.45920e-3, rel=1e-4)
    assert across == pytest.approx(1.57219e-3 + 0.45920e-3, rel=1e-4)
    assert across / _seconds("all_gather", LLAMA_8B_LAYER_BYTES, 8, 1) == pytest.approx(1.779, rel=1e-3)


def test_tensor_parallel_all_reduce_of_one_layer_at_two_sizes():
    """Llama-2-7B (h 4096), TP 8 on one H100 node, bf16: b x s x h x 2 bytes per all-reduce.
    s = 4096: 32 MiB at 275.84 GB/s (NVLS) -> 33,554,432 x 1.75 / 275.84e9 = 212.87 us.
    s = 512: 4 MiB at 107.16 GB/s -> 4,194,304 x 1.75 / 107.16e9 = 68.50 us: an 8x smaller
    message is only 3.1x faster (the latency-bound end of the curve)."""
    assert _seconds("all_reduce", 32 * 2**20, 8, 1) == pytest.approx(212.87e-6, rel=1e-4)
    assert _seconds("all_reduce", 4 * 2**20, 8, 1) == pytest.approx(68.50e-6, rel=1e-3)


def test_nvls_only_from_five_gpus():
    """4 GPUs ring all-reduce: at 16 GiB the ring plateau 367.2 GB/s, not NVLS's 482.26."""
    assert bus_gbytes_per_s(H100, "all_reduce", 16 * 2**30, 4, 1, 400, NVLINK) == pytest.approx(367.2)
    assert bus_gbytes_per_s(H100, "all_reduce", 16 * 2**30, 8, 1, 400, NVLINK) == pytest.approx(482.26)


def test_a100_takes_its_own_plateau_on_nvlink4s_shape():
    """A100 (NVLink 3, 300 GB/s one way): at 16 GiB its measured 235 GB/s."""
    assert bus_gbytes_per_s(A100, "all_reduce", 16 * 2**30, 8, 1, 400, NVLINK) == pytest.approx(235)


def test_fabric_without_a_curve_keeps_the_flat_link():
    """L4 on PCIe 4 (64 GB/s both ways): 32 x 0.88 = 28.16 GB/s at every size."""
    assert bus_gbytes_per_s(L4, "all_reduce", 1e3, 4, 1, 400, NVLINK) == pytest.approx(28.16)
    assert bus_gbytes_per_s(L4, "all_reduce", 1e9, 4, 1, 400, NVLINK) == pytest.approx(28.16)


def test_volume_factors():
    assert volume_factor("all_reduce", 8) == 1.75
    assert volume_factor("all_gather", 8) == volume_factor("reduce_scatter", 8) == 0.875
    assert volume_factor("send_recv", 2) == 1


def test_a_calibrated_curve_replaces_the_published_one():
    """A host that measured 100 GB/s at 32 MiB all-reduce: Llama-2-7B's TP 8 all-reduces (4 per
    layer, 32 layers, 32 MiB x 1.75 each = 7,516,192,768 bytes) take 0.075162 s instead of the
    published curve's 0.027248 s."""
    spec = get_preset("llama-2-7b")
    settings = TrainingSettings(tensor_parallel=8, seq_len=4096)
    measured = {
        "all_reduce": [{"bytes": 2**20, "bus_gbytes_per_s": 20.0}, {"bytes": 32 * 2**20, "bus_gbytes_per_s": 100.0}]
    }
    calibrated = estimate_time(spec, settings, H100, TimeSettings(dataset_tokens=1e9, collective_curves=measured))
    published = estimate_time(spec, settings, H100, TimeSettings(dataset_tokens=1e9))
    assert calibrated.comm_by_dimension_s["tp"] == pytest.approx(0.075162, rel=1e-4)
    assert published.comm_by_dimension_s["tp"] == pytest.approx(0.027248, rel=1e-4)
    assert any("calibrated curves" in line for line in calibrated.assumptions)


def test_a_measured_curve_is_checked():
    with pytest.raises(ValidationError):
        curve_from_points([{"bytes": -1, "bus_gbytes_per_s": 10}])
    with pytest.raises(ValueError, match="at least one point"):
        curve_from_points([])


def test_a_calibration_applies_its_curves_once():
    """with_measured_collectives puts a calibration's curves in; settings that carry curves keep them."""
    measured = {"all_gather": [{"bytes": 2**20, "bus_gbytes_per_s": 50.0}]}
    applied = TimeSettings(dataset_tokens=1e9).with_measured_collectives(measured)
    assert applied.collective_curves["all_gather"][0].bus_gbytes_per_s == 50
    other = {"all_gather": [{"bytes": 2**20, "bus_gbytes_per_s": 10.0}]}
    assert applied.with_measured_collectives(other) is applied
    assert TimeSettings(dataset_tokens=1e9).with_measured_collectives(None).collective_curves is None
    with pytest.raises(ValidationError):
        TimeSettings(dataset_tokens=1e9).with_measured_collectives(
            {"all_reduce": [{"bytes": 0, "bus_gbytes_per_s": 1}]}
        )


def test_a_send_across_nodes_is_one_hop_and_the_nic_at_its_point_to_point_peak():
    """One H100 sends 2 MiB to a GPU of another node on 400 Gb/s (50 GB/s): 4.1 us of hop latency
    (123 us / 30 ring steps) + 2,097,152 / (47e9: 46-48 GB/s per NDR NIC, nccl-tests issue 290) =
    4.1 + 44.620 = 48.720 us, 43.045 GB/s; 8 MiB: 4.1 + 178.482 = 182.582 us, 45.945 GB/s. On a
    200 Gb/s NIC 2 MiB take 4.1 + 89.241 = 93.341 us, 22.468 GB/s. Not the network all-reduce curve (which
    put 2 MiB at 4.3 GB/s: a 16 MiB two-node all-reduce's NIC share, intra-node phases and ring
    steps included)."""
    assert bus_gbytes_per_s(H100, "send_recv", 2 * 2**20, 2, 2, 400, NVLINK) == pytest.approx(43.045, rel=1e-4)
    assert bus_gbytes_per_s(H100, "send_recv", 8 * 2**20, 2, 2, 400, NVLINK) == pytest.approx(45.945, rel=1e-4)
    assert bus_gbytes_per_s(H100, "send_recv", 2 * 2**20, 2, 2, 200, NVLINK) == pytest.approx(22.468, rel=1e-4)
    assert _seconds("send_recv", 2 * 2**20, 2, 2) == pytest.approx(48.720e-6, rel=1e-4)


def test_a_send_inside_an_nvswitch_node_is_one_hop_and_the_send_plateau():
    """NVLink 4's hop: the 32 KiB all-reduce at 1.44 GB/s takes 32,768 x 1.75 / 1.44e9 = 39.822 us
    over 2 x 7 ring steps, 2.8444 us each. A 4 MiB send: 2.8444 + 4,194,304 / 396.4e9 (the
    nvbandwidth send plateau) = 2.8444 + 10.581 = 13.425 us, 312.42 GB/s (the all-reduce sweep's
    shape put it at 88.1). Across nodes 1 MiB takes the NIC's 4.1 + 22.310 us, 39.70 GB/s, the
    slower of its two hops (NVLink: 2.8444 + 2.6453 us, 191.01 GB/s)."""
    assert fabric_hop_latency_s("nvlink4") == pytest.approx(2.8444e-6, rel=1e-4)
    assert bus_gbytes_per_s(H100, "send_recv", 4 * 2**20, 2, 1, 400, NVLINK) == pytest.approx(312.42, rel=1e-4)
    assert bus_gbytes_per_s(H100, "send_recv", 2**20, 2, 1, 400, NVLINK) == pytest.approx(191.01, rel=1e-4)
    assert bus_gbytes_per_s(H100, "send_recv", 2**20, 2, 2, 400, NVLINK) == pytest.approx(39.70, rel=1e-3)


def test_a_send_on_amd_mesh_keeps_the_sweep_shape():
    """xGMI is a mesh (a pair shares one link of seven): its sends stay on the all-reduce shape it
    borrows from NVLink 4, 1 MiB at 39.93 and 1 GiB at 463.58 GB/s of that sweep: 0.086134."""
    mi300x = find_gpu("MI300X-192GB")
    small = bus_gbytes_per_s(mi300x, "send_recv", 2**20, 2, 1, 400, NVLINK)
    large = bus_gbytes_per_s(mi300x, "send_recv", 2**30, 2, 1, 400, NVLINK)
    assert small / large == pytest.approx(39.93 / 463.58, rel=1e-4)
