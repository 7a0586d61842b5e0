"""Time and cost: hours and dollars of the workload on every priced cloud option."""

import streamlit as st

from calculators.cost.exports import csv_bytes, table_excel_bytes
from calculators.cost.options import (
    CostOption,
    OwnershipSettings,
    TimedRow,
    buy_vs_rent,
    cheapest,
    priced_options,
    purchase_usd_per_gpu,
    timed_rows,
)
from calculators.cost.ranges import scaled_range
from calculators.cost.unpriced import unpriced_gpus
from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.memory.engine import estimate_memory
from calculators.plan.figures import hours_range_text, usd_range_text
from calculators.timing.context_parallel import rank_settings
from calculators.timing.estimate import estimate_time
from calculators.units import counted
from calculators.validation.error_band import time_band_for
from calculators.workload.compatibility import stack_problem
from ui import state
from ui.calibration_state import measured_collective_curves, measured_matmul_fraction
from ui.charts import time_cost_figure
from ui.cost_inputs import cost_inputs
from ui.cost_table import (
    FORMULAS,
    catalogue_dates,
    escape_dollars,
    escape_markdown,
    left_out_rows,
    range_lines,
    ranked_rows,
    shown_rows,
    table_and_left_out,
)
from ui.layout import EMPTY_CELL, wrapping_row
from ui.memo import FrozenKey, frame_key, json_key, remembered
from ui.messages import in_words
from ui.plan_view import apply_plan, cheapest_fitting_layout, layout_text
from ui.serve_cost_view import serve_cost_section
from ui.step_view import step_view
from ui.table_labels import column_config
from ui.user_gpus import user_gpus
from ui.vision_compare_view import no_transformer_comparison
from ui.vision_cost_view import vision_cost_section
from ui.workload import require_training

st.title("Time and cost")
workload = st.session_state["workload"]
if workload.ready and workload.is_inference:  # Serve: throughput, latency and cost per million tokens
    serve_cost_section(workload, list(load_gpu_catalogue()) + user_gpus())
    st.stop()
if workload.is_vision:  # an image model of the vision library: images/s, hours and cost per epoch
    vision_cost_section(workload)
    st.stop()
require_training(workload, "Times and costs", "see times and costs")
spec, settings = workload.spec, workload.settings
catalogue = list(load_gpu_catalogue()) + user_gpus()
inputs = cost_inputs(catalogue)
for message in inputs.errors:
    st.error(message)
for note in inputs.notes:
    st.caption(note)
if inputs.time_settings is None:
    st.stop()

# under context parallel each GPU holds seq_len / cp tokens of every sequence
rank = rank_settings(settings, inputs.time_settings.context_parallel)
peak_gib = remembered("cost_peak", json_key(spec, rank), lambda: estimate_memory(spec, rank).peak_gib)
calibrated = measured_matmul_fraction(settings.precision)
if calibrated:
    st.caption(
        "Calibrated matmul fraction: "
        + ", ".join(f"{gpu} {value:.0%}" for gpu, value in calibrated.items())
        + " of dense peak (measured here; each GEMM's roofline uses it instead of mamf-finder's)."
    )
# the options and the cheapest fitting layout are pure functions of the page's inputs: a
# rerun that did not change them (a click below, a setting changed back) reuses them; the inputs
# other than the workload are keyed once per run for every key below (the price rows and GPUs as
# themselves, frozen models, not their JSON)
inputs_key = json_key(inputs.time_settings, inputs.energy) + (
    FrozenKey(inputs.prices),
    FrozenKey(catalogue),
    inputs.checkpoint_write_h,
    inputs.restart_h,
    tuple(sorted(calibrated.items())),
)
asked = json_key(spec, settings) + inputs_key


def priced(rows: list[TimedRow]) -> list[CostOption]:
    """The options of some timed rows, with the page's pauses, energy and time band."""
    return priced_options(
        rows,
        settings,
        inputs.checkpoint_write_h,
        inputs.restart_h,
        energy=inputs.energy,
        time_band=time_band_for,
    )


