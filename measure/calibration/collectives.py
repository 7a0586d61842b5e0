"""Collective bandwidth against message size, swept like nccl-tests, inside torchrun workers.

What is measured follows nccl-tests (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md):
- `bytes` is the size nccl-tests prints: the all-reduce buffer, the all-gather's gathered
  output (each rank sends bytes / n), the reduce-scatter's input (each rank keeps bytes / n);
- algorithm bandwidth algbw = bytes / time;
- bus bandwidth busbw = algbw x factor, the rate each link of a ring carries, comparable with the
  hardware's link bandwidth whatever the rank count: 2(n-1)/n for all-reduce, (n-1)/n for
  all-gather and reduce-scatter.

Sizes double from 1 KB to 1 GB (nccl-tests' `-b 1K -e 1G -f 2`) until the budget runs out; at
each size the three collectives run in turn, so a sweep cut short keeps three curves of the same
sizes. Every decision that changes what the ranks do next (how many iterations, whether to go on)
is taken from figures all ranks agree on (a MAX all-reduce), so no rank waits on a collective
the others skipped. The time of a size is the slowest rank's mean, as nccl-tests reports.

Each node's local rank 0 writes the curves as JSON (temporary file renamed over `--out`), so every
node of a multi-node run ends with the same figures and no reader sees half a file. The line
`SWEEP_STARTED` on stderr tells the launcher the rendezvous is over (`collective_launch`).

    torchrun --nproc_per_node 2 -m measure.calibration.collectives --backend gloo --budget-s 10 --out c.json

torch is imported inside the functions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
MIN_BYTES, MAX_BYTES = 1024, 1024**3  # nccl-tests -b 1K -e 1G
SWEEP_STARTED = "collectives: sweep started"
# Each size's iterations aim at this much time per collective, between 1 and MAX_ITERS
# (nccl-tests runs a fixed 20 by default, `-n 20`; the cap keeps that figure for small sizes).
TARGET_S_PER_POINT = 0.05
MAX_ITERS = 20


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for all-gather and
    reduce-scatter (github.com/NVIDIA/nccl-tests doc/PERFORMANCE.md, "Bus bandwidth")."""
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    ring_share = (world_size - 1) / world_size
    return 2 * ring_share if collective == "all_reduce" else ring_share


def sweep_sizes(min_bytes: int = MIN_BYTES, max_bytes: int = MAX_BYTES) -> list[int]:
    """Message sizes doubling from min_bytes to max_bytes (nccl-tests' -f 2)."""
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def curve_point(collective: str, size_bytes: int, time_s: float, world_size: int) -> dict[str, float | int]:
    """One point of a curve, in the result file's keys."""
    algbw = size_bytes / time_s / 1e9
    return {
        "bytes": size_bytes,
        "algbw_gbytes_per_s": algbw,
        "busbw_gbytes_per_s": algbw * bus_factor(collective, world_size),
        "time_s": time_s,
    }


def _operation(collective: str, size_bytes: int, world_size: int, device: Any) -> Callable[[], None]:
    """The collective on fp32 buffers of nccl-tests' sizes (the gathered / scattered side is `size_bytes`)."""
    import torch
    import torch.distributed as dist

    elements = size_bytes // 4
    if collective == "all_reduce":
        buffer = torch.ones(elements, dtype=torch.float32, device=device)
        return lambda: dist.all_reduce(buffer)
    whole = torch.ones(elements, dtype=torch.float32, device=device)
    share = torch.ones(elements // world_size, dtype=torch.float32, device=device)
    if collective == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed in torch 2.13
        return lambda: gather(whole, share)
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return lambda: scatter(share, whole)


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _slowest(value_s: float, device: Any) -> float:
    """The largest of every rank's value, the same on all ranks."""
    import torch
    import torch.distributed as dist

    figure = torch.tensor([value_s], dtype=torch.float64, device=device)
    dist.all_reduce(figure, op=dist.ReduceOp.MAX)
    return float(figure.item())


def _timed_s(run: Callable[[], None], iters: int, device: Any) -> float:
    """The slowest rank's mean time of `iters` runs, started together after a barrier."""
    import torch.distributed as dist

    dist.barrier()
    started_s = time.perf_counter()
    for _ in range(iters):
        run()
    _synchronize(device)
    return _slowest((time.perf_counter() - started_s) / iters, device)


def _measure(collective: str, size_bytes: int, world_size: int, device: Any) -> float:
    """One warm-up run (which also times how many iterations fit), then the timed mean."""
    run = _operation(collective, size_bytes, world_size, device)
    warm_s = _timed_s(run, 1, device)
    iters = max(1, min(MAX_ITERS, int(TARGET_S_PER_POINT / max(warm_s, 1e-9))))
    return _timed_s(run, iters, device)


def sweep(backend: str, world_size: int, budget_s: float, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """Curves of the three collectives in the initialised process group, within `budget_s`.

    The next size (twice the bytes) is started only when twice the last size's time still fits."""
    device = _device(backend)
    deadline_s = time.perf_counter() + budget_s
    curves: dict[str, list[dict[str, float | int]]] = {name: [] for name in COLLECTIVES}
    print(f"{SWEEP_STARTED} (pid {os.getpid()})", file=sys.stderr, flush=True)
    for size_bytes in sweep_sizes(MIN_BYTES, max_bytes):
        size_bytes -= size_bytes % (4 * world_size)  # whole fp32 shares per rank
        started_s = time.perf_counter()
        for name in COLLECTIVES:
            curves[name].append(
                curve_point(name, size_bytes, _measure(name, size_bytes, world_size, device), world_size)
            )
        size_s = time.perf_counter() - started_s
        # Each rank judges by its own clock; one that must stop stops them all (MAX), so none is
        # left waiting in a collective the others never start.
        if _slowest(float(time.perf_counter() + 2 * size_s > deadline_s), device):
            break
    return {"backend": backend, "world_size": world_size, **curves}


def _device(backend: str) -> Any:
    import torch

    return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")


def write_atomically(path: Path, text: str) -> None:
    """Write to a temporary file beside `path` and rename it over `path`: readers see all or nothing."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Collective bandwidth sweep (run under torchrun)")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="nccl")
    parser.add_argument("--budget-s", type=float, default=60.0, help="seconds for the sweep itself")
    parser.add_argument("--max-bytes", type=int, default=MAX_BYTES)
    parser.add_argument("--timeout-s", type=float, default=60.0, help="how long one collective waits for a peer")
    parser.add_argument("--out", type=Path, required=True, help="each node's local rank 0 writes the curves here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point for torchrun: every rank sweeps, each node's local rank 0 writes the JSON."""
    args = _parse_args(argv)  # before importing torch, so a bad argument fails fast
    import torch
    import torch.distributed as dist

    if args.backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=args.backend, timeout=dt.timedelta(seconds=args.timeout_s))
    try:
        result = sweep(args.backend, dist.get_world_size(), args.budget_s, args.max_bytes)
        if int(os.environ.get("LOCAL_RANK", "0")) == 0:
            write_atomically(args.out, json.dumps(result))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
