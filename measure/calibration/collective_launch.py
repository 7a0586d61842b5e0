"""Start the collective sweep (`collectives`) with torchrun on one node of N, or as N local nodes.

Across nodes every node runs the same command with its own `--node-rank`; torchrun's static
rendezvous (`--rdzv-backend static`: node rank 0 serves the TCP store at `--rdzv-endpoint`,
pytorch.org/docs/stable/elastic/run.html) waits `join_timeout_s` for all of them. Without an
endpoint, `run_local_nodes` starts N torchrun agents on this host, each one node with its own
node rank, on a free local port: how tests and CI exercise the multi-node path on one machine.

Failures become `CollectiveRunError` with one line: a peer that never arrives (the rendezvous
times out), a node that dies after the sweep started (its peers' collectives fail), or any other
torchrun exit. A failed run writes nothing: the workers write their curves with a rename
(`collectives.write_atomically`) only when the whole sweep is done.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from measure.calibration.allreduce import REPO_ROOT, _last_lines
from measure.calibration.collectives import MAX_BYTES, SWEEP_STARTED

# Seconds past the join timeout and the sweep's budget for torchrun to start its workers (torch's
# import alone takes seconds on a busy host) and to write and shut down.
STARTUP_SLACK_S = 60.0
# How long the other local agents may take to notice a failed one before they are stopped.
PEER_GRACE_S = 5.0
# How long an agent asked to stop may take to stop its workers.
STOP_GRACE_S = 10.0


class CollectiveRunError(RuntimeError):
    """The sweep did not complete; the message is one line saying why."""


@dataclass(frozen=True)
class Rendezvous:
    """Where and how the nodes meet: `nodes` agents at `endpoint` (HOST:PORT), this one `node_rank`."""

    nodes: int
    node_rank: int
    endpoint: str
    join_timeout_s: float


def free_local_endpoint() -> str:
    """127.0.0.1 and a port the kernel says is free now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def torchrun_command(rendezvous: Rendezvous, nproc: int, backend: str, budget_s: float, out: Path,
                     max_bytes: int = MAX_BYTES) -> list[str]:  # fmt: skip
    """The torchrun command line of one node of the sweep."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        f"--nnodes={rendezvous.nodes}", f"--node-rank={rendezvous.node_rank}", f"--nproc-per-node={nproc}",
        "--rdzv-backend=static", f"--rdzv-endpoint={rendezvous.endpoint}",
        f"--rdzv-conf=timeout={max(1, round(rendezvous.join_timeout_s))}", "--max-restarts=0",
        "-m", "measure.calibration.collectives", "--backend", backend, "--budget-s", f"{budget_s:g}",
        "--timeout-s", f"{rendezvous.join_timeout_s:g}", "--max-bytes", str(max_bytes), "--out", str(out),
    ]  # fmt: skip


def _environment() -> dict[str, str]:
    """This environment with the repository on PYTHONPATH and one OpenMP thread per worker."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {"OMP_NUM_THREADS": "1"} | dict(os.environ) | {"PYTHONPATH": path}


# What gloo and NCCL print when a peer's connection ends under them.
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "connectFullMesh failed")


def failure_message(stderr: str, returncode: int, rendezvous: Rendezvous) -> str:
    """One line saying why a node's torchrun failed, from what it printed."""
    started = SWEEP_STARTED in stderr
    if not started and ("timed out" in stderr.lower() or "TimeoutError" in stderr):
        return (
            f"a peer never arrived: not all {rendezvous.nodes} nodes joined the rendezvous at "
            f"{rendezvous.endpoint} within {rendezvous.join_timeout_s:g} s; start the same command on every node "
            "with its own --node-rank"
        )
    # a peer that goes away after the rendezvous may leave this node still connecting its mesh, before
    # its own sweep started: gloo then reports the closed connection rather than a failed collective
    if started or any(sign in stderr for sign in PEER_GONE):
        return f"a node stopped in the middle of the sweep, so nothing was written ({_cause(stderr)})"
    return f"torchrun exited with code {returncode}: {_cause(stderr)}"


