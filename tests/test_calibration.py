"""Calibration backend without a GPU: inventory, NVML name mapping, store, import, runner, lock."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.workload.training import Overheads, TrainingSettings
from measure.calibration import inventory, runner
from measure.calibration.inventory import match_catalogue, normalise_gpu_name, read_inventory
from measure.calibration.result import BenchmarkRecord, CalibratedOverheads, CalibrationResult
from measure.calibration.runner import CalibrationBusyError, calibration_allowed, run_calibration
from measure.calibration.store import CalibrationImportError, CalibrationStore, export_json, import_json

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def private_lock_and_store(tmp_path, monkeypatch):
    """Runs here take this test's own lock file, not the one in the user's ~/.cache."""
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(tmp_path / "store" / "calibrations.sqlite3"))
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(tmp_path / "calibration.lock"))


def test_importing_the_package_does_not_import_torch_or_pynvml():
    code = (
        "import sys, measure.calibration, measure.calibration.store, measure.calibration.inventory, "
        "measure.calibration.runner, measure.calibration.benchmarks, measure.calibration.allreduce; "
        "assert 'torch' not in sys.modules and 'pynvml' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


# --- Inventory -------------------------------------------------------------------------


def test_inventory_without_a_driver_gives_a_message_not_an_exception(monkeypatch):
    pynvml = pytest.importorskip("pynvml")

    def no_driver():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    found = read_inventory()
    assert found.gpus == []
    assert found.message.startswith("No NVIDIA driver found (NVML: ")
    assert "Driver Not Loaded" in found.message


def test_inventory_without_pynvml_gives_a_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    found = read_inventory()
    assert found.gpus == [] and found.message.startswith("No NVIDIA driver found")


class _NotSupported(Exception):
    pass


def _fake_pynvml(name: str = "NVIDIA H100 80GB HBM3") -> types.SimpleNamespace:
    """An NVML with one H100 whose power and NVLink queries are not supported."""
    GIB = 2**30

    def not_supported(*_args):
        raise _NotSupported("Not Supported")

    memory = types.SimpleNamespace(total=int(79.65 * GIB), free=int(79.0 * GIB), used=int(0.65 * GIB))
    clocks = {0: 1980, 2: 2619}
    return types.SimpleNamespace(
        NVMLError=_NotSupported,
        NVML_NVLINK_MAX_LINKS=18,
        NVML_FEATURE_ENABLED=1,
        NVML_CLOCK_SM=0,
        NVML_CLOCK_MEM=2,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: "550.54.15",
        nvmlSystemGetCudaDriverVersion=lambda: 12040,
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda index: f"handle-{index}",
        nvmlDeviceGetName=lambda handle: name.encode(),  # old releases return bytes
        nvmlDeviceGetMemoryInfo=lambda handle: memory,
        nvmlDeviceGetMaxClockInfo=lambda handle, clock: clocks[clock],
        nvmlDeviceGetEnforcedPowerLimit=not_supported,
        nvmlDeviceGetMaxPcieLinkGeneration=lambda handle: 5,
        nvmlDeviceGetMaxPcieLinkWidth=lambda handle: 16,
        nvmlDeviceGetNvLinkState=not_supported,
    )


def test_inventory_fields_that_nvml_does_not_support_are_none(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    found = read_inventory()
    assert len(found.gpus) == 1
    gpu = found.gpus[0]
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_total_gib == pytest.approx(79.65)
    assert (gpu.driver_version, gpu.cuda_driver_version) == ("550.54.15", "12.4")
    assert (gpu.max_sm_clock_mhz, gpu.max_mem_clock_mhz, gpu.pcie_gen, gpu.pcie_width) == (1980, 2619, 5, 16)
    assert gpu.power_limit_w is None and gpu.nvlink_links is None
    assert gpu.catalogue_name == "H100-SXM5-80GB"
    assert "1 GPU(s): NVIDIA H100 80GB HBM3" in found.message


# Real NVML names (nvidia-smi --query-gpu=name,memory.total) with the NVML memory total in GiB.
NVML_NAMES = [
    ("NVIDIA H100 80GB HBM3", 79.6, "H100-SXM5-80GB"),
    ("NVIDIA H100 PCIe", 79.6, "H100-PCIe-80GB"),
    ("NVIDIA H100 NVL", 93.6, "H100-NVL-94GB"),
    ("NVIDIA H200", 140.4, "H200-SXM-141GB"),
    ("NVIDIA H200 NVL", 140.4, "H200-NVL-141GB"),
    ("NVIDIA GH200 480GB", 94.5, "GH200-96GB"),
    ("NVIDIA GH200 144G HBM3e", 139.8, None),  # no 144 GB row in the catalogue
    ("NVIDIA A100-SXM4-80GB", 80.0, "A100-SXM4-80GB"),
    ("NVIDIA A100-SXM4-40GB", 40.0, "A100-SXM4-40GB"),
    ("NVIDIA A100-PCIE-40GB", 40.0, "A100-PCIe-40GB"),
    ("NVIDIA A100 80GB PCIe", 80.0, "A100-PCIe-80GB"),
    ("NVIDIA A10", 22.5, "A10-24GB"),
    ("NVIDIA A10G", 22.5, "A10G-24GB"),
    ("NVIDIA A30", 24.0, "A30-24GB"),
    ("NVIDIA A40", 45.0, "A40-48GB"),
    ("NVIDIA RTX A6000", 48.0, "RTX-A6000-48GB"),
    ("NVIDIA GeForce RTX 3090", 24.0, "RTX-3090-24GB"),
    ("NVIDIA GeForce RTX 4090", 24.0, "RTX-4090-24GB"),
    ("NVIDIA GeForce RTX 5090", 31.8, "RTX-5090-32GB"),
    ("NVIDIA RTX 6000 Ada Generation", 48.0, "RTX-6000-Ada-48GB"),
    ("Quadro RTX 6000", 24.0, "Quadro-RTX-6000-24GB"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 95.6, "RTX-PRO-6000-Blackwell-96GB"),
    ("NVIDIA L4", 22.5, "L4-24GB"),
    ("NVIDIA L40", 45.0, "L40-48GB"),
    ("NVIDIA L40S", 45.0, "L40S-48GB"),
    ("Tesla T4", 15.0, "T4-16GB"),
    ("Tesla V100-SXM2-16GB", 15.8, "V100-SXM2-16GB"),
    ("Tesla V100-SXM2-32GB", 31.7, "V100-SXM2-32GB"),
    ("Tesla V100-PCIE-32GB", 31.7, "V100-PCIe-32GB"),
    ("Tesla P100-PCIE-16GB", 15.9, "P100-16GB"),
    ("NVIDIA B200", 179.1, "B200-SXM-180GB"),
    # Look-alikes that are other chips and must not match a row:
    ("NVIDIA H20", 95.6, None),
    ("NVIDIA H800", 79.6, None),
    ("NVIDIA A800-SXM4-80GB", 80.0, None),
    ("Tesla V100S-PCIE-32GB", 31.7, None),
    ("NVIDIA GeForce RTX 4090 D", 24.0, None),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", 16.0, None),
    ("NVIDIA GeForce RTX 3090 Ti", 24.0, None),
]


@pytest.mark.parametrize(("nvml_name", "memory_gib", "expected"), NVML_NAMES)
def test_nvml_names_map_to_catalogue_rows(nvml_name, memory_gib, expected):
    spec = match_catalogue(nvml_name, memory_gib=memory_gib)
    assert (spec.name if spec else None) == expected


def test_name_mapping_uses_the_size_in_the_name_without_a_memory_figure():
    assert match_catalogue("NVIDIA A100-SXM4-40GB").name == "A100-SXM4-40GB"
    assert match_catalogue("NVIDIA H100 80GB HBM3").name == "H100-SXM5-80GB"
    assert normalise_gpu_name("NVIDIA A100-SXM4-80GB") == "A100 SXM4 80GB"


def test_name_mapping_rejects_a_memory_size_far_from_the_row():
    assert match_catalogue("NVIDIA H100 PCIe", memory_gib=40.0) is None


def test_name_mapping_works_with_a_user_catalogue_lacking_the_row():
    only_a10 = [spec for spec in inventory.load_gpu_catalogue() if spec.name == "A10-24GB"]
    assert match_catalogue("NVIDIA H100 PCIe", only_a10) is None
    assert match_catalogue("NVIDIA A10", only_a10).name == "A10-24GB"


# --- Result and store ---------------------------------------------------------------


def _result(host: str = "box", gpu: str | None = "NVIDIA H100 80GB HBM3", minutes: int = 0) -> CalibrationResult:
    created = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC) + dt.timedelta(minutes=minutes)
    return CalibrationResult(
        host=host,
        device="cuda:0",
        gpu_name=gpu,
        created_at=created,
        budget_s=110,
        records=[BenchmarkRecord(name="matmul_bf16", value=790.0, unit="TFLOPS", percent_of_datasheet=79.9)],
        overheads=CalibratedOverheads(cuda_context_gib=0.52, cublas_workspace_gib=0.008),
        utilisation={"bf16": 0.799},
    )


def test_calibrated_overheads_replace_only_measured_fields_and_change_the_estimate():
    applied = _result().apply_to_overheads(Overheads(nccl_gib=2.0))
    assert applied.cuda_context_gib == 0.52 and applied.cublas_workspace_gib == 0.008
    assert applied.allocator_reserve_fraction == Overheads().allocator_reserve_fraction and applied.nccl_gib == 2.0
    spec = get_preset("llama-3.1-8b")
    default = estimate_memory(spec, TrainingSettings())
    calibrated = estimate_memory(spec, TrainingSettings(overheads=applied))
    expected_change = (0.52 + 0.008) - (Overheads().cuda_context_gib + Overheads().cublas_workspace_gib)
    assert calibrated.peak_gib - default.peak_gib == pytest.approx(expected_change)


def test_utilisation_for_a_training_precision():
    result = _result()
    assert result.utilisation_for("bf16-mixed") == 0.799
    assert result.utilisation_for("amp-bf16") == 0.799
    assert result.utilisation_for("fp32") is None


# The store's own tests run against SQLite and PostgreSQL in test_calibration_store.py.


def test_export_then_import_gives_the_same_result():
    result = _result()
    assert import_json(export_json(result)) == result
    assert import_json(export_json(result).encode()) == result
    assert CalibrationStore.import_json(CalibrationStore.export_json(result)) == result


@pytest.mark.parametrize(
    ("text", "message_start"),
    [
        ("{not json", "not valid JSON: "),
        ("", "not valid JSON: "),
        (b"\xff\xfe\x00", "not valid JSON: "),
        ("[1, 2]", "not a calibration result: expected a JSON object, got list"),
        ('{"foo": 1}', "not a calibration result: "),
        ("[" * 100_000, "not valid JSON"),
    ],
)
def test_import_of_malformed_json_raises_a_one_line_error(text, message_start):
    with pytest.raises(CalibrationImportError) as caught:
        import_json(text)
    message = str(caught.value)
    assert message.startswith(message_start) and "\n" not in message


def test_import_of_a_wrong_schema_names_the_field():
    data = json.loads(export_json(_result()))
    data["records"][0]["value"] = "fast"
    with pytest.raises(CalibrationImportError, match=r"^not a calibration result: records\.0\.value: "):
        import_json(json.dumps(data))


def test_import_of_a_huge_file_is_refused_before_parsing():
    huge = '{"host": "' + "x" * 5_100_000 + '"}'
    with pytest.raises(CalibrationImportError, match=r"^file too large: 5\.1 MB \(limit 5 MB\)$"):
        import_json(huge)


# --- Runner -----------------------------------------------------------------------------


def test_calibration_allowed_reads_the_environment_variable():
    assert calibration_allowed({"GPU_SIZING_ALLOW_CALIBRATION": "1"})
    assert not calibration_allowed({"GPU_SIZING_ALLOW_CALIBRATION": "0"})
    assert not calibration_allowed({})


GPU_ONLY = ("matmul_tf32", "matmul_bf16", "matmul_fp16", "matmul_fp8", "host_to_device", "allreduce")


def test_without_torch_every_benchmark_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    result = run_calibration(device="auto", budget_s=5)
    assert result.records and all(r.skipped_reason.startswith("torch is not installed") for r in result.records)
    assert result.torch_version is None


def test_cpu_calibration_finishes_in_its_budget_and_skips_gpu_benchmarks_with_reasons():
    pytest.importorskip("torch")
    progress: list[tuple[str, float]] = []
    started = time.perf_counter()
    result = run_calibration(device="cpu", budget_s=3, progress=lambda label, f: progress.append((label, f)))
    elapsed = time.perf_counter() - started
    # The budget is a bound on planned work; a loaded CI machine adds scheduling delay, so
    # this only catches a run that ignores its budget (the speed figure is a bench's job).
    assert elapsed < 3 * 3
    assert result.device == "cpu" and result.duration_s == pytest.approx(elapsed, abs=0.5)
    for name in GPU_ONLY + ("epoch_cuda_fp32", "epoch_cuda_mixed"):
        record = result.record(name)
        assert record is not None and record.value is None and record.skipped_reason, name
    fixed = result.record("fixed_overhead")
    assert fixed.value == 0.0 and "CPU" in fixed.skipped_reason
    for name in ("matmul_fp32", "memory_bandwidth", "training_step", "epoch_cpu_fp32"):
        assert result.record(name).ok and result.record(name).value > 0, result.record(name)
    assert result.record("training_step").details["mfu"] > 0
    assert result.overheads == CalibratedOverheads() and result.utilisation == {}
    assert progress[0] == ("Fixed memory overhead", 0.0) and progress[-1] == ("Done", 1.0)
    assert import_json(export_json(result)) == result


def _fake_record(name: str) -> BenchmarkRecord:
    return BenchmarkRecord(name=name, value=1.0, unit="x")


def _fast_benchmarks(monkeypatch):
    """Replace the CPU benchmarks with instant fakes (the runner still needs torch to pick the device)."""
    pytest.importorskip("torch")
    bench = runner.benchmarks
    monkeypatch.setattr(bench, "matmul_tflops", lambda device, precision, **_: _fake_record(f"matmul_{precision}"))
    monkeypatch.setattr(bench, "memory_bandwidth_gbps", lambda *_: _fake_record("memory_bandwidth"))
    step = BenchmarkRecord(name="training_step", value=0.1, unit="s", details={"micro_batch": 4, "precision": "fp32"})
    monkeypatch.setattr(bench, "training_step_benchmark", lambda *_, **__: step)
    monkeypatch.setattr(runner.vision, "vision_comparison", lambda *_: [])  # tests/test_calibration_vision.py runs it


def test_a_failing_benchmark_becomes_an_error_record(monkeypatch):
    _fast_benchmarks(monkeypatch)

    def broken(*_args):
        raise RuntimeError("copy engine on fire\nsecond line")

    monkeypatch.setattr(runner.benchmarks, "memory_bandwidth_gbps", broken)
    result = run_calibration(device="cpu", budget_s=5)
    assert result.record("memory_bandwidth").error == "RuntimeError: copy engine on fire"
    assert result.record("training_step").ok and result.record("epoch_cpu_fp32").value == pytest.approx(512 * 0.1)


def test_benchmarks_that_no_longer_fit_are_skipped_with_the_reason(monkeypatch):
    _fast_benchmarks(monkeypatch)
    result = run_calibration(device="cpu", budget_s=0.5)  # the training step needs at least 1 s
    assert result.record("training_step").skipped_reason.startswith("out of time: ")


def test_asking_for_cuda_without_a_gpu_skips_everything_with_the_reason():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA GPU")
    result = run_calibration(device="cuda", budget_s=5)
    assert result.records and all(record.skipped_reason for record in result.records)
    assert "torch.cuda.is_available() is False" in result.records[0].skipped_reason


def test_a_second_concurrent_run_raises_busy(monkeypatch):
    _fast_benchmarks(monkeypatch)
    started, release = threading.Event(), threading.Event()

    def hold(label: str, fraction: float) -> None:
        started.set()
        release.wait(10)

    first = threading.Thread(target=run_calibration, kwargs={"device": "cpu", "budget_s": 2, "progress": hold})
    first.start()
    try:
        assert started.wait(10)
        with pytest.raises(CalibrationBusyError):
            run_calibration(device="cpu", budget_s=1)
    finally:
        release.set()
        first.join(30)
    assert run_calibration(device="cpu", budget_s=0.2).records  # the lock is free again