try:
    timed = remembered(
        "cost_timed_rows",
        asked,
        lambda: timed_rows(
            spec,
            settings,
            inputs.time_settings,
            inputs.prices,
            catalogue,
            measured_matmul_fraction=calibrated,
            peak_gib=peak_gib,
        ),
    )
    in_table, left_out = table_and_left_out(timed, inputs.fits_only)
    # only the table's options are priced on each run: those set apart are counted in their section's
    # title and priced when it is opened (most of them where the workload fits few GPUs)
    shown = remembered("cost_options", (*asked, inputs.fits_only), lambda: priced(in_table))
except ValueError as error:
    st.error(in_words(error))
    st.stop()


REASON_WIDTH_PX = 640  # "does not fit: the workload needs 198.0 GiB per GPU, RTX-6000-Ada-48GB has 48 GB"


def show_left_out() -> None:
    """The options set apart, in a collapsed section, each with its reason, and the GPUs no rental
    row prices (owned hardware is priced below, in Buy or rent)."""
    uncosted = unpriced_gpus(catalogue, inputs.prices, include_owned=False)
    if uncosted:
        label = f"Not costed: {counted(len(uncosted), 'GPU')} without a rental price"
        with st.expander(label, key="cost_uncosted_open", on_change="rerun") as section:
            if section.open:  # drawn only while open: a closed section costs a rerun nothing
                st.markdown("\n".join(f"- {line}" for line in uncosted))
    if not left_out:
        return
    label = f"Left out: {len(left_out)} options that do not fit or cannot run"
    with st.expander(label, key="cost_left_out_open", on_change="rerun") as section:
        if section.open:
            left_out_options = remembered("cost_left_out", (*asked, inputs.fits_only), lambda: priced(left_out))
            st.dataframe(
                left_out_rows(left_out_options),
                hide_index=True,
                width="stretch",
                # the reason is the column read here: wide enough for its ~95 characters at 1400 px
                column_config=column_config({"usd on demand": "$%.0f"}, {"reason": REASON_WIDTH_PX, "gpu": "medium"}),
                placeholder=EMPTY_CELL,
            )


chosen_gpu = next((gpu for gpu in catalogue if gpu.name == workload.gpu_name), None)
chosen_stack_problem = None if chosen_gpu is None else stack_problem(chosen_gpu, workload.mode, settings.optimizer)
sidebar_fits = peak_gib <= workload.gpu_memory_gib and chosen_stack_problem is None
estimate = None
if chosen_gpu is not None:
    try:
        chosen_time_settings = inputs.time_settings
        if chosen_gpu.name in calibrated and chosen_time_settings.utilisation is None:
            chosen_time_settings = chosen_time_settings.model_copy(update={"utilisation": calibrated[chosen_gpu.name]})
        measured_curves = measured_collective_curves(chosen_gpu.name)
        chosen_time_settings = chosen_time_settings.with_measured_collectives(measured_curves)
        if measured_curves:
            st.caption(
                f"The step of {chosen_gpu.name} times its collectives on the curves measured on this host "
                f"({', '.join(name.replace('_', '-') for name in measured_curves)}), not the published ones."
            )
        estimate = remembered(
            "cost_step",
            json_key(spec, settings, chosen_gpu, chosen_time_settings),
            lambda: estimate_time(spec, settings, chosen_gpu, chosen_time_settings),
        )
    except ValueError as error:
        st.warning(in_words(error))


