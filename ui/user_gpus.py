"""GPUs the user adds for hardware the catalogue lacks: a form for one GPU, or a CSV
with the catalogue's columns. They live in `st.session_state["user_gpus"]`, so they
survive moving between pages; a bad row is reported and the rest keeps working."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from calculators.hardware.catalogue import COLUMNS, CatalogueError, GpuSpec, parse_gpu_csv, parse_gpu_rows
from ui import state
from ui.messages import in_words

STATE_KEY = "user_gpus"
UPLOAD_ERROR_KEY = "user_gpu_upload_error"
FORM_FIELDS = (
    ("memory_gb", "Memory (GB)", 24.0),
    ("memory_bandwidth_tbps", "Bandwidth (TB/s)", 1.0),
    ("bf16_tflops", "Dense BF16 TFLOPS", 100.0),
    ("fp16_tflops", "Dense FP16 TFLOPS", 100.0),
    ("fp32_tflops", "FP32 TFLOPS", 30.0),
    ("tdp_w", "Power (W)", 300.0),
    ("price_usd", "Price (USD, 0 = unknown)", 0.0),
)


def user_gpus() -> list[GpuSpec]:
    return list(st.session_state.get(STATE_KEY, []))


def _store(gpus: list[GpuSpec], catalogue_names: set[str]) -> str | None:
    """Add GPUs, replacing earlier ones of the same name; refuse catalogue names."""
    clashes = [gpu.name for gpu in gpus if gpu.name.lower() in catalogue_names]
    if clashes:
        return f"{', '.join(clashes)} already in the catalogue: give your GPU another name."
    new_names = {gpu.name.lower() for gpu in gpus}
    kept = [gpu for gpu in user_gpus() if gpu.name.lower() not in new_names]
    st.session_state[STATE_KEY] = kept + gpus
    return None


def _on_upload(catalogue_names: set[str]) -> None:
    upload = st.session_state.get("user_gpu_upload")
    st.session_state[UPLOAD_ERROR_KEY] = None
    if upload is None:
        return
    try:
        gpus = parse_gpu_csv(upload.getvalue(), origin=upload.name)
    except CatalogueError as error:
        st.session_state[UPLOAD_ERROR_KEY] = in_words(error)
        return
    st.session_state[UPLOAD_ERROR_KEY] = _store(gpus, catalogue_names)


# Figures every GPU has: a zero here is a mistake to report, not "unknown".
REQUIRED_FORM_FIELDS = frozenset({"memory_gb", "memory_bandwidth_tbps"})


def _form_cell(key: str, value: float) -> str:
    """The cell text of one form figure. A zero in an optional field means unknown (a
    blank cell); a zero in a required one stays 0, so the message says it must be
    greater than 0 rather than that the cell is empty."""
    return f"{value:g}" if value or key in REQUIRED_FORM_FIELDS else ""


def _row_from_form(name: str, values: dict[str, float]) -> dict[str, str]:
    """A catalogue row for a GPU typed in the form; zeros in optional fields mean unknown."""
    row = {column: "" for column in COLUMNS}
    row |= {key: _form_cell(key, value) for key, value in values.items()}
    row |= {
        "name": name.strip(),
        "vendor": "user",
        "category": "datacenter",
        "launch_year": str(dt.date.today().year),
        "price_kind": "street" if values.get("price_usd") else "",
        "source": "entered by the user",
        "as_of": dt.date.today().isoformat(),
    }
    return row


def user_gpu_controls(catalogue: list[GpuSpec]) -> None:
    """The expander with the form, the upload and the list of the user's GPUs."""
    catalogue_names = {gpu.name.lower() for gpu in catalogue}
    # drawn only while open (its form has a dozen inputs, redrawn on every change of the workload), and kept
    # open under its own key: the title changes with the count, which would make streamlit close it
    with state.section(st, f"Your GPUs ({len(user_gpus())})", key="user_gpus_section") as section:
        if not section.open:
            return
        with st.form("add_gpu", clear_on_submit=False):
            name = st.text_input("Name", key="user_gpu_name")
            columns = st.columns(4)
            values = {
                key: columns[i % 4].number_input(label, min_value=0.0, max_value=1e7, value=default, key=f"ug_{key}")
                for i, (key, label, default) in enumerate(FORM_FIELDS)
            }
            if st.form_submit_button("Add GPU"):
                try:
                    gpus = parse_gpu_rows([_row_from_form(name, values)], origin="your GPU")
                    problem = _store(gpus, catalogue_names)
                except CatalogueError as error:
                    problem = in_words(error)
                if problem:
                    st.error(problem)
                else:
                    st.success(f"Added {name.strip()}.")
        st.file_uploader(
            f"Or upload a CSV with the catalogue's columns ({', '.join(COLUMNS)})",
            type=["csv"],
            key="user_gpu_upload",
            on_change=_on_upload,
            args=(catalogue_names,),
        )
        if st.session_state.get(UPLOAD_ERROR_KEY):
            st.error(f"Upload not used: {st.session_state[UPLOAD_ERROR_KEY]}")
        if user_gpus():
            st.caption("Added: " + ", ".join(gpu.name for gpu in user_gpus()))
            if st.button("Remove my GPUs"):
                st.session_state[STATE_KEY] = []
                st.rerun()
