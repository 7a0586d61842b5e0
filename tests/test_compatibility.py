"""Tests for calculators.workload.compatibility: which software stacks cannot run a workload, and why."""

from __future__ import annotations

import pytest

from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue
from calculators.workload.compatibility import stack_problem


@pytest.mark.parametrize(
    ("gpu", "mode", "optimizer"),
    [
        ("H100-SXM5-80GB", "finetune-qlora", "paged-adamw-8bit"),  # bitsandbytes' home: CUDA
        ("RTX-4090-24GB", "train", "adamw-8bit"),
        ("MI300X-192GB", "finetune-qlora", "adamw-8bit"),  # ROCm, treated as supported
        ("Gaudi2-96GB", "finetune-qlora", "adamw"),  # NF4 on Gaudi since bitsandbytes 0.48.0
        ("TPU-v5p", "train", "adamw"),
        ("TPU-v5e", "finetune-lora", "adafactor"),
        ("Trainium2-96GB", "finetune-lora", "adamw"),
        ("Inferentia2-32GB", "inference", None),
        ("TPU-v5e", "inference", "adamw-8bit"),  # serving uses no optimizer
    ],
)
def test_workloads_the_stack_runs_have_no_problem(gpu, mode, optimizer):
    assert stack_problem(find_gpu(gpu), mode, optimizer) is None


@pytest.mark.parametrize(
    ("gpu", "mode", "optimizer", "problem"),
    [
        (
            "TPU-v5e",
            "finetune-qlora",
            "adamw",
            "TPU-v5e cannot run QLoRA: its 4-bit NF4 base needs bitsandbytes, which has no Google TPU (XLA) backend",
        ),
        (
            "Trainium2-96GB",
            "finetune-qlora",
            None,
            "Trainium2-96GB cannot run QLoRA: its 4-bit NF4 base needs bitsandbytes, "
            "which has no AWS Neuron (Trainium, Inferentia) backend",
        ),
        (
            "TPU-v6e",
            "finetune-lora",
            "adamw-8bit",
            "TPU-v6e cannot run the adamw-8bit optimizer: it comes from bitsandbytes, "
            "which has no optimizers for Google TPU (XLA)",
        ),
        (
            "Trainium1-32GB",
            "train",
            "paged-adamw-8bit",
            "Trainium1-32GB cannot run the paged-adamw-8bit optimizer: it comes from bitsandbytes, "
            "which has no optimizers for AWS Neuron (Trainium, Inferentia)",
        ),
        (
            "Gaudi3-128GB",
            "train",
            "adamw-8bit",
            "Gaudi3-128GB cannot run the adamw-8bit optimizer: it comes from bitsandbytes, "
            "which has no optimizers for Intel Gaudi",
        ),
        (
            "Inferentia2-32GB",
            "finetune-lora",
            "adamw",
            "Inferentia2-32GB is built for serving only: AWS documents training on Trainium, not on Inferentia",
        ),
    ],
)
def test_contradictions_are_named_in_words(gpu, mode, optimizer, problem):
    assert stack_problem(find_gpu(gpu), mode, optimizer) == problem


def test_an_inference_only_chip_refuses_every_training_mode():
    inferentia = find_gpu("Inferentia2-32GB")
    assert all(stack_problem(inferentia, mode) is not None for mode in ("train", "finetune-lora", "finetune-qlora"))


def test_an_inference_only_chip_of_another_vendor_gets_the_plain_reason():
    card = find_gpu("L4-24GB").model_copy(update={"name": "Serve-Card", "inference_only": True})
    assert stack_problem(card, "train", "adamw") == "Serve-Card is built for serving only"


def test_every_catalogue_gpu_can_serve():
    assert [gpu.name for gpu in load_gpu_catalogue() if stack_problem(gpu, "inference") is not None] == []


def test_qlora_is_refused_on_exactly_the_tpus_and_aws_chips_of_the_catalogue():
    refused = {gpu.vendor for gpu in load_gpu_catalogue() if stack_problem(gpu, "finetune-qlora", "adamw")}
    assert refused == {"Google", "AWS"}


def test_vendor_names_are_matched_without_case_and_intel_gpus_other_than_gaudi_pass():
    tpu = find_gpu("TPU-v5e").model_copy(update={"vendor": "google"})
    assert stack_problem(tpu, "finetune-qlora") is not None
    arc = find_gpu("Gaudi2-96GB").model_copy(update={"name": "Arc-B580-12GB"})
    assert stack_problem(arc, "train", "adamw-8bit") is None


def test_an_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="unknown mode 'pretrain'"):
        stack_problem(find_gpu("H100-SXM5-80GB"), "pretrain")
