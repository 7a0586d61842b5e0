"""The GPUs of the machine the app runs on, read once a minute with NVML."""

from __future__ import annotations

import streamlit as st

from calculators.hardware.catalogue import GpuSpec
from measure.calibration.inventory import match_catalogue, read_inventory


@st.cache_data(ttl=60, show_spinner=False)
def _host_gpu_names() -> tuple[list[str], str]:
    inventory = read_inventory()
    return [gpu.name for gpu in inventory.gpus], inventory.message


def detected_gpu_names(catalogue: list[GpuSpec]) -> tuple[set[str], str]:
    """Catalogue names of this host's GPUs, and a quiet message when there are none."""
    nvml_names, message = _host_gpu_names()
    detected = set()
    for nvml_name in nvml_names:
        match = match_catalogue(nvml_name, catalogue)
        if match is not None:
            detected.add(match.name)
    if nvml_names and not detected:
        message = f"This host has {', '.join(nvml_names)}, not found in the catalogue: add it under 'Your GPUs'."
    return detected, message or "No NVIDIA GPU detected on this host."
