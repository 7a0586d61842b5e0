"""The data loader's ceiling: how many training images per second the host's CPU cores can decode
and augment, against what the GPU would take.

A CPU worker (PyTorch DataLoader, torchvision transforms) decodes each JPEG and resizes a random
crop of it to the training size; both dominate the per-image CPU time ("decoding, even for
relatively small images like 480p, takes as much time as resize", NVIDIA/DALI issue #11). The
figures, one core each:

- decode: 68.4 megapixels/s, torchvision.io.decode_jpeg on the CPU (libjpeg-turbo), one thread,
  batch 1 (pytorch/vision pull request #2786, benchmark of a 300 x 300 JPEG: "for-loop cpu ...
  Throughput = 68.4 Megapixel / sec");
- resize of a typical ImageNet image, 600 x 400, to 224 x 224, bilinear, float32, one thread:
  1.0 ms (pytorch/pytorch pull request #86361, "In a typical torchvision ImageNet training job
  (where num_threads=1 because of DataLoader multi-processing)").

So one core prepares 1 / (240,000 px / 68.4e6 px/s + 1.0e-3 s) = 222 images/s; the flip,
ToTensor and normalisation are left out (small next to these two). The ceiling is that times the
host's physical cores per GPU (TimeSettings.host_cores_per_gpu; a vCPU is a hyperthread, half a
core). With DALI on the GPU (`fn.decoders.image(device="mixed")`, nvJPEG) decoding and
augmentation leave the CPU: no CPU ceiling, and the GPU time they take is not counted.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

DataLoader = Literal["cpu", "dali-gpu"]

DECODE_PIXELS_PER_S_PER_CORE = 68.4e6  # pytorch/vision PR #2786
TYPICAL_IMAGENET_PIXELS = 600 * 400  # pytorch/pytorch PR #86361's typical training image
RESIZE_S_PER_IMAGE = 1.0e-3  # pytorch/pytorch PR #86361, 600 x 400 -> 224 x 224, one thread
INPUT_BOUND_WARNING = "if GPU utilisation is under 70%, fix I/O first"


class InputCeiling(BaseModel):
    """What the data loader can feed one GPU, and whether it caps training."""

    loader: DataLoader
    images_per_s_per_core: float | None
    ceiling_images_per_s_per_gpu: float | None  # None: no CPU ceiling (DALI on the GPU)
    input_bound: bool
    warning: str | None


def images_per_s_per_core() -> float:
    """Images one CPU core decodes and resizes per second (module docstring): 222."""
    return 1.0 / (TYPICAL_IMAGENET_PIXELS / DECODE_PIXELS_PER_S_PER_CORE + RESIZE_S_PER_IMAGE)


def input_ceiling(gpu_images_per_s: float, host_cores_per_gpu: float, loader: DataLoader = "cpu") -> InputCeiling:
    """The loader's ceiling per GPU against the GPU's own rate; input-bound when the ceiling is lower."""
    if loader == "dali-gpu":
        return InputCeiling(
            loader=loader,
            images_per_s_per_core=None,
            ceiling_images_per_s_per_gpu=None,
            input_bound=False,
            warning=None,
        )
    per_core = images_per_s_per_core()
    ceiling = per_core * host_cores_per_gpu
    bound = ceiling < gpu_images_per_s
    return InputCeiling(
        loader=loader,
        images_per_s_per_core=per_core,
        ceiling_images_per_s_per_gpu=ceiling,
        input_bound=bound,
        warning=f"Input-bound: the CPU loader feeds {ceiling:,.0f} images/s per GPU; {INPUT_BOUND_WARNING}."
        if bound
        else None,
    )
