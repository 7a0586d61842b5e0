"""Subprocess entry of traces: `python -m measure.trace.worker` (see `runner.TraceSession`).

Reads one request per line on stdin, {"spec": ..., "settings": ..., "layers": int | null,
"extrapolate": bool}, and answers each with one JSON line on stdout: the TraceResult, or
{"error": "..."} for a configuration that cannot be traced or a trace that failed. It exits
at the end of stdin. torch is imported at the first request that passes the support checks.

For tests, the environment variable GPU_SIZING_TRACE_FAULT makes the worker fail on purpose
when a request arrives: "abort" (SIGABRT, as fake CUDA tensors do on a CPU-only build),
"hang" (sleeps past any time limit), "garbage" (prints something that is not a result).
"""

from __future__ import annotations

import json
import os
import sys
import time

from calculators.models.spec import ArchitectureSpec, ModelSpec
from calculators.workload.training import TrainingSettings
from measure.trace.result import UnsupportedConfiguration
from measure.trace.support import check_traceable

FAULT_ENV = "GPU_SIZING_TRACE_FAULT"


def _inject_fault() -> None:
    fault = os.environ.get(FAULT_ENV, "")
    if fault == "abort":
        os.abort()
    if fault == "hang":
        time.sleep(3600)
    if fault == "garbage":
        print("this is not a trace result", flush=True)


def _trace(spec: ModelSpec, settings: TrainingSettings, request: dict):
    import torch

    from measure.trace.tracer import trace_extrapolated, trace_step

    torch.set_num_threads(1)
    if request.get("extrapolate"):
        return trace_extrapolated(spec, settings)
    return trace_step(spec, settings, layers=request.get("layers"))


def answer(line: str) -> dict:
    """Trace one request line; every failure becomes {"error": one line}."""
    try:
        request = json.loads(line)
        # ArchitectureSpec keeps the extension fields (a VLM's encoder) that ModelSpec would drop
        spec = ArchitectureSpec.model_validate(request["spec"])
        settings = TrainingSettings.model_validate(request["settings"])
        check_traceable(spec, settings)
        result = _trace(spec, settings, request)
    except UnsupportedConfiguration as exc:
        return {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - every failure becomes a one-line error for the runner
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    return json.loads(result.model_dump_json())


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            _inject_fault()
            print(json.dumps(answer(line)), flush=True)


if __name__ == "__main__":
    main()
