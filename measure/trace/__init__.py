"""Exact memory and FLOPs of one training step, traced with PyTorch fake tensors on the CPU.

`run_trace(spec, settings)` runs one real training step of a reference model under
`torch._subclasses.fake_tensor.FakeTensorMode` in a subprocess (no tensor memory is
allocated) and returns a `TraceResult`: live tensor bytes per phase, the peak and the op at
the peak, the saved activations, and the FLOPs. It is the check of the closed-form engine
`calculators.memory.engine.estimate_memory`.

Importing this package does not import torch; only the worker subprocess (and the modules
`models`, `blocks`, `tracer`, `tracking`, `cuda_emulation`, `flops`, `lora`, `fused_loss`,
`compile_partition`) do. `result`, `support`,
`runner` and `worker` (until its first request) are torch-free.

Run on the CPU, the trace reproduces CUDA's behaviour where it changes memory: CUDA
autocast's fp32 op list, flash attention's output layout and fused dropout's 1-byte masks
(`cuda_emulation`, `blocks.dropout`). Fake and real CPU tensors give the same bytes.
"""

from measure.trace.result import PHASES, TraceError, TraceResult, UnsupportedConfiguration
from measure.trace.runner import run_trace

__all__ = ["PHASES", "TraceError", "TraceResult", "UnsupportedConfiguration", "run_trace"]
