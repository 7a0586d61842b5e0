"""The bundled library of vision models (data/vision_library.json) and their names.

Each row was measured by tracing the real torchvision/timm module definition (or our U-Net,
measure/vision/unet.py) through one training step under PyTorch fake tensors
(`bench/vision_library.py`, `measure/vision/trace.py`): exact parameters and BatchNorm buffers,
forward FLOPs per image, and per variant (fp32 or bf16 autocast, channels-last or not) the bytes
autograd keeps for backward per image, the backward's transient above them, and the autocast
weight copies. How each grows with the image size is stored as coefficients per size unit (pixels
for convolutional networks, Swin and the U-Net; tokens for ViT, with a tokens-squared term),
fitted through traces at resolutions that are multiples of the network's stride. Each row names
its source (library, version and module file) and the date it was traced. Nothing here imports
torch.

Names: the library key (torchvision's name where there is one), the timm name with or without a
`timm/` prefix, the torchvision name and the Hugging Face Hub ids of the same architecture all
resolve offline (`vision_model`).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from calculators import DATA_DIR
from calculators.models.library import fold_name

DEFAULT_VISION_LIBRARY_PATH = DATA_DIR / "vision_library.json"
VARIANT_NAMES = ("fp32", "fp32-channels-last", "amp-bf16", "amp-bf16-channels-last")


class VisionLibraryError(ValueError):
    """The vision library file is malformed; the message names the model and the field."""


class VisionVariant(BaseModel):
    """What one precision and memory format keeps, per image at the reference resolution, and
    how it grows per size unit (pixel or token) and per unit squared."""

    saved_bytes_per_image: float = Field(gt=0)
    saved_bytes_per_unit: float
    saved_bytes_per_unit_squared: float = 0.0
    backward_extra_bytes_per_image: float
    backward_extra_fixed_bytes: float = 0.0
    backward_extra_bytes_per_unit: float = 0.0
    backward_extra_bytes_per_unit_squared: float = 0.0
    autocast_copy_bytes: int = Field(ge=0)


class VisionModel(BaseModel):
    """One model of the vision library, as its row in data/vision_library.json reads."""

    key: str
    kind: Literal["cnn", "vit", "swin", "unet"]
    torchvision_name: str | None = None
    timm_name: str | None = None
    hub_ids: list[str] = []
    reference_resolution: int = Field(gt=0)
    stride: int = Field(gt=0)
    num_classes: int = Field(gt=0)
    patch_size: int | None = None
    prefix_tokens: int = Field(default=0, ge=0)
    parameters: int = Field(gt=0)
    parameters_per_unit: float = 0.0  # a ViT's position embedding grows with its tokens
    buffers: int = Field(ge=0)
    buffer_bytes: int = Field(ge=0)
    forward_flops_per_image: float = Field(gt=0)
    forward_flops_per_unit: float
    forward_flops_per_unit_squared: float = 0.0
    traced_micro_batch: int = Field(gt=0)
    variants: dict[str, VisionVariant]
    source: str = Field(min_length=8)
    as_of: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")

    @model_validator(mode="after")
    def _complete(self) -> VisionModel:
        missing = [name for name in VARIANT_NAMES if name not in self.variants]
        if missing:
            raise ValueError(f"variants missing: {', '.join(missing)}")
        if self.kind == "vit" and not self.patch_size:
            raise ValueError("a ViT needs its patch_size")
        return self

    def size_unit(self, image_size: int) -> int:
        """What activations grow with at `image_size` (square): tokens for a ViT (patches plus
        class tokens), pixels otherwise."""
        if self.kind == "vit":
            return (image_size // self.patch_size) ** 2 + self.prefix_tokens
        return image_size * image_size

    def names(self) -> list[str]:
        return [name for name in (self.key, self.torchvision_name, self.timm_name, *self.hub_ids) if name]


@lru_cache(maxsize=4)
def load_vision_library(path: Path | None = None) -> tuple[VisionModel, ...]:
    """Every model of the library, validated; VisionLibraryError names the bad row and field."""
    path = path or DEFAULT_VISION_LIBRARY_PATH
    document = json.loads(Path(path).read_text())
    models = []
    for index, row in enumerate(document.get("models", [])):
        try:
            models.append(VisionModel.model_validate(row))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise VisionLibraryError(f"{path.name} model {row.get('key', index)}: {where}: {first['msg']}") from None
    return tuple(models)


def _fold(name: str) -> str:
    """Case and separators do not matter: resnet-50, ResNet50 and resnet_50 are one name."""
    return fold_name(name.strip().lower().removeprefix("timm/").removeprefix("torchvision/"), keep="/")


@lru_cache(maxsize=4)
def _by_name(path: Path | None = None) -> dict[str, VisionModel]:
    names: dict[str, VisionModel] = {}
    for model in load_vision_library(path):
        for name in model.names():
            names.setdefault(_fold(name), model)
    return names


# Images per GPU where a run does not say: torchvision's classification reference trains every
# model of its recipes at `-b/--batch-size` default 32, "images per gpu, the total batch size is
# $NGPU x batch_size" (pytorch/vision references/classification/train.py); the U-Net's own paper
# trained one image per step ("we favor large input tiles over a large batch size and hence reduce
# the batch to a single image", Ronneberger et al. 2015, arXiv:1505.04597, Sec. 3).
CLASSIFICATION_REFERENCE_MICRO_BATCH = 32
UNET_REFERENCE_MICRO_BATCH = 1


def reference_micro_batch(model: VisionModel) -> int:
    """The images per GPU of the model's reference recipe (the constants above)."""
    return UNET_REFERENCE_MICRO_BATCH if model.kind == "unet" else CLASSIFICATION_REFERENCE_MICRO_BATCH