def show_sidebar_estimate(fits: bool = True) -> None:
    """The step of the sidebar's GPU and layout, its hours on demand (no interruptions); a layout
    that does not fit gets no cost, its figures framed as for reference only."""
    if not fits:
        st.warning(
            f"Does not fit on {layout_name}: these figures are for reference only, what its step would take "
            "if memory allowed; no cost is given for it. The cheapest layout that fits is named above."
        )
    row = wrapping_row()
    row.metric("Step", f"{estimate.step_s:.2f} s", help=f"compute {estimate.compute_s:.2f} s", width="content")
    row.metric("Tokens/s", f"{estimate.tokens_per_s:,.0f}", width="content")
    row.metric("Hours per epoch", f"{estimate.hours_per_epoch:,.1f} h", width="content")
    band = time_band_for(chosen_gpu, settings)
    row.metric(
        "Hours in all",
        f"{estimate.hours_total:,.1f} h",
        help=f"range {hours_range_text(scaled_range(estimate.hours_total, band))}: {band.assumption}",
        width="content",
    )
    row.metric(
        "MFU",
        f"{estimate.mfu:.0%}",
        help=f"of {estimate.peak_tflops:g} dense {estimate.compute_format} TFLOPS; HFU {estimate.hfu:.0%}",
        width="content",
    )
    st.caption(
        "Hours of running without interruption, as on demand; spot's expected hours, with interruptions, restarts "
        "and lost work, are in the spot rows below."
    )
    step_view(spec, settings, chosen_gpu, chosen_time_settings, estimate, inputs.prices, fits=fits)


layout_name = f"{settings.total_gpus} x {workload.gpu_name}"
if sidebar_fits and estimate is not None:
    st.subheader(f"On {layout_name}")
    show_sidebar_estimate()
elif not sidebar_fits:
    # what fits leads: the sidebar's layout is named as not fitting before any of its figures
    if chosen_stack_problem is not None:
        st.warning(f"{chosen_stack_problem}. Priced options below leave it out.")
    else:
        capacity = f"{workload.gpu_memory_gib:g} GiB"  # in GiB, as the Memory page's verdict reads the GPU
        if inputs.fits_only:
            where = "priced options below only include GPUs it fits"
        else:
            where = "priced options below on GPUs it does not fit say so in the fits column and come last"
        st.warning(
            f"Does not fit on {layout_name}: the workload needs {peak_gib:,.1f} GiB per GPU, the GPU has "
            f"{capacity}; {where}."
        )
    fitting = None
    if chosen_gpu is not None and chosen_stack_problem is None:
        # the planner sets the micro-batch and accumulation itself (from the global batch), so a change
        # of the sidebar's micro-batch alone finds the same layout: it is left out of the key
        searched = settings.model_copy(update={"micro_batch": 1, "grad_accum": 1})
        fitting = remembered(
            "cost_fitting_layout",
            (
                *json_key(spec, searched),
                *inputs_key,
                workload.mode,
                chosen_gpu.name,
                state.value("plan_global_batch"),
                state.value("plan_max_gpus"),
            ),
            lambda: cheapest_fitting_layout(
                workload.mode,
                spec,
                settings,
                chosen_gpu,
                catalogue,
                inputs.prices,
                inputs.time_settings,
                (inputs.checkpoint_write_h, inputs.restart_h),
                calibrated,
            ),
        )
    if fitting is not None:
        st.markdown(escape_dollars(f"The cheapest layout that fits on {chosen_gpu.name}: {layout_text(fitting)}."))
        if st.button("Use this layout", key="cost_use_fitting_layout"):
            apply_plan(fitting, {gpu.name for gpu in catalogue})
            st.rerun()
    elif chosen_gpu is not None and chosen_stack_problem is None:
        st.info(
            f"No priced layout of up to {state.value('plan_max_gpus'):,} x {chosen_gpu.name} fits; the options "
            "below are the GPUs it fits on (the Plan page searches every GPU and layout)."
        )
    if estimate is not None:
        label = f"For reference only: step time of {layout_name}, which does not fit (no cost)"
        with st.expander(label, key="cost_unfit_step_open", on_change="rerun") as section:
            if section.open:  # drawn only while open, like any section a reader may never open
                show_sidebar_estimate(fits=False)

st.subheader("Options, cheapest first")
if not shown:
    st.warning(
        f"No priced option fits a peak of {peak_gib:.1f} GiB per GPU and can run the workload. Change the "
        "workload (see the Memory page) or untick 'Only GPUs the workload fits on'."
    )
    show_left_out()
    st.stop()
