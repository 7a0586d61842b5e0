"""The host link and the CPU's work in a step with CPU offload: what ZeRO-Offload, ZeRO-Infinity
and activation offloading send over the GPU's link to its host, and the optimizer step the CPU runs.

- The link: PCIe x16 of the catalogue's generation (GpuSpec.pcie_gen) at its per-direction payload
  rate times an achievable fraction measured with pinned copies; NVLink-C2C on Grace superchips
  (GH200, GB200). Accelerators without a host link figure (TPUs, Trainium) get none: their stacks
  have no CPU offload of this kind (calculators.workload.compatibility.cpu_offload_problem).
- Optimizer offload (ZeRO-Offload, Ren et al. 2021, arXiv 2101.06840, Sec. 4.1, Fig. 5): each
  GPU's share of the gradients goes to the host, in gradient precision, overlapped with backward;
  the CPU steps its share with DeepSpeed's CPU Adam; the updated parameters come back, in
  parameter precision, before the next forward. DeepSpeed's "delayed parameter update" (Sec. 4.2)
  is off by default, so the CPU step and the return trip are on the critical path.
- Parameter offload (ZeRO-Infinity, Rajbhandari et al. 2021, arXiv 2104.07857, Sec. 5; DeepSpeed
  ZeRO-3 offload_param): each GPU's share of the weights streams in for forward and again for
  backward, every micro-batch; at best it hides under that micro-batch's compute
  (exposed = max(0, transfer - compute)), with prefetching as DeepSpeed does it.
- Activation offload (torchtune's OffloadActivations, Megatron's CPU offloading): the saved
  activations the memory engine puts on the host go out in forward and come back in backward,
  every micro-batch, on the same link.

The link is full duplex: host-to-device and device-to-host traffic run side by side, each at
its own direction's rate.
"""

from __future__ import annotations

from typing import NamedTuple

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.engine import step_memory
from calculators.memory.layout import in_flight_micro_batches
from calculators.models.spec import ModelSpec
from calculators.timing.communication import trainable_parameters_per_rank
from calculators.timing.operations import optimizer_bytes_per_parameter
from calculators.units import GIB
from calculators.workload.precision import gradient_bytes, weight_bytes
from calculators.workload.training import TrainingSettings

# PCI Express transfer rate per lane (GT/s) and line-code efficiency by generation (PCI-SIG base
# specifications 1.0-6.0, as tabulated at https://en.wikipedia.org/wiki/PCI_Express#Comparison_table):
# 8b/10b for 1-2, 128b/130b for 3-5, and 6.0's FLIT mode, 242 of every 256 bytes carrying data.
PCIE_GT_PER_S: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}
PCIE_LANES = 16
# Achievable share of the payload rate with pinned memory, measured on one NVIDIA H200 SXM host
# (PCIe 5 x16; data/device_runs/2026-11-27-h200-measurements.json, bench/gpu_measurements.py):
# torch Tensor.copy_(non_blocking=True) of a 1 GiB pinned buffer, 55.45 GB/s host-to-device and
# 55.30 GB/s device-to-host; 55.45 / 63.02 = 0.880. NVIDIA's nvbandwidth host_to_device_memcpy_ce
# gives 55.6 GB/s in the NVbandwidth blog's example (developer.nvidia.com/blog, "NVbandwidth").
# The same share is assumed for every generation and for AMD's and Intel's cards.
PCIE_ACHIEVABLE_FRACTION = 55.45 / 63.02
# NVLink-C2C between Grace and Hopper/Blackwell: 900 GB/s, 450 GB/s per direction (NVIDIA Grace
# Hopper Superchip Architecture whitepaper, 2023). Measured with cudaMemcpy on GH200: 375 GB/s
# host-to-device and 297 GB/s device-to-host (Schieffer et al., "Harnessing Integrated CPU-GPU
# System Memory for HPC: a first look into Grace Hopper", ICPP 2024).
NVLINK_C2C_GBYTES_PER_S = 450.0
C2C_MEASURED_GBYTES_PER_S = (375.0, 297.0)  # (host to device, device to host)
C2C_PREFIXES: tuple[str, ...] = ("GH200", "GB200")
# The CPU optimizer step: torch 2.11's fused AdamW (fused=True, the CPU kernel FSDP2's CPU offload
# steps with) measured on the same host, 16 threads over 256M fp32 parameters: 4.106e9 parameters/s,
# 256.6M per core (data/device_runs/2026-11-27-h200-measurements.json, "cpu_adamw"). DeepSpeed's
# CPU Adam is "5X-7X faster than the standard PyTorch implementation" (deepspeed.ai/tutorials/
# zero-offload/, measured against torch's unfused AdamW): on that host torch's foreach AdamW ran
# 0.946e9 parameters/s, so DeepSpeed's claim puts it at 4.7-6.6e9, the same order as the fused
# kernel's rate taken here.
CPU_ADAM_PARAMS_PER_S_PER_CORE = 4.106e9 / 16


