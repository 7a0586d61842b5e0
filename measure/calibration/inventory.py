"""Which NVIDIA GPUs this host has, read through NVML (nvidia-ml-py), and their catalogue rows.

`read_inventory()` never raises for a host without a GPU: no driver, no NVML library or
no `pynvml` module gives an empty list and a one-line message. Each per-device query
that the driver does not support (NVMLError_NotSupported, NoPermission, ...) leaves its
field None instead of failing the whole read.

Sources: NVML API reference (docs.nvidia.com/deploy/nvml-api), nvidia-ml-py's pynvml.py.
PCIe figures are the maximum link generation and width the device and slot support
(nvmlDeviceGetMaxPcieLink*), since an idle GPU drops its current link to a lower speed.

pynvml is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, Field

from calculators.hardware.catalogue import GpuSpec, load_gpu_catalogue
from calculators.units import GIB

MEMORY_TOLERANCE = 0.12  # NVML totals sit 0-7% under the vendor "GB" (ECC, reserved); 12% leaves room


class GpuInfo(BaseModel):
    """One GPU as NVML reports it; None where the driver does not report a field."""

    index: int = Field(ge=0)
    name: str
    memory_total_gib: float | None = None
    memory_free_gib: float | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    power_limit_w: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlink_links: int | None = None
    catalogue_name: str | None = None


class GpuInventory(BaseModel):
    """All GPUs found, and a one-line message saying what was found or why nothing was."""

    gpus: list[GpuInfo] = Field(default_factory=list)
    message: str = ""


Inventory = GpuInventory


# --- NVML reads -----------------------------------------------------------------------


def _text(value: str | bytes) -> str:
    """Old nvidia-ml-py releases return bytes."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _query(pynvml: Any, function: Callable[..., Any], *args: Any) -> Any:
    """function(*args), or None when NVML reports an error for this field."""
    try:
        return function(*args)
    except pynvml.NVMLError:
        return None


def _cuda_version_text(version: int | None) -> str | None:
    """NVML's 12040 -> '12.4'."""
    if version is None:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


