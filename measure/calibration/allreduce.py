"""All-reduce bandwidth between processes, measured with torch.distributed.

Figures follow nccl-tests (doc/PERFORMANCE.md): algorithm bandwidth algbw = size / time,
and bus bandwidth busbw = algbw x 2(n-1)/n for all-reduce, the rate each link must carry
with a ring algorithm, comparable with the hardware's link bandwidth.

Run one process per GPU (NCCL) or per CPU worker (gloo) with torchrun; rank 0 writes JSON:

    torchrun --nproc_per_node 2 -m measure.calibration.allreduce --backend gloo --size-mb 8 --out ar.json

`run_allreduce_subprocess()` does the same from Python (`sys.executable -m torch.distributed.run`).
torch is imported inside the functions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def bus_bandwidth_gbps(algbw_gbps: float, world_size: int) -> float:
    """All-reduce bus bandwidth: algbw x 2(n-1)/n (nccl-tests PERFORMANCE.md)."""
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    return algbw_gbps * 2 * (world_size - 1) / world_size


def allreduce_busbw(backend: str, world_size: int, size_bytes: int, iters: int = 20, warmup: int = 3) -> dict[str, Any]:
    """Time `iters` all-reduces of `size_bytes` (fp32 sum) in the already initialised
    process group; the slowest rank's mean time counts. Returns algbw and busbw in GB/s (1e9)."""
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    tensor = torch.ones(max(1, size_bytes // 4), dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    _synchronize(device)
    dist.barrier()
    start_s = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor)
    _synchronize(device)
    elapsed = torch.tensor([(time.perf_counter() - start_s) / iters], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    time_s = float(elapsed.item())
    algbw = tensor.numel() * 4 / time_s / 1e9
    return {
        "backend": backend,
        "world_size": world_size,
        "size_bytes": tensor.numel() * 4,
        "iters": iters,
        "time_s": time_s,
        "algbw_gbps": algbw,
        "busbw_gbps": bus_bandwidth_gbps(algbw, world_size),
    }


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="All-reduce bus bandwidth (run under torchrun)")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="nccl")
    parser.add_argument("--size-mb", type=float, default=64.0, help="message size in MB (1e6 bytes)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--out", type=Path, help="rank 0 writes its JSON here (default: stdout)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point for torchrun: every rank measures, rank 0 writes the JSON."""
    args = _parse_args(argv)  # before importing torch, so a bad argument fails fast
    import torch
    import torch.distributed as dist

    if args.backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=args.backend)
    try:
        result = allreduce_busbw(args.backend, dist.get_world_size(), int(args.size_mb * 1e6), args.iters)
        if dist.get_rank() == 0:
            text = json.dumps(result, indent=2)
            if args.out:
                args.out.write_text(text, encoding="utf-8")
            else:
                print(text)
    finally:
        dist.destroy_process_group()
    return 0


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:])[-500:]


def torchrun_command(nproc: int, backend: str, size_mb: float, iters: int, out: Path) -> list[str]:
    """The torchrun command line of one measurement (rendezvous on a free local port)."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
        "-m", "measure.calibration.allreduce",
        "--backend", backend, "--size-mb", str(size_mb), "--iters", str(iters), "--out", str(out),
    ]  # fmt: skip


def run_allreduce_subprocess(
    nproc: int, backend: str = "gloo", size_mb: float = 8.0, timeout_s: float = 60.0, iters: int = 20
) -> dict[str, Any]:
    """Launch torchrun (`sys.executable -m torch.distributed.run --standalone`) with `nproc`
    processes and return rank 0's JSON. Raises TimeoutError (the process group is killed)
    or RuntimeError with the end of stderr when the run fails."""
    with tempfile.TemporaryDirectory(prefix="allreduce-") as folder:
        out = Path(folder) / "result.json"
        command = torchrun_command(nproc, backend, size_mb, iters, out)
        env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        env.setdefault("OMP_NUM_THREADS", "1")
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            _, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise TimeoutError(f"all-reduce with {nproc} processes did not finish in {timeout_s:g} s") from None
        if process.returncode != 0 or not out.exists():
            raise RuntimeError(f"torchrun exited with code {process.returncode}: {_last_lines(stderr)}")
        return json.loads(out.read_text(encoding="utf-8"))


if __name__ == "__main__":
    sys.exit(main())
