"""The vision library (data/vision_library.json), its names, and the vision training memory engine.

Three small models are traced again under fake tensors (measure/vision/trace.py) and must give the
table's rows, and the engine must stay within 3% of the trace at resolutions and micro-batches the
table was not traced at. The engine's parameter-only terms are checked against arithmetic by hand.
"""

from __future__ import annotations

import pytest

from calculators.memory.vision_training import (
    VisionInputError,
    VisionTrainingInput,
    check_image_size,
    estimate_vision_memory,
)
from calculators.models.vision_library import load_vision_library, vision_model, vision_model_names
from calculators.units import GIB

SMALL_MODELS = ("resnet18", "mobilenet_v3_small", "deit_tiny_patch16_224")


def library() -> dict:
    return {model.key: model for model in load_vision_library()}


# --- the table ----------------------------------------------------------------------------------


def test_library_holds_the_issue_models_with_a_source_and_date_each():
    models = library()
    assert len(models) >= 30
    for key in ("resnet50", "efficientnet_b7", "efficientnet_v2_l", "convnext_base", "vit_large_patch16_224"):
        assert key in models
    assert {model.kind for model in models.values()} == {"cnn", "vit", "swin", "unet"}
    for model in models.values():
        assert model.source and model.as_of
    # the library and its version, as the row names its source
    assert models["resnet50"].source == "torchvision 0.28.0 torchvision/models/resnet.py"


def test_parameter_counts_are_the_published_ones():
    models = library()
    # torchvision's weight tables publish num_params (torchvision/models/resnet.py ResNet50_Weights
    # IMAGENET1K_V1: 25557032; ResNet18: 11689512; mobilenetv3.py small: 2542856; efficientnet.py B0: 5288548;
    # convnext.py tiny: 28589128; vision_transformer.py vit_b_16: 86567656)
    assert models["resnet50"].parameters == 25_557_032
    assert models["resnet18"].parameters == 11_689_512
    assert models["mobilenet_v3_small"].parameters == 2_542_856
    assert models["efficientnet_b0"].parameters == 5_288_548
    assert models["convnext_tiny"].parameters == 28_589_128
    assert models["vit_base_patch16_224"].parameters == 86_567_656


def test_forward_flops_are_twice_torchvision_published_multiply_adds():
    # torchvision's tables give "GFLOPS" as multiply-adds (ResNet50_Weights _ops 4.089, ResNet18 1.814);
    # a multiply-add is 2 FLOPs, so 8.18 and 3.63 GFLOP per 224-pixel image
    models = library()
    assert models["resnet50"].forward_flops_per_image / 2 / 1e9 == pytest.approx(4.089, abs=0.001)
    assert models["resnet18"].forward_flops_per_image / 2 / 1e9 == pytest.approx(1.814, abs=0.001)


def test_resnet18_first_convolution_flops_by_hand():
    # conv1: 3 -> 64 channels, 7x7 kernel, stride 2: 64 x 112 x 112 outputs, each 3 x 49 multiply-adds:
    # 2 x 802,816 x 147 = 236,027,904 FLOPs per image; its output 64 x 112 x 112 fp32 = 3,211,264 bytes
    # is what BatchNorm keeps for backward
    import json

    from calculators import DATA_DIR

    layers = json.loads((DATA_DIR / "vision_layers.json").read_text())
    resnet18 = next(model for model in layers["models"] if model["key"] == "resnet18")
    conv1 = dict(zip(layers["columns"], resnet18["layers"][0], strict=True))
    assert conv1["name"] == "conv1" and conv1["output_shape"] == [64, 112, 112]
    assert conv1["forward_flops"] == 236_027_904
    assert conv1["saved_bytes"] == 3_211_264


def test_vit_activations_grow_with_tokens_not_their_square():
    # timm's ViT runs fused attention (scaled_dot_product_attention), which keeps per token its output
    # and log-sum-exp, not the tokens x tokens scores: the traced squared term is nil
    vit = library()["vit_base_patch16_224"]
    fp32 = vit.variants["fp32"]
    assert abs(fp32.saved_bytes_per_unit_squared) * 197**2 < 1e-3 * fp32.saved_bytes_per_image


# --- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("resnet50", "resnet50"),
        ("ResNet-50", "resnet50"),
        ("microsoft/resnet-50", "resnet50"),
        ("vit_base_patch16_224", "vit_base_patch16_224"),
        ("timm/vit_base_patch16_224", "vit_base_patch16_224"),
        ("vit_b_16", "vit_base_patch16_224"),
        ("google/vit-base-patch16-224", "vit_base_patch16_224"),
        ("facebook/convnext-tiny-224", "convnext_tiny"),
        ("timm/deit_base_patch16_224", "deit_base_patch16_224"),
        ("swin_tiny_patch4_window7_224", "swin_tiny_patch4_window7_224"),
    ],
)
def test_names_resolve_offline(name, key):
    assert vision_model(name).key == key


def test_unknown_name_is_none_and_names_are_listed():
    assert vision_model("meta-llama/Llama-3.1-8B") is None
    assert "microsoft/resnet-50" in vision_model_names()


# --- the engine by hand -------------------------------------------------------------------------


