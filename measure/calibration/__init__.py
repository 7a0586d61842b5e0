"""Live calibration on a GPU host: measure this host's matmul rates, bandwidths, fixed
memory overheads and a real training step, store them, and apply them to estimates.

Importing this package does not import torch or pynvml; the benchmarks import them when
they run. Check a request with `check_calibration_request()`, start with `run_calibration()`
(runner; one run per host at a time, `host_lock`), keep results in a `CalibrationStore`
(store), and apply one with `CalibrationResult.apply_to_overheads()` and
`CalibrationResult.utilisation_for()` (result). `run_collective_calibration()` sweeps collectives
across this host's GPUs or across nodes (collectives, collective_launch).
"""

from measure.calibration.inventory import GpuInfo, GpuInventory, Inventory, match_catalogue, read_inventory
from measure.calibration.result import BenchmarkRecord, CalibratedOverheads, CalibrationResult
from measure.calibration.runner import (
    ALLOW_ENV_VAR,
    CalibrationBusyError,
    CalibrationRequestError,
    calibration_allowed,
    check_calibration_request,
    run_calibration,
    run_collective_calibration,
)
from measure.calibration.store import (
    CalibrationImportError,
    CalibrationStore,
    CalibrationStoreError,
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
    "CalibrationRequestError",
    "CalibrationResult",
    "CalibrationStore",
    "CalibrationStoreError",
    "GpuInfo",
    "GpuInventory",
    "Inventory",
    "calibration_allowed",
    "check_calibration_request",
    "default_store_path",
    "export_json",
    "import_json",
    "match_catalogue",
    "read_inventory",
    "run_calibration",
    "run_collective_calibration",
]
