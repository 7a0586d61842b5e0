"""The memory estimate as data: components, per-phase breakdowns and the result model."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel

COMPONENTS = (
    "weights",
    "master_weights",
    "autocast_weight_copies",
    "gradients",
    "optimizer_states",
    "optimizer_step_temporaries",
    "activations",
    "logits_and_loss",
    "allocator_reserve",
    "framework_overhead",
)


COMPONENT_LABEL = {
    "weights": "Weights",
    "master_weights": "FP32 master weights",
    "autocast_weight_copies": "Autocast weight copies",
    "gradients": "Gradients",
    "optimizer_states": "Optimizer states",
    "optimizer_step_temporaries": "Optimizer step temporaries",
    "activations": "Activations",
    "logits_and_loss": "Logits and loss",
    "allocator_reserve": "Allocator reserve",
    "framework_overhead": "CUDA context, cuBLAS, NCCL",
}


class PhaseMemory(NamedTuple):
    """Bytes allocated by torch at one moment of the step, by component: the engine's own record,
    made a few times per estimate (a NamedTuple: no validation of what the engine computed);
    MemoryEstimate is the result."""

    name: str
    components: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.components.values())


class MemoryEstimate(BaseModel):
    """Result of the estimate: the peak (GiB), its breakdown and the phases."""

    peak_gib: float
    allocated_gib: float
    reserved_gib: float
    peak_phase: str
    components_gib: dict[str, float]
    phases_gib: dict[str, float]
    phase_components_gib: dict[str, dict[str, float]]
    activations_per_layer_gib: dict[str, float]
    parameters: int
    trainable_parameters: int
    tokens_per_micro_batch: int
    assumptions: list[str]
    host_memory_gib: float = 0.0
    # the whole model on the GPU while it is loaded (0 when loading never holds it whole)
    load_peak_gib: float = 0.0
    # paged optimizer states in CUDA unified memory: on the device, outside torch's caching allocator
    outside_allocator_gib: float = 0.0
    pipeline_stage: str = "only"
