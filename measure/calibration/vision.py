"""Train a real torchvision ResNet for a few steps: images/s per precision, for the CPU vs GPU vs
mixed precision comparison (calculators.cost.vision_comparison) and the estimate it is checked against
(calculators.timing.vision_measured).

On a GPU: ResNet-50, 128 images of 224 pixels, channels-last, in fp32 (TF32 convolutions, cuDNN's
default in PyTorch) and in mixed precision (bf16 autocast where the GPU has bf16, else fp16 with a
GradScaler); the configuration of this project's H200 runs (data/device_runs/2026-11-27-h200-measurements.json).
On a CPU: ResNet-18, 8 images of 112 pixels, in fp32 and in bf16 autocast, so that a step stays well
under a second on a small host and warm-up plus timed steps fit a budget of a few seconds.
SGD with momentum 0.9 and weight decay 1e-4, torchvision's classification reference recipe
(github.com/pytorch/vision references/classification/train.py @v0.28.0). Inputs are random tensors
already on the device: the data loader is left out, as in the estimate it is compared with.

torch is imported inside the functions: pages import nothing from here.
"""

from __future__ import annotations

import platform
import statistics
import time
from pathlib import Path
from typing import Any, NamedTuple

from calculators.hardware.catalogue import GpuSpec
from calculators.hardware.cpus import load_cpus
from calculators.timing.vision_measured import MeasuredVisionThroughput
from measure.calibration.benchmarks import _synchronize, _timed_steps_s, _torch_device, skipped
from measure.calibration.result import BenchmarkRecord

UNIT = "images/s"


class VisionConfig(NamedTuple):
    model: str
    micro_batch: int
    image_size: int
    channels_last: bool


GPU_CONFIG = VisionConfig("resnet50", 128, 224, True)
CPU_CONFIG = VisionConfig("resnet18", 8, 112, False)


def record_name(device_type: str, precision: str) -> str:
    """vision_cpu_fp32, vision_cpu_amp-bf16, vision_cuda_fp32, vision_cuda_amp-bf16 (or amp-fp16)."""
    return f"vision_{device_type}_{precision}"


def precisions_for(device: Any) -> tuple[str, str]:
    """fp32 and the device's mixed precision: bf16 autocast on a CPU and on a GPU with bf16, else fp16."""
    import torch

    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "fp32", "amp-fp16"
    return "fp32", "amp-bf16"


def host_cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (platform.processor() elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def catalogue_cpu(model_name: str) -> GpuSpec | None:
    """The catalogue CPU (data/cpus.csv) whose name's parts all appear in the host's model name
    ("Xeon-Platinum-8480+" in "Intel(R) Xeon(R) Platinum 8480+"), or None."""
    words = model_name.casefold().replace("(r)", " ").split()
    for cpu in load_cpus():
        if all(part in words for part in cpu.name.casefold().split("-")):
            return cpu
    return None


def _training_step(model: Any, device: Any, precision: str, config: VisionConfig) -> Any:
    """One SGD step on random images; autocast and a GradScaler as the precision asks."""
    import torch

    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    images = torch.randn(config.micro_batch, 3, config.image_size, config.image_size, device=device)
    images = images.to(memory_format=memory_format)
    labels = torch.randint(0, 1000, (config.micro_batch,), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    dtype = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "amp-fp16")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = loss_fn(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return step


# Steps before timing: on this project's 2-core CPU host the first two fp32 steps of ResNet-18 took
# 2 s each and the third 0.2 s (oneDNN builds its kernels on first use), so the third is the first
# that says how long a step takes; cuDNN picks its kernels and the caching allocator fills on the
# GPU's first steps.
WARMUP_STEPS = {"cpu": 3, "cuda": 3}
# The least budget worth starting one precision with: on that host importing torchvision took 2.9 s and
# the two slow warm-up steps 4 s, so below this no timed step would fit.
MIN_BENCHMARK_S = 4.0


def _warm_up_s(device: Any, step: Any, steps: int, deadline_s: float) -> float:
    """Run up to `steps` untimed steps, stopping at the deadline; seconds of the last one."""
    last_s = 0.0
    for _ in range(steps):
        started_s = time.perf_counter()
        step()
        _synchronize(device)
        last_s = time.perf_counter() - started_s
        if time.perf_counter() > deadline_s:
            break
    return last_s


def vision_benchmark(device: Any, precision: str, budget_s: float, config: VisionConfig | None = None,
                     device_name: str | None = None) -> BenchmarkRecord:  # fmt: skip
    """Images/s of `config` (default GPU_CONFIG on CUDA, CPU_CONFIG on the CPU) in `precision`, the
    median of the steps timed after warm-up. Skipped with the reason when the last warm-up step shows
    that no timed step fits what is left of `budget_s`."""
    import torch

    from measure.vision.imports import torchvision_module

    device = _torch_device(device)
    config = config or (GPU_CONFIG if device.type == "cuda" else CPU_CONFIG)
    name = record_name(device.type, precision)
    if budget_s < MIN_BENCHMARK_S:
        return skipped(
            name, UNIT, f"out of time: {budget_s:.1f} s left, it needs {MIN_BENCHMARK_S:.0f} s", model=config.model
        )
    started_s = time.perf_counter()
    model = torchvision_module().models.get_model(config.model, num_classes=1000)
    model = model.to(device, memory_format=torch.channels_last if config.channels_last else torch.contiguous_format)
    step = _training_step(model, device, precision, config)
    last_s = _warm_up_s(device, step, WARMUP_STEPS[device.type], started_s + budget_s)
    left_s = budget_s - (time.perf_counter() - started_s)
    if left_s < last_s:
        reason = f"out of time: a warm-up step took {last_s:.1f} s, {max(left_s, 0):.1f} s of the budget left"
        return skipped(name, UNIT, reason, model=config.model)
    times_s = _timed_steps_s(device, step, left_s, warmup=0)
    step_s = statistics.median(times_s)
    return BenchmarkRecord(
        name=name,
        value=config.micro_batch / step_s,
        unit=UNIT,
        duration_s=time.perf_counter() - started_s,
        details={
            "model": config.model,
            "device_name": device_name,
            "precision": precision,
            "micro_batch": config.micro_batch,
            "image_size": config.image_size,
            "channels_last": config.channels_last,
            "timed_steps": len(times_s),
            "step_s": step_s,
        },
    )


def vision_comparison(device: Any, budget_s: float, device_name: str | None = None) -> list[BenchmarkRecord]:
    """fp32 and mixed precision on `device`, the budget shared equally."""
    device = _torch_device(device)
    records, started_s = [], time.perf_counter()
    precisions = precisions_for(device)
    for index, precision in enumerate(precisions):
        share_s = (budget_s - (time.perf_counter() - started_s)) / (len(precisions) - index)
        records.append(vision_benchmark(device, precision, share_s, device_name=device_name))
    return records


def measured_throughputs(records: list[BenchmarkRecord]) -> list[MeasuredVisionThroughput]:
    """The vision records that measured something, as the result's `vision` entries."""
    measured = []
    for record in records:
        if record.unit != UNIT or not record.ok:
            continue
        details = record.details
        measured.append(
            MeasuredVisionThroughput(
                model=str(details["model"]),
                device=record.name.split("_")[1],
                device_name=details.get("device_name"),
                precision=str(details["precision"]),
                micro_batch=int(details["micro_batch"]),
                image_size=int(details["image_size"]),
                channels_last=bool(details["channels_last"]),
                images_per_s=float(record.value),
                timed_steps=int(details["timed_steps"]),
            )
        )
    return measured
