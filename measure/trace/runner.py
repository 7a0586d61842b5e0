"""Run traces in a subprocess with a time limit, and turn any failure into a TraceError.

A trace runs PyTorch in `python -m measure.trace.worker`: each request (spec, settings)
goes in as one JSON line on stdin and the `TraceResult` comes back as one JSON line on
stdout. The process boundary keeps torch out of the caller and contains what cannot be
caught in-process: fake CUDA tensors on a CPU-only torch build abort the interpreter
(SIGABRT), and a large model can take long. `run_trace` uses a fresh process per call;
`TraceSession` keeps one process for many traces (importing torch once) and replaces it
after a crash or a timeout. This module does not import torch.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

from pydantic import ValidationError

from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings
from measure.trace.result import TraceError, TraceResult, UnsupportedConfiguration
from measure.trace.support import check_traceable

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = 120.0
STARTUP_ALLOWANCE_S = 30.0  # importing torch in a fresh worker, on top of the trace's own limit


def request_json(spec: ModelSpec, settings: TrainingSettings, layers: int | None, extrapolate: bool) -> str:
    """One request line for the worker: spec, settings and how many layers to trace."""
    payload = {
        "spec": spec.model_dump(mode="json"),
        "settings": settings.model_dump(mode="json"),
        "layers": layers,
        "extrapolate": extrapolate,
    }
    return json.dumps(payload)


def describe_exit(returncode: int | None) -> str:
    """'killed by SIGABRT' or 'exited with code 1', for the error message."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the tracing process was killed by {name}"
    return f"the tracing process exited with code {returncode}"


def parse_answer(line: str) -> TraceResult:
    """A worker's answer line as a TraceResult, or a TraceError naming why it is not one."""
    try:
        answer = json.loads(line)
    except json.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        raise TraceError(f"the tracing process printed no result (it printed {line.strip()[-200:]!r})")
    if "error" in answer:
        raise TraceError(str(answer["error"]))
    try:
        return TraceResult.model_validate(answer)
    except ValidationError as exc:
        raise TraceError(f"the tracing process printed a malformed result: {exc.errors()[0]['msg']}") from exc


class TraceSession:
    """A worker process that traces one request after another.

    Each `trace` call waits at most `timeout_s` (plus `startup_allowance_s` when the worker is
    new, for importing torch); on a timeout, a crash or a malformed answer the worker is killed, TraceError is
    raised, and the next call starts a fresh worker.
    """

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: dict[str, str] | None = None,
        startup_allowance_s: float = STARTUP_ALLOWANCE_S,
    ) -> None:
        self.timeout_s, self.env, self.startup_allowance_s = timeout_s, env, startup_allowance_s
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=20)

    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _start(self) -> None:
        env = {**os.environ, **(self.env or {})}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
        command = [sys.executable, "-m", "measure.trace.worker"]
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            env=env,
        )
        self._lines, self._stderr = queue.Queue(), deque(maxlen=20)
        threading.Thread(target=self._pump, args=(self._process.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._drain, args=(self._process.stderr, self._stderr), daemon=True).start()

    @staticmethod
    def _pump(stream, lines: queue.Queue) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    @staticmethod
    def _drain(stream, tail: deque) -> None:
        for line in stream:
            if line.strip():
                tail.append(line.strip())

    def close(self) -> None:
        """Stop the worker (it exits at the end of its stdin; killed if it does not)."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.stdin.close()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()

    def _fail(self, reason: str) -> TraceError:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait()
        return TraceError(reason)

    def trace(
        self, spec: ModelSpec, settings: TrainingSettings, *, layers: int | None = None, extrapolate: bool = False
    ) -> TraceResult:
        """Trace one step of `spec` under `settings` (see `run_trace`)."""
        try:
            check_traceable(spec, settings)
        except UnsupportedConfiguration as exc:
            raise TraceError(str(exc)) from exc
        fresh = self._process is None
        if fresh:
            try:
                self._start()
            except OSError as exc:
                raise TraceError(f"the tracing process could not start ({exc})") from exc
        try:
            self._process.stdin.write(request_json(spec, settings, layers, extrapolate) + "\n")
            self._process.stdin.flush()
        except OSError:
            pass  # the worker is gone; its exit is reported below
        wait_s = self.timeout_s + (self.startup_allowance_s if fresh else 0.0)
        try:
            line = self._lines.get(timeout=wait_s)
        except queue.Empty:
            raise self._fail(f"the trace took longer than {self.timeout_s:g} s and was stopped") from None
        if line is None:
            self._process.wait()
            detail = f" ({self._stderr[-1]})" if self._stderr else ""
            raise self._fail(describe_exit(self._process.returncode) + detail)
        try:
            return parse_answer(line)
        except TraceError as exc:
            if "error" not in line:
                self._fail(str(exc))  # the worker printed something unexpected: do not trust it further
            raise


def run_trace(
    spec: ModelSpec,
    settings: TrainingSettings,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    layers: int | None = None,
    extrapolate: bool = False,
    env: dict[str, str] | None = None,
) -> TraceResult:
    """Trace one training step of `spec` under `settings` in a fresh subprocess.

    `layers` traces a model with that many layers instead of `spec.n_layers`; `extrapolate`
    traces 3, 4 and 5 layers and extends each phase linearly to `spec.n_layers` after checking
    that the three points lie on a line to the byte (`tracer.trace_extrapolated`).
    Raises TraceError("could not trace this configuration: ...") on an unsupported
    configuration, a crash, a timeout or output that is not a result. `timeout_s` includes
    starting the process and importing torch (about 3 s).
    """
    session = TraceSession(timeout_s, env, startup_allowance_s=0.0)
    try:
        return session.trace(spec, settings, layers=layers, extrapolate=extrapolate)
    finally:
        session.close()
