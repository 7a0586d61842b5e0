"""Build data/vision_library.json by tracing every model of measure/vision/catalogue.py, or check
the engine against fresh traces.

    python bench/vision_library.py                 # regenerate the table (about 15 minutes on 2 cores)
    python bench/vision_library.py --only resnet18,unet2d --out /tmp/v.json
    python bench/vision_library.py --check         # engine vs trace, every model, 2 sizes x 2 precisions

Per model and variant (fp32 or bf16 autocast, channels-last or not) the trace runs a training
step of `BATCH` images (SGD with momentum; measure.vision.trace) at the reference resolution,
which gives the exact per-image values, and at one or two more resolutions, which give how each
value grows with the model's size unit (pixels for convolutional networks, Swin and the U-Net:
Swin's windows are of fixed size, so its attention grows with the number of windows, i.e. with
pixels; tokens for ViT, where attention could add a tokens-squared term). The extra resolutions
are multiples of the network's stride so that every feature map scales exactly (a reference crop
like EfficientNet-B1's 240 is not, and is traced on its own). Per-layer rows (output shape,
forward FLOPs, saved bytes per image in fp32) go to data/vision_layers.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calculators.units import GIB  # noqa: E402
from measure.vision.catalogue import BY_KEY, ENTRIES, VisionEntry  # noqa: E402

BATCH = 32  # images per traced step: per-image values are the step's divided by it
# The backward's transient is b x per image + what does not grow with the batch (the first
# parameter gradients); a second, smaller batch at the reference resolution separates the two.
SMALL_BATCH = 16
VARIANTS = {  # name: (precision, channels_last)
    "fp32": ("fp32", False),
    "fp32-channels-last": ("fp32", True),
    "amp-bf16": ("amp-bf16", False),
    "amp-bf16-channels-last": ("amp-bf16", True),
}
STRIDE = {"cnn": 32, "unet": 16, "swin": 224, "vit": 16}
LAYER_COLUMNS = ["name", "type", "output_shape", "forward_flops", "saved_bytes"]
LAYERS_ABOUT = (
    "Per module of each model at its reference resolution, fp32, one image: output shape without the batch, "
    "forward FLOPs, and the bytes it made that are still live at the end of forward (kept for backward). "
    "Modules with neither FLOPs nor saved bytes are left out."
)
MODULE_FILES = {
    "resnet": "resnet.py",
    "resnext": "resnet.py",
    "wide_resnet": "resnet.py",
    "efficientnet": "efficientnet.py",
    "mobilenet_v2": "mobilenetv2.py",
    "mobilenet_v3": "mobilenetv3.py",
    "regnet": "regnet.py",
    "convnext": "convnext.py",
    "vit": "vision_transformer.py",
    "deit": "vision_transformer.py",
    "swin": "swin_transformer.py",
}


def size_unit(entry: VisionEntry, image_size: int) -> int:
    """What a model's activations grow with: tokens for a ViT, pixels otherwise."""
    if entry.kind == "vit":
        return (image_size // entry.patch_size) ** 2 + entry.prefix_tokens
    return image_size * image_size


def fit_resolutions(entry: VisionEntry) -> list[int]:
    """Resolutions that fix the growth coefficients: two multiples of the stride (three for a ViT,
    whose quadratic term needs a third point)."""
    stride, ref = STRIDE[entry.kind], entry.reference_resolution
    first = max(stride, round(ref / stride) * stride)
    if entry.kind == "vit":
        return [first, first + 2 * stride, first + 4 * stride]
    return [first, first + (stride if entry.kind == "swin" else 2 * stride)]


def check_resolutions(entry: VisionEntry) -> list[int]:
    """Resolutions the --check mode compares at: the reference and one the table was not fitted at."""
    ref = entry.reference_resolution
    other = {"swin": 672, "unet": 384, "vit": ref + 96}.get(entry.kind, ref + 96)
    return [ref, other]


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(linear, quadratic) coefficients of the polynomial through 2 (quadratic 0) or 3 points."""
    if len(points) == 2:
        (u1, v1), (u2, v2) = points
        return (v2 - v1) / (u2 - u1), 0.0
    (u1, v1), (u2, v2), (u3, v3) = points
    slope12, slope23 = (v2 - v1) / (u2 - u1), (v3 - v2) / (u3 - u2)
    quadratic = (slope23 - slope12) / (u3 - u1)
    return slope12 - quadratic * (u1 + u2), quadratic


def backward_extra(trace) -> int:
    """Live bytes at the backward's peak above those at the end of forward."""
    return trace.phase_peaks["backward"] - trace.end_of_forward_bytes


def per_image(trace, backward_fixed: float) -> dict[str, float]:
    return {
        "saved_bytes_per_image": trace.saved_bytes / trace.micro_batch,
        "backward_extra_bytes_per_image": (backward_extra(trace) - backward_fixed) / trace.micro_batch,
        "forward_flops_per_image": trace.forward_flops / trace.micro_batch,
        "parameters": float(trace.parameters),
    }


def trace_variant(entry: VisionEntry, precision: str, channels_last: bool):
    """The reference trace and the growth coefficients of one variant."""
    from measure.vision.trace import trace_vision_step

    ref = trace_vision_step(entry, entry.reference_resolution, precision, channels_last, BATCH)
    small = trace_vision_step(entry, entry.reference_resolution, precision, channels_last, SMALL_BATCH)
    per_extra_image = (backward_extra(ref) - backward_extra(small)) / (BATCH - SMALL_BATCH)
    backward_fixed = backward_extra(ref) - BATCH * per_extra_image
    traces = {entry.reference_resolution: ref}
    for size in fit_resolutions(entry):
        if size not in traces:
            traces[size] = trace_vision_step(entry, size, precision, channels_last, BATCH)
    values = {size: per_image(trace, backward_fixed) for size, trace in traces.items()}
    growth = {}
    for name in values[entry.reference_resolution]:
        points = [(size_unit(entry, size), values[size][name]) for size in fit_resolutions(entry)]
        growth[name] = _fit(points)
    values[entry.reference_resolution]["backward_fixed_bytes"] = backward_fixed
    return ref, values[entry.reference_resolution], growth


def _variant_row(ref, values, growth) -> dict:
    return {
        "backward_extra_fixed_bytes": values["backward_fixed_bytes"],
        "saved_bytes_per_image": values["saved_bytes_per_image"],
        "saved_bytes_per_unit": growth["saved_bytes_per_image"][0],
        "saved_bytes_per_unit_squared": growth["saved_bytes_per_image"][1],
        "backward_extra_bytes_per_image": values["backward_extra_bytes_per_image"],
        "backward_extra_bytes_per_unit": growth["backward_extra_bytes_per_image"][0],
        "backward_extra_bytes_per_unit_squared": growth["backward_extra_bytes_per_image"][1],
        "autocast_copy_bytes": ref.autocast_copy_bytes,
    }


def source_of(entry: VisionEntry, versions: dict[str, str]) -> str:
    if entry.builder.startswith("unet:"):
        return "measure/vision/unet.py (Ronneberger et al. 2015, arXiv:1505.04597, padded, with BatchNorm)"
    library = entry.builder.split(":")[0]
    stem = next((file for prefix, file in MODULE_FILES.items() if entry.key.startswith(prefix)), "")
    return f"{library} {versions[library]} {library}/models/{stem}".strip()


def library_row(entry: VisionEntry, versions: dict[str, str], as_of: str) -> tuple[dict, dict]:
    variants, ref_fp32, growth_fp32 = {}, None, None
    for name, (precision, channels_last) in VARIANTS.items():
        ref, values, growth = trace_variant(entry, precision, channels_last)
        variants[name] = _variant_row(ref, values, growth)
        if name == "fp32":
            ref_fp32, growth_fp32 = ref, growth
    row = {
        "key": entry.key,
        "kind": entry.kind,
        "torchvision_name": entry.torchvision_name,
        "timm_name": entry.timm_name,
        "hub_ids": list(entry.hub_ids),
        "reference_resolution": entry.reference_resolution,
        "stride": STRIDE[entry.kind],
        "num_classes": entry.num_classes,
        "patch_size": entry.patch_size,
        "prefix_tokens": entry.prefix_tokens,
        "parameters": ref_fp32.parameters,
        "parameters_per_unit": growth_fp32["parameters"][0],
        "buffers": ref_fp32.buffers,
        "buffer_bytes": ref_fp32.buffer_bytes,
        "forward_flops_per_image": ref_fp32.forward_flops / BATCH,
        "forward_flops_per_unit": growth_fp32["forward_flops_per_image"][0],
        "forward_flops_per_unit_squared": growth_fp32["forward_flops_per_image"][1],
        "traced_micro_batch": BATCH,
        "variants": variants,
        "source": source_of(entry, versions),
        "as_of": as_of,
    }
    layers = [
        [
            layer.name,
            layer.type,
            layer.output_shape[1:],
            round(layer.forward_flops / BATCH),
            round(layer.saved_bytes / BATCH),
        ]  # noqa: E501
        for layer in ref_fp32.layers
        if layer.forward_flops or layer.saved_bytes
    ]
    return row, {"key": entry.key, "resolution": entry.reference_resolution, "layers": layers}


def check_aliases(entry: VisionEntry) -> list[str]:
    """The other library's name must build a model of exactly the same parameter count."""
    from measure.vision.models import build_vision_model

    problems = []
    count = sum(p.numel() for p in build_vision_model(entry, entry.reference_resolution).parameters())
    for library, name in (("torchvision", entry.torchvision_name), ("timm", entry.timm_name)):
        if name and not entry.builder.startswith(library):
            other = build_vision_model(entry, entry.reference_resolution, f"{library}:{name}")
            other_count = sum(p.numel() for p in other.parameters())
            if other_count != count:
                problems.append(f"{entry.key}: {library} {name} has {other_count} parameters, not {count}")
    return problems


def versions() -> dict[str, str]:
    from measure.vision.imports import timm_module, torchvision_module

    return {"torchvision": torchvision_module().__version__.split("+")[0], "timm": timm_module().__version__}


def build(keys: list[str], out: Path, resume: bool = False) -> None:
    """Trace every model and write the table after each (so a failure keeps what was traced);
    `resume` keeps the rows already in `out` and traces the others."""
    found = versions()
    as_of = dt.date.today().isoformat()
    stem = out.stem.replace("library", "layers") if "library" in out.stem else out.stem + "_layers"
    layers_out = out.with_name(stem + out.suffix)
    rows, layer_rows = _kept_rows(out, layers_out, keys) if resume else ({}, {})
    for key in keys:
        if key in rows:
            continue
        start = time.perf_counter()
        entry = BY_KEY[key]
        problems = check_aliases(entry)
        if problems:
            raise SystemExit("alias mismatch:\n" + "\n".join(problems))
        rows[key], layer_rows[key] = library_row(entry, found, as_of)
        fp32 = rows[key]["variants"]["fp32"]
        print(
            f"{key:32s} {rows[key]['parameters']:>12,d} params {rows[key]['forward_flops_per_image'] / 1e9:7.2f} GFLOP "
            f"{fp32['saved_bytes_per_image'] / 2**20:8.1f} MiB/img ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
        _write(
            out,
            layers_out,
            found,
            as_of,
            [rows[k] for k in keys if k in rows],
            [layer_rows[k] for k in keys if k in layer_rows],
        )
    print(f"wrote {out} and {layers_out}")


def _kept_rows(out: Path, layers_out: Path, keys: list[str]) -> tuple[dict, dict]:
    if not out.exists() or not layers_out.exists():
        return {}, {}
    rows = {row["key"]: row for row in json.loads(out.read_text())["models"] if row["key"] in keys}
    layers = {row["key"]: row for row in json.loads(layers_out.read_text())["models"] if row["key"] in rows}
    return {key: rows[key] for key in layers}, layers


def _write(out: Path, layers_out: Path, found: dict, as_of: str, rows: list, layer_rows: list) -> None:
    document = {
        "about": "Vision models traced under fake tensors (bench/vision_library.py, measure/vision/trace.py).",
        "torch": _torch_version(),
        **found,
        "models": rows,
    }
    out.write_text(json.dumps(document, indent=1) + "\n")
    layers = {"about": LAYERS_ABOUT, "columns": LAYER_COLUMNS, "as_of": as_of, "models": layer_rows}
    layers_out.write_text(json.dumps(layers, separators=(",", ":")) + "\n")


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


# --- check: the engine against fresh traces ---------------------------------------------------

CHECK_PRECISIONS = ("fp32", "amp-fp16")
CHECK_BATCH = 64


def check(keys: list[str], library_path: Path) -> list[dict]:
    """Engine vs trace at two resolutions x two precisions, CHECK_BATCH images, SGD momentum."""
    from calculators.memory.vision_training import VisionTrainingInput, estimate_vision_memory
    from calculators.models.vision_library import load_vision_library
    from measure.vision.trace import trace_vision_step

    library = {model.key: model for model in load_vision_library(library_path)}
    rows = []
    for key in keys:
        entry, model = BY_KEY[key], library[key]
        for size in check_resolutions(entry):
            for precision in CHECK_PRECISIONS:
                trace = trace_vision_step(entry, size, precision, False, CHECK_BATCH)
                estimate = estimate_vision_memory(
                    VisionTrainingInput(
                        model=model,
                        micro_batch=CHECK_BATCH,
                        image_size=size,
                        precision=precision,
                        optimizer="sgd",
                        cudnn_workspace_gib=0.0,
                    )
                )
                rows.append(_check_row(key, size, precision, trace, estimate))
                print(_format_check(rows[-1]), flush=True)
    return rows


def _check_row(key, size, precision, trace, estimate) -> dict:
    traced_saved = trace.saved_bytes / GIB
    traced_peak = trace.peak_bytes / GIB
    return {
        "model": key,
        "image_size": size,
        "precision": precision,
        "saved_trace_gib": traced_saved,
        "saved_engine_gib": estimate.activations_gib,
        "saved_error": estimate.activations_gib / traced_saved - 1,
        "peak_trace_gib": traced_peak,
        "peak_engine_gib": estimate.peak_gib,
        "peak_error": estimate.peak_gib / traced_peak - 1,
    }


def _format_check(row: dict) -> str:
    return (
        f"{row['model']:32s} {row['image_size']:4d} {row['precision']:9s} saved {row['saved_trace_gib']:8.3f} "
        f"vs {row['saved_engine_gib']:8.3f} GiB ({row['saved_error']:+.2%})  peak {row['peak_trace_gib']:8.3f} "
        f"vs {row['peak_engine_gib']:8.3f} GiB ({row['peak_error']:+.2%})"
    )


def summarize(rows: list[dict]) -> None:
    for what in ("saved_error", "peak_error"):
        errors = [abs(row[what]) for row in rows]
        worst = max(rows, key=lambda row: abs(row[what]))
        print(
            f"{what}: median {statistics.median(errors):.2%}, worst {abs(worst[what]):.2%} "
            f"({worst['model']} {worst['image_size']} {worst['precision']}), {len(rows)} configurations"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated library keys (default: all)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "data" / "vision_library.json", help="the table (or what --check reads)"
    )
    parser.add_argument("--check", action="store_true", help="compare the engine with fresh traces")
    parser.add_argument("--json", type=Path, help="--check: also write the rows here")
    parser.add_argument("--resume", action="store_true", help="keep the rows already in --out")
    args = parser.parse_args(argv)
    keys = args.only.split(",") if args.only else [entry.key for entry in ENTRIES]
    unknown = [key for key in keys if key not in BY_KEY]
    if unknown:
        raise SystemExit(f"not in the library: {', '.join(unknown)}")
    if args.check:
        rows = check(keys, args.out)
        summarize(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    else:
        build(keys, args.out, args.resume)


if __name__ == "__main__":
    main()
