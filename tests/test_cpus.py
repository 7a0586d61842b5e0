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
    # bf16 on Intel runs on AMX: oneDNN's all-core benchdnn figure, 42.9 / (112 x 2.0 x 1024 / 1000) = 0.19
    assert rates.fraction == pytest.approx(0.19)
    # bytes at STREAM Triad's share: 307.2 GB/s x 0.78 = 239.6 GB/s
    assert rates.bandwidth_bytes_per_s == pytest.approx(307.2e9 * 0.78)
    nchw = vs.estimate_vision_step(run, xeon).step_s
    nhwc = vs.estimate_vision_step(run.model_copy(update={"channels_last": True}), xeon).step_s
    assert nchw == pytest.approx(nhwc)


def test_a_cpu_has_no_fp16_rate():
    run = vs.VisionStepInput(model=vision_model("resnet50"), micro_batch=32, precision="amp-fp16")
    with pytest.raises(ValueError, match="no fp16 rate"):
        vs.estimate_vision_step(run, find_cpu("EPYC-9654"))


def test_vector_unit_gemms_keep_the_default_fraction():
    """fp32 on any CPU, and AMD's bf16 (VDPBF16PS), run on the AVX-512 units: no AMX figure applies,
    the default 0.80 x sustained clocks 0.825 = 0.66."""
    fp32 = vs.VisionStepInput(model=vision_model("resnet50"), micro_batch=32, precision="fp32")
    bf16 = fp32.model_copy(update={"precision": "amp-bf16"})
    assert vs.step_rates(find_cpu("Xeon-Platinum-8480+"), fp32).fraction == pytest.approx(0.66)
    assert vs.step_rates(find_cpu("EPYC-9654"), bf16).fraction == pytest.approx(0.66)
    # EPYC 9654: 12 channels x 4800 MT/s x 8 bytes = 460.8 GB/s; x 0.78 = 359.4 GB/s
    assert vs.step_rates(find_cpu("EPYC-9654"), bf16).bandwidth_bytes_per_s == pytest.approx(359.424e9)


def test_the_optimizer_step_moves_at_the_stream_bandwidth():
    """The optimizer's fp32 bytes over 307.2 GB/s x 0.78: the same bytes take 1 / 0.78 of their
    time at the DRAM peak."""
    xeon = find_cpu("Xeon-Platinum-8480+")
    run = vs.VisionStepInput(model=vision_model("resnet50"), micro_batch=32, precision="amp-bf16")
    rates = vs.step_rates(xeon, run)
    moved = 1e9
    assert vs.bandwidth_s(moved, rates) == pytest.approx(moved / (307.2e9 * 0.78))


def test_cpu_assumptions_name_the_cpu_rates():
    xeon = find_cpu("Xeon-Platinum-8480+")
    run = vs.VisionStepInput(model=vision_model("resnet50"), micro_batch=32, precision="amp-bf16")
    lines = vs.estimate_vision_step(run, xeon).assumptions
    assert "0.19 of the socket's peak" in lines[0] and "240 GB/s" in lines[0]
    assert not any("H200" in line for line in lines)
