"""The Cost page's controls: dataset size, throughput and spot assumptions, and the prices
(the catalogue, a negotiated discount, an uploaded price sheet)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import streamlit as st
from pydantic import ValidationError

from calculators import DATA_DIR
from calculators.cost.energy import EnergySettings
from calculators.cost.options import OwnershipSettings, adjusted_prices
from calculators.cost.prices import CloudPrice, PriceCatalogueError, load_prices, parse_price_csv
from calculators.cost.spot import DEFAULT_INTERRUPTIONS_PER_HOUR
from calculators.hardware.catalogue import GpuSpec
from calculators.interface.settings import settings_of, values_for
from calculators.timing.settings import TimeSettings
from ui import state
from ui.messages import in_words

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
    energy: EnergySettings = field(default_factory=EnergySettings)


def dataset_controls(size_column, epochs_column=None, unit_column=None) -> dict:
    """The run's dataset (tokens or samples per epoch) and epochs: one set of kept values that the
    Plan and Time and cost pages both draw, so the run is the same on both."""
    unit = state.widget(
        (unit_column or size_column).radio,
        "cost_dataset_unit",
        "Dataset size in",
        ("tokens", "samples"),
        horizontal=unit_column is not None,
    )
    if unit == "tokens":
        size = {"dataset_tokens": state.number(size_column, "cost_tokens_billion", step=1.0)}
    else:
        size = {"dataset_samples": state.number(size_column, "cost_samples", step=1000)}
    return size | {"epochs": state.number(epochs_column or size_column, "cost_epochs", step=1.0)}


def kept_time_settings() -> tuple[TimeSettings | None, str | None]:
    """The run's time settings as the user set them (on whichever page), without drawing a widget:
    (settings, None), or (None, the problem in words)."""
    values = {item.key: state.value(item.key) for item in settings_of(TimeSettings)}
    fields = values_for(TimeSettings, values)
    dropped = "dataset_samples" if state.value("cost_dataset_unit") == "tokens" else "dataset_tokens"
    fields.pop(dropped, None)
    try:
        return TimeSettings(**fields), None
    except ValueError as error:
        return None, f"Time settings: {in_words(error)}"


def kept_pause_hours() -> tuple[float, float]:
    """(checkpoint write, restart after an interruption) in hours, as the user set them in minutes."""
    return state.value("cost_checkpoint_min") / 60, state.value("cost_restart_min") / 60


def kept_prices() -> list[CloudPrice]:
    """The prices the Time and cost page uses: the catalogue and the user's sheet (or only theirs),
    with the discount and the interruption rate the user set."""
    uploaded = st.session_state.get(UPLOAD_STATE_KEY) or []
    only_mine = bool(uploaded) and state.value("cost_only_mine")
    prices = list(uploaded) if only_mine else list(load_prices()) + list(uploaded)
    rate = state.value("cost_interruptions_per_hour") if state.value("cost_override_rate") else None
    return adjusted_prices(prices, state.value("cost_discount_pct") / 100, rate)


def kept_ownership() -> tuple[OwnershipSettings | None, str | None]:
    """Owning the GPUs as the user set it under Buy instead of rent, or the problem in words."""
    fields = {item.name: state.value(item.key) for item in settings_of(OwnershipSettings)}
    try:
        return OwnershipSettings(**fields), None
    except ValueError as error:
        return None, f"Buy vs rent: {in_words(error)}"


def _throughput_controls(column) -> dict:
    return {
        "utilisation": state.number(
            column,
            "cost_utilisation_pct",
            step=5.0,
            help="A measured MFU for every GPU. 0 = the step built from its operations (each GEMM's roofline, "
            "FlashAttention, bandwidth-bound ops, traffic per parallel dimension).",
        ),
        "inter_node_gbps": state.number(column, "cost_inter_node_gbps", step=100.0),
        "overlap_fraction": state.number(column, "cost_overlap_pct", step=10.0),
    }


def run_section_title() -> str:
    """The throughput and interruption settings in one line, as kept: 'Throughput and interruptions:
    each GPU's own utilisation, 400 Gb/s between nodes, 100% of data-parallel traffic hidden;
    checkpoint write 3 min, restart 15 min, the price sheet's interruption rate'."""
    utilisation = state.value("cost_utilisation_pct")
    used = f"{utilisation:.0%} of dense peak" if utilisation else "each GPU's own utilisation"
    hidden = f"{state.value('cost_overlap_pct'):.0%} of data-parallel traffic hidden"
    network = f"{state.value('cost_inter_node_gbps'):g} Gb/s between nodes"
    rate = "the price sheet's interruption rate"
    if state.value("cost_override_rate"):
        rate = f"{state.value('cost_interruptions_per_hour'):g} interruptions per instance-hour"
    write_min, restart_min = state.value("cost_checkpoint_min"), state.value("cost_restart_min")
    pauses = f"checkpoint write {write_min:g} min, restart {restart_min:g} min"
    return f"Throughput and interruptions: {used}, {network}, {hidden}; {pauses}, {rate}"


def _step_controls() -> dict:
    """Placement, per-dimension overlap, pipeline schedule and compiler of the step."""
    with state.section(st, "Step: placement, overlap, schedule, compiler", key="cost_step_section"):
        left, middle, right = state.columns(st, 3)
        return {
            "gpus_per_node": state.number(left, "cost_gpus_per_node", step=1),
            "virtual_stages": state.number(left, "cost_virtual_stages", step=1),
            "expert_parallel": state.number(left, "cost_expert_parallel", step=1),
            "context_parallel": state.number(left, "cost_context_parallel", step=1),
            "matmul_fraction": state.number(middle, "cost_matmul_fraction", step=0.05),
            "tp_overlap_fraction": state.number(middle, "cost_tp_overlap_pct", step=10.0),
            "pp_overlap_fraction": state.number(middle, "cost_pp_overlap_pct", step=10.0),
            "compile": state.checkbox(right, "cost_compile"),
            "kernels": state.choice(right, "cost_kernels"),
            "loss_kernel": state.choice(right, "cost_loss_kernel"),
            "attention_kernel": state.choice(right, "cost_attention_kernel"),
            "fp32_uses_tf32": state.checkbox(right, "cost_tf32"),
        }


def _spot_controls(column) -> tuple[float, float, float | None]:
    write_min = state.number(column, "cost_checkpoint_min", step=1.0)
    restart_min = state.number(column, "cost_restart_min", step=5.0)
    override = state.checkbox(column, "cost_override_rate")
    rate = state.number(
        column,
        "cost_interruptions_per_hour",
        step=0.1,
        disabled=not override,
        help="From the price sheet otherwise: AWS Spot Advisor bands, "
        f"or {DEFAULT_INTERRUPTIONS_PER_HOUR:g}/h (median of public spot traces).",
    )
    return write_min / 60, restart_min / 60, rate if override else None


def _energy_controls() -> dict:
    """What the energy and carbon columns assume: the GPUs' share of TDP, the host, PUE, the grid."""
    with state.section(st, "Energy and carbon: GPU and host power, PUE, grid intensity", key="cost_energy_section"):
        left, middle, right, last = state.columns(st, 4)
        return {
            "gpu_share_of_tdp": state.number(left, "cost_gpu_share_pct", step=5.0),
            "host_w_per_gpu": state.number(middle, "cost_host_w", step=25.0),
            "pue": state.number(right, "cost_pue", step=0.05),
            "grid_gco2e_per_kwh": state.number(last, "cost_grid_g", step=10.0),
        }


