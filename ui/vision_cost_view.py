"""Time and cost and Plan for an image model of the vision library in the sidebar: every priced
option's images/s, hours and cost per epoch and to the end (calculators.interface.vision_cli.priced_rows),
and the planner's front (calculators.plan.vision)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.interface.vision_cli import RunOptions, VisionCliError, VisionCostRow, priced_rows
from calculators.memory.vision_training import VisionTrainingInput
from calculators.plan.vision import VisionPlan, VisionPlanRequest, plan_vision_run
from calculators.timing.data_loading import INPUT_BOUND_WARNING
from calculators.timing.settings import DEFAULT_HOST_CORES_PER_GPU
from calculators.timing.vision_step import IMAGENET_1K_TRAIN_IMAGES, VisionStepInput
from calculators.validation.vision_error import error_band_words, vision_error_band
from calculators.validation.vision_throughput import vision_throughput_table
from ui.cost_inputs import kept_prices
from ui.layout import EMPTY_CELL
from ui.messages import in_words
from ui.vision_compare_view import cpu_gpu_precision_section

# torchvision's classification recipe trains 90 epochs by default
# (github.com/pytorch/vision references/classification/train.py, --epochs default=90).
DEFAULT_EPOCHS = 90.0
LOADER_WORDS = {"cpu": "CPU workers (PIL decode)", "dali-gpu": "NVIDIA DALI on the GPU"}


def step_of(run: VisionTrainingInput) -> VisionStepInput:
    """The sidebar's training step as the time model takes it (ZeRO and checkpointing size memory only)."""
    return VisionStepInput.of_training(run)


def run_controls() -> RunOptions:
    """Images per epoch, epochs and the data loader, kept under the same keys on both pages."""
    cols = st.columns(4)
    images = cols[0].number_input("Dataset (images per epoch)", min_value=1, max_value=10**12,
                                  value=IMAGENET_1K_TRAIN_IMAGES, step=1000, key="vision_dataset_images")  # fmt: skip
    epochs = cols[1].number_input("Epochs", min_value=0.001, max_value=100_000.0, value=DEFAULT_EPOCHS,
                                  step=1.0, key="vision_epochs")  # fmt: skip
    cores = cols[2].number_input("Host CPU cores per GPU (loader)", min_value=0.5, max_value=1024.0,
                                 value=DEFAULT_HOST_CORES_PER_GPU, step=1.0, key="vision_host_cores")  # fmt: skip
    loader = cols[3].selectbox("Data loader", list(LOADER_WORDS), format_func=LOADER_WORDS.get, key="vision_loader")
    return RunOptions(int(images), float(epochs), float(cores), loader)


def _ready_run(workload) -> VisionTrainingInput:
    """The sidebar's image run, or the sidebar's errors and a stop."""
    if workload.vision is None:
        reasons = " ".join(workload.errors)
        st.error(f"The workload in the sidebar has an error; fix it to see times and costs. {reasons}".strip())
        st.stop()
    return workload.vision


def _cost_frame(rows: list[VisionCostRow]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "GPU or CPU": row.gpu,
                "Provider": row.provider,
                "Cost per epoch (USD)": round(row.usd_per_epoch, 2),
                "Cost total (USD)": round(row.usd_total, 2),
                "Hours per epoch (h)": round(row.hours_per_epoch, 3),
                "Hours total (h)": round(row.hours_total, 2),
                "Images/s per GPU": round(row.samples_per_s_per_gpu),
                "Input-bound": "yes" if row.input_bound else "no",
                "Fits in memory": "yes" if row.fits else f"no ({row.peak_gib:,.1f} GiB)",
                "Instance": row.instance_type,
                "Instances": row.instances,
            }
            for row in rows
        ]
    )


def _input_bound_warning(rows: list[VisionCostRow]) -> None:
    bound = [row for row in rows if row.fits and row.input_bound]
    if bound:
        ceiling = bound[0].input_ceiling_images_per_s_per_gpu or 0.0
        st.warning(
            f"Input-bound on {len({row.gpu for row in bound})} device(s): the data loader feeds "
            f"{ceiling:,.0f} images/s per GPU, less than they train; {INPUT_BOUND_WARNING}.",
            icon=":material/report:",
        )


