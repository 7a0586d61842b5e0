"""The Cost page's controls: dataset size, throughput and spot assumptions, and the prices
(the catalogue, a negotiated discount, an uploaded price sheet)."""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st
from pydantic import ValidationError

from calculators.cost import adjusted_prices
from calculators.gpu_catalogue import GpuSpec
from calculators.model_input import describe_validation_error
from calculators.prices import CloudPrice, PriceCatalogueError, load_prices, parse_price_csv
from calculators.time_model import TimeSettings
from ui.remember import remember

UPLOAD_STATE_KEY = "user_prices"
UPLOAD_ERROR_KEY = "user_prices_error"


@dataclass
class CostInputs:
    time_settings: TimeSettings | None
    prices: list[CloudPrice]
    checkpoint_write_h: float
    restart_h: float
    fits_only: bool
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _dataset_controls(column) -> dict:
    unit = column.radio("Dataset size in", ("tokens", "samples"), key=remember("cost_dataset_unit", "tokens"))
    if unit == "tokens":
        billions = column.number_input(
            "Tokens per epoch (billions)", 1e-6, 1e6, step=1.0, format="%g", key=remember("cost_tokens_billion", 1.0)
        )
        size = {"dataset_tokens": billions * 1e9}
    else:
        samples = column.number_input(
            "Samples per epoch (sequences)", 1, 10**12, step=1000, key=remember("cost_samples", 100_000)
        )
        size = {"dataset_samples": int(samples)}
    epochs = column.number_input("Epochs", 0.01, 100_000.0, step=1.0, key=remember("cost_epochs", 1.0))
    return size | {"epochs": epochs}


def _throughput_controls(column) -> dict:
    mfu_pct = column.number_input(
        "Utilisation (% of dense peak; 0 = per-GPU default)",
        0.0,
        100.0,
        step=5.0,
        key=remember("cost_utilisation_pct", 0.0),
        help="Model FLOPs utilisation. Defaults: achievable matmul % (mamf-finder) x 0.6 for a whole step.",
    )
    network = column.number_input(
        "Network between nodes (Gb/s per GPU)", 1.0, 100_000.0, step=100.0, key=remember("cost_inter_node_gbps", 400.0)
    )
    overlap_pct = column.number_input(
        "Communication hidden under compute (%)", 0.0, 100.0, step=10.0, key=remember("cost_overlap_pct", 50.0)
    )
    return {
        "utilisation": mfu_pct / 100 if mfu_pct > 0 else None,
        "inter_node_gbps": network,
        "overlap_fraction": overlap_pct / 100,
    }


def _spot_controls(column) -> tuple[float, float, float | None]:
    write_min = column.number_input(
        "Checkpoint write (minutes)", 0.0, 1440.0, step=1.0, key=remember("cost_checkpoint_min", 3.0)
    )
    restart_min = column.number_input(
        "Restart after an interruption (minutes)", 0.0, 1440.0, step=5.0, key=remember("cost_restart_min", 15.0)
    )
    override = column.checkbox("Set the interruption rate myself", key=remember("cost_override_rate", False))
    rate = column.number_input(
        "Interruptions per instance-hour",
        0.0,
        100.0,
        step=0.1,
        key=remember("cost_interruptions_per_hour", 0.5),
        disabled=not override,
        help="From the price sheet otherwise: AWS Spot Advisor bands, or 0.5/h (median of public spot traces).",
    )
    return write_min / 60, restart_min / 60, rate if override else None


def _on_price_upload(catalogue: list[GpuSpec]) -> None:
    upload = st.session_state.get("price_upload")
    st.session_state[UPLOAD_ERROR_KEY] = None
    if upload is None:
        return
    try:
        st.session_state[UPLOAD_STATE_KEY] = parse_price_csv(upload.getvalue(), upload.name, catalogue)
    except PriceCatalogueError as error:
        st.session_state[UPLOAD_ERROR_KEY] = str(error)


def _price_controls(catalogue: list[GpuSpec]) -> tuple[list[CloudPrice], float, list[str]]:
    notes = []
    with st.expander("Prices: discount and your own price sheet"):
        discount_pct = st.number_input(
            "Negotiated discount on every price (%)", 0.0, 99.0, step=5.0, key=remember("cost_discount_pct", 0.0)
        )
        st.file_uploader(
            "Upload a price sheet (CSV with the columns of data/cloud_prices.csv)",
            type=["csv"],
            key="price_upload",
            on_change=_on_price_upload,
            args=(catalogue,),
        )
        if st.session_state.get(UPLOAD_ERROR_KEY):
            st.error(f"Price sheet not used: {st.session_state[UPLOAD_ERROR_KEY]}")
        uploaded = st.session_state.get(UPLOAD_STATE_KEY) or []
        only_mine = False
        if uploaded:
            only_mine = st.checkbox("Use only my price sheet", key=remember("cost_only_mine", False))
            notes.append(f"Your price sheet adds {len(uploaded)} rows.")
            if st.button("Forget my price sheet"):
                st.session_state[UPLOAD_STATE_KEY] = []
                st.rerun()
    prices = list(uploaded) if only_mine else list(load_prices()) + list(uploaded)
    return prices, discount_pct / 100, notes


def cost_inputs(catalogue: list[GpuSpec]) -> CostInputs:
    """Draw the controls and return what the cost calculators need."""
    left, middle, right = st.columns(3)
    dataset = _dataset_controls(left)
    throughput = _throughput_controls(middle)
    write_h, restart_h, rate = _spot_controls(right)
    fits_only = st.checkbox("Only GPUs the workload fits on", key=remember("cost_fits_only", True))
    prices, discount, notes = _price_controls(catalogue)
    errors = []
    try:
        time_settings = TimeSettings(**dataset, **throughput)
    except ValidationError as error:
        errors.append(f"Time settings: {describe_validation_error(error)}")
        time_settings = None
    return CostInputs(
        time_settings=time_settings,
        prices=adjusted_prices(prices, discount, rate),
        checkpoint_write_h=write_h,
        restart_h=restart_h,
        fits_only=fits_only,
        errors=errors,
        notes=notes,
    )