def _on_price_upload(catalogue: list[GpuSpec]) -> None:
    upload = st.session_state.get("price_upload")
    st.session_state[UPLOAD_ERROR_KEY] = None
    if upload is None:
        return
    try:
        st.session_state[UPLOAD_STATE_KEY] = parse_price_csv(upload.getvalue(), upload.name, catalogue)
    except PriceCatalogueError as error:
        st.session_state[UPLOAD_ERROR_KEY] = in_words(error)


# one example row of a price sheet, in the columns of data/cloud_prices.csv: an 8 x H100 instance at a
# made-up $24.00 per hour, which the user replaces with their own quote
TEMPLATE_EXAMPLE = {
    "provider": "My cloud",
    "instance_type": "8x-h100-example",
    "gpu": "H100-SXM5-80GB",
    "gpu_count": "8",
    "host_ram_gib": "2048",
    "region": "eu-west",
    "on_demand_usd_per_hour": "24.00",
    "spot_usd_per_hour": "",
    "interruptions_per_hour": "",
    "source": "quote from my provider",
    "as_of": "2026-11-01",
    "notes": "example row: replace it with your own prices; gpu is a name from the Compare page",
}


def price_sheet_template() -> bytes:
    """A CSV with the header of data/cloud_prices.csv (read from the file, so it follows it) and
    one example row; a column the example does not know is left empty."""
    with open(DATA_DIR / "cloud_prices.csv", newline="", encoding="utf-8") as sheet:
        header = next(csv.reader(sheet))
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerow([TEMPLATE_EXAMPLE.get(column, "") for column in header])
    return text.getvalue().encode("utf-8")


