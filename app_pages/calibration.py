"""Calibration: what this host's GPUs really deliver, measured, kept and applied.

Nothing runs on page load: a benchmark starts only from the button, only when the
operator allows it (GPU_SIZING_ALLOW_CALIBRATION=1), and one run at a time per host.
Bad input (an imported file, a damaged store, a price) gets a message, never a traceback."""

import hashlib

import pandas as pd
import streamlit as st

from calculators.hardware.catalogue import load_gpu_catalogue
from measure.calibration.inventory import read_inventory
from measure.calibration.power import training_energy_text
from measure.calibration.result import CalibrationResult
from measure.calibration.runner import (
    CalibrationRequestError,
    calibration_allowed,
    check_budget_s,
    check_usd_per_hour,
)
from measure.calibration.store import (
    CalibrationImportError,
    CalibrationStore,
    CalibrationStoreError,
    default_store_path,
    export_json,
    import_json,
)
from ui import state
from ui.calibration_state import ACTIVE_KEY, USE_KEY, set_active
from ui.collective_chart import collective_figure
from ui.fleet_view import show_fleet
from ui.layout import EMPTY_CELL
from ui.messages import in_words
from ui.vision_calibration_view import show_vision_measurements

STORE_PROBLEMS_KEY = "_calibration_store_problems"
IMPORTED_KEY = "_calibration_imported"  # (sha256 of the imported result's JSON, what was said about it)


def save_to_store(store: CalibrationStore, result: CalibrationResult) -> bool:
    """Keep `result` in the history; a store that cannot be used gets a message, the result stays active."""
    try:
        store.save(result)
    except CalibrationStoreError as error:
        st.error(f"Not kept in the history: {in_words(error)}")
        return False
    return True


def import_message(store: CalibrationStore, imported: CalibrationResult) -> None:
    """Keep an imported result in the history once, keyed by its content, not its file name, and say
    so: the uploader hands the same file to every rerun, and two results may share a name."""
    content = hashlib.sha256(imported.model_dump_json().encode()).hexdigest()
    done = st.session_state.get(IMPORTED_KEY)
    if done is None or done[0] != content:
        when = f"{imported.host}, {imported.gpu_name or imported.device}, {imported.created_at:%Y-%m-%d %H:%M} UTC"
        try:
            existing = store.find(imported)
        except CalibrationStoreError:
            existing = None  # save_to_store says what is wrong with the store
        if existing is not None:
            message = f"Already in the history: the calibration of {when} (stored as number {existing})."
        elif save_to_store(store, imported):
            message = f"Imported the calibration of {when} into the history."
        else:
            message = f"Imported the calibration of {when} for this session only."
        done = (content, message)
        st.session_state[IMPORTED_KEY] = done
    st.info(done[1])


def request_problem(usd_per_hour: float, budget_s: float) -> str | None:
    """The same checks as `calculators calibrate` makes of --usd-per-hour and --budget-s."""
    try:
        check_usd_per_hour(usd_per_hour)
        check_budget_s(budget_s)
    except CalibrationRequestError as error:
        return in_words(error)
    return None


def show_store_problems(store: CalibrationStore) -> None:
    """Warnings about a damaged store or skipped rows, kept for the session: a damaged file is
    moved aside on the first run only, and the next click would otherwise hide the message."""
    shown = st.session_state.setdefault(STORE_PROBLEMS_KEY, [])
    shown.extend(problem for problem in store.problems if problem not in shown)
    for problem in shown:
        st.warning(problem)


st.title("Calibration")
st.caption(
    "Measures matmul TFLOPS per precision, memory and host-to-device bandwidth, the fixed overhead, and a real "
    "training step whose peak memory and time are compared with this app's estimates."
)

st.subheader("This host")
inventory = read_inventory(load_gpu_catalogue())
if inventory.gpus:
    st.dataframe(
        pd.DataFrame([gpu.model_dump() for gpu in inventory.gpus]),
        hide_index=True,
        width="stretch",
        placeholder=EMPTY_CELL,
    )
elif (inventory.message or "").startswith("No NVIDIA driver found"):
    # a visitor needs what it means for them, not NVML's error; the operator finds it on hover
    st.info(
        "This machine has no NVIDIA GPU the app can use (no NVIDIA driver): benchmarks run here would measure "
        "the CPU. To calibrate a GPU, run the command below on a machine that has one and import its result.",
        icon=":material/info:",
    )
    st.caption("What the driver check said, for whoever runs the app", help=inventory.message)
