"""Collectives from measured curves: bus bandwidth against message size, per collective and fabric.

data/collective_curves.csv holds published nccl-tests / torch.distributed sweeps (busbw per payload,
nccl-tests doc/PERFORMANCE.md's convention) inside a node (NVLink 3, 4 and 5 behind NVSwitch,
AMD xGMI) and across nodes (2 nodes of H100 on 8 x 200 Gb/s, 4 nodes of B200 on 8 x 400 Gb/s).
A collective of `size` bytes over `ranks` GPUs on `nodes` nodes is timed as

    seconds = size x factor(collective, ranks) / busbw + extra ring latency

- inside a node, busbw = the GPU's one-way link x the fabric's all-reduce curve at `size`
  relative to its largest payload (the shape: latency-bound small messages, saturated large
  ones) x the collective's own measured plateau: NVLS (NVLink SHARP) lifts all-reduce above
  the ring from 5 GPUs on (ml-engineering network/README.md @744d01e, SHARP: 1.14x at 5 to
  1.29x at 8 H200s, ring only at 4), all-gather and reduce-scatter run the ring path;
- across nodes, NCCL's hierarchical collectives move 2(k-1)/k x size/g bytes per GPU over its
  NIC for an all-reduce of n = g x k ranks (g per node, k nodes; ibid., "Inter-node speed
  depends on intra-node speed", model 3); the NIC runs at the efficiency the network curve
  measured for as many bytes per NIC (per-accelerator rate = busbw x (k-1)/(n-1)), never
  faster than the intra-node figure;
- a send (pipeline stages, a context-parallel ring's K, V) is one hop's latency and then its
  link at the send plateau, not a point of an all-reduce sweep, whose small payloads carry
  2(n - 1) steps of latency: inside an NVSwitch node the fabric's hop (fabric_hop_latency_s) and
  its send plateau; to another node HOP_LATENCY_S and the NIC at its point-to-point peak
  (point_to_point_gbytes_per_s), never faster than the hop inside the node;
- a ring all-gather or reduce-scatter pays one hop of latency per rank (n - 1 steps), so
  rings longer than the curve's add HOP_LATENCY_S per extra rank; all-reduce across nodes runs
  NCCL's tree (logarithmic in nodes) and is left at the curve's latency.

A calibration's measured curve (list of {bytes, bus_gbytes_per_s} per collective) replaces the
published intra-node one: measured_intra_curves.
"""

from __future__ import annotations

import bisect
import csv
import functools
import math
from typing import Literal

from pydantic import BaseModel, Field

from calculators import DATA_DIR
from calculators.hardware.catalogue import GpuSpec

CURVES_PATH = DATA_DIR / "collective_curves.csv"
Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]
# The curve of each catalogue interconnect that sits behind a switch or a full mesh (bridged
# pairs and PCIe have none: they keep the flat NVLINK_EFFICIENCY link of communication.py).
FABRIC_OF_INTERCONNECT: dict[str, str] = {
    "NVLink3": "nvlink3",
    "NVLink4": "nvlink4",
    "NVLink5": "nvlink5",
    "Infinity Fabric": "xgmi",
}
# Fabrics with no all-reduce sweep of their own borrow NVLink 4's shape (an assumption); their
# plateau is their own measured point.
SHAPE_OF_FABRIC: dict[str, str] = {"nvlink3": "nvlink4", "xgmi": "nvlink4"}
# The network curve measured beside each fabric's generation: B200 nodes on EFA v4, the rest on
# H100 nodes' GPUDirect-TCPXO sweep (an assumption for A100 and MI300X clusters).
NETWORK_CURVE_OF_FABRIC: dict[str, str] = {"nvlink5": "efa-b200"}
DEFAULT_NETWORK_CURVE = "tcpxo-h100"
# NVLS (NVLink SHARP) is picked by NCCL for all-reduce from 5 GPUs of an NVSwitch node on
# (ml-engineering network/README.md @744d01e, SHARP: "a ramp that starts above 4").
NVLS_MIN_RANKS = 5
NVLS_FABRICS = ("nvlink4", "nvlink5")
# Fabrics behind an NVSwitch, where any two GPUs send to each other over their whole link (NVIDIA
# HGX/DGX A100, H100, B200); AMD's xGMI is a mesh whose pairs share one link of seven, so its sends
# stay on the all-reduce sweep's shape.
SWITCHED_FABRICS = ("nvlink3", "nvlink4", "nvlink5")
# One ring step's latency: the 2-node, 16-rank all-reduce of 8 to 256 bytes takes 123 us in
# 2 x 15 ring steps (github.com/lessizzmore/create-a3mega-ztan-fork ztan-NCCL-test-result
# @02dd8f45): 4.1 us per step.
HOP_LATENCY_S = 123e-6 / 30
# Share of its line rate one NDR (400 Gb/s) InfiniBand NIC carries point to point on large
# messages: "For NDR @ 400Gbps you should see 46-48GB/s per NIC" (NVIDIA's nccl-tests maintainer,
# comment of 2025-03-03 in https://github.com/NVIDIA/nccl-tests/issues/290): 47 of 50 GB/s.
NIC_PEAK_EFFICIENCY = 47 / 50