class HostLink(NamedTuple):
    """A GPU's link to its host: GB/s each way and its name in words."""

    h2d_gbytes_per_s: float
    d2h_gbytes_per_s: float
    name: str


def pcie_payload_gbytes_per_s(generation: int, lanes: int = PCIE_LANES) -> float:
    """Per-direction payload GB/s of a PCIe link: GT/s x lanes x line-code efficiency / 8 bits
    (PCIe 5 x16: 32 x 16 x 128/130 / 8 = 63.02 GB/s)."""
    if generation <= 2:
        efficiency = 8 / 10
    elif generation <= 5:
        efficiency = 128 / 130
    else:
        efficiency = 242 / 256
    return PCIE_GT_PER_S[generation] * lanes * efficiency / 8


def host_link(gpu: GpuSpec, given_gbytes_per_s: float | None = None) -> HostLink | None:
    """The GPU's host link: `given_gbytes_per_s` each way when the user gave it, NVLink-C2C's
    measured rates on Grace superchips, else PCIe x16 of the catalogue's generation at the
    achievable fraction; None when the catalogue has no host link for it (TPUs, Trainium)."""
    if given_gbytes_per_s is not None:
        return HostLink(given_gbytes_per_s, given_gbytes_per_s, f"a given {given_gbytes_per_s:g} GB/s host link")
    if gpu.name.upper().startswith(C2C_PREFIXES):
        h2d, d2h = C2C_MEASURED_GBYTES_PER_S
        return HostLink(h2d, d2h, f"NVLink-C2C ({NVLINK_C2C_GBYTES_PER_S:g} GB/s per direction peak)")
    if gpu.pcie_gen is None or gpu.pcie_gen not in PCIE_GT_PER_S:
        return None
    rate = pcie_payload_gbytes_per_s(gpu.pcie_gen) * PCIE_ACHIEVABLE_FRACTION
    return HostLink(rate, rate, f"PCIe {gpu.pcie_gen} x{PCIE_LANES}")


def cpu_optimizer_params_per_s(host_cores: float) -> float:
    """Parameters a CPU Adam updates per second on `host_cores` cores: the fused AdamW rate per
    core measured on an H200 host (CPU_ADAM_PARAMS_PER_S_PER_CORE), linear in cores."""
    return host_cores * CPU_ADAM_PARAMS_PER_S_PER_CORE


def _adamw_bytes_per_parameter(settings: TrainingSettings) -> float:
    return optimizer_bytes_per_parameter(settings.model_copy(update={"optimizer": "adamw"}))


def optimizer_shard_parameters(spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1) -> float:
    """Trainable parameters whose optimizer step one GPU's host runs: the rank's trainable
    parameters, divided over the data-parallel GPUs from ZeRO-1 on."""
    shard = settings.gpus if settings.zero >= 1 else 1
    return trainable_parameters_per_rank(spec, settings, expert_parallel) / shard


