"""Short benchmarks that measure what the estimates assume: matmul rate, memory and PCIe
bandwidth, fixed memory overheads, and a real training step of the reference transformer
(`measure.trace.models`, the same model the trace runs under fake tensors).

Every benchmark takes a time budget in seconds (it checks the clock between timed
batches, so a budget can be overrun by at most one batch, a model build or a warm-up
step), returns a `BenchmarkRecord`, and has a CPU path: either a CPU measurement or a
record skipped with the reason. Timing on CUDA uses CUDA events around batches of calls
after a warm-up; on the CPU, time.perf_counter.

Method sources:
- Matmul TFLOPS = 2*m*n*k / time; the best over a few large square shapes, as
  stas00/ml-engineering's mamf-finder reports "maximum achievable matmul FLOPS".
- Memory bandwidth: a device-to-device copy moves 2 x size bytes (read + write), as
  nvbandwidth / STREAM "copy" count it.
- Training FLOPs = 6 x N x tokens (Kaplan et al. 2020, arXiv 2001.08361, Sec. 2.1), with
  N the weights used in matmuls (embedding lookups do no FLOPs; attention's s^2 term is
  left out, as in the usual MFU figure of PaLM, arXiv 2204.02311, App. B, without it).

torch is imported inside the functions: importing this module does not import torch.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from calculators.hardware.catalogue import GpuSpec
from calculators.models.geometry import parameter_count
from calculators.models.spec import ModelSpec
from calculators.units import GIB, MIB
from measure.calibration.power import EnergyMeter, nvml_index
from measure.calibration.result import MATMUL_PRECISION_OF, BenchmarkRecord

MATMUL_PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
STEP_PRECISIONS = ("fp32", "amp-bf16", "amp-fp16", "bf16")
CUDA_MATMUL_SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096))
CPU_MATMUL_SHAPES = ((1024, 1024, 1024), (512, 512, 512))
# PCIe payload rate per lane and direction in GB/s after line coding (PCI-SIG: 8b/10b up
# to gen 2, 128b/130b gen 3-5, FLIT gen 6).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# Reference-model sizes, largest first: (layers, hidden, vocab, seq_len, micro_batch).
CUDA_REFERENCE_TIERS = ((8, 2048, 32768, 2048, 4), (8, 1024, 32768, 1024, 4), (4, 512, 16384, 512, 4))
CPU_REFERENCE_TIER = (4, 256, 8192, 256, 4)
REFERENCE_MEMORY_SHARE = 0.5  # the reference model's estimated peak may use half the free memory
EPOCH_SAMPLES = 2048


# --- Helpers -----------------------------------------------------------------------


def resolve_device(device: str = "auto") -> Any:
    """torch.device for 'auto' (cuda when available), 'cuda', 'cuda:N' or 'cpu'."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _torch_device(device: Any) -> Any:
    import torch

    return device if isinstance(device, torch.device) else resolve_device(device)


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_calls_s(device: Any, function: Callable[[], object], calls: int) -> float:
    """Seconds for `calls` back-to-back calls: CUDA events on a GPU, perf_counter on the CPU."""
    import torch

    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            function()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000
    start_s = time.perf_counter()
    for _ in range(calls):
        function()
    return time.perf_counter() - start_s


def best_rate(device: Any, function: Callable[[], object], work_per_call: float, budget_s: float) -> float:
    """Highest work per second over timed batches, after one warm-up call.

    Each batch holds enough calls to last about a tenth of the budget; batches repeat
    while the next one still fits in the budget (at least one is timed).
    """
    deadline = time.perf_counter() + budget_s
    function()
    _synchronize(device)
    single_s = max(_time_calls_s(device, function, 1), 1e-7)
    calls = max(1, min(10_000, int(budget_s / 10 / single_s)))
    best = work_per_call / single_s
    while True:
        elapsed_s = _time_calls_s(device, function, calls)
        best = max(best, work_per_call * calls / max(elapsed_s, 1e-9))
        if time.perf_counter() + elapsed_s > deadline:
            return best


def skipped(name: str, unit: str, reason: str, **details: Any) -> BenchmarkRecord:
    """A record that says why the benchmark did not run."""
    return BenchmarkRecord(name=name, unit=unit, skipped_reason=reason, details=details)


