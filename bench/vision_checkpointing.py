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
CHECK_BATCH = 32
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
    return {
        "key": key,
        "resolution": size,
        "columns": ["block", "fp32_input_bytes", "amp_input_bytes"],
        "blocks": [[name, measured["fp32"][name], measured["amp-bf16"][name]] for name in measured["fp32"]],
        "source": row.source,
        "as_of": dt.date.today().isoformat(),
    }


def build(keys: list[str]) -> None:
    rows = []
    for key in keys:
        if BY_KEY[key].kind == "unet":
            continue  # no checkpointable blocks (calculators.models.vision_library.checkpoint_shares)
        rows.append(measure(key))
        print(rows[-1]["key"], len(rows[-1]["blocks"]), "blocks", flush=True)
    about = (
        "Per model and block, in forward order: the bytes of the block's input for one image at the reference "
        "resolution that torch.utils.checkpoint keeps and nothing else would (an input made by the block before), "
        "fp32 and under bf16 autocast; one forward of the module under fake tensors (bench/vision_checkpointing.py)."
    )
    OUT.write_text(json.dumps({"about": about, "models": rows}, indent=1) + "\n")


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
    args = parser.parse_args()
    keys = args.only.split(",") if args.only else [entry.key for entry in ENTRIES]
    check(keys) if args.check else build(keys)


if __name__ == "__main__":
    main()