@st.cache_data(show_spinner=False)
def published_error_words(key: str) -> str | None:
    """The estimate's spread over published runs of the model, in words; computed once per model
    (the published table does not change while the app runs)."""
    band = vision_error_band(key, vision_throughput_table())
    return None if band is None else error_band_words(band)


def vision_cost_section(workload) -> None:
    """Time and cost for the sidebar's image model, then the CPU vs GPU vs mixed precision table."""
    run = _ready_run(workload)
    st.caption(
        f"{run.model.key} at {run.resolution} px, {run.micro_batch} images per GPU on {run.gpus} GPU(s) per "
        "option; rows that fit first, each cheapest per epoch first. On-demand prices; CPUs priced as owned."
    )
    error_words = published_error_words(run.model.key)
    if error_words:
        st.caption(error_words)
    options = run_controls()
    try:
        rows = priced_rows(step_of(run), options, kept_prices())
    except (VisionCliError, ValueError) as error:
        st.error(in_words(error))
        st.stop()
    _input_bound_warning(rows)
    st.dataframe(_cost_frame(rows), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    cpu_gpu_precision_section(run, workload.gpu_name)


def _plan_frame(plans: list[VisionPlan]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "GPUs": plan.gpus,
                "GPU": plan.gpu,
                "Provider": plan.provider,
                "Pricing": plan.pricing,
                "Hours total (h)": round(plan.hours, 2),
                "Cost total (USD)": round(plan.usd, 2),
                "Cost per epoch (USD)": round(plan.usd_per_epoch, 2),
                "Hours per epoch (h)": round(plan.hours_per_epoch, 3),
                "Images/s per GPU": round(plan.samples_per_s_per_gpu),
                "Input-bound": "yes" if plan.input_bound else "no",
                "Sharding": f"ZeRO-{plan.zero}",
                "Peak memory (GiB)": round(plan.peak_gib, 1),
                "Instance": plan.instance_type,
            }
            for plan in plans
        ]
    )


def _plan_line(label: str, plan: VisionPlan | None) -> str | None:
    if plan is None:
        return None
    return (
        f"**{label}:** {plan.gpus} x {plan.gpu} on {plan.provider} {plan.instance_type} ({plan.pricing}), "
        f"{plan.hours:,.2f} h, {plan.usd:,.2f} USD"
    )


def vision_plan_section(workload) -> None:
    """The planner's front for the sidebar's image model, with the deadline and budget answers."""
    run = _ready_run(workload)
    st.caption(
        f"{run.model.key} at {run.resolution} px, {run.micro_batch} images per GPU: every priced GPU, GPU count, "
        "ZeRO stage (0-2), provider and pricing is searched; only what fits in memory is kept."
    )
    options = run_controls()
    cols = st.columns(3)
    deadline = cols[0].number_input("Deadline (h, 0 = none)", min_value=0.0, value=0.0, step=1.0, key="vision_deadline")
    budget = cols[1].number_input("Budget (USD, 0 = none)", min_value=0.0, value=0.0, step=100.0, key="vision_budget")
    max_gpus = cols[2].number_input("Most GPUs", min_value=1, max_value=65_536, value=64, step=1, key="vision_max_gpus")
    try:
        request = VisionPlanRequest(
            dataset_samples=options.dataset_samples,
            epochs=options.epochs,
            deadline_hours=deadline or None,
            budget_usd=budget or None,
            max_gpus=int(max_gpus),
            host_cores_per_gpu=options.host_cores_per_gpu,
            loader=options.loader,
        )
        result = plan_vision_run(step_of(run), request, load_gpu_catalogue(), kept_prices())
    except ValueError as error:
        st.error(in_words(error))
        st.stop()
    for problem in result.problems:
        st.warning(problem, icon=":material/report:")
    answers = [_plan_line("Cheapest within the limits", result.best_under_deadline),
               _plan_line("Fastest within the limits", result.best_under_budget)]  # fmt: skip
    st.markdown("  \n".join(line for line in answers if line) or "No plan meets the limits.")
    if any(plan.input_bound for plan in result.plans):
        st.warning(f"Some plans are input-bound (marked): {INPUT_BOUND_WARNING}.", icon=":material/report:")
    st.dataframe(_plan_frame(result.plans), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    st.caption(" · ".join(result.assumptions))
