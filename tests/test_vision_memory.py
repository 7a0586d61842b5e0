"""An image model of the vision library end to end: its names (offline), checkpointing, ZeRO
sharding, the device peak, the fit answers, and the `memory` / `fit` commands with their bad input.
Numbers are worked by hand from the parameter count and the stated overheads."""

from __future__ import annotations

import json

import pytest

from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.memory.vision_fit import (
    check_vision_fit,
    device_peak_gib,
    vision_batch_gains,
    vision_fit_matrix,
    vision_min_gpus,
    vision_suggestions,
)
from calculators.memory.vision_training import VisionInputError, VisionTrainingInput, estimate_vision_memory
from calculators.models.hf_config import ModelInputError, spec_from_parameter_count
from calculators.models.library import ModelNotFound
from calculators.models.names import resolve_any, search_any
from calculators.models.presets import load_presets
from calculators.models.vision_library import _block_profile, checkpoint_shares, vision_model
from calculators.units import GIB
from calculators.workload.build import workload_from_fields
from tests.cli_helpers import run_cli

RESNET50_PARAMETERS = 25_557_032  # torchvision resnet50, the table's exact count


def resnet50(**fields) -> VisionTrainingInput:
    return VisionTrainingInput(model=vision_model("resnet50"), **({"micro_batch": 32} | fields))


# --- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("resnet50", "resnet50"),
        ("ResNet-50", "resnet50"),
        ("vit_base_patch16_224", "vit_base_patch16_224"),
        ("timm/vit_base_patch16_224", "vit_base_patch16_224"),
        ("deit_base_patch16_224", "deit_base_patch16_224"),
        ("timm/swin_tiny_patch4_window7_224", "swin_tiny_patch4_window7_224"),
        ("microsoft/resnet-50", "resnet50"),
        ("google/vit-base-patch16-224", "vit_base_patch16_224"),
        ("facebook/convnext-tiny-224", "convnext_tiny"),
    ],
)
def test_torchvision_timm_and_hub_names_resolve_offline_to_the_vision_library(name, key):
    def no_hub(repo, revision):  # the Hub must not be asked
        raise AssertionError(f"asked the Hub for {repo}")

    assert resolve_any(name, no_hub).key == key


def test_a_transformer_name_still_resolves_to_its_spec():
    assert resolve_any("llama-3.1-8b").name == load_presets()["llama-3.1-8b"].name


def test_an_unknown_name_offers_the_closest_vision_names():
    with pytest.raises(ModelNotFound) as caught:
        resolve_any("resnet-99")
    assert caught.value.closest[0].startswith("resnet")


def test_the_model_search_finds_vision_models():
    assert "resnet50" in search_any("resnet") and "google/vit-base-patch16-224" in search_any("vit")


def test_a_cnn_sized_parameter_count_names_the_vision_library():
    with pytest.raises(ModelInputError, match="vision library"):
        spec_from_parameter_count(12e6)  # between two shapes, as the issue found


def test_lamb_is_refused_for_a_transformer_by_name():
    with pytest.raises(ValueError, match="LAMB is sized for the vision library"):
        workload_from_fields("train", load_presets()["llama-3.1-8b"], {"optimizer": "lamb"})


# --- sharding, device peak, checkpointing ---------------------------------------------------------


def test_zero_shards_states_gradients_and_weights_over_the_gpus():
    # AdamW: two fp32 moments = 8 bytes per parameter, over 8 GPUs at ZeRO-1
    sharded = estimate_vision_memory(resnet50(optimizer="adamw", zero=1, gpus=8))
    assert sharded.optimizer_states_gib == pytest.approx(8 * RESNET50_PARAMETERS / 8 / GIB)
    assert sharded.gradients_gib == pytest.approx(4 * RESNET50_PARAMETERS / GIB)  # ZeRO-1 keeps them whole
    zero3 = estimate_vision_memory(resnet50(optimizer="adamw", zero=3, gpus=8))
    assert zero3.gradients_gib == pytest.approx(4 * RESNET50_PARAMETERS / 8 / GIB)
    assert zero3.weights_gib == pytest.approx(4 * RESNET50_PARAMETERS / 8 / GIB)


def test_device_peak_adds_reserve_context_and_nccl():
    one = estimate_vision_memory(resnet50())
    assert one.device_peak_gib == pytest.approx(one.peak_gib * 1.10 + 0.5)  # 10% reserve, 0.5 GiB context
    many = estimate_vision_memory(resnet50(gpus=4))
    assert many.device_peak_gib == pytest.approx(many.peak_gib * 1.10 + 0.5 + 1.5)  # NCCL buffers


