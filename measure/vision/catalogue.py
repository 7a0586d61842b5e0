"""Which models the vision library holds, how each is built, and the names it goes by.

No torch here: the bench script and the tests read this list before importing anything heavy.
Reference resolutions are the crop each model's published weights were evaluated at: torchvision's
weight tables (`torchvision/models/*.py`, `transforms=partial(ImageClassification, crop_size=...)`)
for its models, timm's `default_cfg['input_size']` for timm's, 512 for our U-Net (a multiple of its
stride 16; the paper's 572 is for its unpadded convolutions).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VisionEntry:
    """One model of the library: how to build it and its names."""

    key: str  # the library's own name (the torchvision name where there is one)
    kind: str  # cnn, vit, swin, unet
    builder: str  # "torchvision:<fn>", "timm:<name>" or "unet:unet2d"
    reference_resolution: int
    torchvision_name: str | None = None
    timm_name: str | None = None
    hub_ids: tuple[str, ...] = ()
    num_classes: int = 1000
    patch_size: int | None = None  # ViT: pixels per patch side
    prefix_tokens: int = 0  # ViT: class (and distillation) tokens


def _tv(key, resolution, timm_name=None, hub=(), kind="cnn", **extra) -> VisionEntry:
    return VisionEntry(key, kind, f"torchvision:{key}", resolution, key, timm_name, tuple(hub), **extra)


def _timm(key, kind, resolution, torchvision_name=None, hub=(), **extra) -> VisionEntry:
    return VisionEntry(key, kind, f"timm:{key}", resolution, torchvision_name, key, tuple(hub), **extra)


VIT_PATCH16 = {"patch_size": 16, "prefix_tokens": 1}  # 16-pixel patches and a class token
EFFICIENTNET_CROPS = {"b0": 224, "b1": 240, "b2": 288, "b3": 300, "b4": 380, "b5": 456, "b6": 528, "b7": 600}

ENTRIES: tuple[VisionEntry, ...] = (
    *(_tv(f"resnet{depth}", 224, f"resnet{depth}", [f"microsoft/resnet-{depth}"]) for depth in (18, 34, 50, 101, 152)),
    _tv("resnext50_32x4d", 224, "resnext50_32x4d"),
    _tv("resnext101_32x8d", 224, "resnext101_32x8d"),
    # timm's definitions match DLE ConvNets' resnext101-32x4d and se-resnext101-32x4d (ResNet v1.5
    # bottlenecks, 32 groups of width 4; SE with reduction 16 after the last BatchNorm, before the add)
    _timm("resnext101_32x4d", "cnn", 224),
    _timm("seresnext101_32x4d", "cnn", 224),
    _tv("wide_resnet50_2", 224, "wide_resnet50_2"),
    *(
        _tv(f"efficientnet_{b}", crop, f"efficientnet_{b}", [f"google/efficientnet-{b}"])
        for b, crop in EFFICIENTNET_CROPS.items()
    ),
    _tv("efficientnet_v2_s", 384),
    _tv("efficientnet_v2_m", 480),
    _tv("efficientnet_v2_l", 480),
    _tv("mobilenet_v2", 224, "mobilenetv2_100", ["google/mobilenet_v2_1.0_224"]),
    _tv("mobilenet_v3_large", 224),
    _tv("mobilenet_v3_small", 224),
    _tv("regnet_y_400mf", 224),
    _tv("regnet_y_16gf", 224),
    _tv("convnext_tiny", 224, "convnext_tiny", ["facebook/convnext-tiny-224"]),
    _tv("convnext_small", 224, "convnext_small", ["facebook/convnext-small-224"]),
    _tv("convnext_base", 224, "convnext_base", ["facebook/convnext-base-224"]),
    *(
        _timm(f"vit_{size}_patch16_224", "vit", 224, tv, [f"google/vit-{size}-patch16-224"], **VIT_PATCH16)
        for size, tv in (("base", "vit_b_16"), ("large", "vit_l_16"))
    ),
    *(
        _timm(
            f"deit_{size}_patch16_224",
            "vit",
            224,
            None,
            [f"facebook/deit-{size}-patch16-224"],
            **VIT_PATCH16,
        )
        for size in ("tiny", "small", "base")
    ),
    *(
        _timm(
            f"swin_{size}_patch4_window7_224",
            "swin",
            224,
            f"swin_{size[0]}",
            [f"microsoft/swin-{size}-patch4-window7-224"],
        )
        for size in ("tiny", "small", "base")
    ),
    VisionEntry("unet2d", "unet", "unet:unet2d", 512, num_classes=2),
)

BY_KEY = {entry.key: entry for entry in ENTRIES}
