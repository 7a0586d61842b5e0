"""Run every calibration benchmark within one time budget and collect a `CalibrationResult`.

`run_calibration()` never raises for a failing benchmark: an exception (CUDA out of memory
included) becomes that record's `error`, and a benchmark that no longer fits in what is
left of the budget, or needs a GPU the run does not have, gets a `skipped_reason`. The
budget is shared out by weight among the benchmarks still to run, so time one leaves
unused goes to the next.

Only one run at a time per host, across processes (`host_lock`; `CalibrationBusyError`
for a second caller), since two runs on one GPU would disturb each other's timings and memory.

`check_calibration_request()` validates what a caller asks for (output file, price, budget)
before any benchmark runs, so a mistake costs a second, not the whole budget.

Environment variables:
- `GPU_SIZING_ALLOW_CALIBRATION=1` lets the app offer the "Calibrate" button. A shared
  deployment leaves it unset, so visitors cannot start GPU work on the server; read it
  with `calibration_allowed()`. `run_calibration()` itself does not check it (the CLI and
  tests call it directly).
- `GPU_SIZING_CALIBRATION_LOCK`: the host's lock file (see `host_lock`).

torch is imported inside the functions that run benchmarks; importing this module is cheap.
"""

from __future__ import annotations

import math
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from calculators.hardware.catalogue import GpuSpec, load_gpu_catalogue
from calculators.units import GIB
from measure.calibration import benchmarks, vision
from measure.calibration.host_lock import CalibrationBusyError as CalibrationBusyError  # callers catch it here
from measure.calibration.host_lock import exclusive_calibration
from measure.calibration.inventory import GpuInfo, match_catalogue, read_inventory
from measure.calibration.result import (
    MIN_FRACTION_OF_PEAK,
    BenchmarkRecord,
    CalibratedOverheads,
    CalibrationResult,
    utc_now,
)

ALLOW_ENV_VAR = "GPU_SIZING_ALLOW_CALIBRATION"
DEFAULT_BUDGET_S = 110.0
MIN_BUDGET_S, MAX_BUDGET_S = 1.0, 3600.0
ALLREDUCE_SIZE_MB = 64.0
Progress = Callable[[str, float], None]


class CalibrationRequestError(ValueError):
    """A calibration request that cannot succeed; the message is one line naming the flag."""


def check_budget_s(budget_s: float) -> None:
    """CalibrationRequestError unless 1 <= budget_s <= 3600 (NaN and infinities fail too)."""
    if not (math.isfinite(budget_s) and MIN_BUDGET_S <= budget_s <= MAX_BUDGET_S):
        raise CalibrationRequestError(
            f"--budget-s must be between {MIN_BUDGET_S:.0f} and {MAX_BUDGET_S:.0f} seconds, got {budget_s}"
        )


def check_usd_per_hour(usd_per_hour: float | None) -> None:
    """CalibrationRequestError unless the price is None (no cost asked) or a finite 0 or more."""
    if usd_per_hour is not None and not (math.isfinite(usd_per_hour) and usd_per_hour >= 0):
        raise CalibrationRequestError(f"--usd-per-hour must be a price of 0 or more, got {usd_per_hour}")


def check_out_path(out: Path) -> list[str]:
    """CalibrationRequestError when the result could not be written to `out`; else warnings.

    The folder is probed by creating and deleting a temporary file in it, which is how the
    result is written (a temporary file renamed over `out`), so a read-only mount or a
    missing permission shows up here, for root too.
    """
    out = Path(out)
    folder = out.parent
    if out.is_dir():
        raise CalibrationRequestError(f"--out {out} is a folder; give a file name")
    if out.exists() and not out.is_file():  # renaming over /dev/null would replace the device
        raise CalibrationRequestError(f"--out {out} is not a regular file; give a file name")
    if not folder.is_dir():
        raise CalibrationRequestError(f"--out {out}: the folder {folder} does not exist")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".calibration-probe-"):
            pass
    except OSError as error:
        raise CalibrationRequestError(f"--out {out}: cannot write in {folder} ({error.strerror})") from None
    return [f"--out {out} exists and will be replaced"] if out.exists() else []