class CurveRow(BaseModel):
    """One measured point of data/collective_curves.csv."""

    curve: str
    collective: str
    gpus: int = Field(ge=2)
    nodes: int = Field(ge=1)
    bytes: float = Field(gt=0)
    bus_gbytes_per_s: float = Field(gt=0)
    link_gbytes_per_s: float = Field(gt=0, description="the one-way link the busbw is measured over, per GPU")
    algorithm: str
    source: str
    as_of: str
    notes: str = ""


class CurvePoint(BaseModel):
    """One payload of a sweep: bytes and the bus bandwidth measured at it (nccl-tests busbw)."""

    bytes: float = Field(gt=0, le=1e13)
    bus_gbytes_per_s: float = Field(gt=0, le=1e5)


class Curve(BaseModel):
    """A sweep of one collective on one fabric, points sorted by payload."""

    gpus: int
    nodes: int
    link_gbytes_per_s: float
    points: tuple[CurvePoint, ...]

    def bus_gbytes_per_s(self, size_bytes: float) -> float:
        """busbw at `size_bytes`: linear in log2 of the payload between measured points, the end
        points held beyond the measured range."""
        sizes = [point.bytes for point in self.points]
        size = min(max(size_bytes, sizes[0]), sizes[-1])
        upper = min(bisect.bisect_left(sizes, size), len(sizes) - 1)
        lower = max(upper - 1, 0)
        if sizes[upper] == sizes[lower]:
            return self.points[upper].bus_gbytes_per_s
        weight = (math.log2(size) - math.log2(sizes[lower])) / (math.log2(sizes[upper]) - math.log2(sizes[lower]))
        low, high = self.points[lower].bus_gbytes_per_s, self.points[upper].bus_gbytes_per_s
        return low + weight * (high - low)

    @property
    def plateau_gbytes_per_s(self) -> float:
        """busbw at the largest measured payload."""
        return self.points[-1].bus_gbytes_per_s

    def shape(self, size_bytes: float) -> float:
        """busbw at `size_bytes` relative to the largest payload's."""
        return self.bus_gbytes_per_s(size_bytes) / self.plateau_gbytes_per_s


def curve_from_points(points: list[CurvePoint] | list[dict], gpus: int = 8, nodes: int = 1) -> Curve:
    """A curve from measured points ({bytes, bus_gbytes_per_s}, in any order), as a calibration
    writes them; its link is its own largest busbw."""
    checked = sorted((CurvePoint.model_validate(point) for point in points), key=lambda point: point.bytes)
    if not checked:
        raise ValueError("a measured collective curve needs at least one point")
    return Curve(gpus=gpus, nodes=nodes, link_gbytes_per_s=checked[-1].bus_gbytes_per_s, points=tuple(checked))


@functools.cache
def published_curves() -> dict[tuple[str, str], Curve]:
    """Every (curve, collective) sweep of data/collective_curves.csv, read and checked once."""
    with CURVES_PATH.open(newline="") as handle:
        rows = [CurveRow.model_validate(row) for row in csv.DictReader(handle)]
    grouped: dict[tuple[str, str], list[CurveRow]] = {}
    for row in rows:
        grouped.setdefault((row.curve, row.collective), []).append(row)
    curves = {}
    for key, group in grouped.items():
        group.sort(key=lambda row: row.bytes)
        points = tuple(CurvePoint(bytes=row.bytes, bus_gbytes_per_s=row.bus_gbytes_per_s) for row in group)
        first = group[0]
        curves[key] = Curve(
            gpus=first.gpus, nodes=first.nodes, link_gbytes_per_s=first.link_gbytes_per_s, points=points
        )
    return curves


def fabric_of(gpu: GpuSpec) -> str | None:
    """The measured fabric of `gpu`'s interconnect ('nvlink4', ...), None where no curve applies."""
    return FABRIC_OF_INTERCONNECT.get(gpu.interconnect or "")


def volume_factor(collective: Collective, ranks: int) -> float:
    """busbw / algbw of nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather,
    reduce-scatter and all-to-all (n-1)/n, a send 1."""
    if collective == "send_recv":
        return 1.0
    ring = (ranks - 1) / ranks
    return 2 * ring if collective == "all_reduce" else ring


