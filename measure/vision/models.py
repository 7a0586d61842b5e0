"""Build a library model from its real module definition (torchvision, timm or our U-Net)."""

from __future__ import annotations

import contextlib

from measure.vision.catalogue import VisionEntry
from measure.vision.imports import timm_module, torchvision_module


def build_vision_model(entry: VisionEntry, image_size: int, builder: str | None = None):
    """The model of `entry` on the meta device (shapes only: `materialize` gives it fake
    storage), for `image_size` square images. Built outside FakeTensorMode because timm reads
    values at construction (`calculate_drop_path_rates` calls `.item()` on a CPU linspace).
    torchvision's RegNet computes its widths with tensors on the default device and reads them
    (`BlockParams.from_init_params`, `.tolist()`), which meta tensors cannot give: it is built on
    the CPU with real (randomly initialised) weights instead.

    timm's ViTs and Swins size their position embedding (and Swin its attention masks) for one
    image size, given here as `img_size`; convolutional networks take any size."""
    import torch

    with fake_safe_init():
        try:
            with torch.device("meta"):
                return _build(entry, image_size, builder)
        except NotImplementedError:  # torchvision's RegNet reads tensor values it makes on the default device
            return _build(entry, image_size, builder)


@contextlib.contextmanager
def fake_safe_init():
    """torch.nn.init.trunc_normal_ (torch 2.13) reads a tensor's value (`.item()`), which a fake
    tensor has not; the values do not matter to memory or FLOPs, so it draws a plain normal while
    a model is built (torchvision's ConvNeXt, Swin and ViT call it)."""
    import torch

    original = torch.nn.init.trunc_normal_

    def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
        with torch.no_grad():
            return tensor.normal_(mean, std, generator=generator)

    torch.nn.init.trunc_normal_ = trunc_normal_
    try:
        yield
    finally:
        torch.nn.init.trunc_normal_ = original


def _build(entry: VisionEntry, image_size: int, builder: str | None):
    library, name = (builder or entry.builder).split(":")
    if library == "torchvision":
        extra = {"image_size": image_size} if name.startswith("vit_") else {}
        return torchvision_module().models.get_model(name, num_classes=entry.num_classes, **extra)
    if library == "timm":
        extra = {"img_size": image_size} if entry.kind in ("vit", "swin") else {}
        return timm_module().create_model(name, pretrained=False, num_classes=entry.num_classes, **extra)
    from measure.vision.unet import UNet

    return UNet(num_classes=entry.num_classes)


def materialize(model, channels_last: bool = False):
    """Give a meta-device model storage on the CPU: fake storage when called under
    FakeTensorMode (values are not needed for memory or FLOPs). channels_last lays out 4-D
    parameters as `model.to(memory_format=torch.channels_last)` does (Module.to cannot swap
    fake parameters in place)."""
    import torch

    def empty(t):
        if channels_last and t.dim() == 4:
            return torch.empty(t.shape, dtype=t.dtype, device="cpu", memory_format=torch.channels_last)
        return torch.empty(t.shape, dtype=t.dtype, device="cpu")

    return model._apply(empty)