def _price_controls(catalogue: list[GpuSpec]) -> tuple[list[CloudPrice], float, list[str]]:
    notes = []
    # closed, the section draws nothing and its settings keep their values (ui/state.section)
    with state.section(st, "Prices: discount and your own price sheet", key="cost_prices_section"):
        discount_pct = state.number(st, "cost_discount_pct", step=5.0)
        if state.drawn():
            _price_sheet_controls(catalogue)
        uploaded = st.session_state.get(UPLOAD_STATE_KEY) or []
        only_mine = False
        if uploaded:
            only_mine = state.checkbox(st, "cost_only_mine")
            notes.append(f"Your price sheet adds {len(uploaded)} rows.")
            if state.drawn() and st.button("Forget my price sheet"):
                st.session_state[UPLOAD_STATE_KEY] = []
                st.rerun()
    prices = list(uploaded) if only_mine else list(load_prices()) + list(uploaded)
    return prices, discount_pct / 100, notes


def _price_sheet_controls(catalogue: list[GpuSpec]) -> None:
    """The upload of a price sheet, its template, and why the last upload was not used."""
    st.file_uploader(
        "Upload a price sheet (CSV in the columns of the template below)",
        type=["csv"],
        key="price_upload",
        on_change=_on_price_upload,
        args=(catalogue,),
    )
    st.download_button(
        "Price-sheet template (CSV)",
        price_sheet_template,
        "price-sheet-template.csv",
        "text/csv",
        on_click="ignore",
        help="The columns of data/cloud_prices.csv and one example row to overwrite",
    )
    if st.session_state.get(UPLOAD_ERROR_KEY):
        st.error(f"Price sheet not used: {st.session_state[UPLOAD_ERROR_KEY]}")


def cost_inputs(catalogue: list[GpuSpec]) -> CostInputs:
    """Draw the controls and return what the cost calculators need."""
    unit_column, size_column, epochs_column = st.columns(3)
    dataset = dataset_controls(size_column, epochs_column, unit_column)
    # closed, the section draws nothing and sends only its title, which says what its settings are
    with state.section(st, run_section_title(), key="cost_run_section"):
        middle, right = state.columns(st, 2)
        throughput = _throughput_controls(middle)
        write_h, restart_h, rate = _spot_controls(right)
    step = _step_controls()
    fits_only = state.checkbox(st, "cost_fits_only")
    prices, discount, notes = _price_controls(catalogue)
    energy_values = _energy_controls()
    errors = []
    try:
        energy = EnergySettings(**energy_values)
    except ValidationError as error:
        errors.append(f"Energy settings: {in_words(error)}; the defaults are used")
        energy = EnergySettings()
    try:
        time_settings = TimeSettings(**dataset, **throughput, **step)
    except ValidationError as error:
        errors.append(f"Time settings: {in_words(error)}")
        time_settings = None
    return CostInputs(
        time_settings=time_settings,
        prices=adjusted_prices(prices, discount, rate),
        checkpoint_write_h=write_h,
        restart_h=restart_h,
        fits_only=fits_only,
        errors=errors,
        notes=notes,
        energy=energy,
    )