def vision_model(name: str, path: Path | None = None) -> VisionModel | None:
    """The library model a name stands for (its key, torchvision or timm name, `timm/` prefixed
    or not, or a Hub id of the same model), or None. Offline: only the bundled table is read."""
    return _by_name(path).get(_fold(name))


def vision_model_names(path: Path | None = None) -> list[str]:
    """Every name the library answers to, for a search box."""
    return sorted({name for model in load_vision_library(path) for name in model.names()})


# --- blocks, for activation checkpointing ----------------------------------------------------

DEFAULT_VISION_LAYERS_PATH = DATA_DIR / "vision_layers.json"
# Where each family's repeated blocks are, by module name: torchvision ResNet/ResNeXt `layerN.M`
# (torchvision/models/resnet.py), EfficientNet/ConvNeXt `features.N.M` and MobileNet `features.N`
# (efficientnet.py, convnext.py, mobilenetv2.py), RegNet `trunk_output.blockN.blockN-M` (regnet.py), timm
# ViT/DeiT `blocks.N` and Swin `layers.N.blocks.M` (timm vision_transformer.py, swin_transformer.py): the
# units timm's `set_grad_checkpointing` and torch.utils.checkpoint.checkpoint_sequential wrap. First match wins.
BLOCK_PATTERNS = (
    re.compile(r"layer\d+\.\d+"),
    re.compile(r"features\.\d+\.\d+(?=\.|$)"),
    re.compile(r"features\.\d+(?=\.)"),
    re.compile(r"trunk_output\.block\d+\.block\d+-\d+"),
    re.compile(r"blocks\.\d+"),
    re.compile(r"layers\.\d+\.blocks\.\d+"),
)


class CheckpointedBlock(BaseModel):
    """One block under activation checkpointing, per image at the reference resolution: the share of
    the whole step's saved bytes (fp32 trace, data/vision_layers.json) that the modules outside any
    block keep before it, and that the block itself keeps (what it recomputes in backward); the
    bytes of its input the checkpoint keeps (data/vision_checkpointing.json), fp32 and autocast."""

    name: str
    outside_before_share: float = Field(ge=0, le=1)
    share: float = Field(ge=0, le=1)
    input_bytes_fp32: float = Field(ge=0)
    input_bytes_amp: float = Field(ge=0)


