"""`plan` for an image model of the vision library: hand-worked hours and cost on a one-row price
sheet, the deadline and budget answers, the ZeRO stage that fits, LAMB on the command line."""

import datetime as dt
import json

import pytest

from calculators.cost.prices import CloudPrice
from calculators.hardware.catalogue import find_gpu
from calculators.memory.vision_fit import device_peak_gib
from calculators.memory.vision_training import VisionTrainingInput
from calculators.models.vision_library import vision_model
from calculators.plan.vision import VisionPlanRequest, lowest_fitting_zero, plan_vision_run
from calculators.timing.vision_step import VisionStepInput
from tests.cli_helpers import run_cli

A100 = "A100-SXM4-80GB"
# An 8-GPU instance at 32 USD/h (4 USD per GPU-hour), no spot price: every plan is on demand.
ROW = CloudPrice(provider="Test", instance_type="eight", gpu=A100, gpu_count=8, region="here",
                 on_demand_usd_per_hour=32.0, source="a test row", as_of=dt.date(2026, 1, 1))  # fmt: skip
RESNET = VisionStepInput(model=vision_model("resnet50"), micro_batch=256, precision="amp-fp16", channels_last=True)


def _plan(max_gpus=8, **limits):
    request = VisionPlanRequest(dataset_samples=1_000_000, epochs=10, max_gpus=max_gpus, **limits)
    return plan_vision_run(RESNET, request, [find_gpu(A100)], [ROW])


def test_hours_and_usd_are_worked_by_hand():
    one = _plan(max_gpus=1).fastest
    # 10 epochs of 1,000,000 images at r images/s on one GPU: 1e7 / r / 3600 h
    assert one.hours == pytest.approx(1e7 / one.samples_per_s_per_gpu / 3600)
    # one GPU of an 8-GPU instance still bills the whole instance: 32 USD/h
    assert one.instances == 1 and one.usd_per_hour == 32.0
    assert one.usd == pytest.approx(32.0 * one.hours)
    assert one.usd_per_epoch == pytest.approx(one.usd / 10)
    assert one.global_batch_images == 256 and one.zero == 0 and one.pricing == "on-demand"


def test_eight_gpus_fill_the_instance_and_are_on_the_front():
    result = _plan()
    eight = result.fastest
    assert eight.gpus == 8 and eight.instances == 1
    assert eight.hours == pytest.approx(1e7 / (8 * eight.samples_per_s_per_gpu) / 3600)
    assert eight.global_batch_images == 8 * 256
    # counts 1, 2, 4, 8 all bill one 32 USD/h instance, so 8 GPUs are both fastest and cheapest
    assert result.plans == [eight] and result.cheapest == eight
    assert result.candidates == 4 and result.searched == 4


def test_an_unreachable_deadline_names_the_fastest_plan():
    result = _plan(deadline_hours=1e-4)
    assert result.best_under_deadline is None
    assert result.problems[0].startswith("no plan ends within 0.0001 h: the fastest, 8 x A100-SXM4-80GB")


def test_a_budget_below_the_cheapest_names_it():
    result = _plan(budget_usd=0.01)
    assert result.best_under_budget is None
    assert "no plan costs at most 0 USD: the cheapest, 8 x A100-SXM4-80GB (on-demand)" in result.problems[0]


def test_the_lowest_zero_stage_that_fits_is_kept():
    run = VisionTrainingInput(model=vision_model("vit_large_patch16_224"), micro_batch=1, optimizer="adamw")
    unsharded, states_sharded = device_peak_gib(run, gpus=8), device_peak_gib(run, gpus=8, zero=1)
    assert states_sharded < unsharded
    between = (unsharded + states_sharded) / 2
    assert lowest_fitting_zero(run, 8, between) == (1, states_sharded)
    assert lowest_fitting_zero(run, 8, unsharded) == (0, unsharded)
    # one GPU has nothing to shard over
    assert lowest_fitting_zero(run, 1, between) is None


def test_plan_cli_json(capsys):
    code, out, _ = run_cli(capsys, "plan", "--model", "resnet50", "--epochs", "90", "--micro-batch", "256",
                           "--precision", "amp-fp16", "--deadline-h", "24", "--budget-usd", "5000",
                           "--max-gpus", "16", "--providers", "AWS", "--json")  # fmt: skip
    result = json.loads(out)
    assert code == 0
    assert result["model"] == "resnet50" and result["epochs"] == 90 and result["dataset_samples"] == 1_281_167
    best = result["best_under_deadline"]
    assert best["hours"] <= 24 and best["usd"] <= 5000 and best["provider"] == "AWS"
    assert {"samples_per_s_per_gpu", "hours_per_epoch", "usd_per_epoch", "input_bound"} <= set(best)


def test_plan_cli_refuses_in_one_line(capsys):
    code, _, err = run_cli(capsys, "plan", "--model", "resnet50", "--providers", "Nowhere")
    assert code == 2 and err.startswith("error: unknown provider Nowhere") and err.count("\n") == 1


def test_lamb_trains_an_image_model_and_not_a_transformer(capsys):
    code, out, _ = run_cli(capsys, "time", "--model", "resnet50", "--gpu", A100, "--optimizer", "lamb", "--json")
    assert code == 0 and json.loads(out)["samples_per_s_per_gpu"] > 0
    code, _, err = run_cli(capsys, "memory", "--model", "llama-3.1-8b", "--optimizer", "lamb")
    assert code == 2 and "LAMB is sized for the vision library's image models only" in err