def check_calibration_request(out: Path, usd_per_hour: float | None, budget_s: float) -> list[str]:
    """Validate a headless calibration request before it spends its budget.

    Raises CalibrationRequestError (one line naming `--out`, `--usd-per-hour` or `--budget-s`)
    for a budget outside 1..3600 s or not finite, a negative, NaN or infinite price, and an
    `out` that is a folder or another non-regular file, or whose folder is missing or not
    writable. Returns warnings to show, such as an existing `out` that will be replaced.
    """
    check_budget_s(budget_s)
    check_usd_per_hour(usd_per_hour)
    return check_out_path(out)


def calibration_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """True when GPU_SIZING_ALLOW_CALIBRATION=1 (default environment: os.environ)."""
    environ = os.environ if environ is None else environ
    return environ.get(ALLOW_ENV_VAR, "").strip() == "1"


@dataclass
class _Host:
    """What the run knows about its device before the benchmarks."""

    device: Any = None  # torch.device, or None when the requested device cannot be used
    unavailable_reason: str | None = None
    gpu: GpuSpec | None = None
    gpu_name: str | None = None
    nvml_gpu: GpuInfo | None = None
    cuda_gpus: int = 0
    torch_version: str | None = None
    cuda_version: str | None = None
    nvml_used_before_bytes: int | None = None  # all GPUs' memory in use before this run touched CUDA
    notes: list[str] = field(default_factory=list)


@dataclass
class _Step:
    """One benchmark: its share of the budget, the least time worth starting it with, and how to run
    it: run(budget_s, records so far by name)."""

    label: str
    names: tuple[str, ...]
    weight: float
    min_s: float
    run: Callable[[float, dict[str, BenchmarkRecord]], BenchmarkRecord | list[BenchmarkRecord]]
    skip_reason: str | None = None


def _host_for(device: str, catalogue: Iterable[GpuSpec] | None) -> _Host:
    """Resolve the device and find its GPU name, catalogue row and NVML figures."""
    inventory = read_inventory(catalogue)
    notes = [f"Inventory: {inventory.message}"]
    try:
        import torch
    except ImportError as exc:
        return _Host(unavailable_reason=f"torch is not installed ({exc})", notes=notes)
    host = _Host(torch_version=torch.__version__, cuda_version=torch.version.cuda, notes=notes)
    try:
        host.device = benchmarks.resolve_device(device)
    except RuntimeError as exc:
        host.unavailable_reason = f"unknown device {device!r}: {exc}"
        return host
    if host.device.type == "cuda" and not torch.cuda.is_available():
        host.device, host.unavailable_reason = None, "CUDA was asked for, but torch.cuda.is_available() is False"
    if host.device is None or host.device.type != "cuda":
        return host
    host.nvml_used_before_bytes = benchmarks.nvml_used_before_cuda()  # before anything below initialises CUDA
    props = torch.cuda.get_device_properties(host.device)
    specs = list(load_gpu_catalogue() if catalogue is None else catalogue)
    host.gpu = match_catalogue(props.name, specs, memory_gib=props.total_memory / GIB)
    host.gpu_name, host.cuda_gpus = props.name, torch.cuda.device_count()
    host.nvml_gpu = next((gpu for gpu in inventory.gpus if gpu.name == props.name), None)
    notes.append(f"Catalogue row: {host.gpu.name if host.gpu else 'none matches ' + repr(props.name)}")
    return host


def _gpu_only(reason: str) -> str:
    return f"GPU only: {reason}"


