"""Writes data/vision_checkpointing.json: per model of the vision library, the bytes of every block's
input per image at its reference resolution, in fp32 and under bf16 autocast (fp16 casts the same ops),
measured by one forward of the real torchvision/timm module under fake tensors
(measure.vision.checkpointing.block_input_bytes). With `--check`, compares the memory engine's
checkpointed estimate with a traced checkpointed step (every block under torch.utils.checkpoint).

    python bench/vision_checkpointing.py [--only KEYS]
    python bench/vision_checkpointing.py --check [--only KEYS]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calculators.units import GIB  # noqa: E402
from measure.vision.catalogue import BY_KEY, ENTRIES  # noqa: E402

OUT = ROOT / "data" / "vision_checkpointing.json"
CHECK_BATCH = 32  # not one of TRACE_BATCHES
# Micro-batches of the traced checkpointed steps. Two would separate what grows with the images from what
# does not, but the backward's peak moves between blocks as the batch grows (resnet101 under autocast: a
# fixed part of -122 MB from 8 and 16 images), so a straight line through two points extrapolates worse
# than a proportion from one: one batch, nothing fixed.
TRACE_BATCHES = (16,)
CHECK_SIZES = {"cnn": 288, "unet": 256, "swin": 448, "vit": 288}  # a size the table was not measured at


def measure(key: str) -> dict:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from calculators.models.vision_library import load_vision_library
    from measure.vision.checkpointing import block_input_bytes
    from measure.vision.models import build_vision_model, materialize

    entry = BY_KEY[key]
    row = next(model for model in load_vision_library() if model.key == key)
    size = row.reference_resolution
    measured = {}
    for variant, dtype in (("fp32", None), ("amp-bf16", torch.bfloat16)):
        model = build_vision_model(entry, size)
        with FakeTensorMode():
            model = materialize(model, False)
            measured[variant] = block_input_bytes(model, torch.randn(1, 3, size, size), dtype)
    backward = {variant: checkpointed_backward(entry, size, variant) for variant in ("fp32", "amp-bf16")}
    return {
        "key": key,
        "resolution": size,
        "traced_micro_batches": list(TRACE_BATCHES),
        "backward_extra_bytes_per_image": {variant: values[0] for variant, values in backward.items()},
        "backward_extra_fixed_bytes": {variant: values[1] for variant, values in backward.items()},
        "backward_gradient_bytes": {variant: values[2] for variant, values in backward.items()},
        "columns": ["block", "fp32_input_bytes", "amp_input_bytes"],
        "blocks": [[name, measured["fp32"][name], measured["amp-bf16"][name]] for name in measured["fp32"]],
        "source": row.source,
        "as_of": dt.date.today().isoformat(),
    }


def checkpointed_backward(entry, size: int, precision: str) -> tuple[float, float, int]:
    """Checkpointed steps traced at the reference resolution with two micro-batches: (activations live
    at the backward's peak above those kept at the end of forward, per image; what of them does not
    grow with the batch, such as the autocast copies of a block's weights made again; the parameter
    gradients live at the peak)."""
    from measure.vision.trace import trace_vision_step

    extras, gradients = [], 0
    for batch in TRACE_BATCHES:
        trace = trace_vision_step(entry, size, precision, False, batch, "sgd", checkpointing=True)
        at_peak = trace.phase_components["backward"]
        extras.append(at_peak.get("activations", 0) - trace.saved_bytes)
        gradients = at_peak.get("gradients", 0)
    if len(TRACE_BATCHES) == 1:
        return extras[0] / TRACE_BATCHES[0], 0.0, gradients
    (small, large), (b_small, b_large) = extras, TRACE_BATCHES
    per_image = (large - small) / (b_large - b_small)
    return per_image, large - b_large * per_image, gradients


ABOUT = (
    "Per model, every block under torch.utils.checkpoint, at the reference resolution, fp32 and bf16 autocast: "
    "per block in forward order the bytes of its input for one image that the checkpoint keeps and nothing "
    "else would (an input made by the block before), from one forward under fake tensors; and from checkpointed "
    "steps traced at two micro-batches (traced_micro_batches), the activations live at the backward's peak above "
    "those kept at the end of forward, per image and what does not grow with the images, and the parameter "
    "gradients live then (bench/vision_checkpointing.py)."
)


def build(keys: list[str], out: Path) -> None:
    """Measure each model and write `out` after each, so that a long run keeps what it has."""
    for key in keys:
        if BY_KEY[key].kind == "unet":
            continue  # no checkpointable blocks (calculators.models.vision_library.checkpoint_shares)
        row = measure(key)
        _write(row, out)
        print(row["key"], len(row["blocks"]), "blocks", flush=True)


def _write(row: dict, out: Path) -> None:
    kept = json.loads(out.read_text())["models"] if out.exists() else []  # the other models' rows stay
    merged = [other for other in kept if other["key"] != row["key"]] + [row]
    order = [entry.key for entry in ENTRIES]
    merged.sort(key=lambda other: order.index(other["key"]))
    out.write_text(json.dumps({"about": ABOUT, "models": merged}, indent=1) + "\n")


def check(keys: list[str]) -> None:
    from calculators.memory.vision_training import VisionTrainingInput, estimate_vision_memory
    from calculators.models.vision_library import checkpoint_shares, vision_model
    from measure.vision.trace import trace_vision_step

    errors = []
    for key in keys:
        entry = BY_KEY[key]
        if checkpoint_shares(key) is None:
            continue
        for size in (vision_model(key).reference_resolution, CHECK_SIZES[entry.kind]):
            for precision in ("fp32", "amp-fp16"):
                trace = trace_vision_step(entry, size, precision, False, CHECK_BATCH, "sgd", checkpointing=True)
                run = VisionTrainingInput(
                    model=vision_model(key), micro_batch=CHECK_BATCH, image_size=size, precision=precision,
                    checkpointing="full", cudnn_workspace_gib=0.0,
                )  # fmt: skip
                estimate = estimate_vision_memory(run)
                error = estimate.peak_gib / (trace.peak_bytes / GIB) - 1
                errors.append((abs(error), key, size, precision))
                print(f"{key:32s} {size:4d} {precision:9s} checkpointed peak: trace {trace.peak_bytes / GIB:8.3f} "
                      f"engine {estimate.peak_gib:8.3f} GiB ({error:+.2%})", flush=True)  # fmt: skip
    if errors:
        worst = max(errors)
        print(f"checkpointed peak: median |error| {statistics.median(e[0] for e in errors):.2%}, worst "
              f"{worst[0]:.2%} ({worst[1]} {worst[2]} {worst[3]}), {len(errors)} configurations; "
              f"{sum(e[0] <= 0.03 for e in errors)} within 3%")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated library keys (default: all)")
    parser.add_argument("--check", action="store_true", help="engine vs traced checkpointed steps")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (default data/vision_checkpointing.json)")
    args = parser.parse_args()
    keys = args.only.split(",") if args.only else [entry.key for entry in ENTRIES]
    check(keys) if args.check else build(keys, args.out)


if __name__ == "__main__":
    main()