def _cause(stderr: str) -> str:
    """A worker's last exception line without torchrun's rank prefix and gloo's source path
    ('RuntimeError: Read error [127.0.0.1]:5522: Connection reset by peer'), else the last lines."""
    errors = re.findall(r"^(?:\[rank\d+\]: )?(\w+(?:Error|Exception): .+)$", stderr, flags=re.MULTILINE)
    if not errors:
        return _last_lines(stderr)
    first_sentence = errors[-1].split(". ")[0]  # gloo goes on with advice on how to report a bug
    return re.sub(r"\[[^\]]*\.(?:cc|cpp|h):\d+\] ", "", first_sentence)[:300]


def _read(stream: IO[str]) -> str:
    stream.seek(0)
    return stream.read()


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM first: torchrun's agent then stops its workers, which run in sessions of their own and
    would outlive a SIGKILL of the agent; SIGKILL if it has not gone after STOP_GRACE_S."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_all(processes: list[subprocess.Popen], deadline_s: float) -> int | None:
    """Wait for every process; the index of the first that failed, else None. Stops the others
    PEER_GRACE_S after a failure, and all of them at the deadline (TimeoutError)."""
    failed, grace_until_s = None, None
    while any(process.poll() is None for process in processes):
        now_s = time.monotonic()
        if now_s > deadline_s or (grace_until_s is not None and now_s > grace_until_s):
            for process in processes:
                _stop(process)
            if failed is None:
                raise TimeoutError
            break
        if failed is None:
            failed = next((index for index, p in enumerate(processes) if p.poll() not in (None, 0)), None)
            grace_until_s = None if failed is None else now_s + PEER_GRACE_S
        time.sleep(0.1)
    if failed is None:
        failed = next((index for index, p in enumerate(processes) if p.returncode != 0), None)
    return failed


def run_nodes(rendezvous_per_node: list[Rendezvous], nproc: int, backend: str, budget_s: float,
              max_bytes: int = MAX_BYTES) -> dict[str, Any]:  # fmt: skip
    """Run one torchrun agent per rendezvous given (all on this host) and return the first one's curves.

    Raises CollectiveRunError with one line when any of them fails or all do not finish in time."""
    first = rendezvous_per_node[0]
    timeout_s = first.join_timeout_s + budget_s + STARTUP_SLACK_S
    with tempfile.TemporaryDirectory(prefix="collectives-") as folder:
        outs = [Path(folder) / f"node{r.node_rank}.json" for r in rendezvous_per_node]
        logs = [open(Path(folder) / f"node{r.node_rank}.log", "w+", encoding="utf-8") for r in rendezvous_per_node]  # noqa: SIM115
        processes: list[subprocess.Popen] = []
        try:
            processes += [
                subprocess.Popen(
                    torchrun_command(r, nproc, backend, budget_s, out, max_bytes),
                    cwd=REPO_ROOT,
                    env=_environment(),
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    text=True,
                    start_new_session=True,
                )  # fmt: skip
                for r, out, log in zip(rendezvous_per_node, outs, logs, strict=True)
            ]
            try:
                failed = _wait_all(processes, time.monotonic() + timeout_s)
            except TimeoutError:
                raise CollectiveRunError(
                    f"the collective sweep did not finish in {timeout_s:.0f} s: a node stopped or hangs"
                ) from None
            if failed is not None:
                stderr = _read(logs[failed])
                raise CollectiveRunError(failure_message(stderr, processes[failed].returncode, first))
            if not outs[0].exists():
                raise CollectiveRunError(f"torchrun wrote no curves: {_last_lines(_read(logs[0]))}")
            return json.loads(outs[0].read_text(encoding="utf-8"))
        finally:  # an interrupted caller (Ctrl-C) leaves no agent or worker behind
            for process in processes:
                _stop(process)
            for log in logs:
                log.close()


def run_local_nodes(nodes: int, nproc: int, backend: str, budget_s: float, join_timeout_s: float,
                    max_bytes: int = MAX_BYTES) -> dict[str, Any]:  # fmt: skip
    """`nodes` agents on this host, each one node of the rendezvous, on a free local port."""
    endpoint = free_local_endpoint()
    rendezvous = [Rendezvous(nodes, rank, endpoint, join_timeout_s) for rank in range(nodes)]
    return run_nodes(rendezvous, nproc, backend, budget_s, max_bytes)