def _plateau(fabric: str, collective: Collective, ranks: int) -> float:
    """The fabric's measured busbw on large payloads for `collective` over `ranks` GPUs: NVLS
    all-reduce from NVLS_MIN_RANKS on NVSwitch, else the ring's; all-gather, reduce-scatter and a
    send their own where measured, else the ring all-reduce's; all-to-all as all-gather (an
    assumption: both move (n-1)/n of the buffer through each link)."""
    curves = published_curves()
    ring = curves.get((fabric, "all_reduce_ring"), curves[(fabric, "all_reduce")])
    if collective == "all_reduce":
        nvls = fabric in NVLS_FABRICS and ranks >= NVLS_MIN_RANKS
        return (curves[(fabric, "all_reduce")] if nvls else ring).plateau_gbytes_per_s
    own = "all_gather" if collective == "all_to_all" else collective
    return curves.get((fabric, own), ring).plateau_gbytes_per_s


def intra_node_gbytes_per_s(
    gpu: GpuSpec,
    collective: Collective,
    size_bytes: float,
    ranks: int,
    fallback_efficiency: float,
    measured: dict[str, Curve] | None = None,
) -> float:
    """busbw of `collective` on `size_bytes` over `ranks` GPUs of one node: a measured curve of
    this collective where one is given (calibration), else the GPU's one-way link x the
    fabric's shape x its plateau over its link, else (no curve for the fabric) the one-way link
    x `fallback_efficiency` at every size."""
    if measured and collective in measured:
        return measured[collective].bus_gbytes_per_s(size_bytes)
    link = (gpu.interconnect_gbps or 0) / 2
    fabric = fabric_of(gpu)
    if fabric is None or not link:
        return link * fallback_efficiency
    curves = published_curves()
    own_link = curves[(fabric, "all_reduce")].link_gbytes_per_s
    plateau = link * _plateau(fabric, collective, ranks) / own_link
    if collective == "send_recv" and fabric in SWITCHED_FABRICS:
        return one_hop_gbytes_per_s(size_bytes, fabric_hop_latency_s(fabric), plateau)
    shape = curves[(SHAPE_OF_FABRIC.get(fabric, fabric), "all_reduce")].shape(size_bytes)
    return plateau * shape


def fabric_hop_latency_s(fabric: str) -> float:
    """One ring step's latency inside a node of `fabric`: its all-reduce sweep's smallest payload
    takes 2(n - 1) ring steps of latency (the LL protocol at 32 KiB moves next to nothing), so
    that time / 2(n - 1); NVLink 4: 32,768 x 1.75 / 1.44 GB/s = 39.8 us / 14 = 2.84 us."""
    curve = published_curves()[(SHAPE_OF_FABRIC.get(fabric, fabric), "all_reduce")]
    smallest = curve.points[0]
    seconds = smallest.bytes * volume_factor("all_reduce", curve.gpus) / (smallest.bus_gbytes_per_s * 1e9)
    return seconds / (2 * (curve.gpus - 1))


def one_hop_gbytes_per_s(size_bytes: float, latency_s: float, peak_gbytes_per_s: float) -> float:
    """GB/s of one send of `size_bytes`: one hop's latency, then the link at its peak."""
    return size_bytes / (latency_s + size_bytes / (peak_gbytes_per_s * 1e9)) / 1e9


def network_curve(gpu: GpuSpec) -> Curve:
    """The all-reduce sweep across nodes measured beside `gpu`'s generation."""
    name = NETWORK_CURVE_OF_FABRIC.get(fabric_of(gpu) or "", DEFAULT_NETWORK_CURVE)
    return published_curves()[(name, "all_reduce")]


def nic_bytes(collective: Collective, size_bytes: float, ranks: int, nodes: int) -> float:
    """Bytes each GPU's NIC carries in one collective over `ranks` GPUs on `nodes` nodes (g =
    ranks / nodes per node), NCCL's hierarchical algorithms: all-reduce 2(k-1)/k x size / g
    (reduce inside the node, exchange the shard, broadcast back: ml-engineering
    network/README.md @744d01e, model 3), all-gather and reduce-scatter (k-1)/k x size / g, an
    all-to-all the (n-g)/n of the buffer bound for other nodes, a send the whole message."""
    per_node = ranks / nodes
    if collective == "send_recv":
        return size_bytes
    if collective == "all_to_all":
        return size_bytes * (ranks - per_node) / ranks
    share = (nodes - 1) / nodes * size_bytes / per_node
    return 2 * share if collective == "all_reduce" else share