def _matmul_steps(host: _Host) -> list[_Step]:
    """One step per matmul precision; on the CPU only fp32 runs."""
    steps = []
    for precision in benchmarks.MATMUL_PRECISIONS:
        skip = None
        if host.device.type != "cuda" and precision != "fp32":
            skip = _gpu_only(f"{precision} matmul rates matter on a GPU; the CPU run measures fp32 only")

        def run(budget_s: float, _: object, precision: str = precision) -> BenchmarkRecord:
            return benchmarks.matmul_tflops(host.device, precision, budget_s=budget_s, gpu=host.gpu)

        steps.append(_Step(f"Matmul {precision}", (f"matmul_{precision}",), 1.2, 0.3, run, skip))
    return steps


def _link_gbps_one_direction(host: _Host) -> float | None:
    """The catalogue's GPU-to-GPU link in one direction (its figure counts both), which a ring's bus
    bandwidth is compared with; None without a catalogue row or link figure."""
    return host.gpu.interconnect_gbps / 2 if host.gpu and host.gpu.interconnect_gbps else None


def _allreduce_step(host: _Host) -> _Step:
    """NCCL all-reduce across this host's GPUs (needs at least two)."""
    skip = None if host.cuda_gpus >= 2 else _gpu_only("all-reduce bus bandwidth needs 2 or more CUDA GPUs (NCCL)")

    def run(budget_s: float, _: object) -> BenchmarkRecord:
        from measure.calibration.allreduce import run_allreduce_subprocess

        measured = run_allreduce_subprocess(host.cuda_gpus, "nccl", ALLREDUCE_SIZE_MB, timeout_s=budget_s)
        link = _link_gbps_one_direction(host)
        busbw = measured["busbw_gbps"]
        return BenchmarkRecord(
            name="allreduce",
            value=busbw,
            unit="GB/s",
            datasheet_value=link,
            percent_of_datasheet=100 * busbw / link if link else None,
            details=measured,
        )

    return _Step("All-reduce", ("allreduce",), 2.0, 15.0, run, skip)


def _vision_step(host: _Host) -> _Step:
    """A real torchvision ResNet in fp32 and mixed precision (measure/calibration/vision.py), named by
    the host's catalogue GPU or CPU so the pages can set it against the estimate."""
    if host.device.type == "cuda":
        device_name = host.gpu.name if host.gpu else None
    else:
        cpu_model = vision.host_cpu_name()
        cpu = vision.catalogue_cpu(cpu_model)
        device_name = cpu.name if cpu else None
        host.notes.append(f"Host CPU: {cpu_model}; catalogue row: {device_name or 'none'}")
    names = tuple(vision.record_name(host.device.type, p) for p in vision.precisions_for(host.device))
    return _Step("Vision training (ResNet)", names, 3.0, len(names) * vision.MIN_BENCHMARK_S,
                 lambda s, _: vision.vision_comparison(host.device, s, device_name))  # fmt: skip


