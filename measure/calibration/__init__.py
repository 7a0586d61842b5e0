"""Live calibration on a GPU host (issue 6): measure this host's matmul rates, bandwidths,
fixed memory overheads and a real training step, store them, and apply them to estimates.

Importing this package does not import torch or pynvml; the benchmarks import them when
they run. Start with `run_calibration()` (runner), keep results in a `CalibrationStore`
(store), and apply one with `CalibrationResult.apply_to_overheads()` and
`CalibrationResult.utilisation_for()` (result).
"""

from measure.calibration.inventory import GpuInfo, GpuInventory, Inventory, match_catalogue, read_inventory
from measure.calibration.result import BenchmarkRecord, CalibratedOverheads, CalibrationResult
from measure.calibration.runner import (
    ALLOW_ENV_VAR,
    CalibrationBusyError,
    calibration_allowed,
    run_calibration,
)
from measure.calibration.store import (
    CalibrationImportError,
    CalibrationStore,
    default_store_path,
    export_json,
    import_json,
)

__all__ = [
    "ALLOW_ENV_VAR",
    "BenchmarkRecord",
    "CalibratedOverheads",
    "CalibrationBusyError",
    "CalibrationImportError",
    "CalibrationResult",
    "CalibrationStore",
    "GpuInfo",
    "GpuInventory",
    "Inventory",
    "calibration_allowed",
    "default_store_path",
    "export_json",
    "import_json",
    "match_catalogue",
    "read_inventory",
    "run_calibration",
]