def test_resnet50_weights_gradients_and_sgd_momentum_by_hand():
    # fp32 weights, fp32 gradients and one fp32 momentum buffer: 3 x 4 x 25,557,032 = 306,684,384 bytes
    # = 0.28562 GiB (306,684,384 / 1,073,741,824)
    run = VisionTrainingInput(model=vision_model("resnet50"), micro_batch=256, precision="amp-fp16", optimizer="sgd")
    result = estimate_vision_memory(run)
    assert result.weights_gib + result.gradients_gib + result.optimizer_states_gib == pytest.approx(306_684_384 / GIB)
    assert result.weights_gib + result.gradients_gib + result.optimizer_states_gib == pytest.approx(0.28562, abs=1e-5)


def test_adamw_keeps_two_states():
    # AdamW: exp_avg and exp_avg_sq, 2 x 4 x 25,557,032 = 204,456,256 bytes = 0.19041 GiB
    run = VisionTrainingInput(model=vision_model("resnet50"), micro_batch=8, optimizer="adamw")
    assert estimate_vision_memory(run).optimizer_states_gib == pytest.approx(204_456_256 / GIB)


def test_activations_scale_with_images_and_pixels():
    # ResNet-50 at 448 pixels keeps per image 4x what it keeps at 224 (every feature map has 4x the
    # pixels; the table's per-pixel coefficient), less the few bytes that do not grow (the pooled
    # features and the logits): within 0.5% of 4x
    model = vision_model("resnet50")
    at_224 = estimate_vision_memory(VisionTrainingInput(model=model, micro_batch=32, image_size=224))
    at_448 = estimate_vision_memory(VisionTrainingInput(model=model, micro_batch=32, image_size=448))
    doubled = estimate_vision_memory(VisionTrainingInput(model=model, micro_batch=64, image_size=224))
    assert doubled.activations_gib == pytest.approx(2 * at_224.activations_gib)
    assert at_448.activations_gib == pytest.approx(4 * at_224.activations_gib, rel=0.005)


def test_bad_image_sizes_name_the_bound():
    unet, swin = vision_model("unet2d"), vision_model("swin_tiny_patch4_window7_224")
    with pytest.raises(VisionInputError, match="multiple of 16"):
        check_image_size(unet, 500)
    with pytest.raises(VisionInputError, match="multiple of 224"):
        check_image_size(swin, 300)
    with pytest.raises(VisionInputError, match="32 to 4096"):
        check_image_size(vision_model("resnet50"), 100_000)
    with pytest.raises(ValueError, match="4096"):  # the settings' own bound, before any estimate
        VisionTrainingInput(model=vision_model("resnet50"), micro_batch=8, image_size=100_000)


# --- against fresh traces -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace():
    pytest.importorskip("torch")
    from measure.vision.imports import timm_module

    try:
        timm_module()  # torchvision first, through its CPU import path (measure/vision/imports.py)
    except ImportError:
        pytest.skip("torchvision and timm are in requirements-dev.txt")
    from measure.vision.catalogue import BY_KEY
    from measure.vision.trace import trace_vision_step

    def run(key: str, *args):
        return trace_vision_step(BY_KEY[key], *args)

    return run


@pytest.mark.parametrize("key", SMALL_MODELS)
def test_retraced_row_matches_the_table(trace, key):
    model = library()[key]
    fresh = trace(key, model.reference_resolution, "fp32", False, model.traced_micro_batch)
    assert fresh.parameters == model.parameters
    assert fresh.buffers == model.buffers
    assert fresh.saved_bytes / fresh.micro_batch == model.variants["fp32"].saved_bytes_per_image
    assert fresh.forward_flops / fresh.micro_batch == model.forward_flops_per_image


@pytest.mark.parametrize("key", SMALL_MODELS)
@pytest.mark.parametrize("image_size", [224, 320])
@pytest.mark.parametrize("precision", ["fp32", "amp-fp16"])
def test_engine_within_3_percent_of_the_trace(trace, key, image_size, precision):
    # 320 pixels and 48 images were not traced for the table (fit at 224/288 or 224/256/288, 16 and 32 images),
    # and fp16 autocast reads the bf16 row
    traced = trace(key, image_size, precision, False, 48)
    run = VisionTrainingInput(
        model=library()[key], micro_batch=48, image_size=image_size, precision=precision, cudnn_workspace_gib=0
    )
    estimate = estimate_vision_memory(run)
    assert estimate.activations_gib == pytest.approx(traced.saved_bytes / GIB, rel=0.03)
    assert estimate.peak_gib == pytest.approx(traced.peak_bytes / GIB, rel=0.03)


def test_unet_parameters_by_hand():
    # measure/vision/unet.py, arXiv:1505.04597 Fig. 1 with padded, bias-free 3x3 convolutions and BatchNorm:
    # a DoubleConv(i, o) holds 9io + 9o^2 weights and 2 x 2o BatchNorm affine values:
    #   down 3->64: 38,848; 64->128: 221,696; 128->256: 885,760; 256->512: 3,540,992; 512->1024: 14,159,872
    #   (sum 18,847,168)
    # an Up(i, o) is a 2x2 transposed convolution, 4io + o (bias), then DoubleConv(2o, o) = 27o^2 + 4o:
    #   1024->512: 9,177,600; 512->256: 2,295,040; 256->128: 574,080; 128->64: 143,680 (sum 12,190,400)
    # the 1x1 head 64 -> 2 classes: 128 + 2 = 130.  Total 18,847,168 + 12,190,400 + 130 = 31,037,698
    assert library()["unet2d"].parameters == 31_037_698