def _steps(host: _Host, usd_per_hour: float | None) -> list[_Step]:
    """Benchmarks in run order. Fixed overhead comes first, before anything else loads CUDA."""
    device, on_gpu = host.device, host.device.type == "cuda"
    pcie = (host.nvml_gpu.pcie_gen, host.nvml_gpu.pcie_width) if host.nvml_gpu else (None, None)

    def training(budget_s: float, done: dict[str, BenchmarkRecord]) -> BenchmarkRecord:
        """On the CPU, MFU is relative to the fp32 matmul rate measured just before."""
        fp32 = done.get("matmul_fp32")
        peak = fp32.value if fp32 is not None and fp32.ok and not on_gpu else None
        return benchmarks.training_step_benchmark(device, budget_s, gpu=host.gpu, peak_tflops=peak)

    def epoch(budget_s: float, done: dict[str, BenchmarkRecord]) -> list[BenchmarkRecord]:
        """On the CPU the training step already ran the epoch model: its record is reused."""
        cpu_step = None if on_gpu else done.get("training_step")
        gpu_device = device if on_gpu else None  # a CPU run leaves the GPU alone
        return benchmarks.epoch_comparison(budget_s, usd_per_hour, cpu_step=cpu_step, cuda_device=gpu_device)

    epoch_weight, epoch_min_s = (3.0, 3.0) if on_gpu else (0.1, 0.0)  # the CPU row reuses the training step
    return [
        _Step("Fixed memory overhead", ("fixed_overhead",), 0.5, 0.0,
              lambda s, _: benchmarks.fixed_overhead_gib(device, host.nvml_used_before_bytes)),
        *_matmul_steps(host),
        _Step("Memory bandwidth", ("memory_bandwidth",), 1.0, 0.3,
              lambda s, _: benchmarks.memory_bandwidth_gbps(device, s, host.gpu)),
        _Step("Host-to-device copy", ("host_to_device",), 1.0, 0.3,
              lambda s, _: benchmarks.host_to_device_gbps(device, s, *pcie),
              None if on_gpu else _gpu_only("host-to-device copies need a CUDA GPU")),
        _Step("Training step", ("training_step",), 5.0, 3.0 if on_gpu else 1.0, training),
        _allreduce_step(host),
        _Step("Epoch CPU vs GPU", ("epoch_cpu_fp32", "epoch_cuda_fp32", "epoch_cuda_mixed"), epoch_weight,
              epoch_min_s, epoch),
        _vision_step(host),
    ]  # fmt: skip


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):  # a measurement the result refuses (above every datasheet): name it
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        return f"not a measurement: {where + ': ' if where else ''}{problem['msg']}"[:500]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def _release_cuda_cache() -> None:
    """Give cached GPU memory back after a benchmark (and after an out-of-memory error)."""
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:  # cleanup must not hide the benchmark's own outcome
        pass


def _is_out_of_memory(exc: BaseException) -> bool:
    try:
        import torch
    except ImportError:
        return False
    return isinstance(exc, torch.cuda.OutOfMemoryError)


def _run_step(step: _Step, budget_s: float, done: dict[str, BenchmarkRecord]) -> list[BenchmarkRecord]:
    """The step's records; an exception becomes the error of each of its records."""
    started_s = time.perf_counter()
    try:
        outcome = step.run(budget_s, done)
        return outcome if isinstance(outcome, list) else [outcome]
    except Exception as exc:
        error = ("out of memory: " if _is_out_of_memory(exc) else "") + _one_line(exc)
        elapsed_s = time.perf_counter() - started_s
        return [BenchmarkRecord(name=name, error=error, duration_s=elapsed_s) for name in step.names]
    finally:
        _release_cuda_cache()


def _run_steps(
    steps: list[_Step], budget_s: float, deadline_s: float, progress: Progress | None
) -> list[BenchmarkRecord]:
    """Run the steps in order, each with its weighted share of the time left before `deadline_s`."""
    records: list[BenchmarkRecord] = []
    for index, step in enumerate(steps):
        if progress:
            progress(step.label, index / len(steps))
        if step.skip_reason:
            records += [BenchmarkRecord(name=name, skipped_reason=step.skip_reason) for name in step.names]
            continue
        left_s = max(0.0, deadline_s - time.perf_counter())
        # a later step that needs more than all the time left will be skipped: it takes no share of it
        fitting = [later for later in steps[index + 1 :] if not later.skip_reason and later.min_s <= left_s]
        weight_left = step.weight + sum(later.weight for later in fitting)
        step_budget_s = left_s * step.weight / weight_left
        if step_budget_s < step.min_s:  # steps with min_s 0 (reused or instant figures) always run
            reason = f"out of time: {left_s:.1f} s of the {budget_s:.0f} s budget left, it needs {step.min_s:.1f} s"
            records += [BenchmarkRecord(name=name, skipped_reason=reason) for name in step.names]
            continue
        records += _run_step(step, step_budget_s, {record.name: record for record in records})
    if progress:
        progress("Done", 1.0)
    return records


