"""Measurements only a GPU host can give, for the figures the estimates assume:

- the host link: pinned and pageable copies host -> GPU and GPU -> host, one way and both
  ways at once (what CPU offload streams over each step);
- the CPU optimizer: AdamW over fp32 parameters on the host's cores (what optimizer
  offload runs on the CPU each step), with all cores and with one;
- the reference transformer's real peak memory and step time against estimate_memory(),
  at several sizes and precisions, with the GPU's energy from NVML;
- vision models from torchvision (ResNet-50, ViT-B/16): images/s, peak memory, power.

    python bench/gpu_measurements.py --out measurements.json [--quick]

Each part runs on its own: one that fails is recorded with its error and the others go on.
On a host without CUDA only the CPU optimizer part runs (--quick makes it small).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from measure.calibration.power import EnergyMeter, nvml_index  # noqa: E402

GIB = 1024**3


def _cuda_seconds(function, calls: int) -> float:
    """Mean seconds per call, timed with CUDA events after one warm-up call."""
    function()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        function()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000 / calls


def _copy_rates(size_mib: int, copy_stream: Any) -> dict[str, float]:
    """GB/s of one size's copies: pinned each way, pinned both ways at once, pageable host -> GPU."""
    elements = size_mib * 2**20 // 4
    size_bytes = elements * 4
    pinned = torch.ones(elements, pin_memory=True)
    pinned_back = torch.empty(elements, pin_memory=True)
    device = torch.empty(elements, device="cuda")
    device_out = torch.ones(elements, device="cuda")
    calls = max(3, 4096 // size_mib)

    def both_ways():
        with torch.cuda.stream(copy_stream):
            pinned_back.copy_(device_out, non_blocking=True)
        device.copy_(pinned, non_blocking=True)
        torch.cuda.current_stream().wait_stream(copy_stream)

    row = {
        "size_mib": size_mib,
        "pinned_h2d_gbps": size_bytes / _cuda_seconds(lambda: device.copy_(pinned, non_blocking=True), calls) / 1e9,
        "pinned_d2h_gbps": size_bytes
        / _cuda_seconds(lambda: pinned_back.copy_(device_out, non_blocking=True), calls)
        / 1e9,
        "pinned_both_ways_gbps": 2 * size_bytes / _cuda_seconds(both_ways, calls) / 1e9,
    }
    if size_mib == 256:
        pageable = torch.ones(elements)
        row["pageable_h2d_gbps"] = size_bytes / _cuda_seconds(lambda: device.copy_(pageable), 3) / 1e9
    return row


def host_link() -> dict[str, Any]:
    """GB/s (1e9 bytes) of host <-> GPU copies by size, pinned and pageable, one way and both."""
    copy_stream = torch.cuda.Stream()
    return {"copies": [_copy_rates(size_mib, copy_stream) for size_mib in (16, 64, 256, 1024)]}


def cpu_adamw(parameters_millions: int) -> dict[str, Any]:
    """Parameters updated per second by torch.optim.AdamW on the CPU, fp32, by implementation and threads."""
    tensors = 16
    per_tensor = parameters_millions * 1_000_000 // tensors
    params = [torch.nn.Parameter(torch.randn(per_tensor)) for _ in range(tensors)]
    for param in params:
        param.grad = torch.randn(per_tensor)
    total = per_tensor * tensors
    rows = []
    all_threads = torch.get_num_threads()
    for threads in (all_threads, 1):
        torch.set_num_threads(threads)
        for kind in ("foreach", "fused", "for-loop"):
            options = {"foreach": kind == "foreach", "fused": True if kind == "fused" else None}
            try:
                optimizer = torch.optim.AdamW(params, lr=1e-4, **options)
                optimizer.step()  # the first step allocates the moments
                steps = 3
                start_s = time.perf_counter()
                for _ in range(steps):
                    optimizer.step()
                seconds = (time.perf_counter() - start_s) / steps
                rows.append(
                    {"threads": threads, "implementation": kind, "seconds_per_step": seconds,
                     "parameters_per_s": total / seconds}
                )  # fmt: skip
                del optimizer
            except Exception as error:  # an implementation this torch lacks on the CPU
                rows.append({"threads": threads, "implementation": kind, "error": str(error)[:200]})
    torch.set_num_threads(all_threads)
    return {"parameters": total, "cpu": platform.processor() or platform.machine(), "threads_all": all_threads,
            "rows": rows}  # fmt: skip


def reference_models() -> list[dict[str, Any]]:
    """The calibration's training step at several sizes: real peak memory against the engine."""
    from calculators.hardware.catalogue import load_gpu_catalogue
    from measure.calibration import benchmarks

    name = torch.cuda.get_device_name()
    gpu = next((g for g in load_gpu_catalogue() if "H200" in name and g.name == "H200-SXM-141GB"), None)
    gpu = gpu or next((g for g in load_gpu_catalogue() if "H100" in name and g.name == "H100-SXM5-80GB"), None)
    configs = [
        # (layers, hidden, vocab, seq_len, micro_batch, heads, precision)
        (8, 2048, 32768, 2048, 4, 16, "amp-bf16"),
        (8, 2048, 32768, 2048, 4, 16, "fp32"),
        (16, 4096, 32768, 2048, 2, 32, "amp-bf16"),
        (24, 2048, 50304, 1024, 8, 16, "amp-bf16"),
        (8, 1024, 32768, 4096, 2, 8, "amp-fp16"),
    ]
    rows = []
    for layers, hidden, vocab, seq_len, micro_batch, heads, precision in configs:
        spec = benchmarks.reference_spec(layers, hidden, vocab, seq_len, heads)
        try:
            record = benchmarks.training_step_benchmark(
                "cuda", budget_s=10.0, precision=precision, gpu=gpu, config=(spec, micro_batch, seq_len)
            )
            rows.append({"layers": layers, "hidden": hidden, "vocab": vocab, "seq_len": seq_len,
                         "micro_batch": micro_batch, "heads": heads, "step_s": record.value,
                         "skipped": record.skipped_reason, "error": record.error} | record.details)  # fmt: skip
        except Exception as error:
            rows.append({"layers": layers, "hidden": hidden, "precision": precision, "error": repr(error)[:300]})
        torch.cuda.empty_cache()
    return rows


def _vision_step(model, optimizer, images, labels, dtype):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()


VISION_CASES = [
    ("resnet50", 128, torch.bfloat16, True, "sgd"),
    ("resnet50", 128, None, True, "sgd"),
    ("resnet50", 256, torch.bfloat16, True, "sgd"),
    ("resnet50", 128, torch.bfloat16, False, "sgd"),
    ("vit_b_16", 128, torch.bfloat16, False, "adamw"),
    ("resnet18", 256, torch.bfloat16, True, "sgd"),
]
# The vision library's models (issue: vision and convolutional training), batch 64 at 224 x 224,
# fp32 and bf16 autocast: real peaks and images/s for the engine to be checked against.
LIBRARY_MODELS = [
    ("resnet18", "sgd"), ("resnet34", "sgd"), ("resnet101", "sgd"), ("resnet152", "sgd"),
    ("resnext50_32x4d", "sgd"), ("wide_resnet50_2", "sgd"), ("efficientnet_b0", "sgd"), ("efficientnet_b4", "sgd"),
    ("mobilenet_v3_large", "sgd"), ("regnet_y_8gf", "sgd"), ("convnext_tiny", "adamw"), ("swin_t", "adamw"),
    ("vit_l_16", "adamw"), ("efficientnet_v2_s", "sgd"),
]  # fmt: skip
LIBRARY_CASES = [
    (name, 64, dtype, name not in ("swin_t", "vit_l_16"), optimizer)
    for name, optimizer in LIBRARY_MODELS
    for dtype in (None, torch.bfloat16)
]


def vision_models(cases: list | None = None, steps: int = 20) -> list[dict[str, Any]]:
    """torchvision models trained on random 224 x 224 images: images/s, peak memory and power."""
    import torchvision

    cases = VISION_CASES if cases is None else cases
    rows = []
    for name, batch, dtype, channels_last, optimizer_name in cases:
        row: dict[str, Any] = {
            "model": name, "batch": batch, "image_size": 224, "autocast": str(dtype), "channels_last": channels_last,
            "optimizer": optimizer_name, "torchvision": torchvision.__version__,
        }  # fmt: skip
        try:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            model = getattr(torchvision.models, name)().cuda()
            memory_format = torch.channels_last if channels_last else torch.contiguous_format
            model = model.to(memory_format=memory_format)
            if optimizer_name == "sgd":
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
            else:
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            images = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=memory_format)
            labels = torch.randint(1000, (batch,), device="cuda")
            for _ in range(3):
                _vision_step(model, optimizer, images, labels, dtype)
            torch.cuda.synchronize()
            meter = EnergyMeter(nvml_index(torch.device("cuda")))
            meter.start()
            start_s = time.perf_counter()
            for _ in range(steps):
                _vision_step(model, optimizer, images, labels, dtype)
            torch.cuda.synchronize()
            seconds = (time.perf_counter() - start_s) / steps
            meter.stop()
            row |= {
                "parameters": sum(p.numel() for p in model.parameters()),
                "step_s": seconds,
                "images_per_s": batch / seconds,
                "peak_allocated_gib": (torch.cuda.max_memory_allocated() - before) / GIB,
                "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
            } | meter.details(steps, batch, None)
            del model, optimizer, images, labels
        except Exception as error:
            row["error"] = repr(error)[:300]
        rows.append(row)
    return rows


