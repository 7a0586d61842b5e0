"""Published image-model training throughputs against the vision step-time model.

data/vision_training.csv (a copy of the shared validation table, its rows as published with their
sources): NVIDIA DeepLearningExamples' PyTorch ConvNets and EfficientNet tables (DGX A100 and
DGX-1, 1 to 64 GPUs, TF32/FP32 and AMP) and timm's RTX 3090 training benchmark. Each images/s row
of an image model is re-estimated with calculators.timing.vision_step at the row's GPU, GPU
count, precision, memory format and batch. DLE's rows name their loader: PyTorch's DataLoader with 10
worker processes per GPU on a DGX A100 and 8 on a DGX-1 (configs.yml), so the CPU loader's ceiling
(calculators.timing.data_loading) applies at that many cores per GPU, or at the node's physical
cores per GPU where fewer (loader_cores); timm's inputs are synthetic. DLE's ConvNets rows ran NGC
20.12 and 21.03 containers, whose PyTorch still ran half 5 x 5 depthwise convolutions in its own
kernels (row_cudnn_depthwise_5x5).

A row is counted unless it says why not: a model the library does not hold, a GPU the catalogue
does not hold, a text model, a time-to-train row (derived from the same throughput), or a table
flagged ambiguous (DLE EfficientNet's "V100 32GB" table, whose heading and body disagree on the
GPU; DLE EfficientNet's time to train, which states no unit). Nothing here is fitted to these rows.
"""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path

from pydantic import BaseModel

from calculators import DATA_DIR
from calculators.hardware.catalogue import find_gpu
from calculators.models.vision_library import vision_model
from calculators.timing.data_loading import input_ceiling
from calculators.timing.vision_step import VisionStepInput, estimate_vision_step

VISION_TRAINING_PATH = DATA_DIR / "vision_training.csv"
THROUGHPUT_METRICS = ("train_throughput_all_gpus", "train_samples_per_sec")
# The table's model names that are not a library name as written.
MODEL_KEYS = {"ResNet-50 v1.5": "resnet50", "EfficientNet-b0": "efficientnet_b0", "EfficientNet-b4": "efficientnet_b4",
              "ResNeXt-101 32x4d": "resnext101_32x4d", "SE-ResNeXt-101 32x4d": "seresnext101_32x4d"}  # fmt: skip
# Published hardware names -> catalogue names.
GPU_NAMES = {
    "NVIDIA A100-SXM4-80GB (DGX A100)": "A100-SXM4-80GB",
    "NVIDIA V100-SXM2-16GB (DGX-1)": "V100-SXM2-16GB",
    "NVIDIA V100-SXM2-32GB (DGX-1)": "V100-SXM2-32GB",
    "NVIDIA GeForce RTX 3090 24GB": "RTX-3090-24GB",
}
# torchvision's ResNet-50 is v1.5 (stride 2 in the 3 x 3 convolution, torchvision models/resnet.py).
# DLE's ResNeXt-101 32x4d is timm's resnext101_32x4d (bottleneck width 128, 32 groups, expansion 2 in
# DLE's image_classification/models/resnet.py); DLE's SE-ResNeXt squeezes every SE block to 16
# channels where timm's seresnext101_32x4d divides by 16: the same FLOPs within 0.1%, 4.8M of
# timm's 49.0M parameters in SE against about 0.6M in DLE's (optimizer and all-reduce bytes only).
# The library lacks these, so they are named with why.
MISSING_MODELS = {
    "nnU-Net 2D U-Net (DLE)": "nnU-Net's 2D U-Net is not the library's U-Net (measure/vision/unet.py)",
    "nnU-Net 3D U-Net (DLE)": "3D U-Nets are not in the library",
}