def test_block_profile_of_a_hand_made_layer_table():
    # stem 100 bytes saved, block layer1.0 50 + 30, block layer1.1 40, head 10: 230 in all
    layers = [
        ["conv1", "Conv2d", [1, 2, 2], 0, 100],
        ["layer1.0.conv1", "Conv2d", [1, 2, 2], 0, 50],
        ["layer1.0.bn1", "BatchNorm2d", [1, 1, 1], 0, 30],
        ["layer1.1.conv1", "Conv2d", [1, 1, 1], 0, 40],
        ["fc", "Linear", [10], 0, 10],
    ]
    outside, blocks = _block_profile(layers)
    assert outside == pytest.approx(110 / 230)
    assert blocks == [
        ("layer1.0", pytest.approx(100 / 230), pytest.approx(80 / 230)),
        ("layer1.1", pytest.approx(100 / 230), pytest.approx(40 / 230)),
    ]


def test_checkpointing_keeps_the_outside_and_the_block_inputs_and_adds_the_traced_backward():
    plain = estimate_vision_memory(resnet50(micro_batch=64))
    checkpointed = estimate_vision_memory(resnet50(micro_batch=64, checkpointing="full"))
    shares = checkpoint_shares("resnet50")
    kept = plain.activations_gib * GIB * shares.outside_share + 64 * sum(b.input_bytes_fp32 for b in shares.blocks)
    assert checkpointed.activations_gib == pytest.approx(kept / GIB)
    extra = 64 * shares.backward_extra_bytes_per_image["fp32"] + shares.backward_extra_fixed_bytes["fp32"]
    assert checkpointed.recompute_gib == pytest.approx(extra / GIB)
    assert checkpointed.backward_transient_gib == pytest.approx(shares.backward_gradient_bytes["fp32"] / GIB)
    assert checkpointed.peak_gib < plain.peak_gib
    # at 448 px a convolutional network's per-image figures grow with the pixels: four times
    bigger = estimate_vision_memory(resnet50(micro_batch=64, checkpointing="full", image_size=448))
    grown = 4 * 64 * shares.backward_extra_bytes_per_image["fp32"] + shares.backward_extra_fixed_bytes["fp32"]
    assert bigger.recompute_gib == pytest.approx(grown / GIB)


def test_the_unet_refuses_checkpointing_by_name():
    with pytest.raises(VisionInputError, match="no repeated blocks"):
        estimate_vision_memory(VisionTrainingInput(model=vision_model("unet2d"), micro_batch=1, checkpointing="full"))


# --- fit ------------------------------------------------------------------------------------------


def test_largest_micro_batch_fits_and_one_more_does_not():
    fit = check_vision_fit(resnet50(precision="amp-bf16"), 16.0)
    assert fit.verdict == "fits"
    assert device_peak_gib(resnet50(precision="amp-bf16"), micro_batch=fit.max_micro_batch) <= 16.0
    assert device_peak_gib(resnet50(precision="amp-bf16"), micro_batch=fit.max_micro_batch + 1) > 16.0


def test_fewest_gpus_needs_zero_and_is_the_smallest_count():
    big = VisionTrainingInput(model=vision_model("vit_large_patch16_224"), micro_batch=4, optimizer="adamw")
    capacity = device_peak_gib(big) - 1.0  # just under what one GPU needs
    assert vision_min_gpus(big, capacity) is None  # without ZeRO every GPU holds everything
    sharded = big.model_copy(update={"zero": 3})
    fewest = vision_min_gpus(sharded, capacity)
    assert fewest and fewest > 1
    assert device_peak_gib(sharded, gpus=fewest) <= capacity < device_peak_gib(sharded, gpus=fewest - 1)


def test_suggestions_put_those_that_fit_first():
    run = resnet50(micro_batch=512)
    found = vision_suggestions(run, 24.0)
    assert found and found[0].fits
    assert any("Checkpoint every block" in s.change for s in found)


def test_no_suggestion_raises_the_peak_of_a_small_model():
    # resnet50, 64 images, AMP: 4.24 GiB on one GPU. ZeRO over 8 GPUs shards 25.6M parameters'
    # gradients and states (at most 3 x 0.095 GiB) but adds the NCCL buffers (see the assumptions):
    # its peak rose to 5.55-5.65 GiB and was listed as a saving.
    run = resnet50(micro_batch=64, precision="amp-bf16")
    today = device_peak_gib(run)
    assert 4.0 < today < 4.5
    found = vision_suggestions(run, 80.0)
    assert found and all(s.peak_gib < today for s in found)
    assert not any("ZeRO" in s.change for s in found)


@pytest.mark.parametrize(
    ("key", "api"),
    [("resnet50", "torch.utils.checkpoint"), ("efficientnet_b0", "torch.utils.checkpoint"),
     ("vit_base_patch16_224", "timm set_grad_checkpointing"),
     ("swin_tiny_patch4_window7_224", "timm set_grad_checkpointing")],
)  # fmt: skip
def test_checkpointing_is_named_with_the_models_own_library(key, api):
    run = VisionTrainingInput(model=vision_model(key), micro_batch=32)
    change = next(s.change for s in vision_suggestions(run, 80.0) if s.change.startswith("Checkpoint"))
    assert api in change
    other = "timm" if api.startswith("torch") else "torch.utils"
    assert other not in change
    checkpointed = run.model_copy(update={"checkpointing": "full"})
    assert any(api in line for line in estimate_vision_memory(checkpointed).assumptions)