def _percent(value: float, datasheet: float | None) -> float | None:
    return 100 * value / datasheet if datasheet else None


def _capability(device: Any) -> tuple[int, int]:
    import torch

    return torch.cuda.get_device_capability(device)


# --- Matmul ------------------------------------------------------------------------


def _matmul_skip_reason(device: Any, precision: str) -> str | None:
    """Why `precision` cannot run on `device`, or None."""
    import torch

    if precision not in MATMUL_PRECISIONS:
        return f"unknown precision {precision!r}; expected one of {', '.join(MATMUL_PRECISIONS)}"
    if device.type != "cuda":
        if precision in ("tf32", "fp8"):
            return f"{precision.upper()} matmuls need a CUDA GPU with tensor cores"
        return None
    major, minor = _capability(device)
    if precision in ("tf32", "bf16") and major < 8:
        return f"{precision.upper()} tensor cores need compute capability 8.0+ (this GPU is {major}.{minor})"
    if precision == "fp8":
        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            return "this torch build has no torch._scaled_mm"
        if (major, minor) < (8, 9):
            return f"FP8 tensor cores need compute capability 8.9+ (this GPU is {major}.{minor})"
    return None


@contextlib.contextmanager
def _tf32(enabled: bool) -> Iterator[None]:
    """TF32 on or off for fp32 matmuls in the block, then the previous setting.

    Uses torch.backends.cuda.matmul.fp32_precision ('tf32'/'ieee', torch >= 2.9) where it
    exists, since reading the legacy allow_tf32 after the new API was used raises; older
    torch gets allow_tf32.
    """
    import torch

    matmul = torch.backends.cuda.matmul
    name, value = ("fp32_precision", "tf32" if enabled else "ieee")
    if not hasattr(matmul, "fp32_precision"):
        name, value = "allow_tf32", enabled
    previous = getattr(matmul, name)
    setattr(matmul, name, value)
    try:
        yield
    finally:
        setattr(matmul, name, previous)