class VisionThroughputRow(BaseModel):
    """One published row, its estimate where the row can be estimated, or why not."""

    id: str
    model: str
    library_key: str | None
    gpu: str
    gpus: int
    precision: str
    channels_last: bool
    micro_batch: int
    image_size: int
    measured_images_per_s_per_gpu: float
    loader_cores_per_gpu: int | None  # DataLoader workers per GPU; None: synthetic inputs
    gpu_estimate_images_per_s_per_gpu: float | None  # the GPU alone
    estimate_images_per_s_per_gpu: float | None  # the loader's ceiling applied
    ratio: float | None  # estimate / measured
    counted: bool
    why_not: str | None
    source: str


def load_rows(path: Path = VISION_TRAINING_PATH) -> list[dict]:
    with Path(path).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def library_key(model: str) -> str | None:
    """The library model a published name stands for: the table's own names, or a timm name
    ('resnet50 (timm)') resolved by the library's names."""
    if model in MODEL_KEYS:
        return MODEL_KEYS[model]
    found = vision_model(model.removesuffix(" (timm)"))
    return found.key if found else None


def row_precision(text: str) -> str:
    """TF32 and FP32 rows train in fp32 (cuDNN runs fp32 convolutions in TF32 where the GPU can);
    AMP rows in fp16 autocast."""
    return "amp-fp16" if "AMP" in text else "fp32"


def row_channels_last(row: dict) -> bool:
    """DLE's AMP runs use NHWC ("AMP runs use memory_format=nhwc"); timm's notes name the format."""
    if "timm" in row["model"]:
        return "memory_format NHWC" in row["assumptions_and_notes"]
    return "AMP" in row["precision"]


# pytorch PR #58749, which hands NCHW half-precision 5 x 5 depthwise convolutions to cuDNN
# (calculators.timing.vision_step.VisionStepInput.cudnn_depthwise_5x5), was opened on 2021-05-21: an
# NGC PyTorch container released before that month (DLE's ConvNets rows name 20.12 and 21.03) runs
# them in PyTorch's own kernels.
FIRST_CONTAINER_WITH_CUDNN_DEPTHWISE_5X5 = (21, 5)


def row_cudnn_depthwise_5x5(row: dict) -> bool:
    """Whether the row's PyTorch build runs NCHW half 5 x 5 depthwise convolutions in cuDNN: not in an NGC
    container older than pytorch PR #58749; any other build (timm's PyTorch 1.12) does."""
    container = re.search(r"NGC.*?(\d\d)\.(\d\d)", row["framework_and_version"])
    if container is None:
        return True
    return (int(container.group(1)), int(container.group(2))) >= FIRST_CONTAINER_WITH_CUDNN_DEPTHWISE_5X5


# DataLoader worker processes per GPU in DLE's configs.yml, and the physical CPU cores of the node
# they share: a DGX A100 has two 64-core AMD EPYC 7742 (NVIDIA DGX A100 datasheet, "Dual AMD Rome
# 7742, 128 cores total"), a DGX-1 two 20-core Intel Xeon E5-2698 v4 (NVIDIA DGX-1 datasheet);
# 8 GPUs per node in both.
DLE_WORKERS_PER_GPU = {"A100": 10, "V100": 8}
DGX_NODE_CORES = {"A100": 128, "V100": 40}
DGX_GPUS_PER_NODE = 8