else:
    st.info(inventory.message or "No NVIDIA GPU found: the benchmarks run on the CPU.")

store = CalibrationStore(default_store_path())

st.subheader("Run the benchmarks")
allowed = calibration_allowed()
if not allowed:
    st.info(
        "Benchmarks load the GPU for up to the time budget, so they run only when the operator allows it: "
        "start the app with `GPU_SIZING_ALLOW_CALIBRATION=1`. On a host without a browser use "
        "`python -m calculators calibrate --out result.json` and import the file below."
    )
cols = st.columns(3)
device = state.choice(cols[0], "cal_device")
budget_s = state.number(cols[1], "cal_budget_s", step=10)
usd_per_hour = state.number(cols[2], "cal_usd_per_hour", step=0.5)
problem = request_problem(usd_per_hour, float(budget_s))
if problem:
    st.error(problem)
if st.button("Run benchmarks", disabled=not allowed or problem is not None, type="primary"):
    from measure.calibration.runner import CalibrationBusyError, run_calibration  # loads torch lazily

    with st.status("Calibrating...", expanded=True) as status:
        bar = st.progress(0.0)

        def report(step: str, fraction: float) -> None:
            bar.progress(min(max(fraction, 0.0), 1.0), text=step)

        try:
            result = run_calibration(
                device=device, budget_s=float(budget_s), progress=report, usd_per_hour=usd_per_hour
            )
        except (CalibrationBusyError, CalibrationRequestError) as error:
            status.update(label=f"Not started: {in_words(error)}", state="error")
        else:
            set_active(result)
            save_to_store(store, result)
            status.update(label=f"Done in {result.duration_s:.0f} s", state="complete")

uploaded = st.file_uploader("Import a result (JSON from `calculators calibrate --out`)", type=["json"])
if uploaded is not None:
    try:
        imported = import_json(uploaded.getvalue())
    except CalibrationImportError as error:
        st.error(f"Not imported: {in_words(error)}")
    else:
        import_message(store, imported)
        set_active(imported)

try:
    history = store.history()
except CalibrationStoreError as error:
    st.error(f"History not shown: {in_words(error)}")
    history = []
show_store_problems(store)
active = st.session_state.get(ACTIVE_KEY)
if active is None and history:
    active = history[0]
    set_active(active)

st.subheader("Results")
if active is None:
    st.info("No calibration yet on this host.")
    st.stop()
state.widget(st.toggle, USE_KEY, "Use this calibration in the Memory, Compare and Cost pages")
st.caption(
    f"{active.host}, {active.gpu_name or active.device}, driver {active.driver_version or '-'}, "
    f"torch {active.torch_version or '-'}, {active.created_at:%Y-%m-%d %H:%M} UTC, {active.duration_s:.0f} s"
)
rows = [
    {
        "benchmark": record.name,
        "value": record.value,
        "unit": record.unit,
        "datasheet": record.datasheet_value,
        "% of datasheet": record.percent_of_datasheet,
        "skipped or failed": record.skipped_reason or record.error or "",
    }
    for record in active.records
]
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
curves = collective_figure(active)
if curves is not None:
    st.plotly_chart(curves, width="stretch")
cols = st.columns(3)
cols[0].markdown("**Measured overheads**")
cols[0].json(active.overheads.model_dump())
cols[1].markdown("**Matmul utilisation (fraction of dense peak)**")
cols[1].json(active.utilisation)
cols[2].metric("Training-step MFU", "-" if active.training_mfu is None else f"{active.training_mfu:.1%}")
step_record = active.record("training_step")
if step_record is not None and step_record.ok:
    st.caption(training_energy_text(step_record.details))
if active.vision:
    show_vision_measurements(active.vision)
st.download_button("Export JSON", export_json(active), "calibration.json", "application/json")

if len(history) > 1:
    st.subheader("History")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "when": r.created_at,
                    "host": r.host,
                    "device": r.device,
                    "GPU": r.gpu_name,
                    "driver": r.driver_version,
                    "torch": r.torch_version,
                }
                for r in history
            ]
        ),
        hide_index=True,
        width="stretch",
        placeholder=EMPTY_CELL,
    )

show_fleet(history, store.name)
