"""Calibration benchmarks on the CPU (torch CPU build), and all-reduce with gloo."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.memory.engine import estimate_memory
from calculators.models.geometry import parameter_count
from measure.calibration import allreduce, benchmarks
from measure.calibration.allreduce import bus_bandwidth_gbps, run_allreduce_subprocess

torch = pytest.importorskip("torch")

TINY = (2, 128, 2048, 128, 2)  # layers, hidden, vocab, seq_len, micro_batch


def _tiny_config():
    layers, hidden, vocab, seq_len, micro_batch = TINY
    return benchmarks.reference_spec(layers, hidden, vocab, seq_len), micro_batch, seq_len


def test_matmul_on_cpu_gives_positive_tflops_and_a_datasheet_percentage():
    record = benchmarks.matmul_tflops("cpu", "fp32", shapes=[(256, 256, 256)], budget_s=0.3, gpu=find_gpu("A10-24GB"))
    assert record.ok and record.value > 0 and record.unit == "TFLOPS"
    assert record.datasheet_value == 31.2
    assert record.percent_of_datasheet == pytest.approx(100 * record.value / 31.2)
    assert record.details["best_shape"] == "256x256x256"


@pytest.mark.parametrize("precision", ["tf32", "fp8"])
def test_tensor_core_only_precisions_are_skipped_on_cpu_with_a_reason(precision):
    record = benchmarks.matmul_tflops("cpu", precision, budget_s=0.1)
    assert record.value is None and "CUDA GPU" in record.skipped_reason


def test_unknown_matmul_precision_is_skipped_with_the_choices():
    assert "expected one of fp32" in benchmarks.matmul_tflops("cpu", "int4", budget_s=0.1).skipped_reason


def test_memory_bandwidth_on_cpu_is_positive():
    record = benchmarks.memory_bandwidth_gbps("cpu", 0.3, find_gpu("H100-SXM5-80GB"), size_bytes=32 * 2**20)
    assert record.ok and record.value > 0 and record.unit == "GB/s" and record.datasheet_value == 3350


def test_gpu_only_benchmarks_report_reasons_on_cpu():
    assert benchmarks.host_to_device_gbps("cpu", 0.1).skipped_reason == "host-to-device copies need a CUDA GPU"
    fixed = benchmarks.fixed_overhead_gib("cpu")
    assert fixed.value == 0.0 and "CPU" in fixed.skipped_reason


def test_pcie_link_rate():
    assert benchmarks.pcie_gbps(5, 16) == pytest.approx(63.0, rel=0.01)
    assert benchmarks.pcie_gbps(4, 16) == pytest.approx(31.5, rel=0.01)
    assert benchmarks.pcie_gbps(None, 16) is None


def test_reference_spec_is_llama_style_with_grouped_query_attention():
    spec, _, _ = _tiny_config()
    # hidden 128 -> 2 heads of 64, 1 k/v head; SwiGLU 8/3 x 128 = 341 rounded up to 6 x 64
    assert (spec.n_heads, spec.n_kv_heads, spec.attention_head_dim, spec.ffn_hidden_size) == (2, 1, 64, 384)
    assert (spec.norm, spec.position_embedding, spec.activation, spec.tied_embeddings) == (
        "rmsnorm",
        "rope",
        "swiglu",
        False,
    )


def test_the_calibration_trains_the_traces_reference_transformer(monkeypatch):
    from measure.trace import models

    built = []

    def spy(spec, attention="fused", checkpointing="none"):
        model = models.ReferenceTransformer(spec, attention, checkpointing)
        built.append((attention, checkpointing, model))
        return model

    monkeypatch.setattr(models, "build_model", spy)
    record = benchmarks.training_step_benchmark("cpu", budget_s=0.5, config=_tiny_config(), with_mfu=False)
    assert record.ok and [(a, c) for a, c, _ in built] == [("fused", "none")]
    # per layer: q 128x128 + k, v 128x64 + o 128x128 = 49,152; SwiGLU 3 x 128 x 384 = 147,456;
    # 2 norms 256 -> 196,864 x 2 layers = 393,728; embedding and LM head 2 x 2048 x 128 = 524,288;
    # final norm 128. Total 918,144.
    assert sum(p.numel() for p in built[0][2].parameters()) == 918_144
    assert record.details["parameters"] == 918_144 == parameter_count(_tiny_config()[0]).total


def test_training_step_on_cpu_gives_step_time_mfu_and_the_estimate():
    record = benchmarks.training_step_benchmark("cpu", budget_s=1.0, config=_tiny_config(), peak_tflops=0.1)
    assert record.ok and record.value > 0 and record.unit == "s"
    details = record.details
    assert details["precision"] == "fp32" and details["timed_steps"] >= 1
    assert details["tokens_per_s"] == pytest.approx(TINY[3] * TINY[4] / record.value)
    spec = _tiny_config()[0]
    assert details["achieved_tflops"] == pytest.approx(
        6 * parameter_count(spec).matmul_total * 256 / record.value / 1e12
    )
    assert details["mfu"] == pytest.approx(details["achieved_tflops"] / 0.1)
    assert details["peak_source"] == "given (measured matmul)"
    settings = benchmarks._reference_settings(TINY[4], TINY[3], "fp32")
    assert details["estimated_allocated_gib"] == pytest.approx(estimate_memory(spec, settings).allocated_gib)
    assert "not measured on the CPU" in details["memory_comparison"]
    assert details["energy"].startswith("not measured") and "energy_j" not in details


class _FakeNvml:
    """pynvml with an energy counter that reads 1,000,000 mJ, then 1,450,000 mJ."""

    class NVMLError(Exception):
        pass

    def __init__(self):
        self.readings_mj = [1_000_000, 1_450_000]

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return self.readings_mj.pop(0)


def test_energy_meter_turns_the_nvml_counter_into_energy_and_power(monkeypatch):
    import sys

    from measure.calibration import power

    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    clock = iter([10.0, 11.5])  # the timed steps took 1.5 s
    monkeypatch.setattr(power.time, "perf_counter", lambda: next(clock))
    meter = power.EnergyMeter(0)
    meter.start()
    meter.stop()
    details = meter.details(steps=3, tokens_per_step=4096, tdp_w=700.0)
    # 1,450,000 - 1,000,000 mJ = 450 J over 1.5 s = 300 W, 150 J a step, 450 / (3 x 4096) = 0.0366 J a token;
    # 300 W of a 700 W TDP is 0.4286.
    assert details["energy_j"] == pytest.approx(450.0)
    assert details["mean_power_w"] == pytest.approx(300.0)
    assert details["energy_per_step_j"] == pytest.approx(150.0)
    assert details["energy_per_token_j"] == pytest.approx(450 / 12288)
    assert details["power_fraction_of_tdp"] == pytest.approx(300 / 700)
    assert power.training_energy_text(details) == (
        "Training step: 300 W mean board power (43% of the board's TDP), 150.0 J per step, 36.62 mJ per token "
        "(NVML energy counter, warm-up steps left out)."
    )


def test_energy_meter_says_why_when_the_gpu_has_no_energy_counter(monkeypatch):
    import sys

    from measure.calibration import power

    fake = _FakeNvml()

    def refuse(handle):
        raise fake.NVMLError("Not Supported")

    fake.nvmlDeviceGetTotalEnergyConsumption = refuse
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    meter = power.EnergyMeter(0)
    meter.start()
    meter.stop()
    assert meter.details(steps=1, tokens_per_step=1, tdp_w=None) == {
        "energy": "not measured: this GPU has no NVML energy counter (Not Supported)"
    }


def test_training_step_refuses_master_weight_precisions_with_a_reason():
    record = benchmarks.training_step_benchmark("cpu", budget_s=1.0, precision="bf16-mixed", config=_tiny_config())
    assert record.value is None and "master-weight" in record.skipped_reason


def test_epoch_comparison_on_cpu_prices_the_cpu_epoch_and_skips_the_gpu_rows(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA GPU")
    monkeypatch.setattr(benchmarks, "epoch_config", _tiny_config)
    records = benchmarks.epoch_comparison(budget_s=1.0, usd_per_hour=3.6, samples=64)
    by_name = {record.name: record for record in records}
    cpu = by_name["epoch_cpu_fp32"]
    assert cpu.ok and cpu.details["steps"] == 32
    assert cpu.value == pytest.approx(32 * cpu.details["step_s"])
    assert cpu.details["cost_usd"] == pytest.approx(cpu.value / 3600 * 3.6)
    for name in ("epoch_cuda_fp32", "epoch_cuda_mixed"):
        assert "no CUDA GPU" in by_name[name].skipped_reason


def test_bus_bandwidth_formula():
    assert bus_bandwidth_gbps(10.0, 2) == 10.0
    assert bus_bandwidth_gbps(10.0, 4) == 15.0  # x 2(n-1)/n = 1.5
    assert bus_bandwidth_gbps(10.0, 8) == 17.5
    with pytest.raises(ValueError):
        bus_bandwidth_gbps(10.0, 0)


def test_allreduce_with_gloo_in_two_processes():
    measured = run_allreduce_subprocess(nproc=2, backend="gloo", size_mb=1.0, timeout_s=60, iters=5)
    assert measured["world_size"] == 2 and measured["backend"] == "gloo"
    assert measured["algbw_gbps"] > 0
    assert measured["busbw_gbps"] == pytest.approx(measured["algbw_gbps"])  # 2(n-1)/n = 1 for n = 2
    assert measured["algbw_gbps"] == pytest.approx(measured["size_bytes"] / measured["time_s"] / 1e9)


def test_allreduce_failure_is_reported_with_the_end_of_stderr(monkeypatch):
    failing = [sys.executable, "-c", "import sys; sys.stderr.write('rank 0 failed: no route'); sys.exit(3)"]
    monkeypatch.setattr(allreduce, "torchrun_command", lambda *_: failing)
    with pytest.raises(RuntimeError, match=r"^torchrun exited with code 3: rank 0 failed: no route$"):
        allreduce.run_allreduce_subprocess(nproc=2, timeout_s=30)


def test_allreduce_that_hangs_is_killed_at_the_timeout(monkeypatch):
    monkeypatch.setattr(allreduce, "torchrun_command", lambda *_: [sys.executable, "-c", "import time; time.sleep(60)"])
    started = time.perf_counter()
    with pytest.raises(TimeoutError, match="did not finish in 0.5 s"):
        allreduce.run_allreduce_subprocess(nproc=2, timeout_s=0.5)
    assert time.perf_counter() - started < 10


def test_torchrun_command_uses_this_python():
    command = allreduce.torchrun_command(2, "gloo", 8.0, 20, Path("out.json"))
    assert command[:4] == [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    assert "--nproc_per_node=2" in command and command[-2:] == ["--out", "out.json"]


def test_tf32_switch_is_restored_after_the_benchmark():
    matmul = torch.backends.cuda.matmul
    name = "fp32_precision" if hasattr(matmul, "fp32_precision") else "allow_tf32"
    before = getattr(matmul, name)
    with benchmarks._tf32(True):
        assert getattr(matmul, name) in ("tf32", True)
    assert getattr(matmul, name) == before
