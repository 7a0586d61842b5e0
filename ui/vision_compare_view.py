"""The Time and cost page's "CPU vs GPU vs mixed precision" section for the sidebar's image model
(a note in its place for a transformer, which the time model cannot run on a CPU)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.cost.prices import load_prices
from calculators.cost.vision_comparison import ComparisonRow, cpu_gpu_precision_table
from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.hardware.cpus import load_cpus
from calculators.memory.vision_training import VisionTrainingInput
from calculators.timing.vision_step import IMAGENET_1K_TRAIN_IMAGES
from ui.calibration_state import measured_vision_throughputs
from ui.charts import device_precision_figure
from ui.layout import EMPTY_CELL

DEFAULT_GPU = "A100-SXM4-80GB"  # when the sidebar's GPU is not a training GPU of the catalogue
# One naming for the table and the chart. A GPU's fp32 convolutions run on TF32 tensor cores
# (PyTorch's cuDNN default, torch.backends.cudnn.allow_tf32=True); the caption says so once.
PRECISION_WORDS = {"fp32": "fp32", "amp-bf16": "mixed bf16", "amp-fp16": "mixed fp16"}
NO_TRANSFORMER_CPU = (
    "CPU vs GPU vs mixed precision, per epoch, is drawn for the image models of the vision library "
    "(resnet50, vit_base_patch16_224, ...): the transformer time model has no CPU device (its GEMMs run "
    "on a measured GPU tensor-core curve), so it cannot time this model on a CPU."
)


def _usd(value: float | None) -> str:
    return "not priced" if value is None else f"${value:,.2f}"


def row_label(row: ComparisonRow) -> str:
    """The same words in the table and on the chart: "A100-SXM4-80GB mixed bf16"."""
    return f"{row.device} {PRECISION_WORDS[row.precision]}"


def no_transformer_comparison() -> None:
    """The section's place on Time and cost for a transformer: why it is not drawn."""
    st.subheader("CPU vs GPU vs mixed precision, per epoch")
    st.caption(NO_TRANSFORMER_CPU)


def cpu_gpu_precision_section(run: VisionTrainingInput, gpu_name: str) -> None:
    """One table and chart for the sidebar's image model, micro-batch and image size: a CPU and a
    GPU (the sidebar's by default), each in fp32 and in mixed precision, per epoch of ImageNet-1k."""
    st.subheader("CPU vs GPU vs mixed precision, per epoch")
    gpus = [gpu.name for gpu in load_gpu_catalogue() if not gpu.inference_only]
    cpus = [cpu.name for cpu in load_cpus()]
    cols = st.columns(2)
    default_gpu = gpus.index(gpu_name) if gpu_name in gpus else gpus.index(DEFAULT_GPU)
    gpu_name = cols[0].selectbox("GPU", gpus, index=default_gpu, key="vision_cmp_gpu")
    cpu_name = cols[1].selectbox("CPU (one socket)", cpus, key="vision_cmp_cpu")
    gpu = next(device for device in load_gpu_catalogue() if device.name == gpu_name)
    cpu = next(device for device in load_cpus() if device.name == cpu_name)
    measured = measured_vision_throughputs()
    rows = cpu_gpu_precision_table(
        run.model,
        cpu,
        gpu,
        run.micro_batch,
        load_prices(),
        image_size=run.image_size,
        measured=measured,
        optimizer=run.optimizer,
    )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "device": row.device,
                    "kind": row.kind,
                    "precision": PRECISION_WORDS[row.precision],
                    "images/s": round(row.samples_per_s),
                    "from": "calibration" if row.measured_from else "estimate",
                    "hours per epoch (h)": round(row.hours_per_epoch, 2),
                    "owned, cost per epoch (USD)": _usd(row.owned_usd_per_epoch),
                    "cloud on demand, cost per epoch (USD)": _usd(row.cloud_usd_per_epoch),
                }
                for row in rows
            ]
        ),
        hide_index=True,
        width="stretch",
        placeholder=EMPTY_CELL,
    )
    usd = [row.cloud_usd_per_epoch if row.cloud_usd_per_epoch is not None else row.owned_usd_per_epoch for row in rows]
    figure = device_precision_figure([row_label(row) for row in rows], [row.hours_per_epoch for row in rows], usd)
    st.plotly_chart(figure, width="stretch")
    st.caption(
        f"The sidebar's {run.model.key}, {run.micro_batch:,} images per device at {run.resolution} px; one epoch of "
        f"ImageNet-1k ({IMAGENET_1K_TRAIN_IMAGES:,} images) on one device, data loading on the GPU (DALI) left out. "
        "fp32 on a GPU runs its convolutions on TF32 tensor cores (PyTorch's default); mixed precision is autocast "
        "with channels-last. Owned: the purchase price over 3 years plus facility power at USD 0.13/kWh; cloud: the "
        "cheapest on-demand GPU-hour of the price sheet (no sheet row rents a bare CPU). The chart's markers show the "
        "cloud cost where there is one, else the owned cost. The CPU rows are the time model's estimate from the CPU's "
        "sourced peaks and measured GEMM and memory rates; against the one published CPU training run (MLPerf "
        "Training v3.1, ResNet-50 on 32 Xeon 8480+ sockets) it predicts 0.73 of the time: CPUs read optimistic."
    )
    for row in rows:
        if row.measured_from:
            st.caption(
                f"{row.device} {PRECISION_WORDS[row.precision]}: measured by the applied calibration "
                f"({row.measured_from}), scaled to {run.model.key} at {run.micro_batch:,} images by the ratio of the "
                "time model's estimates of the two (assumed: the model's relative speed holds where its absolute "
                "speed may not)."
            )
