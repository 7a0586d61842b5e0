"""GPU energy over a timed stretch of work, read from NVML's energy counter.

`nvmlDeviceGetTotalEnergyConsumption` returns the energy the board has used since the
driver loaded, in millijoules (NVML API reference, "Device Queries"; Volta and later).
The difference between two readings around the timed steps is the energy of those steps;
divided by the elapsed time it is the mean board power. Where the counter is missing (no
driver, an older GPU, the CPU path) the meter says in words why nothing was measured,
and the calibration reports "not measured" rather than a number.

pynvml is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

NOT_MEASURED_ON_CPU = "not measured: NVML reads the energy of NVIDIA GPUs only, and this run is on the CPU"


class EnergyMeter:
    """Energy (J) and mean power (W) of one NVIDIA GPU between `start()` and `stop()`."""

    def __init__(self, nvml_index: int | None):
        self._index = nvml_index
        self._pynvml: Any = None
        self._handle: Any = None
        self._start_mj: int | None = None
        self._start_s = 0.0
        self.reason = ""
        self.energy_j: float | None = None
        self.elapsed_s: float | None = None

    def start(self) -> None:
        self._start_s = time.perf_counter()
        if self._index is None:
            self.reason = NOT_MEASURED_ON_CPU
            return
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as error:  # no pynvml or no driver: say so instead of a number
            self.reason = f"not measured: NVML could not start ({error})"
            return
        self._pynvml = pynvml
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self._index)
            self._start_mj = pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except pynvml.NVMLError as error:
            self.reason = f"not measured: this GPU has no NVML energy counter ({error})"
            self._shutdown()

    def stop(self) -> None:
        self.elapsed_s = time.perf_counter() - self._start_s
        if self._start_mj is None:
            return
        try:
            end_mj = self._pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except self._pynvml.NVMLError as error:
            self.reason = f"not measured: the NVML energy counter stopped answering ({error})"
        else:
            self.energy_j = (end_mj - self._start_mj) / 1000
        self._shutdown()

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self._pynvml.nvmlShutdown()

    def details(self, steps: int, tokens_per_step: int, tdp_w: float | None) -> dict[str, Any]:
        """Record details: energy per step and per token, mean power and its share of the
        board's TDP, or the reason nothing was measured."""
        if self.energy_j is None or not self.elapsed_s or self.energy_j <= 0:
            return {"energy": self.reason or "not measured: the energy counter did not advance"}
        mean_power_w = self.energy_j / self.elapsed_s
        return {
            "energy": "measured (NVML nvmlDeviceGetTotalEnergyConsumption)",
            "energy_j": self.energy_j,
            "mean_power_w": mean_power_w,
            "energy_per_step_j": self.energy_j / steps,
            "energy_per_token_j": self.energy_j / (steps * tokens_per_step),
            "power_fraction_of_tdp": mean_power_w / tdp_w if tdp_w else None,
        }


def nvml_index(device: Any) -> int | None:
    """NVML's index of a torch CUDA device (None on the CPU). NVML numbers GPUs by PCI bus
    order, CUDA by speed unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so match the PCI bus id."""
    import torch

    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    bus_id = getattr(torch.cuda.get_device_properties(index), "pci_bus_id", None)
    if bus_id is None:
        return index
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByPciBusId(_pci_bus_id_text(bus_id, index)))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver or no match: the CUDA index is the best guess left
        return index


def _pci_bus_id_text(bus_id: Any, index: int) -> str:
    """torch gives the bus number as an int in some versions and as text in others."""
    import torch

    if isinstance(bus_id, str):
        return bus_id
    props = torch.cuda.get_device_properties(index)
    domain = getattr(props, "pci_domain_id", 0)
    device = getattr(props, "pci_device_id", 0)
    return f"{domain:08x}:{bus_id:02x}:{device:02x}.0"


def training_energy_text(details: dict[str, Any]) -> str:
    """One sentence on the training step's measured power and energy, or why there is none."""
    if "mean_power_w" not in details:
        return f"Training-step energy: {details.get('energy', 'not measured')}."
    share = details.get("power_fraction_of_tdp")
    of_tdp = f" ({share:.0%} of the board's TDP)" if share else ""
    return (
        f"Training step: {details['mean_power_w']:,.0f} W mean board power{of_tdp}, "
        f"{details['energy_per_step_j']:,.1f} J per step, {1000 * details['energy_per_token_j']:,.2f} mJ per token "
        "(NVML energy counter, warm-up steps left out)."
    )