best, best_spot = cheapest(shown), cheapest(shown, spot=True)  # the headline is always one that fits
if best is not None:
    line = f"Cheapest on demand: **{best.gpu}** on {best.provider} ({best.instance_type}), {best.hours:,.1f} h, "
    line += f"**${best.usd_on_demand:,.0f}** (range {usd_range_text(best.usd_on_demand_range)})."
    if best_spot is not None:
        line += f" Cheapest on spot (expected): **{best_spot.gpu}** on {best_spot.provider}, "
        line += f"{best_spot.spot_hours_expected:,.1f} h, **${best_spot.usd_spot_expected:,.0f}** "
        line += f"(range {usd_range_text(best_spot.usd_spot_expected_range)})."
    elif any(option.spot_not_worth_reason for option in shown):
        line += " No option is worth running on spot with these interruptions: see the note column."
    st.markdown(escape_dollars(line))
else:
    st.warning("None of the priced options below fits the workload; they are listed for comparison.")
# a pure function of the options and the filter: kept, like the options, for a rerun that did not change them
rows = remembered("cost_rows", (*asked, inputs.fits_only), lambda: ranked_rows(shown))
st.dataframe(
    shown_rows(rows),
    hide_index=True,
    width="stretch",
    column_config=column_config(
        {"hours": "%.1f", "usd": "dollar", "usd per epoch": "$%.0f", "usd per M tokens": "$%.3f"}
    ),
    placeholder=EMPTY_CELL,
)
# drawn only while open: the chart moves with every change of the workload, and a chart drawn anew is the
# costliest element of a rerun in the browser (bench/bench_clicks.py); the table's "pareto" column says the same
label = "Chart: hours against USD of every option, with the Pareto fronts"
with st.expander(label, key="cost_chart_open", on_change="rerun") as section:
    if section.open:
        figure_columns = ["pricing", "gpu", "provider", "instance", "hours", "usd", "pareto"]
        figure = remembered("cost_figure", frame_key(rows, figure_columns), lambda: time_cost_figure(rows))
        st.plotly_chart(figure, width="stretch")
        st.caption("Dotted lines join the Pareto front: options that nothing else beats on both time and cost.")
st.caption(escape_dollars("Ranges: " + "; ".join(range_lines(shown))))
show_left_out()

assumptions = {
    "model": spec.name,
    "workload": ", ".join(f"{k}={v}" for k, v in settings.model_dump(exclude={"overheads"}).items()),
    "peak memory per GPU (GiB)": f"{peak_gib:.2f}",
    **{k: str(v) for k, v in inputs.time_settings.model_dump().items()},
    "checkpoint write (h)": f"{inputs.checkpoint_write_h:g}",
    "restart (h)": f"{inputs.restart_h:g}",
}
gpu_dates = sorted(gpu.as_of.isoformat() for gpu in catalogue)
dates = catalogue_dates(inputs.prices, f"{gpu_dates[0]} to {gpu_dates[-1]}")
left, right = st.columns(2)
# the downloads are the table above: its rows, in its order, with its columns
# built when clicked, not on every rerun: the Excel sheet alone took a third of a second
left.download_button("Download CSV", lambda: csv_bytes(rows), "gpu-cost-options.csv", "text/csv", on_click="ignore")
right.download_button(
    "Download Excel",
    lambda: table_excel_bytes(rows, shown, assumptions, dates, FORMULAS),
    "gpu-cost-options.xlsx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    on_click="ignore",
)


