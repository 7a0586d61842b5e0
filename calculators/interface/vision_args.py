"""What the command line's image-model paths share: which library model --model names, the one
error they raise, and the reading of --precision and --optimizer for an image model.

`memory`/`fit` (calculators.interface.vision_commands) and `time`/`cost`
(calculators.interface.vision_cli) both read their flags through here, so a name, a precision or a
refusal reads the same in every command.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import ValidationError

from calculators.memory.vision_training import VISION_PRECISIONS
from calculators.models.hf_config import describe_validation_error
from calculators.models.vision_library import VisionModel, reference_micro_batch, vision_model

# The transformer recipes' mixed precision read as autocast for an image model: the same half-precision
# compute, fp32 weights (torchvision references/classification/train.py `--amp`: torch.autocast + GradScaler).
PRECISION_FOR_IMAGES = {"bf16-mixed": "amp-bf16", "fp16-mixed": "amp-fp16"}


class VisionUsageError(ValueError):
    """A vision workload the flags describe wrongly; one line (the CLI prints it as `error:`)."""


def named_vision_model(args: argparse.Namespace) -> VisionModel | None:
    """The vision library's model --model names, or None (a transformer, or no --model)."""
    name = getattr(args, "model", None)
    return vision_model(name) if name else None


def vision_choice(value: str, choices: tuple[str, ...], flag: str, model: VisionModel) -> str:
    """`value` when it is one of `choices`, else one line naming the flag and the choices."""
    if value not in choices:
        allowed = ", ".join(choices)
        raise VisionUsageError(f"{flag} for an image model ({model.key}) must be one of {allowed}, not {value}")
    return value


def image_precision(args: argparse.Namespace, model: VisionModel) -> str:
    """--precision as an image model's autocast precision (bf16-mixed reads as amp-bf16)."""
    precision = PRECISION_FOR_IMAGES.get(args.precision, args.precision)
    return vision_choice(precision, VISION_PRECISIONS, "--precision", model)


@contextmanager
def one_line_validation() -> Iterator[None]:
    """A pydantic refusal of the flags' values as one VisionUsageError line."""
    try:
        yield
    except ValidationError as error:
        raise VisionUsageError(describe_validation_error(error)) from None


def micro_batch_of(args: argparse.Namespace, model: VisionModel) -> int:
    """--micro-batch where given, else the model's reference images per GPU (reference_micro_batch):
    the shared flag's default of 1 is a transformer's, not an image model's."""
    given = "micro_batch" in getattr(args, "given_settings", ())
    return args.micro_batch if given else reference_micro_batch(model)
