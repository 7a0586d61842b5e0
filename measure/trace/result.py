"""What a traced training step reports, and the error a failed trace raises.

This module does not import torch: the app and the runner read results without it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

# Phase names, in the order a step passes through them. The first five that the
# closed-form engine also computes carry the same names as `MemoryEstimate.phases_gib`.
PHASES = (
    "forward",
    "end of forward",
    "loss backward",
    "backward, last layer",
    "backward, middle layers",
    "backward, first layer",
    "backward, embeddings",
    "optimizer step",
)


class TraceError(RuntimeError):
    """A configuration could not be traced; the message is one line starting with
    'could not trace this configuration: '."""

    PREFIX = "could not trace this configuration: "

    def __init__(self, reason: str) -> None:
        reason = " ".join(str(reason).split()) or "unknown reason"
        if not reason.startswith(self.PREFIX):
            reason = self.PREFIX + reason
        super().__init__(reason)


class UnsupportedConfiguration(ValueError):
    """The tracer has no faithful way to run this configuration (raised inside the worker)."""


class TraceResult(BaseModel):
    """Bytes and FLOPs of one traced training step (the second, in steady state).

    `allocated_gib` equals `peak_gib`: the trace sees every tensor torch allocates
    but no CUDA context or caching-allocator reserve, so compare it with the
    engine's `MemoryEstimate.allocated_gib`, not with its `peak_gib`.
    """

    peak_gib: float
    allocated_gib: float
    peak_phase: str
    peak_op: str
    phases_gib: dict[str, float]
    phase_ops: dict[str, str] = Field(default_factory=dict, description="op at each phase's peak")
    components_gib: dict[str, float] = Field(description="live bytes at the peak, by what they are")
    phase_components_gib: dict[str, dict[str, float]] = Field(default_factory=dict)
    saved_activations_gib: float = Field(description="activations alive at the end of forward (logits excluded)")
    saved_by_op_gib: dict[str, float] = Field(
        default_factory=dict, description="the end-of-forward activations grouped by the op that created them"
    )
    warmup_peak_gib: float = Field(description="peak of the first step, before optimizer states exist")
    flops_total: float = Field(description="FLOPs of one micro-batch's forward and backward (recompute included)")
    flops_per_token: float
    flops_by_op: dict[str, float] = Field(default_factory=dict)
    tokens: int
    traced_layers: list[int] = Field(description="layer counts actually traced (more than one: extrapolated)")
    extrapolated: bool = False
    seconds: float
    torch_version: str
    notes: list[str] = Field(default_factory=list)