def network_efficiency(gpu: GpuSpec, bytes_per_nic: float) -> float:
    """The share of its one-way rate a GPU's NIC sustains when it carries `bytes_per_nic` in one
    collective: the network curve's busbw x (k-1)/(n-1) / NIC GB/s (ml-engineering
    network/README.md @744d01e, "So what should you expect?"), read at the curve's payload whose
    NIC bytes are the same (so a ring of one GPU per node and a node-wide reduction compare
    like for like)."""
    curve = network_curve(gpu)
    payload = bytes_per_nic / nic_bytes("all_reduce", 1.0, curve.gpus, curve.nodes)
    per_gpu = curve.bus_gbytes_per_s(payload) * (curve.nodes - 1) / (curve.gpus - 1)
    return per_gpu / curve.link_gbytes_per_s


def bus_gbytes_per_s(
    gpu: GpuSpec,
    collective: Collective,
    size_bytes: float,
    ranks: int,
    nodes: int,
    inter_node_gbps: float,
    fallback_efficiency: float,
    measured: dict[str, Curve] | None = None,
) -> float:
    """busbw of one collective over `ranks` GPUs spread on `nodes` nodes (module docstring): the
    intra-node figure in one node; across nodes the NIC bytes (nic_bytes) at the NIC's measured
    efficiency for that many bytes x its GB/s (`inter_node_gbps` / 8 per GPU), as busbw, never
    above the intra-node figure; a GPU with no interconnect figure sends everything through its
    NIC, as if each rank were a node."""
    intra = intra_node_gbytes_per_s(gpu, collective, size_bytes, ranks, fallback_efficiency, measured)
    if nodes <= 1 and intra:
        return intra
    if collective == "send_recv":
        network = point_to_point_gbytes_per_s(size_bytes, inter_node_gbps)
        return min(network, intra) if intra else network
    if not intra:  # no link between GPUs: every rank reaches the others through its own NIC
        nodes = ranks
    carried = nic_bytes(collective, size_bytes, ranks, nodes)
    seconds = carried / (inter_node_gbps / 8 * 1e9 * network_efficiency(gpu, carried))
    network = size_bytes * volume_factor(collective, ranks) / seconds / 1e9
    return min(network, intra) if intra else network


def point_to_point_gbytes_per_s(size_bytes: float, inter_node_gbps: float) -> float:
    """GB/s of one send of `size_bytes` from a GPU to a GPU of another node: one hop's latency
    (HOP_LATENCY_S, a ring step across two nodes) and then the NIC at its point-to-point peak
    (NIC_PEAK_EFFICIENCY x `inter_node_gbps` / 8). A send is not read on the network all-reduce
    curve: that curve's small payloads carry the reduction's intra-node phases and every ring
    step's latency, which one send does not (ml-engineering network/README.md @744d01e,
    "Measuring the inter-node fabric on its own": a collective across nodes "will always lean on
    the intra-node fabric"; the wire is measured point to point, ib_write_bw)."""
    return one_hop_gbytes_per_s(size_bytes, HOP_LATENCY_S, inter_node_gbps / 8 * NIC_PEAK_EFFICIENCY)


def curve_ranks(gpu: GpuSpec, nodes: int) -> int:
    """Ranks of the sweep a collective on `nodes` nodes is read from: a node's 8, or the network
    curve's."""
    return network_curve(gpu).gpus if nodes > 1 else 8


def collective_seconds(
    collective: Collective, size_bytes: float, ranks: int, bus_gbytes: float, curve_ranks: int = 8
) -> float:
    """Seconds of one collective of `size_bytes` (the full buffer: all-reduce's input,
    all-gather's output, reduce-scatter's input, a send's message) at `bus_gbytes` busbw:
    size x volume_factor / busbw, plus HOP_LATENCY_S per ring step beyond the curve's
    `curve_ranks` for a ring all-gather or reduce-scatter."""
    if ranks <= 1 or size_bytes <= 0:
        return 0.0
    seconds = size_bytes * volume_factor(collective, ranks) / (bus_gbytes * 1e9)
    if collective in ("all_gather", "reduce_scatter"):
        seconds += HOP_LATENCY_S * max(0, ranks - curve_ranks)
    return seconds


def measured_intra_curves(curves: dict[str, list] | None) -> dict[str, Curve] | None:
    """A calibration's measured curves ({'all_reduce': [{bytes, bus_gbytes_per_s}, ...], ...})
    as Curves that replace the published intra-node ones; None stays None."""
    if not curves:
        return None
    return {name: curve_from_points(points) for name, points in curves.items() if points}
