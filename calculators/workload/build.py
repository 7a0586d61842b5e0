"""The workload: one variant per mode, each carrying the resolved model and GPU.

`train`, `finetune-lora` and `finetune-qlora` run the training-memory engine with their
method; `inference` runs the serving calculator. Pages and CLI commands take a `Workload`
and dispatch on its type, so a command either answers every mode it offers or refuses one
with a sentence.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from calculators.models.spec import ModelSpec
from calculators.workload.modes import METHOD_OF_MODE
from calculators.workload.serving import ServingSettings, serving_problem
from calculators.workload.support import check_supported
from calculators.workload.training import TrainingSettings


class GpuTarget(BaseModel):
    """The GPU a verdict is given for: a catalogue name, or a custom capacity."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    memory_gib: float = Field(gt=0, le=100_000, allow_inf_nan=False)


class TrainingWorkload(BaseModel):
    """Shared by the three training modes: the engine's settings with the mode's method."""

    model: ModelSpec
    gpu: GpuTarget | None = None
    training: TrainingSettings

    @model_validator(mode="after")
    def _settings_fit_the_model(self) -> TrainingWorkload:
        check_supported(self.model, self.training)
        expected = METHOD_OF_MODE[self.mode]
        if self.training.method != expected:
            raise ValueError(f"mode {self.mode} trains with method {expected}, not {self.training.method}")
        return self

    @property
    def is_training(self) -> bool:
        return True


class TrainWorkload(TrainingWorkload):
    mode: Literal["train"] = "train"


class LoraWorkload(TrainingWorkload):
    mode: Literal["finetune-lora"] = "finetune-lora"


class QloraWorkload(TrainingWorkload):
    mode: Literal["finetune-qlora"] = "finetune-qlora"


class ServeWorkload(BaseModel):
    """A model served by a vLLM-style server on `serving.tensor_parallel` GPUs."""

    mode: Literal["inference"] = "inference"
    model: ModelSpec
    gpu: GpuTarget | None = None
    serving: ServingSettings

    @model_validator(mode="after")
    def _servable(self) -> ServeWorkload:
        problem = serving_problem(self.model, self.serving)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def is_training(self) -> bool:
        return False


Workload = Annotated[TrainWorkload | LoraWorkload | QloraWorkload | ServeWorkload, Field(discriminator="mode")]
WORKLOAD_OF_MODE: dict[str, type[BaseModel]] = {
    "train": TrainWorkload,
    "finetune-lora": LoraWorkload,
    "finetune-qlora": QloraWorkload,
    "inference": ServeWorkload,
}


def workload_from_fields(mode: str, model: ModelSpec, fields: dict[str, Any], gpu: GpuTarget | None = None) -> Workload:
    """The mode's workload from the fields of its settings model by name: ServingSettings' for
    inference, TrainingSettings' (the method is the mode's) for the training modes. Raises
    pydantic's ValidationError (or ValueError) naming what is wrong."""
    variant = WORKLOAD_OF_MODE[mode]
    if variant is ServeWorkload:
        return ServeWorkload(model=model, gpu=gpu, serving=ServingSettings(**fields))
    return variant(model=model, gpu=gpu, training=TrainingSettings(**fields | {"method": METHOD_OF_MODE[mode]}))


def describe_workload_error(error: ValidationError | ValueError) -> str:
    """One line for the pages and the CLI: each problem with the setting it is about
    (`training.micro_batch: ...`), or the sentence alone for checks across settings."""
    if not isinstance(error, ValidationError):
        return str(error)
    parts = []
    for problem in error.errors():
        message = problem["msg"].removeprefix("Value error, ")
        where = ".".join(str(part) for part in problem["loc"])
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