def show_buy_or_rent() -> None:
    """Owning the GPU against renting it for this run: the cheapest rental of the GPU picked, and the
    purchase, years, PUE and electricity price of owning it."""
    gpu_names = sorted({option.gpu for option in shown})
    priced_to_buy = [name for name in gpu_names if next(g for g in catalogue if g.name == name).price_usd]
    # until the user picks: the sidebar's GPU when it is priced here, else the cheapest that fits and has a
    # catalogue price
    ranked_names = [o.gpu for o in sorted(shown, key=lambda o: (o.excluded_reason is not None, o.usd_on_demand))]
    page_default = next((name for name in [workload.gpu_name, *ranked_names] if name in priced_to_buy), gpu_names[0])
    if state.is_set("cost_buy_gpu") and state.value("cost_buy_gpu") not in gpu_names:
        st.warning(
            f"GPU to buy: {state.quoted(state.value('cost_buy_gpu'))} is not among the GPUs priced above; "
            f"using `{page_default}` instead.",
            icon=":material/warning:",
        )
        state.forget("cost_buy_gpu")  # the page's choice, until the user picks one
    buy_gpu_name = state.choice(st, "cost_buy_gpu", options=gpu_names, page_default=page_default)
    buy_gpu = next(gpu for gpu in catalogue if gpu.name == buy_gpu_name)
    rent = cheapest([o for o in shown if o.gpu == buy_gpu_name], fits_only=False)
    cols = st.columns(4)
    purchase = state.number(cols[0], "cost_buy_price", step=1000.0)
    years = state.number(cols[1], "cost_buy_years", step=0.5)
    pue = state.number(cols[2], "cost_buy_pue", step=0.1)
    kwh = state.number(cols[3], "cost_buy_kwh", step=0.01)
    try:
        ownership = OwnershipSettings(purchase_usd_per_gpu=purchase, years=years, pue=pue, electricity_usd_per_kwh=kwh)
    except ValueError as error:
        st.info(f"Buy vs rent not available: {in_words(error)}")
        ownership = None
    if ownership is not None and purchase_usd_per_gpu(buy_gpu, ownership) is None:
        others = f"pick one that has ({', '.join(priced_to_buy)})" if priced_to_buy else "none of these GPUs has one"
        st.info(
            f"{buy_gpu.name} has no purchase price in the GPU catalogue, so owning it cannot be priced: enter a price "
            f"per GPU above, or {others}."
        )
    elif ownership is not None:
        try:
            rent_usd_per_hour = rent.instances * rent.on_demand_usd_per_hour
            gpus_rented = rent.instances * rent.gpus_per_instance
            verdict = buy_vs_rent(buy_gpu, gpus_rented, rent_usd_per_hour, rent.hours, ownership, inputs.energy)
        except ValueError as error:
            st.info(f"Buy vs rent not available: {in_words(error)}")
        else:
            row = wrapping_row()
            rented_help = f"{rent.provider} {rent.instance_type}, on demand"
            row.metric("Run, rented", f"${verdict.run_usd_rented:,.0f}", help=rented_help, width="content")
            row.metric(
                "Run, owned", f"${verdict.run_usd_owned:,.0f}", help="amortised purchase + energy", width="content"
            )
            owned_help = f"rented ${rent_usd_per_hour:,.2f}"
            row.metric("Owned, per hour", f"${verdict.owned_usd_per_hour:,.2f}", help=owned_help, width="content")
            even = verdict.break_even_hours
            even_text = "never" if even is None else f"{even:,.0f} h"
            row.metric("Break-even", even_text, help="hours of use at which buying pays", width="content")
            st.caption(escape_dollars("; ".join(verdict.assumptions)))


# drawn only while open: its five inputs and four metrics are redrawn on every change of the workload
with st.expander("Buy instead of rent?", key="cost_buy_open", on_change="rerun") as section:
    if section.open:
        show_buy_or_rent()

with st.expander("Assumptions, formulas and sources", key="cost_assumptions_open", on_change="rerun") as section:
    # drawn only while open; one element per list, not one per line: each element is a message to the browser
    if section.open and chosen_gpu is not None and estimate is not None:
        st.markdown("\n".join(f"- {escape_markdown(line)}" for line in estimate.assumptions))
    if section.open:
        formulas = (f"{number}. {escape_markdown(formula)}" for number, formula in enumerate(FORMULAS, start=1))
        st.markdown("\n".join(formulas))
        st.markdown("Catalogue dates: " + "; ".join(f"{k}: {v}" for k, v in dates.items()))

no_transformer_comparison()