def _derived_overheads(records: list[BenchmarkRecord]) -> CalibratedOverheads:
    """Context and cuBLAS workspace from fixed_overhead; allocator reserve from the training step."""
    by_name = {record.name: record for record in records}
    fixed, step = by_name.get("fixed_overhead"), by_name.get("training_step")
    fixed_details = fixed.details if fixed is not None and fixed.ok else {}
    reserve = step.details.get("allocator_reserve_fraction") if step is not None and step.ok else None
    return CalibratedOverheads(
        cuda_context_gib=fixed_details.get("cuda_context_gib"),
        cublas_workspace_gib=fixed_details.get("cublas_workspace_gib"),
        allocator_reserve_fraction=min(1.0, reserve) if reserve is not None else None,
    )


def _fraction_of_peak(record: BenchmarkRecord, notes: list[str]) -> float | None:
    """The record's fraction of its datasheet figure, at most 1; None when below the least any GEMM reaches.

    Above 1 the datasheet figure is conservative for this board (boost clocks above the
    rated ones); the estimates cannot use more than the whole peak, so it is capped and a
    note says so. Below MIN_FRACTION_OF_PEAK the GPU was not working as one (throttled, shared,
    matched to the wrong datasheet): the figure is not applied and a note says so. The record
    keeps the measured percentage.
    """
    fraction = record.percent_of_datasheet / 100
    if fraction > 1:
        notes.append(f"{record.name} reached {fraction:.0%} of the datasheet figure; used as 100%")
    if fraction < MIN_FRACTION_OF_PEAK:
        notes.append(
            f"{record.name} reached {fraction:.3g} of the datasheet figure, below the {MIN_FRACTION_OF_PEAK:.2%} "
            "the smallest GEMM reaches; not applied"
        )
        return None
    return min(1.0, fraction)


def _utilisation(records: list[BenchmarkRecord], notes: list[str]) -> dict[str, float]:
    """Matmul fraction of the datasheet's dense peak, per precision that was measured against one."""
    fractions = {
        record.name.removeprefix("matmul_"): _fraction_of_peak(record, notes)
        for record in records
        if record.name.startswith("matmul_") and record.ok and record.percent_of_datasheet is not None
    }
    return {precision: fraction for precision, fraction in fractions.items() if fraction is not None}


def _unavailable_records(host: _Host) -> list[BenchmarkRecord]:
    """Every benchmark skipped with the reason the device cannot be used."""
    names = ["fixed_overhead", *(f"matmul_{p}" for p in benchmarks.MATMUL_PRECISIONS), "memory_bandwidth"]
    names += ["host_to_device", "training_step", "allreduce", "epoch_cpu_fp32", "epoch_cuda_fp32", "epoch_cuda_mixed"]
    names += ["vision_fp32", "vision_mixed"]
    return [BenchmarkRecord(name=name, skipped_reason=host.unavailable_reason) for name in names]


def _calibrate(device: str, budget_s: float, progress: Progress | None, usd_per_hour: float | None,
               catalogue: Iterable[GpuSpec] | None) -> CalibrationResult:  # fmt: skip
    started_s, created_at = time.perf_counter(), utc_now()
    host = _host_for(device, catalogue)
    if host.device is None:
        records = _unavailable_records(host)
    else:
        records = _run_steps(_steps(host, usd_per_hour), budget_s, started_s + budget_s, progress)
    notes = host.notes + ([host.unavailable_reason] if host.unavailable_reason else [])
    step = next((record for record in records if record.name == "training_step" and record.ok), None)
    mfu = _fraction_of_peak(step, notes) if step is not None and step.percent_of_datasheet is not None else None
    utilisation = _utilisation(records, notes)
    return CalibrationResult(
        **_host_fields(host, str(host.device) if host.device is not None else device),
        created_at=created_at,
        budget_s=budget_s,
        duration_s=time.perf_counter() - started_s,
        records=records,
        overheads=_derived_overheads(records),
        utilisation=utilisation,
        training_mfu=mfu,
        notes=notes,
        vision=vision.measured_throughputs(records),
    )