def loader_cores(row: dict) -> int | None:
    """Cores decoding for each GPU of the row, None for synthetic inputs: its DataLoader workers (one
    process each), at most the node's physical cores shared by the GPUs running on it (an 8-GPU
    DGX-1 runs 8 x 8 = 64 workers on 40 cores: 5 per GPU)."""
    if "synthetic" in row["data_loader"]:
        return None
    system = "A100" if "A100" in row["hardware"] else "V100"
    gpus_on_node = min(int(row["accelerator_count"]), DGX_GPUS_PER_NODE)
    return min(DLE_WORKERS_PER_GPU[system], DGX_NODE_CORES[system] // gpus_on_node)


def why_not_counted(row: dict) -> str | None:
    """Why a row is shown but not counted, or None."""
    if "UNSTATED" in row["unit"]:
        return "ambiguous table: DLE EfficientNet's time to train states no unit"
    if row["metric"] not in THROUGHPUT_METRICS:
        return "a time to train, derived from the same throughput"
    if "BERT" in row["model"]:
        return "a text model (the transformer throughput table validates those)"
    if row["model"] in MISSING_MODELS:
        return MISSING_MODELS[row["model"]]
    if "AMBIGUOUS" in row["assumptions_and_notes"].upper() or row["hardware"] not in GPU_NAMES:
        return "ambiguous table: its heading says V100 32GB, its body 16GB, and its scaling column contradicts itself"
    if library_key(row["model"]) is None:
        return "not in the vision library"
    return None


def estimate_row(row: dict) -> VisionThroughputRow:
    """The row with its estimate, or why it has none."""
    why = why_not_counted(row)
    gpus = int(row["accelerator_count"])
    measured = float(row["value"]) / (gpus if row["metric"] == "train_throughput_all_gpus" else 1)
    key = library_key(row["model"])
    size = int(re.match(r"(\d+)", row["image_or_seq_size"]).group(1)) if row["image_or_seq_size"][:1].isdigit() else 0
    fields = {
        "id": row["id"],
        "model": row["model"],
        "library_key": key,
        "gpu": row["hardware"],
        "gpus": gpus,
        "precision": row["precision"],
        "channels_last": row_channels_last(row),
        "micro_batch": int(row["batch_size_per_device"]) if row["batch_size_per_device"].isdigit() else 0,
        "image_size": size,
        "measured_images_per_s_per_gpu": measured,
        "loader_cores_per_gpu": loader_cores(row),
        "source": row["source"],
    }
    if why is not None:
        return VisionThroughputRow(
            **fields,
            gpu_estimate_images_per_s_per_gpu=None,
            estimate_images_per_s_per_gpu=None,
            ratio=None,
            counted=False,
            why_not=why,
        )
    step = VisionStepInput(
        model=vision_model(key),
        micro_batch=fields["micro_batch"],
        image_size=size,
        precision=row_precision(row["precision"]),
        channels_last=fields["channels_last"],
        optimizer="sgd",
        gpus=gpus,
        cudnn_depthwise_5x5=row_cudnn_depthwise_5x5(row),
    )
    gpu_alone = estimate_vision_step(step, find_gpu(GPU_NAMES[row["hardware"]])).samples_per_s_per_gpu
    estimate = gpu_alone
    if fields["loader_cores_per_gpu"]:
        ceiling = input_ceiling(gpu_alone, fields["loader_cores_per_gpu"]).ceiling_images_per_s_per_gpu
        estimate = min(gpu_alone, ceiling)
    return VisionThroughputRow(
        **fields,
        gpu_estimate_images_per_s_per_gpu=gpu_alone,
        estimate_images_per_s_per_gpu=estimate,
        ratio=estimate / measured,
        counted=True,
        why_not=None,
    )


def vision_throughput_table(path: Path = VISION_TRAINING_PATH) -> list[VisionThroughputRow]:
    """Every row of the table, estimated where it can be."""
    return [estimate_row(row) for row in load_rows(path)]


class ModelSummary(BaseModel):
    """Estimate / measured over one model's counted rows."""

    model: str
    rows: int
    median_ratio: float
    within_20_pct: int


def summary_by_model(table: list[VisionThroughputRow]) -> list[ModelSummary]:
    """Per published model: counted rows, the median estimate / measured and how many lie within
    +-20%."""
    models = sorted({row.model for row in table if row.counted})
    summaries = []
    for model in models:
        ratios = [row.ratio for row in table if row.counted and row.model == model]
        summaries.append(
            ModelSummary(
                model=model,
                rows=len(ratios),
                median_ratio=statistics.median(ratios),
                within_20_pct=sum(0.8 <= ratio <= 1.2 for ratio in ratios),
            )
        )
    return summaries
