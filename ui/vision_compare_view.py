"""The Time and cost page's "CPU vs GPU vs mixed precision" section for an image model."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.cost.prices import load_prices
from calculators.cost.vision_comparison import cpu_gpu_precision_table
from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.hardware.cpus import load_cpus
from calculators.models.vision_library import load_vision_library, vision_model
from calculators.timing.vision_step import IMAGENET_1K_TRAIN_IMAGES
from ui.calibration_state import measured_vision_throughputs
from ui.charts import device_precision_figure

DEFAULT_MODEL = "resnet50"
DEFAULT_GPU = "A100-SXM4-80GB"
DEFAULT_MICRO_BATCH = 256  # DLE's ResNet-50 batch per A100 (configs.yml)
PRECISION_WORDS = {"fp32": "fp32 (TF32 convolutions on a GPU)", "amp-bf16": "mixed bf16", "amp-fp16": "mixed fp16"}


def _usd(value: float | None) -> str:
    return "not priced" if value is None else f"${value:,.2f}"


def cpu_gpu_precision_section() -> None:
    """One table and chart: a CPU and a GPU, each in fp32 and in mixed precision, per epoch of
    ImageNet-1k."""
    st.subheader("CPU vs GPU vs mixed precision, per epoch")
    models = [model.key for model in load_vision_library()]
    gpus = [gpu.name for gpu in load_gpu_catalogue() if not gpu.inference_only]
    cpus = [cpu.name for cpu in load_cpus()]
    cols = st.columns(4)
    model_key = cols[0].selectbox("Image model", models, index=models.index(DEFAULT_MODEL), key="vision_cmp_model")
    gpu_name = cols[1].selectbox("GPU", gpus, index=gpus.index(DEFAULT_GPU), key="vision_cmp_gpu")
    cpu_name = cols[2].selectbox("CPU (one socket)", cpus, key="vision_cmp_cpu")
    micro_batch = cols[3].number_input("Micro-batch (images)", min_value=1, max_value=4096,
                                       value=DEFAULT_MICRO_BATCH, step=1, key="vision_cmp_batch")  # fmt: skip
    gpu = next(device for device in load_gpu_catalogue() if device.name == gpu_name)
    cpu = next(device for device in load_cpus() if device.name == cpu_name)
    model, measured = vision_model(model_key), measured_vision_throughputs()
    rows = cpu_gpu_precision_table(model, cpu, gpu, int(micro_batch), load_prices(), measured=measured)
    labels = [f"{row.device} {row.precision}" for row in rows]
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
    )
    usd = [row.cloud_usd_per_epoch if row.cloud_usd_per_epoch is not None else row.owned_usd_per_epoch for row in rows]
    st.plotly_chart(device_precision_figure(labels, [row.hours_per_epoch for row in rows], usd), width="stretch")
    st.caption(
        f"One epoch of ImageNet-1k ({IMAGENET_1K_TRAIN_IMAGES:,} images) at the model's resolution on one device, "
        "data loading on the GPU (DALI) left out. Owned: the purchase price over 3 years plus facility power at "
        "USD 0.13/kWh; cloud: the cheapest on-demand GPU-hour of the price sheet (no sheet row rents a bare CPU). "
        "The chart's markers show the cloud cost where there is one, else the owned cost. The CPU rows are the time "
        "model's estimate from the CPU's sourced peaks and have not been checked against a measured CPU run."
    )
    for row in rows:
        if row.measured_from:
            st.caption(
                f"{row.device} {PRECISION_WORDS[row.precision]}: measured by the applied calibration "
                f"({row.measured_from}), scaled to {model_key} at {int(micro_batch)} images by the ratio of the "
                "time model's estimates of the two (assumed: the model's relative speed holds where its absolute "
                "speed may not)."
            )