def _host_fields(host, device: str) -> dict:
    """What a result says of the host it was measured on, the same for every kind of run."""
    return {
        "host": socket.gethostname() or "unknown",
        "device": device,
        "gpu_name": host.gpu_name,
        "catalogue_gpu": host.gpu.name if host.gpu else None,
        "driver_version": host.nvml_gpu.driver_version if host.nvml_gpu else None,
        "cuda_version": host.cuda_version,
        "torch_version": host.torch_version,
    }


def run_calibration(
    device: str = "auto",
    budget_s: float = DEFAULT_BUDGET_S,
    progress: Progress | None = None,
    usd_per_hour: float | None = None,
    catalogue: Iterable[GpuSpec] | None = None,
) -> CalibrationResult:
    """Run the benchmarks on `device` ('auto', 'cuda', 'cuda:N' or 'cpu') within `budget_s` seconds in total.

    `progress(label, fraction_done)` is called before each benchmark and with ('Done', 1.0)
    at the end; an exception it raises stops the run and propagates (so a Streamlit rerun
    can interrupt it). `usd_per_hour` prices the epoch comparison. Raises
    CalibrationRequestError for a price that is negative, NaN or infinite or a budget that is
    not a finite number above 0, and CalibrationBusyError at once when another run holds this
    host's lock (in this process or another).
    """
    check_usd_per_hour(usd_per_hour)
    if not (math.isfinite(budget_s) and budget_s > 0):
        raise CalibrationRequestError(f"--budget-s must be a number of seconds above 0, got {budget_s}")
    with exclusive_calibration():
        return _calibrate(device, budget_s, progress, usd_per_hour, catalogue)


# A quarter of a collective calibration's budget is left for torchrun to start its workers and
# for the rendezvous (importing torch alone takes seconds on a busy host); the sweep gets the rest.
COLLECTIVE_SWEEP_SHARE = 0.75
DEFAULT_JOIN_TIMEOUT_S = 300.0
MAX_NODES = 4096


def check_collective_request(nodes: int, node_rank: int | None, rdzv_endpoint: str | None,
                             join_timeout_s: float) -> None:  # fmt: skip
    """CalibrationRequestError naming the flag for node counts, ranks, endpoints or timeouts that cannot work."""
    if not 1 <= nodes <= MAX_NODES:
        raise CalibrationRequestError(f"--nodes must be between 1 and {MAX_NODES}, got {nodes}")
    if node_rank is not None and rdzv_endpoint is None:
        raise CalibrationRequestError("--node-rank needs --rdzv-endpoint HOST:PORT (without it every node runs here)")
    if node_rank is not None and not 0 <= node_rank < nodes:
        raise CalibrationRequestError(
            f"--node-rank must be between 0 and {nodes - 1} for --nodes {nodes}, got {node_rank}"
        )
    if rdzv_endpoint is not None:
        host, _, port = rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise CalibrationRequestError(
                f"--rdzv-endpoint must be HOST:PORT with a port of 1 to 65535, got {rdzv_endpoint!r}"
            )
    if not (math.isfinite(join_timeout_s) and 1 <= join_timeout_s <= MAX_BUDGET_S):
        raise CalibrationRequestError(
            f"--rdzv-timeout-s must be between 1 and {MAX_BUDGET_S:.0f} seconds, got {join_timeout_s}"
        )


def _collective_records(curves: dict[str, Any], nodes: int, link_gbps: float | None) -> list[BenchmarkRecord]:
    """One record per collective: its best bus bandwidth over the sweep, and at which size."""
    from measure.calibration.collectives import COLLECTIVES

    records = []
    for name in COLLECTIVES:
        best = max(curves[name], key=lambda point: point["busbw_gbytes_per_s"])
        busbw = best["busbw_gbytes_per_s"]
        records.append(BenchmarkRecord(
            name=f"{name}_busbw", value=busbw, unit="GB/s", datasheet_value=link_gbps,
            percent_of_datasheet=100 * busbw / link_gbps if link_gbps and busbw > 0 else None,
            details={"backend": curves["backend"], "world_size": curves["world_size"], "nodes": nodes,
                     "bytes_at_best": best["bytes"], "sizes": len(curves[name])},
        ))  # fmt: skip
    return records