def test_a_setup_that_fits_is_offered_a_larger_batch_not_savings():
    run = resnet50(micro_batch=64, precision="amp-bf16")
    today_largest = check_vision_fit(run, 80.0).max_micro_batch
    gains = vision_batch_gains(run, 80.0)
    assert gains and all(gain.max_micro_batch > today_largest for gain in gains)
    assert not any("micro-batch" in gain.change for gain in gains)
    checkpoint = gains[0]
    assert checkpoint.change.startswith("Checkpoint")
    # the larger batch it names does fit, one more image does not
    bigger = run.model_copy(update={"checkpointing": "full"})
    assert device_peak_gib(bigger, micro_batch=checkpoint.max_micro_batch) <= 80.0
    assert device_peak_gib(bigger, micro_batch=checkpoint.max_micro_batch + 1) > 80.0


def test_fit_matrix_has_a_row_per_gpu():
    catalogue = list(load_gpu_catalogue())
    rows = vision_fit_matrix(resnet50(), catalogue)
    assert [row.gpu for row in rows] == [gpu.name for gpu in catalogue]


# --- the command line -----------------------------------------------------------------------------

ISSUE_FLAGS = ("--micro-batch", "256", "--image-size", "224", "--precision", "amp-fp16", "--channels-last")


def test_cli_memory_of_resnet50_json_has_units_in_its_keys(capsys):
    code, out, err = run_cli(
        capsys, "memory", "--model", "resnet50", "--gpu", "A100-SXM4-80GB", *ISSUE_FLAGS, "--optimizer", "sgd", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["model"] == "resnet50" and result["parameters"] == RESNET50_PARAMETERS
    assert result["settings"]["micro_batch_images"] == 256 and result["settings"]["image_size_px"] == 224
    assert result["settings"]["channels_last"] is True and result["settings"]["precision"] == "amp-fp16"
    assert result["components_gib"]["optimizer_states"] == pytest.approx(4 * RESNET50_PARAMETERS / GIB)
    assert result["fit"]["gpu_memory_gib"] == 80 and result["fit"]["verdict"] == "fits"
    assert result["fit"]["max_micro_batch_images"] > 256


def test_cli_fit_takes_a_hub_id(capsys):
    code, out, err = run_cli(capsys, "fit", "--model", "google/vit-base-patch16-224", "--micro-batch", "64", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert {"gpu", "verdict", "peak_gib", "max_micro_batch_images", "min_gpus"} <= set(rows[0])


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--model", "resnet50", "--micro-batch", "0"), "--micro-batch: must be greater than 0"),
        (("--model", "resnet50", "--micro-batch", "-3"), "--micro-batch"),
        (("--model", "resnet50", "--image-size", "100000"), "at most 4,096"),
        (("--model", "resnet50", "--image-size", "16"), "32 to 4096 pixels"),
        (("--model", "unet2d", "--image-size", "500"), "multiple of 16 pixels"),
        (("--model", "swin_tiny_patch4_window7_224", "--image-size", "300"), "multiple of 224 pixels"),
        (("--model", "resnet50", "--precision", "fp8"), "fp32, amp-bf16, amp-fp16"),
        (("--model", "resnet50", "--optimizer", "adafactor"), "sgd, adamw, lamb"),
        (("--model", "resnet50", "--checkpointing", "selective"), "none, full"),
        (("--model", "resnet50", "--tensor-parallel", "2"), "data parallel only"),
        (("--model", "resnet50", "--mode", "finetune-lora"), "only --mode train"),
        (("--model", "llama-3.1-8b", "--image-size", "224"), "image models of the vision library only"),
    ],
)
def test_cli_bad_vision_input_is_one_error_line(capsys, argv, words):
    code, out, err = run_cli(capsys, "memory", *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and words in err


def test_cli_time_of_a_vision_model_says_which_commands_size_it(capsys):
    code, _, err = run_cli(capsys, "trace", "--model", "resnet50")
    assert code == 2 and "image model of the vision library" in err


def test_every_checkpointable_model_has_measured_block_inputs_with_a_source():
    from calculators.models.vision_library import load_vision_library

    for model in load_vision_library():
        shares = checkpoint_shares(model.key)
        if model.kind == "unet":
            assert shares is None
            continue
        assert shares is not None and shares.source and shares.as_of, model.key
        # a block fed by the block before keeps its input; one fed by the stem or Swin's downsampling keeps none
        assert sum(block.input_bytes_fp32 > 0 for block in shares.blocks) >= len(shares.blocks) // 2, model.key
        # autocast keeps a block input in half or in fp32, never more than fp32
        assert all(block.input_bytes_amp <= block.input_bytes_fp32 for block in shares.blocks), model.key


def test_a_small_parameter_count_names_the_vision_library_beside_the_shape(capsys):
    code, _, err = run_cli(capsys, "memory", "--params", "25.6e6")
    assert code == 0 and "vision library" in err and "resnet50" in err