def environment() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cuda": torch.version.cuda, "cpu_threads": torch.get_num_threads()}  # fmt: skip
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            info["driver"] = pynvml.nvmlSystemGetDriverVersion()
            info["power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000
            info["pcie_gen_max"] = pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)
            info["pcie_width_max"] = pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle)
            pynvml.nvmlShutdown()
        except Exception as error:
            info["nvml"] = repr(error)[:200]
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="a small CPU optimizer only (for a CPU host)")
    parser.add_argument("--parts", help="comma-separated parts to run (default: all but vision_library)")
    args = parser.parse_args()
    parts = {"cpu_adamw": lambda: cpu_adamw(16 if args.quick else 256)}
    if torch.cuda.is_available():
        parts = {"host_link": host_link} | parts | {"reference_models": reference_models, "vision": vision_models}
        parts["vision_library"] = lambda: vision_models(LIBRARY_CASES, steps=10)
    wanted = args.parts.split(",") if args.parts else [name for name in parts if name != "vision_library"]
    parts = {name: part for name, part in parts.items() if name in wanted}
    results: dict[str, Any] = {"environment": environment(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ")}
    for name, part in parts.items():
        started_s = time.perf_counter()
        try:
            results[name] = part()
        except Exception:
            results[name] = {"error": traceback.format_exc()[-1500:]}
        print(f"{name}: {time.perf_counter() - started_s:.1f} s", flush=True)
        args.out.write_text(json.dumps(results, indent=1, default=str))
    print(json.dumps(results, indent=1, default=str)[:6000])


if __name__ == "__main__":
    main()