def _sweep(host: _Host, budget_s: float, nodes: int, node_rank: int | None, rdzv_endpoint: str | None,
           join_timeout_s: float, max_bytes: int) -> dict[str, Any]:  # fmt: skip
    """The curves from torchrun: this node of `nodes` at the endpoint, or every node here without one."""
    from measure.calibration import collective_launch as launch

    on_gpu = host.device.type == "cuda"
    if on_gpu and nodes > 1 and rdzv_endpoint is None:
        raise CalibrationRequestError(
            "--nodes without --rdzv-endpoint runs the nodes on this host's CPU: add --device cpu"
        )
    nproc = host.cuda_gpus if on_gpu else 1
    if nodes * nproc < 2:
        raise CalibrationRequestError(
            "--collectives needs two or more processes: --nodes 2 or more, or a host with two or more GPUs"
        )
    backend, sweep_s = ("nccl" if on_gpu else "gloo"), budget_s * COLLECTIVE_SWEEP_SHARE
    if rdzv_endpoint is None:
        return launch.run_local_nodes(nodes, nproc, backend, sweep_s, join_timeout_s, max_bytes)
    rendezvous = launch.Rendezvous(nodes, node_rank or 0, rdzv_endpoint, join_timeout_s)
    return launch.run_nodes([rendezvous], nproc, backend, sweep_s, max_bytes)


def run_collective_calibration(
    device: str = "auto",
    budget_s: float = DEFAULT_BUDGET_S,
    nodes: int = 1,
    node_rank: int | None = None,
    rdzv_endpoint: str | None = None,
    join_timeout_s: float = DEFAULT_JOIN_TIMEOUT_S,
    catalogue: Iterable[GpuSpec] | None = None,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> CalibrationResult:
    """Sweep all-reduce, all-gather and reduce-scatter from 1 KB up (`collectives`) within `budget_s`.

    NCCL across this host's GPUs on a GPU, gloo with one process per node on the CPU. With
    `rdzv_endpoint` this host is node `node_rank` of `nodes` (run the same call on each); without
    it all `nodes` run here as local torchrun agents. Raises CalibrationRequestError for a
    request that cannot work, CalibrationBusyError when this host is calibrating already, and
    `collective_launch.CollectiveRunError` (one line) when a peer never arrives or a node dies.
    """
    from measure.calibration.collectives import MAX_BYTES

    check_budget_s(budget_s)
    check_collective_request(nodes, node_rank, rdzv_endpoint, join_timeout_s)
    started_s, created_at = time.perf_counter(), utc_now()
    with exclusive_calibration():
        host = _host_for(device, catalogue)
        if host.device is None:
            raise CalibrationRequestError(f"--device {device}: {host.unavailable_reason}")
        if progress:
            progress(f"Collectives on {nodes} node(s): waiting for every node, then sweeping", 0.0)
        curves = _sweep(host, budget_s, nodes, node_rank, rdzv_endpoint, join_timeout_s, max_bytes or MAX_BYTES)
        if progress:
            progress("Done", 1.0)
    where = f"rendezvous at {rdzv_endpoint}" if rdzv_endpoint else "all nodes on this host"
    notes = host.notes + [
        f"Collectives: {nodes} node(s), {curves['world_size']} processes, {curves['backend']}, {where}"
    ]
    one_node_link = _link_gbps_one_direction(host) if nodes == 1 else None  # across nodes the network is the link
    return CalibrationResult(
        **_host_fields(host, str(host.device)),
        created_at=created_at,
        budget_s=budget_s,
        duration_s=time.perf_counter() - started_s,
        records=_collective_records(curves, nodes, one_node_link),
        notes=notes,
        all_reduce=curves["all_reduce"],
        all_gather=curves["all_gather"],
        reduce_scatter=curves["reduce_scatter"],
    )