def _matmul_call(device: Any, precision: str, m: int, n: int, k: int) -> Callable[[], object]:
    """A zero-argument function doing one m x k @ k x n product in `precision`."""
    import torch

    if precision == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt needs
        scale = torch.ones((), device=device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    return lambda: torch.matmul(a, b, out=out)


def _first_call_failure(call: Callable[[], object]) -> str | None:
    """None if call() works, else the first line of its error (FP8 support varies by build and GPU)."""
    try:
        call()
    except (RuntimeError, NotImplementedError) as exc:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return None


def matmul_tflops(
    device: Any = "auto",
    dtype_name: str = "bf16",
    shapes: Sequence[tuple[int, int, int]] | None = None,
    budget_s: float = 5.0,
    gpu: GpuSpec | None = None,
) -> BenchmarkRecord:
    """Best achieved TFLOPS over `shapes` (m, n, k) in one precision, and % of `gpu`'s dense peak.

    fp32 runs with TF32 off and tf32 with it on (torch.backends.cuda.matmul, see `_tf32`);
    fp8 uses torch._scaled_mm (e4m3 inputs, bf16 output) and is skipped, with the
    reason, where the GPU or torch lacks it.
    """
    device = _torch_device(device)
    name = f"matmul_{dtype_name}"
    reason = _matmul_skip_reason(device, dtype_name)
    if reason:
        return skipped(name, "TFLOPS", reason)
    shapes = shapes or (CUDA_MATMUL_SHAPES if device.type == "cuda" else CPU_MATMUL_SHAPES)
    started_s = time.perf_counter()
    best: dict[str, float] = {}
    with _tf32(dtype_name == "tf32"):
        for index, (m, n, k) in enumerate(shapes):
            call = _matmul_call(device, dtype_name, m, n, k)
            if dtype_name == "fp8" and (failure := _first_call_failure(call)):
                return skipped(name, "TFLOPS", f"torch._scaled_mm failed here: {failure}")
            shape_budget_s = (budget_s - (time.perf_counter() - started_s)) / (len(shapes) - index)
            best[f"{m}x{n}x{k}"] = best_rate(device, call, 2.0 * m * n * k, shape_budget_s) / 1e12
            del call
    shape, tflops = max(best.items(), key=lambda item: item[1])
    peak = gpu.dense_tflops(dtype_name) if gpu else None
    return BenchmarkRecord(
        name=name,
        value=tflops,
        unit="TFLOPS",
        datasheet_value=peak,
        percent_of_datasheet=_percent(tflops, peak),
        duration_s=time.perf_counter() - started_s,
        details={"best_shape": shape, "device": str(device)} | {f"tflops_{key}": value for key, value in best.items()},
    )


# --- Bandwidth ---------------------------------------------------------------------


def _copy_size_bytes(device: Any) -> int:
    """1 GiB on a GPU (at most an eighth of its free memory), 256 MiB on the CPU (beyond the caches)."""
    import torch

    if device.type != "cuda":
        return 256 * MIB
    free_bytes, _ = torch.cuda.mem_get_info(device)
    return int(min(GIB, free_bytes / 8)) // 4 * 4


def memory_bandwidth_gbps(
    device: Any = "auto", budget_s: float = 3.0, gpu: GpuSpec | None = None, size_bytes: int | None = None
) -> BenchmarkRecord:
    """Device memory bandwidth from a large on-device copy: 2 x size bytes / time (GB/s, 1e9).

    `size_bytes` defaults to 1 GiB on a GPU and 256 MiB on the CPU (well beyond its caches)."""
    import torch

    device = _torch_device(device)
    started_s = time.perf_counter()
    size_bytes = size_bytes or _copy_size_bytes(device)
    source = torch.ones(size_bytes // 4, device=device)
    target = torch.empty_like(source)
    remaining_s = budget_s - (time.perf_counter() - started_s)
    gbps = best_rate(device, lambda: target.copy_(source), 2.0 * size_bytes, remaining_s) / 1e9
    datasheet = gpu.memory_bandwidth_tbps * 1000 if gpu else None
    return BenchmarkRecord(
        name="memory_bandwidth",
        value=gbps,
        unit="GB/s",
        datasheet_value=datasheet,
        percent_of_datasheet=_percent(gbps, datasheet),
        duration_s=time.perf_counter() - started_s,
        details={"copy_bytes": size_bytes, "device": str(device)},
    )


def pcie_gbps(pcie_gen: int | None, pcie_width: int | None) -> float | None:
    """One direction's payload rate of a PCIe link (GB/s), or None when unknown."""
    if pcie_gen is None or pcie_width is None or pcie_gen not in PCIE_LANE_GBPS:
        return None
    return PCIE_LANE_GBPS[pcie_gen] * pcie_width


def host_to_device_gbps(
    device: Any = "auto", budget_s: float = 3.0, pcie_gen: int | None = None, pcie_width: int | None = None
) -> BenchmarkRecord:
    """Pinned host -> GPU copy rate (GB/s) vs the PCIe link's rate (PCIe 5 x16 reaches
    about 55 of 63 GB/s). Skipped on the CPU."""
    import torch

    device = _torch_device(device)
    if device.type != "cuda":
        return skipped("host_to_device", "GB/s", "host-to-device copies need a CUDA GPU")
    started_s = time.perf_counter()
    size_bytes = 256 * MIB
    host = torch.ones(size_bytes // 4, pin_memory=True)
    target = torch.empty(size_bytes // 4, device=device)
    remaining_s = budget_s - (time.perf_counter() - started_s)
    gbps = best_rate(device, lambda: target.copy_(host, non_blocking=True), float(size_bytes), remaining_s) / 1e9
    link = pcie_gbps(pcie_gen, pcie_width)
    return BenchmarkRecord(
        name="host_to_device",
        value=gbps,
        unit="GB/s",
        datasheet_value=link,
        percent_of_datasheet=_percent(gbps, link),
        duration_s=time.perf_counter() - started_s,
        details={"copy_bytes": size_bytes, "pinned": True, "pcie_gen": pcie_gen, "pcie_width": pcie_width},
    )


# --- Fixed memory overheads -----------------------------------------------------------


def _nvml_used_bytes() -> tuple[int | None, int | None]:
    """(memory used on all GPUs, this process's memory on all GPUs) as NVML sees them; None where unknown.

    Summing over devices avoids mapping torch's device index to NVML's (CUDA_VISIBLE_DEVICES),
    and asks torch nothing, so it does not initialise CUDA.
    """
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no pynvml or no driver: the caller says what could not be measured
        return None, None
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(index) for index in range(pynvml.nvmlDeviceGetCount())]
        used = sum(pynvml.nvmlDeviceGetMemoryInfo(handle).used for handle in handles)
        mine = [
            process.usedGpuMemory or 0
            for handle in handles
            for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            if process.pid == os.getpid()
        ]
        return used, (sum(mine) or None)
    except pynvml.NVMLError:
        return None, None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _load_common_kernels(device: Any) -> None:
    """Run fp32 and half matmuls, fused attention and an AdamW step, so the lazily loaded
    kernels (CUDA_MODULE_LOADING=LAZY) are part of the measured context."""
    import torch
    import torch.nn.functional as F

    half = torch.bfloat16 if _capability(device)[0] >= 8 else torch.float16
    weight = torch.randn(256, 256, device=device, requires_grad=True)
    (weight @ weight).sum().backward()
    q = torch.randn(1, 2, 128, 64, device=device, dtype=half)
    F.scaled_dot_product_attention(q, q, q, is_causal=True)
    (q.flatten(0, 2) @ q.flatten(0, 2).t()).sum()
    optimizer = torch.optim.AdamW([weight], foreach=True)
    optimizer.step()
    _synchronize(device)


def nvml_used_before_cuda() -> int | None:
    """Memory in use on all GPUs (NVML) while this process has not initialised CUDA, else None."""
    import torch

    return None if torch.cuda.is_initialized() else _nvml_used_bytes()[0]


def fixed_overhead_gib(device: Any = "auto", used_before_bytes: int | None = None) -> BenchmarkRecord:
    """Memory a CUDA process holds outside torch's tensors: context + cuBLAS workspace (GiB).

    context = NVML used after init - NVML used before (`used_before_bytes` from
    `nvml_used_before_cuda()`, else read here if CUDA is not initialised yet) - torch
    reserved; otherwise this process's NVML figure - torch reserved.
    cuBLAS workspace = what torch's allocator still holds after the warm-up tensors are freed.
    Other processes starting on the GPU meanwhile disturb the device-level figure.
    """
    import torch

    device = _torch_device(device)
    if device.type != "cuda":
        return BenchmarkRecord(
            name="fixed_overhead", value=0.0, unit="GiB", skipped_reason="no CUDA context on the CPU (reported as 0)"
        )
    started_s = time.perf_counter()
    used_before = used_before_bytes if used_before_bytes is not None else nvml_used_before_cuda()
    torch.cuda.init()
    allocated_before = torch.cuda.memory_allocated(device)
    _load_common_kernels(device)
    workspace_bytes = max(0, torch.cuda.memory_allocated(device) - allocated_before)
    reserved_bytes = torch.cuda.memory_reserved(device)
    used_after, process_bytes = _nvml_used_bytes()
    if used_before is not None and used_after is not None:
        context_bytes, method = used_after - used_before - reserved_bytes, "NVML device used after - before init"
    elif process_bytes is not None:
        context_bytes, method = process_bytes - reserved_bytes, "NVML used by this process"
    else:
        return skipped(
            "fixed_overhead",
            "GiB",
            "cannot separate the CUDA context: CUDA was already initialised in this process "
            "and NVML does not list this process (container PID namespace?)",
            cublas_workspace_gib=workspace_bytes / GIB,
        )
    context_gib = max(0, context_bytes) / GIB
    return BenchmarkRecord(
        name="fixed_overhead",
        value=context_gib + workspace_bytes / GIB,
        unit="GiB",
        duration_s=time.perf_counter() - started_s,
        details={"cuda_context_gib": context_gib, "cublas_workspace_gib": workspace_bytes / GIB, "method": method},
    )


# --- Training step -------------------------------------------------------------------


def reference_spec(n_layers: int, hidden_size: int, vocab_size: int, seq_len: int, n_heads: int = 0) -> ModelSpec:
    """A Llama-style ModelSpec (RMSNorm, rotary positions, SwiGLU, untied LM head, as HF's
    LlamaForCausalLM): head_dim 64 (or fewer heads when small), 2 query heads per k/v head
    (grouped-query attention), SwiGLU width 8/3 x hidden rounded up to a multiple of 64."""
    heads = n_heads or max(1, hidden_size // 64)
    kv_heads = heads // 2 if heads % 2 == 0 else heads
    ffn = -(-(8 * hidden_size // 3) // 64) * 64
    return ModelSpec(
        name=f"reference-{n_layers}x{hidden_size}",
        family="llama",
        n_layers=n_layers,
        hidden_size=hidden_size,
        n_heads=heads,
        n_kv_heads=kv_heads,
        ffn_hidden_size=ffn,
        vocab_size=vocab_size,
        max_position_embeddings=seq_len,
        source="calibration reference model",
    )


def default_step_precision(device: Any) -> str:
    """amp-bf16 on GPUs with bf16 tensor cores, amp-fp16 on older GPUs, fp32 on the CPU."""
    if device.type != "cuda":
        return "fp32"
    return "amp-bf16" if _capability(device)[0] >= 8 else "amp-fp16"


def _reference_settings(micro_batch: int, seq_len: int, precision: str) -> Any:
    """TrainingSettings matching how the reference step runs (AdamW foreach, fused attention)."""
    from calculators.workload.training import TrainingSettings

    return TrainingSettings(
        micro_batch=micro_batch,
        seq_len=seq_len,
        precision=precision,
        optimizer="adamw",
        optimizer_impl="foreach",
        attention="fused",
        checkpointing="none",
    )


def reference_config(device: Any, precision: str = "amp-bf16") -> tuple[ModelSpec, int, int]:
    """(spec, micro_batch, seq_len) for the device: the largest tier whose estimated peak
    uses at most half the free GPU memory; the tiny tier on the CPU."""
    import torch

    from calculators.memory.engine import estimate_memory

    tiers = CUDA_REFERENCE_TIERS if device.type == "cuda" else ()
    free_gib = torch.cuda.mem_get_info(device)[0] / GIB if tiers else 0.0
    for layers, hidden, vocab, seq_len, micro_batch in tiers:
        spec = reference_spec(layers, hidden, vocab, seq_len)
        peak_gib = estimate_memory(spec, _reference_settings(micro_batch, seq_len, precision)).peak_gib
        if peak_gib <= REFERENCE_MEMORY_SHARE * free_gib:
            return spec, micro_batch, seq_len
    layers, hidden, vocab, seq_len, micro_batch = CPU_REFERENCE_TIER
    return reference_spec(layers, hidden, vocab, seq_len), micro_batch, seq_len


def _step_function(model: Any, device: Any, precision: str, micro_batch: int, seq_len: int, vocab: int) -> Any:
    """One training step (zero_grad, forward under autocast, cross-entropy on fp32 logits,
    backward, AdamW) as a closure."""
    import torch

    from measure.trace.models import loss_fn

    autocast_dtype = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(precision)
    if precision == "bf16":
        model.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "amp-fp16")
    tokens = torch.randint(vocab, (micro_batch, seq_len), device=device)
    labels = torch.randint(vocab, (micro_batch, seq_len), device=device)

    def autocast() -> contextlib.AbstractContextManager[Any]:
        return torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(model(tokens), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return step


def _timed_steps_s(
    device: Any, step: Callable[[], None], budget_s: float, warmup: int, meter: EnergyMeter | None = None
) -> list[float]:
    """Seconds of each timed step after `warmup` steps; at least one, more while the budget lasts.
    `meter` reads the GPU's energy over the timed steps only, warm-up left out."""
    deadline = time.perf_counter() + budget_s
    for _ in range(warmup):
        step()
    _synchronize(device)
    if meter is not None:
        meter.start()
    times_s: list[float] = []
    while len(times_s) < 50:
        start_s = time.perf_counter()
        step()
        _synchronize(device)
        times_s.append(time.perf_counter() - start_s)
        if time.perf_counter() + max(times_s[-3:]) > deadline:  # the slowest recent step must still fit
            break
    if meter is not None:
        meter.stop()
    return times_s


def _peak_tflops(
    device: Any, precision: str, gpu: GpuSpec | None, peak_tflops: float | None
) -> tuple[float | None, str]:
    """(peak TFLOPS for MFU, where it came from): datasheet, given, or a quick matmul here."""
    matmul_precision = MATMUL_PRECISION_OF[precision]
    datasheet = gpu.dense_tflops(matmul_precision) if gpu else None
    if datasheet:
        return datasheet, f"datasheet {matmul_precision}"
    if peak_tflops:
        return peak_tflops, "given (measured matmul)"
    measured = matmul_tflops(device, "fp32" if device.type != "cuda" else matmul_precision, budget_s=0.5)
    return measured.value, f"measured {measured.name} (this run)"


def _memory_details(device: Any, spec: ModelSpec, settings: Any, baseline: tuple[int, int]) -> dict[str, Any]:
    """Measured torch peak allocated/reserved (less what existed before the model) vs estimate_memory."""
    import torch

    from calculators.memory.engine import estimate_memory

    estimate = estimate_memory(spec, settings)
    details: dict[str, Any] = {
        "estimated_allocated_gib": estimate.allocated_gib,
        "estimated_reserved_gib": estimate.reserved_gib,
        "estimated_peak_phase": estimate.peak_phase,
    }
    if device.type != "cuda":
        return details | {"memory_comparison": "not measured on the CPU (torch's allocator statistics are CUDA-only)"}
    allocated_gib = (torch.cuda.max_memory_allocated(device) - baseline[0]) / GIB
    reserved_gib = (torch.cuda.max_memory_reserved(device) - baseline[1]) / GIB
    return details | {
        "measured_allocated_gib": allocated_gib,
        "measured_reserved_gib": reserved_gib,
        "allocated_error_pct": 100 * (estimate.allocated_gib - allocated_gib) / allocated_gib,
        "reserved_error_pct": 100 * (estimate.reserved_gib - reserved_gib) / reserved_gib,
        "allocator_reserve_fraction": max(0.0, reserved_gib / allocated_gib - 1),
    }


def training_step_benchmark(
    device: Any = "auto",
    budget_s: float = 20.0,
    precision: str | None = None,
    gpu: GpuSpec | None = None,
    config: tuple[ModelSpec, int, int] | None = None,
    peak_tflops: float | None = None,
    with_mfu: bool = True,
) -> BenchmarkRecord:
    """Train the reference transformer (AdamW) for a few steps: step time, tokens/s, TFLOPS, MFU,
    and on CUDA the measured peak memory against estimate_memory() for the same spec.

    `config` is (spec, micro_batch, seq_len) (default: `reference_config`). MFU uses the
    datasheet dense peak of `gpu` for the step's matmul precision, else `peak_tflops`,
    else a short matmul measurement on this device (with_mfu=False skips MFU and that measurement).
    """
    import torch

    from measure.trace.models import build_model

    device = _torch_device(device)
    precision = precision or default_step_precision(device)
    if precision not in STEP_PRECISIONS:
        return skipped(
            "training_step",
            "s",
            f"the reference step runs {', '.join(STEP_PRECISIONS)}; {precision} needs a master-weight optimizer",
        )
    started_s = time.perf_counter()
    spec, micro_batch, seq_len = config or reference_config(device, precision)
    baseline = (0, 0)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        baseline = (torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device))
    settings = _reference_settings(micro_batch, seq_len, precision)
    model = build_model(spec, settings.attention, settings.checkpointing).to(device)
    step = _step_function(model, device, precision, micro_batch, seq_len, spec.vocab_size)
    remaining_s = budget_s - (time.perf_counter() - started_s)
    meter = EnergyMeter(nvml_index(device))
    times_s = _timed_steps_s(device, step, remaining_s, warmup=2 if device.type == "cuda" else 1, meter=meter)
    memory = _memory_details(device, spec, settings, baseline)
    del step, model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    step_s = statistics.median(times_s)
    tokens = micro_batch * seq_len
    achieved_tflops = 6 * parameter_count(spec).matmul_total * tokens / step_s / 1e12
    peak, peak_source = _peak_tflops(device, precision, gpu, peak_tflops) if with_mfu else (None, "not asked")
    from_datasheet = peak is not None and peak_source.startswith("datasheet")
    return BenchmarkRecord(
        name="training_step",
        value=step_s,
        unit="s",
        datasheet_value=peak if from_datasheet else None,
        percent_of_datasheet=100 * achieved_tflops / peak if from_datasheet else None,
        duration_s=time.perf_counter() - started_s,
        details={
            "precision": precision,
            "model": spec.name,
            "parameters": parameter_count(spec).total,
            "micro_batch": micro_batch,
            "seq_len": seq_len,
            "timed_steps": len(times_s),
            "tokens_per_s": tokens / step_s,
            "achieved_tflops": achieved_tflops,
            "peak_tflops": peak,
            "peak_source": peak_source,
            "mfu": achieved_tflops / peak if peak else None,
        }
        | memory
        | meter.details(len(times_s), tokens, gpu.tdp_w if gpu else None),
    )


# --- CPU vs GPU epoch ----------------------------------------------------------------


def _epoch_record(name: str, step: BenchmarkRecord, samples: int, usd_per_hour: float | None) -> BenchmarkRecord:
    """Turn a training-step record into time and cost per epoch of `samples` samples."""
    if not step.ok:
        return step.model_copy(update={"name": name, "unit": "s/epoch"})
    steps = math.ceil(samples / int(step.details["micro_batch"]))
    epoch_s = steps * float(step.value)
    cost = epoch_s / 3600 * usd_per_hour if usd_per_hour is not None else None
    return BenchmarkRecord(
        name=name,
        value=epoch_s,
        unit="s/epoch",
        duration_s=step.duration_s,
        details={
            "precision": step.details["precision"],
            "samples": samples,
            "steps": steps,
            "step_s": step.value,
            "usd_per_hour": usd_per_hour,
            "cost_usd": cost,
        },
    )


def epoch_config() -> tuple[ModelSpec, int, int]:
    """(spec, micro_batch, seq_len) of the epoch comparison: the CPU tier of the reference model."""
    layers, hidden, vocab, seq_len, micro_batch = CPU_REFERENCE_TIER
    return reference_spec(layers, hidden, vocab, seq_len), micro_batch, seq_len


def epoch_comparison(
    budget_s: float = 15.0,
    usd_per_hour: float | None = None,
    samples: int = EPOCH_SAMPLES,
    cpu_step: BenchmarkRecord | None = None,
    cuda_device: Any | None = "cuda",
) -> list[BenchmarkRecord]:
    """Time and cost of one epoch of the tiny reference model (CPU tier) on the CPU in
    fp32, on the GPU in fp32 and on the GPU in mixed precision (amp-bf16, or amp-fp16
    before Ampere). Epoch = ceil(samples / micro_batch) x the median measured step time;
    cost = epoch hours x usd_per_hour. GPU rows are skipped with the reason without CUDA.
    `cpu_step`, a CPU fp32 training-step record of the same config, is reused if given;
    `cuda_device` picks the GPU (None: GPU rows skipped, for a CPU-only run).
    """
    import torch

    config = epoch_config()
    cuda = _torch_device(cuda_device) if cuda_device is not None and torch.cuda.is_available() else None
    modes = [("epoch_cpu_fp32", torch.device("cpu"), "fp32")]
    if cuda is not None:
        modes += [("epoch_cuda_fp32", cuda, "fp32"), ("epoch_cuda_mixed", cuda, default_step_precision(cuda))]
    records = []
    to_measure = len(modes) - (cpu_step is not None)
    for name, device, precision in modes:
        if name == "epoch_cpu_fp32" and cpu_step is not None:
            record = _epoch_record(name, cpu_step, samples, usd_per_hour)
            record.duration_s, record.details["reused_training_step"] = 0.0, True
        else:
            step = training_step_benchmark(device, budget_s / to_measure, precision, config=config, with_mfu=False)
            record = _epoch_record(name, step, samples, usd_per_hour)
        records.append(record)
    if cuda is None:
        no_gpu = "the run is on the CPU" if cuda_device is None else "torch.cuda.is_available() is False"
        reason = f"no CUDA GPU: {no_gpu}"
        records += [skipped(name, "s/epoch", reason) for name in ("epoch_cuda_fp32", "epoch_cuda_mixed")]
    return records