class CheckpointShares(BaseModel):
    """Every block checkpointed: the share kept outside the blocks (the stem and the head) and each
    block in forward order; from a traced checkpointed step at the reference resolution, per
    precision (`fp32`, `amp`), the activations live at the backward's peak above those kept, per image
    (the block run again and the gradients flowing through it) and whatever the batch (the autocast
    copies of the block's weights made again), and the parameter gradients live then."""

    outside_share: float = Field(ge=0, le=1)
    blocks: list[CheckpointedBlock] = Field(min_length=1)
    backward_extra_bytes_per_image: dict[Literal["fp32", "amp"], float]
    backward_extra_fixed_bytes: dict[Literal["fp32", "amp"], float] = {"fp32": 0.0, "amp": 0.0}
    backward_gradient_bytes: dict[Literal["fp32", "amp"], float]
    source: str = Field(min_length=8)
    as_of: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


def block_of(module_name: str) -> str | None:
    """The checkpointable block a module belongs to (BLOCK_PATTERNS), or None for the stem and head."""
    for pattern in BLOCK_PATTERNS:
        match = pattern.match(module_name)
        if match:
            return match.group(0)
    return None


@lru_cache(maxsize=4)
def _layer_tables(path: Path | None = None) -> dict[str, list]:
    document = json.loads(Path(path or DEFAULT_VISION_LAYERS_PATH).read_text())
    return {row["key"]: row["layers"] for row in document["models"]}


DEFAULT_CHECKPOINTING_PATH = DATA_DIR / "vision_checkpointing.json"


@lru_cache(maxsize=4)
def _block_inputs(path: Path | None = None) -> dict[str, dict]:
    document = json.loads(Path(path or DEFAULT_CHECKPOINTING_PATH).read_text())
    return {row["key"]: row for row in document["models"]}


def _block_profile(layers: list) -> tuple[float, list[tuple[str, float, float]]]:
    """(share kept outside the blocks, [(block, outside share before it, its own share)]) of a layer
    table's saved bytes (rows: name, type, output shape, FLOPs, saved bytes), in table order."""
    saved_total = sum(row[4] for row in layers) or 1.0
    # a block holds modules of its own: a lone layer named like one (EfficientNet's stem conv `features.0.0`)
    # is not wrapped, so it stays with the stem and head (measure.vision.checkpointing.block_names)
    real = {block_of(row[0]) for row in layers if block_of(row[0]) not in (None, row[0])}
    outside, order, own = 0.0, {}, {}
    for name, _type, _shape, _flops, saved in layers:
        block = block_of(name)
        if block not in real:
            outside += saved
            continue
        order.setdefault(block, outside)
        own[block] = own.get(block, 0.0) + saved
    return outside / saved_total, [(block, order[block] / saved_total, own[block] / saved_total) for block in order]


@lru_cache(maxsize=64)
def checkpoint_shares(key: str) -> CheckpointShares | None:
    """What checkpointing every block of the model keeps and recomputes (CheckpointShares), or None
    where the model has no such blocks (the U-Net, whose skip connections cross every level)."""
    layers, measured = _layer_tables().get(key), _block_inputs().get(key)
    if not layers or measured is None:
        return None
    outside, profile = _block_profile(layers)
    if not profile:
        return None
    inputs = {name: (fp32, amp) for name, fp32, amp in measured["blocks"]}
    blocks = [
        CheckpointedBlock(
            name=name,
            outside_before_share=before,
            share=share,
            input_bytes_fp32=inputs.get(name, (0, 0))[0],
            input_bytes_amp=inputs.get(name, (0, 0))[1],
        )
        for name, before, share in profile
    ]

    def by_precision(values: dict) -> dict:
        return {"fp32": values["fp32"], "amp": values["amp-bf16"]}

    return CheckpointShares(
        outside_share=outside,
        blocks=blocks,
        backward_extra_bytes_per_image=by_precision(measured["backward_extra_bytes_per_image"]),
        backward_extra_fixed_bytes=by_precision(measured.get("backward_extra_fixed_bytes", {"fp32": 0, "amp-bf16": 0})),
        backward_gradient_bytes=by_precision(measured["backward_gradient_bytes"]),
        source=measured["source"],
        as_of=measured["as_of"],
    )