def _nvlink_links(pynvml: Any, handle: Any) -> int | None:
    """Active NVLink links; None when the device has no NVLink (the first link query fails)."""
    active = 0
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        state = _query(pynvml, pynvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:
            return active if link else None
        active += state == pynvml.NVML_FEATURE_ENABLED
    return active


def _read_gpu(pynvml: Any, index: int, driver: str | None, cuda: str | None) -> GpuInfo:
    """Every field of one device, each query on its own."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    name = _query(pynvml, pynvml.nvmlDeviceGetName, handle)
    memory = _query(pynvml, pynvml.nvmlDeviceGetMemoryInfo, handle)
    power_mw = _query(pynvml, pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    return GpuInfo(
        index=index,
        name=_text(name) if name is not None else f"GPU {index}",
        memory_total_gib=memory.total / GIB if memory is not None else None,
        memory_free_gib=memory.free / GIB if memory is not None else None,
        driver_version=driver,
        cuda_driver_version=cuda,
        max_sm_clock_mhz=_query(pynvml, pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
        max_mem_clock_mhz=_query(pynvml, pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM),
        power_limit_w=power_mw / 1000 if power_mw is not None else None,
        pcie_gen=_query(pynvml, pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        pcie_width=_query(pynvml, pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        nvlink_links=_nvlink_links(pynvml, handle),
    )


def _with_catalogue_names(gpus: list[GpuInfo], catalogue: Iterable[GpuSpec] | None) -> list[GpuInfo]:
    """Fill catalogue_name from match_catalogue (the catalogue read once)."""
    specs = list(load_gpu_catalogue() if catalogue is None else catalogue)
    named = []
    for gpu in gpus:
        spec = match_catalogue(gpu.name, specs, memory_gib=gpu.memory_total_gib)
        named.append(gpu.model_copy(update={"catalogue_name": spec.name if spec else None}))
    return named


def read_inventory(catalogue: Iterable[GpuSpec] | None = None) -> GpuInventory:
    """The host's NVIDIA GPUs; an empty list and a clear message when there is no driver."""
    try:
        import pynvml
    except ImportError as exc:
        return GpuInventory(message=f"No NVIDIA driver found (nvidia-ml-py is not installed: {exc})")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return GpuInventory(message=f"No NVIDIA driver found (NVML: {exc})")
    try:
        driver = _query(pynvml, pynvml.nvmlSystemGetDriverVersion)
        cuda = _cuda_version_text(_query(pynvml, pynvml.nvmlSystemGetCudaDriverVersion))
        count = pynvml.nvmlDeviceGetCount()
        gpus = [_read_gpu(pynvml, index, _text(driver) if driver else None, cuda) for index in range(count)]
    except pynvml.NVMLError as exc:
        return GpuInventory(message=f"NVML failed while listing GPUs: {exc}")
    finally:
        _query(pynvml, pynvml.nvmlShutdown)
    if not gpus:
        return GpuInventory(message="NVIDIA driver found, but it reports no GPUs")
    gpus = _with_catalogue_names(gpus, catalogue)
    names = ", ".join(sorted({gpu.name for gpu in gpus}))
    return GpuInventory(gpus=gpus, message=f"{len(gpus)} GPU(s): {names} (driver {gpus[0].driver_version})")


# --- NVML name -> catalogue row --------------------------------------------------------

# (pattern on the normalised NVML name, catalogue rows it may be). Normalised: upper case,
# '-' and '_' as spaces, the words NVIDIA, TESLA and GEFORCE dropped. Patterns are
# anchored so that e.g. 'H20' is not 'H200', 'A10' is not 'A100', 'RTX 4090 D' is not
# 'RTX 4090', and unknown variants (V100S, H800, A800) match nothing.
NAME_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"V100 SXM2 \d+GB", ("V100-SXM2-16GB", "V100-SXM2-32GB")),
    (r"V100 PCIE \d+GB", ("V100-PCIe-16GB", "V100-PCIe-32GB")),
    (r"P100 PCIE( \d+GB)?", ("P100-16GB",)),
    (r"T4", ("T4-16GB",)),
    (r"(QUADRO )?RTX 6000", ("Quadro-RTX-6000-24GB",)),
    (r"A10", ("A10-24GB",)),
    (r"A10G", ("A10G-24GB",)),
    (r"A30( PCIE)?", ("A30-24GB",)),
    (r"A40", ("A40-48GB",)),
    (r"RTX A6000", ("RTX-A6000-48GB",)),
    (r"RTX 3090", ("RTX-3090-24GB",)),
    (r"A100 SXM4?( \d+GB)?", ("A100-SXM4-40GB", "A100-SXM4-80GB")),
    (r"A100( \d+GB)? PCIE( \d+GB)?", ("A100-PCIe-40GB", "A100-PCIe-80GB")),
    (r"L4", ("L4-24GB",)),
    (r"L40", ("L40-48GB",)),
    (r"L40S", ("L40S-48GB",)),
    (r"RTX 6000 ADA GENERATION", ("RTX-6000-Ada-48GB",)),
    (r"RTX 4090", ("RTX-4090-24GB",)),
    (r"RTX 5090", ("RTX-5090-32GB",)),
    (r"RTX PRO 6000 BLACKWELL( MAX Q)?( WORKSTATION| SERVER)?( EDITION)?", ("RTX-PRO-6000-Blackwell-96GB",)),
    (r"H100( SXM5?)?( \d+GB)?( HBM3)?", ("H100-SXM5-80GB",)),
    (r"H100 PCIE( \d+GB)?", ("H100-PCIe-80GB",)),
    (r"H100 NVL", ("H100-NVL-94GB",)),
    (r"H200( SXM)?( \d+GB)?( HBM3E)?", ("H200-SXM-141GB",)),
    (r"H200 NVL", ("H200-NVL-141GB",)),
    (r"GH200( \d+GB?)?( HBM3E?)?", ("GH200-96GB",)),
    (r"B200", ("B200-SXM-180GB",)),
    (r"GB200", ("GB200 (per B200 GPU)",)),
    (r"B300( SXM6)?( AC)?", ("B300-SXM-288GB",)),
)
_DROPPED_WORDS = {"NVIDIA", "TESLA", "GEFORCE"}


def normalise_gpu_name(name: str) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'A100 SXM4 80GB'."""
    words = re.sub(r"[-_]", " ", name.upper()).split()
    return " ".join(word for word in words if word not in _DROPPED_WORDS)


def _memory_from_name_gb(normalised: str) -> float | None:
    """The '80GB' in a name, or None."""
    found = re.search(r"\b(\d+)GB\b", normalised)
    return float(found.group(1)) if found else None


def _pick_by_memory(candidates: list[GpuSpec], memory_gb: float | None) -> GpuSpec | None:
    """The only candidate, or the one whose memory is closest to memory_gb (None if unknown)."""
    if len(candidates) == 1:
        return candidates[0]
    if not candidates or memory_gb is None:
        return None
    return min(candidates, key=lambda spec: abs(spec.memory_gb - memory_gb))


def match_catalogue(
    name: str, catalogue: Iterable[GpuSpec] | None = None, memory_gib: float | None = None
) -> GpuSpec | None:
    """The catalogue row of an NVML device name, or None when no row fits.

    `memory_gib` (NVML's memory total) picks between rows of one family (A100 40 vs 80 GB)
    and rejects a match whose memory is more than 12% off (a GH200 with 144 GB is not the
    96 GB row). Without it, a size in the name ('80GB') picks the row.
    """
    specs = {spec.name: spec for spec in (load_gpu_catalogue() if catalogue is None else catalogue)}
    normalised = normalise_gpu_name(name)
    for pattern, row_names in NAME_RULES:
        if re.fullmatch(pattern, normalised):
            candidates = [specs[row] for row in row_names if row in specs]
            memory_gb = memory_gib if memory_gib is not None else _memory_from_name_gb(normalised)
            spec = _pick_by_memory(candidates, memory_gb)
            if spec is None or memory_gib is None:
                return spec
            return spec if abs(spec.memory_gb - memory_gib) <= MEMORY_TOLERANCE * spec.memory_gb else None
    return None