def cpu_optimizer_seconds(
    spec: ModelSpec, settings: TrainingSettings, host_cores: float, expert_parallel: int = 1
) -> float:
    """The CPU's optimizer step over one GPU's shard: parameters / CPU Adam's rate, scaled by the
    optimizer's bytes per parameter against AdamW's (the step is memory-bound on the CPU too:
    SGD's one state moves less); 0 without optimizer offload."""
    if not settings.offload_optimizer or settings.optimizer == "none":
        return 0.0
    scale = optimizer_bytes_per_parameter(settings) / _adamw_bytes_per_parameter(settings)
    parameters = optimizer_shard_parameters(spec, settings, expert_parallel)
    return parameters * scale / cpu_optimizer_params_per_s(host_cores)


def optimizer_offload_bytes(
    spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1
) -> tuple[float, float]:
    """(host-to-device, device-to-host) bytes of ZeRO-Offload once per optimizer step: the GPU's
    updated parameters back in parameter precision (with parameter offload they stay on the host
    and stream in with the next forward instead), its gradient shard out in gradient precision."""
    if not settings.offload_optimizer:
        return 0.0, 0.0
    shard = optimizer_shard_parameters(spec, settings, expert_parallel)
    back = 0.0 if settings.offload_parameters else shard * weight_bytes(settings.precision)
    return back, shard * gradient_bytes(settings.precision)


def parameter_stream_bytes_per_micro(spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1) -> float:
    """Host-to-device bytes of ZeRO-Infinity parameter offload per micro-batch: the GPU's 1/dp share
    of its rank's weights (every weight, trained or not), in for forward and again for backward."""
    if not settings.offload_parameters:
        return 0.0
    every_weight = settings.model_copy(update={"method": "full", "frozen_layers": 0})
    rank_parameters = trainable_parameters_per_rank(spec, every_weight, expert_parallel)
    return 2 * rank_parameters / settings.gpus * weight_bytes(settings.precision)


class HostTime(NamedTuple):
    """A step's host traffic and CPU work: seconds on the link (both ways, summed), the CPU
    optimizer's seconds and what of them the step waits for."""

    transfer_s: float
    cpu_optimizer_s: float
    exposed_s: float


def host_seconds(
    link: HostLink,
    per_micro_bytes: tuple[float, float],
    per_step_bytes: tuple[float, float],
    grad_accum: int,
    compute_s: float,
    cpu_optimizer_s: float,
) -> HostTime:
    """The step's host time over `link`: `per_micro_bytes` (host-to-device, device-to-host) move
    every micro-batch and hide under its compute (compute_s / grad_accum) at best, each direction
    on its own; the once-per-step gradients out (`per_step_bytes`[1]) share the last micro-batch's
    window; the CPU step and the parameters back (`per_step_bytes`[0]) wait after backward."""
    h2d_rate, d2h_rate = link.h2d_gbytes_per_s * 1e9, link.d2h_gbytes_per_s * 1e9
    micro_in, micro_out = per_micro_bytes[0] / h2d_rate, per_micro_bytes[1] / d2h_rate
    step_back, step_out = per_step_bytes[0] / h2d_rate, per_step_bytes[1] / d2h_rate
    window = compute_s / grad_accum
    exposed = (grad_accum - 1) * max(0.0, micro_in - window, micro_out - window)
    exposed += max(0.0, micro_in - window, micro_out + step_out - window)
    exposed += cpu_optimizer_s + step_back
    transfer = grad_accum * (micro_in + micro_out) + step_back + step_out
    return HostTime(transfer, cpu_optimizer_s, exposed)


def activation_offload_bytes_per_micro(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes of saved activations one micro-batch sends to the host in forward (and brings back in
    backward) with activation offloading: the memory engine's host memory with it less without it
    (calculators.memory.phases.stage_activations' `offloaded`; engine.step_memory, the numbers
    without the report, which the time model does not read), over the micro-batches in flight
    on the first stage (calculators.memory.layout.in_flight_micro_batches)."""
    if not settings.activation_offload:
        return 0.0
    without = settings.model_copy(update={"activation_offload": False})
    offloaded_gib = step_memory(spec, settings).host_memory_gib - step_memory(spec, without).host_memory_gib
    return max(0.0, offloaded_gib) * GIB / in_flight_micro_batches(settings, "first")
