"""The vision step-time model against published image-model training throughputs, and its speed.

    python bench/vision_time.py [--rows]

Prints, per published model of data/vision_training.csv (calculators.validation.vision_throughput),
the counted rows, the median estimate / measured and the rows within +-20%; the same per DLE model
(ResNet-50, ResNeXt-101, SE-ResNeXt-101, EfficientNet: the +-20% targets); with --rows every
counted row; then how long one estimate takes (the first call reads the layer table; later calls
are the rerun cost). Speed is printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from calculators.hardware.catalogue import find_gpu  # noqa: E402
from calculators.models.vision_library import load_vision_library, vision_model  # noqa: E402
from calculators.timing.vision_step import VisionStepInput, estimate_vision_run  # noqa: E402
from calculators.validation.vision_throughput import summary_by_model, vision_throughput_table  # noqa: E402


def accuracy(show_rows: bool) -> None:
    table = vision_throughput_table()
    print(f"{'model':<40}{'rows':>5}{'median est/meas':>17}{'within 20%':>12}")
    for item in summary_by_model(table):
        print(f"{item.model:<40}{item.rows:>5}{item.median_ratio:>17.2f}{item.within_20_pct:>8} of {item.rows}")
    dle = [row for row in table if row.counted and "(timm)" not in row.model]
    for label, rows in (
        ("DLE, every counted row", dle),
        ("DLE ResNet-50", [row for row in dle if row.model == "ResNet-50 v1.5"]),
        ("DLE ResNeXt-101 32x4d", [row for row in dle if row.model == "ResNeXt-101 32x4d"]),
        ("DLE SE-ResNeXt-101 32x4d", [row for row in dle if row.model == "SE-ResNeXt-101 32x4d"]),
        ("DLE EfficientNet-B0/B4", [row for row in dle if row.model.startswith("EfficientNet")]),
        ("timm RTX 3090", [row for row in table if row.counted and "(timm)" in row.model]),
    ):
        ratios = [row.ratio for row in rows]
        within = sum(0.8 <= ratio <= 1.2 for ratio in ratios)
        print(f"{label}: {len(ratios)} rows, median {statistics.median(ratios):.2f}, within +-20%: {within}")
    skipped = [row for row in table if not row.counted]
    print(f"not counted: {len(skipped)} rows ({len({row.why_not for row in skipped})} reasons)")
    if show_rows:
        for row in table:
            if row.counted:
                print(f"  {row.id} {row.model:<36} {row.gpus:>2} x {row.gpu[:24]:<24} {row.precision[:18]:<18} "
                      f"b{row.micro_batch:<4} measured {row.measured_images_per_s_per_gpu:>7.0f} "
                      f"estimate {row.estimate_images_per_s_per_gpu:>7.0f} ({row.ratio:.2f})")  # fmt: skip


DEVICE_RUN = REPO_ROOT / "data" / "device_runs" / "2026-11-27-h200-vision-library.json"
DEVICE_GPU = "H200-SXM-141GB"


def device_runs() -> None:
    """This project's H200 measurements (batch 64, 224 px, 10 steps, cuDNN autotuning off) against the
    estimate: evidence only, nothing is fitted to them."""
    rows = json.loads(DEVICE_RUN.read_text())["vision_library"]
    gpu = find_gpu(DEVICE_GPU)
    print(f"\n{DEVICE_RUN.name} on {DEVICE_GPU}:")
    ratios = []
    for row in rows:
        model = vision_model(row["model"])
        if model is None:
            continue
        precision = "fp32" if row["autocast"] == "None" else "amp-bf16"
        optimizer = row["optimizer"] if row["optimizer"] in ("sgd", "adamw") else "sgd"
        step = VisionStepInput(model=model, micro_batch=row["batch"], image_size=row["image_size"], precision=precision,
                               channels_last=row["channels_last"], optimizer=optimizer)  # fmt: skip
        estimate = estimate_vision_run(step, gpu, loader="dali-gpu").samples_per_s_per_gpu
        ratios.append(estimate / row["images_per_s"])
        print(f"  {row['model']:<32}{precision:<10}measured {row['images_per_s']:>7.0f}  estimate {estimate:>7.0f}"
              f"  ({ratios[-1]:.2f})")  # fmt: skip
    print(f"  median estimate / measured {statistics.median(ratios):.2f} over {len(ratios)} runs")


def speed() -> None:
    gpu = find_gpu("A100-SXM4-80GB")
    run = VisionStepInput(model=vision_model("resnet50"), micro_batch=256, precision="amp-bf16", channels_last=True)
    start = time.perf_counter()
    estimate_vision_run(run, gpu)
    print(f"first estimate (reads data/vision_layers.json): {1e3 * (time.perf_counter() - start):.1f} ms")
    for model in (vision_model("resnet50"), vision_model("efficientnet_b7"), vision_model("vit_large_patch16_224")):
        step = run.model_copy(update={"model": model})
        estimate_vision_run(step, gpu)
        start = time.perf_counter()
        for _ in range(20):
            estimate_vision_run(step, gpu)
        print(f"{model.key}: {1e3 * (time.perf_counter() - start) / 20:.2f} ms per estimate")
    start = time.perf_counter()
    for model in load_vision_library():
        estimate_vision_run(run.model_copy(update={"model": model, "image_size": None}), gpu)
    print(f"all {len(load_vision_library())} library models once: {1e3 * (time.perf_counter() - start):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every counted row")
    args = parser.parse_args()
    accuracy(args.rows)
    device_runs()
    speed()


if __name__ == "__main__":
    main()
