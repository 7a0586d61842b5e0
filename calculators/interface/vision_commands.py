"""The command line for an image model of the vision library: `memory` and `fit` (and the settings
any other command reads for one, `vision_input_from_args`). The flags are the declared ones
(calculators.interface.settings): `--micro-batch` counts images, `--image-size` and `--channels-last`
are the image model's own; the training flags that mean nothing for an image model are refused by
name rather than ignored."""

from __future__ import annotations

import argparse
import json

from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.interface.vision_args import (
    VisionUsageError,
    image_precision,
    micro_batch_of,
    one_line_validation,
    vision_choice,
)
from calculators.memory.vision_fit import check_vision_fit, vision_fit_matrix, vision_suggestions
from calculators.memory.vision_training import (
    PART_LABEL,
    VISION_CHECKPOINTING,
    VISION_OPTIMIZERS,
    VisionInputError,
    VisionMemoryResult,
    VisionTrainingInput,
    estimate_vision_memory,
)
from calculators.models.vision_library import VisionModel


def _refuse_text_only(args: argparse.Namespace, model: VisionModel) -> None:
    """Training flags an image model has no use for, given away from their defaults, named."""
    if getattr(args, "mode", "train") != "train":
        raise VisionUsageError(f"{model.key} is an image model: only --mode train is modelled (no LoRA or serving)")
    for flag, default in (("tensor_parallel", 1), ("pipeline_parallel", 1)):
        if getattr(args, flag, default) not in (default, None):
            raise VisionUsageError(
                f"--{flag.replace('_', '-')}: {model.key} is an image model, which trains data parallel only here"
            )


def vision_input_from_args(args: argparse.Namespace, model: VisionModel) -> VisionTrainingInput:
    """The image model's training step from the declared flags; every problem is one line."""
    _refuse_text_only(args, model)
    with one_line_validation():
        return VisionTrainingInput(
            model=model,
            micro_batch=micro_batch_of(args, model),
            image_size=args.image_size,
            precision=image_precision(args, model),
            channels_last=args.channels_last,
            optimizer=vision_choice(args.optimizer, VISION_OPTIMIZERS, "--optimizer", model),
            checkpointing=vision_choice(args.checkpointing, VISION_CHECKPOINTING, "--checkpointing", model),
            gpus=args.gpus,
            zero=args.zero,
            cudnn_workspace_gib=args.cudnn_workspace_gib,
        )


def estimate_or_refuse(run: VisionTrainingInput) -> VisionMemoryResult:
    """The estimate, or one line naming the bound the workload breaks."""
    try:
        return estimate_vision_memory(run)
    except VisionInputError as error:
        raise VisionUsageError(str(error)) from None


def settings_json(run: VisionTrainingInput) -> dict:
    """The step's settings with their units in the keys."""
    return {
        "micro_batch_images": run.micro_batch,
        "image_size_px": run.resolution,
        "precision": run.precision,
        "channels_last": run.channels_last,
        "optimizer": run.optimizer,
        "checkpointing": run.checkpointing,
        "gpus": run.gpus,
        "zero": run.zero,
        "cudnn_workspace_gib": run.cudnn_workspace_gib,
    }


def vision_memory_result(run: VisionTrainingInput, capacity_gib: float | None) -> dict:
    """The memory command's answer for an image model (JSON keys carry their units)."""
    estimate = estimate_or_refuse(run)
    result = {
        "model": run.model.key,
        "kind": run.model.kind,
        "mode": "train",
        "settings": settings_json(run),
        "parameters": estimate.parameters,
        "peak_gib": estimate.peak_gib,
        "peak_phase": estimate.peak_phase,
        "device_peak_gib": estimate.device_peak_gib,
        "components_gib": {name: getattr(estimate, f"{name}_gib") for name in PART_LABEL},
        "phases_gib": estimate.phases_gib,
        "assumptions": estimate.assumptions,
    }
    if capacity_gib is not None:
        fit = check_vision_fit(run, capacity_gib)
        result["fit"] = {
            "gpu_memory_gib": capacity_gib,
            "verdict": fit.verdict,
            "headroom_gib": fit.headroom_gib,
            "max_micro_batch_images": fit.max_micro_batch,
            "min_gpus": fit.min_gpus,
        }
        result["suggestions"] = [s.model_dump() for s in vision_suggestions(run, capacity_gib)]
    return result


def format_vision_memory(result: dict) -> str:
    settings = result["settings"]
    lines = [
        f"{result['model']} at {settings['image_size_px']} px, micro-batch {settings['micro_batch_images']:,} "
        f"(images per GPU), "
        f"{settings['precision']}: peak {result['peak_gib']:.2f} GiB allocated at {result['peak_phase']}, "
        f"{result['device_peak_gib']:.2f} GiB on the device"
    ]
    for name, gib in result["components_gib"].items():
        if gib > 0:
            lines.append(f"  {PART_LABEL[name]:<40}{gib:>10.2f} GiB")
    lines.append(f"  {'parameters':<40}{result['parameters']:>14,}")
    if "fit" in result:
        fit = result["fit"]
        largest = fit["max_micro_batch_images"] or "none (one image does not fit)"
        fewest = fit["min_gpus"] or "none (more GPUs do not lower the peak at this setting)"
        lines.append(f"On {fit['gpu_memory_gib']:g} GiB: {fit['verdict']} (headroom {fit['headroom_gib']:.2f} GiB)")
        lines.append(f"  largest micro-batch that fits: {largest} images; fewest GPUs that fit: {fewest}")
        lines.append("What to change:")
        for suggestion in result["suggestions"]:
            mark = "fits" if suggestion["fits"] else "    "
            lines.append(f"  [{mark}] {suggestion['change']}: {suggestion['peak_gib']:.2f} GiB")
    return "\n".join(lines)


def vision_memory_output(args: argparse.Namespace, model: VisionModel, capacity_gib: float | None) -> str:
    result = vision_memory_result(vision_input_from_args(args, model), capacity_gib)
    return json.dumps(result, indent=2) if args.json else format_vision_memory(result)


def vision_fit_output(args: argparse.Namespace, model: VisionModel) -> str:
    """The image model on every GPU of the catalogue."""
    run = vision_input_from_args(args, model)
    estimate_or_refuse(run)
    rows = vision_fit_matrix(run, load_gpu_catalogue())
    answer = [
        {
            "gpu": row.gpu,
            "gpu_memory_gib": row.gpu_memory_gib,
            "fits": row.fits,
            "verdict": row.verdict,
            "peak_gib": row.peak_gib,
            "headroom_gib": row.headroom_gib,
            "max_micro_batch_images": row.max_micro_batch,
            "min_gpus": row.min_gpus,
        }
        for row in rows
    ]
    if args.json:
        return json.dumps(answer, indent=2)
    lines = [f"{model.key}: device peak {rows[0].peak_gib:.2f} GiB per GPU" if rows else model.key]
    for row in answer:
        lines.append(
            f"  {row['gpu']:<32}{row['verdict']:<14}headroom {row['headroom_gib']:>8.1f} GiB  "
            f"max micro-batch {row['max_micro_batch_images'] or '-'!s:>6} images  "
            f"fewest GPUs {row['min_gpus'] or '-'!s:>5}"
        )
    return "\n".join(lines)
