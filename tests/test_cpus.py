"""Server CPUs as training devices (data/cpus.csv, calculators.hardware.cpus), by hand."""

import pytest

from calculators.hardware.cpus import find_cpu, is_cpu, load_cpus, memory_bandwidth_tbps, peak_tflops
from calculators.models.vision_library import vision_model
from calculators.timing import vision_step as vs


def test_peaks_are_cores_times_clock_times_flops_per_cycle():
    xeon = find_cpu("xeon-platinum-8480+")
    # 56 cores x 2.0 GHz x 64 FP32 FLOPs (two 512-bit FMAs) = 7.168 TFLOPS; AMX 1024 BF16: 114.688
    assert xeon.fp32_tflops == pytest.approx(7.168)
    assert xeon.bf16_tflops == pytest.approx(114.688)
    # 8 channels x 4800 MT/s x 8 bytes = 307.2 GB/s
    assert xeon.memory_bandwidth_tbps == pytest.approx(0.3072)
    assert peak_tflops(192, 2.25, 64) == pytest.approx(27.648)  # EPYC 9965 FP32
    assert memory_bandwidth_tbps(12, 6400) == pytest.approx(0.6144)


def test_the_four_cpus_are_priced_and_sourced():
    cpus = {cpu.name: cpu for cpu in load_cpus()}
    assert set(cpus) == {"Xeon-Platinum-8480+", "Xeon-6-6980P", "EPYC-9654", "EPYC-9965"}
    assert all(cpu.price_usd and cpu.tdp_w and cpu.source.startswith("https://") for cpu in cpus.values())
    assert all(is_cpu(cpu) for cpu in cpus.values())


def test_a_cpu_trains_without_the_tensor_core_curve_or_transposes():
    xeon = find_cpu("Xeon-Platinum-8480+")
    run = vs.VisionStepInput(model=vision_model("resnet50"), micro_batch=32, precision="amp-bf16")
    rates = vs.step_rates(xeon, run)
    assert not rates.conv_tensor_cores and not rates.matmul_tensor_cores
    # no measured mamf-finder figure for a CPU: the default fraction 0.80 x sustained clocks 0.825
    assert rates.fraction == pytest.approx(0.80 * 0.825)
    nchw = vs.estimate_vision_step(run, xeon).step_s
    nhwc = vs.estimate_vision_step(run.model_copy(update={"channels_last": True}), xeon).step_s
    assert nchw == pytest.approx(nhwc)


def test_a_cpu_has_no_fp16_rate():
    run = vs.VisionStepInput(model=vision_model("resnet50"), micro_batch=32, precision="amp-fp16")
    with pytest.raises(ValueError, match="no fp16 rate"):
        vs.estimate_vision_step(run, find_cpu("EPYC-9654"))
