"""Server CPUs as training devices: data/cpus.csv, one sourced row per CPU (one socket).

Each row gives the vendor's core count, base clock, memory channels and speed, TDP and price, and
the FLOPs one core does per cycle in FP32 (AVX-512 FMA) and BF16 (Intel AMX tiles; AMD's
AVX512_BF16 dot products), each with its source in the row's notes. The peaks are derived once
here (cores x base clock x FLOPs per cycle; channels x MT/s x 8 bytes) and the CPU becomes a
`GpuSpec`, so the time model trains on it like any accelerator: it has no TF32, no tensor-core
shape curve (calculators.timing.vision_step treats a CPU's GEMMs as the fp32 ones) and no
interconnect. What a CPU reaches of those peaks is not what a GPU reaches: AMX_GEMM_FRACTION and
STREAM_FRACTION below, each from a published measurement.
"""

from __future__ import annotations

import csv
import datetime as dt
from functools import cache
from pathlib import Path

from pydantic import BaseModel, Field

from calculators import DATA_DIR
from calculators.hardware.catalogue import GpuSpec
from calculators.hardware.csv_rows import check_public_source

DEFAULT_CPU_PATH = DATA_DIR / "cpus.csv"
BYTES_PER_TRANSFER = 8  # one 64-bit DDR5 channel moves 8 bytes per transfer (two 32-bit subchannels)

# What an Intel AMX BF16 GEMM reaches of the nominal peak (cores x base clock x 1,024) with every
# core busy: benchdnn's bf16 matmul 4096x5120:5120x15360 (oneDNN v3.2, brg:avx512_core_amx) on two
# 56-core Sapphire Rapids sockets ran at 42.9 TFLOPS at best, "about 20% of the peak" in the
# reporter's words (https://github.com/uxlfoundation/oneDNN/issues/1992): 42.9 / (112 x 2.0 GHz x
# 1,024 = 229.4 TFLOPS) = 0.19. The same run on 16 cores per socket reached 33%: the tiles starve
# for operands when every core feeds them, and a training step uses every core. The figure
# includes the clock under AMX load, so no sustained-clock factor goes on top. Granite Rapids
# (Xeon 6) has the same TMUL tile size; the same fraction is assumed for it.
AMX_GEMM_FRACTION = 0.19
# What a memory-bound kernel reaches of the DDR5 peak: STREAM Triad, 650-780 GB/s on Azure HBv4
# (two 96-core EPYC Genoa-X sockets, 24 channels of DDR5-4800 = 921.6 GB/s peak), Microsoft's
# expected results (https://learn.microsoft.com/en-us/azure/high-performance-computing/
# performance-benchmarking/stream-benchmark): the middle, 715 / 921.6 = 0.78. Taken for every CPU
# of the file (an assumption: the same DDR5 controllers' efficiency on Intel's parts).
STREAM_FRACTION = 0.78


class CpuRow(BaseModel):
    """One CPU socket as data/cpus.csv lists it."""

    name: str = Field(min_length=1)
    vendor: str
    cores: int = Field(gt=0, le=1024)
    base_ghz: float = Field(gt=0, le=10)
    fp32_flops_per_cycle_per_core: float = Field(gt=0)
    bf16_flops_per_cycle_per_core: float = Field(gt=0)
    memory_channels: int = Field(gt=0, le=64)
    memory_mts: float = Field(gt=0, le=20_000)
    memory_gb: float = Field(gt=0)
    tdp_w: float = Field(gt=0)
    launch_year: int
    price_usd: float = Field(gt=0)
    source: str
    as_of: dt.date
    notes: str = ""


def peak_tflops(cores: int, base_ghz: float, flops_per_cycle_per_core: float) -> float:
    """Dense peak of all cores at the base clock: cores x GHz x FLOPs per cycle / 1000."""
    return cores * base_ghz * flops_per_cycle_per_core / 1000


def memory_bandwidth_tbps(channels: int, mega_transfers_per_s: float) -> float:
    """Peak DRAM bandwidth: channels x MT/s x 8 bytes, in TB/s."""
    return channels * mega_transfers_per_s * 1e6 * BYTES_PER_TRANSFER / 1e12


def as_device(row: CpuRow) -> GpuSpec:
    """The CPU as the time model's device record."""
    return GpuSpec(
        name=row.name,
        vendor=row.vendor,
        category="datacenter",
        form_factor="CPU socket",
        memory_gb=row.memory_gb,
        memory_type="DDR5",
        memory_bandwidth_tbps=memory_bandwidth_tbps(row.memory_channels, row.memory_mts),
        fp32_tflops=peak_tflops(row.cores, row.base_ghz, row.fp32_flops_per_cycle_per_core),
        bf16_tflops=peak_tflops(row.cores, row.base_ghz, row.bf16_flops_per_cycle_per_core),
        tdp_w=row.tdp_w,
        launch_year=row.launch_year,
        price_usd=row.price_usd,
        price_kind="msrp",
        source=row.source,
        as_of=row.as_of,
        notes=row.notes or None,
    )


@cache
def load_cpus(path: Path = DEFAULT_CPU_PATH) -> tuple[GpuSpec, ...]:
    """Every CPU of the file as a device; a row that does not name a public document is refused."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        rows = [CpuRow.model_validate(row) for row in csv.DictReader(handle)]
    for row in rows:
        check_public_source(row.source)
    return tuple(as_device(row) for row in rows)


def is_cpu(device: GpuSpec) -> bool:
    """Whether a device record is one of the CPUs of data/cpus.csv."""
    return device.form_factor == "CPU socket"


def uses_amx(device: GpuSpec, compute_format: str) -> bool:
    """Whether the device's GEMMs in `compute_format` run on Intel's AMX tiles: bf16 on the Intel
    rows (their bf16 rate is AMX's, data/cpus.csv notes); AMD's bf16 and every fp32 GEMM run on
    the AVX-512 vector units."""
    return is_cpu(device) and device.vendor == "Intel" and compute_format == "bf16"


def find_cpu(name: str) -> GpuSpec | None:
    """The CPU called `name` (case-insensitive), or None."""
    wanted = name.strip().casefold()
    return next((cpu for cpu in load_cpus() if cpu.name.casefold() == wanted), None)
