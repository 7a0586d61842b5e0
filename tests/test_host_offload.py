"""CPU offload in the step time, worked by hand from the host link and the CPU optimizer rate
(calculators.timing.host_link), and the planner's offload only on stacks that have it.

Figures used throughout:
- PCIe 5 x16 payload per direction: 32 GT/s x 16 lanes x 128/130 / 8 = 63.0154 GB/s; x the measured
  pinned-copy fraction 55.45 / 63.02 = 55.4459 GB/s. PCIe 4 x16: half of that payload, 31.5077 x 55.45 /
  63.02 = 27.7230 GB/s (data/device_runs: 55.45 GB/s measured on an H200's PCIe 5 x16).
- CPU Adam: 4.106e9 / 16 = 256.625e6 parameters/s per core (torch's fused AdamW, measured on that
  host) x 12 host cores per GPU (default) = 3.0795e9 parameters/s.
- Llama-3.1-8B: 8,030,261,248 parameters; Llama-3.2-1B: 1,235,814,400 (tied embeddings).
"""

from __future__ import annotations

import pytest

from calculators.cost.prices import load_prices
from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue
from calculators.models.presets import get_preset
from calculators.plan.launch import launch_files
from calculators.plan.layouts import LayoutSearch, host_link_note
from calculators.plan.search import PlanRequest, plan_run
from calculators.timing.estimate import estimate_time
from calculators.timing.host_link import host_link, pcie_payload_gbytes_per_s
from calculators.timing.settings import TimeSettings
from calculators.workload.compatibility import cpu_offload_problem
from calculators.workload.training import TrainingSettings

H100 = find_gpu("H100-SXM5-80GB")
A100 = find_gpu("A100-SXM4-80GB")
LLAMA_8B = get_preset("llama-3.1-8b")
LLAMA_1B = get_preset("llama-3.2-1b")
TIME = TimeSettings(dataset_tokens=1e9)
PCIE5_GBS = 55.4459  # 63.0154 x 55.45 / 63.02
PCIE4_GBS = 27.7230  # 31.5077 x 55.45 / 63.02
CPU_ADAM_PARAMS_PER_S = 3.0795e9  # 12 cores x 256.625e6


def test_host_link_rates_by_generation_and_superchip():
    """PCIe 5 x16 = 63.0154 GB/s payload each way; H100 (PCIe 5) 55.446, A100 (PCIe 4) 27.723 GB/s;
    GH200's NVLink-C2C 375 GB/s in, 297 GB/s out (measured); a given rate overrides; TPUs and
    Trainium have no host link figure."""
    assert pcie_payload_gbytes_per_s(5) == pytest.approx(63.0154, rel=1e-5)
    assert pcie_payload_gbytes_per_s(3) == pytest.approx(15.7538, rel=1e-5)  # 8 x 16 x 128/130 / 8
    assert host_link(H100).h2d_gbytes_per_s == pytest.approx(PCIE5_GBS, rel=1e-5)
    assert host_link(A100).d2h_gbytes_per_s == pytest.approx(PCIE4_GBS, rel=1e-5)
    gh200 = host_link(find_gpu("GH200-96GB"))
    assert (gh200.h2d_gbytes_per_s, gh200.d2h_gbytes_per_s) == (375.0, 297.0)
    assert host_link(H100, 20.0).h2d_gbytes_per_s == 20.0
    assert host_link(find_gpu("TPU-v6e")) is None
    assert host_link(find_gpu("Trainium2-96GB")) is None


def test_optimizer_offload_on_one_h100_llama_8b():
    """Llama-3.1-8B, 1 x H100, ZeRO-3, 4 x 2048 tokens, one micro-batch, optimizer offloaded.
    Gradients out: 8,030,261,248 x 2 B = 16.0605 GB / 55.4459 GB/s = 0.289661 s, under the
    micro-batch's backward (compute about 0.76 s > 0.29 s: hidden). CPU Adam: 8.03026e9 / 3.0795e9
    = 2.607651 s. Parameters back: 16.0605 GB / 55.4459 = 0.289661 s. The step waits for
    2.607651 + 0.289661 = 2.897312 s; 0.579322 s on the link in all; no optimizer on the GPU."""
    settings = TrainingSettings(zero=3, micro_batch=4, seq_len=2048, offload_optimizer=True)
    estimate = estimate_time(LLAMA_8B, settings, H100, TIME)
    assert estimate.compute_by_class_s["optimizer"] == 0.0
    assert estimate.compute_s > 0.289661  # the gradients hide under the backward
    assert estimate.cpu_optimizer_s == pytest.approx(2.607651, rel=1e-4)
    assert estimate.host_transfer_s == pytest.approx(0.579322, rel=1e-4)
    assert estimate.host_exposed_s == pytest.approx(2.897312, rel=1e-4)
    assert estimate.host_link_gbytes_per_s == pytest.approx(PCIE5_GBS, rel=1e-5)
    assert estimate.step_s == pytest.approx(estimate.compute_s + 2.897312, rel=1e-4)  # one GPU: no traffic
    assert any("PCIe 5 x16" in line for line in estimate.assumptions)


def test_optimizer_offload_scales_with_the_host_cores():
    """The CPU step is linear in cores: 24 cores halve it, 2.607651 / 2 = 1.303826 s."""
    settings = TrainingSettings(zero=3, micro_batch=4, seq_len=2048, offload_optimizer=True)
    more_cores = TIME.model_copy(update={"host_cores_per_gpu": 24.0})
    assert estimate_time(LLAMA_8B, settings, H100, more_cores).cpu_optimizer_s == pytest.approx(1.303826, rel=1e-4)


def test_parameter_and_optimizer_offload_on_two_a100s_llama_1b():
    """Llama-3.2-1B, 2 x A100 (PCIe 4), ZeRO-3, 1 x 512 tokens, 4 micro-batches, parameters and
    optimizer offloaded. Each GPU's share of the weights, 1,235,814,400 / 2 x 2 B = 1.23581 GB,
    streams in twice per micro-batch: 2.47163 GB / 27.7230 GB/s = 0.089155 s, more than the
    micro-batch's compute w, so each of the 4 micro-batches waits 0.089155 - w. Gradients out:
    617,907,200 x 2 B = 1.23581 GB / 27.7230 = 0.044577 s, under the last micro-batch's window. No
    parameters back (they live on the host). CPU Adam: 617,907,200 / 3.0795e9 = 0.200652 s.
    Exposed = 4 x (0.089155 - w) + 0.200652; on the link 4 x 0.089155 + 0.044577 = 0.401195 s."""
    settings = TrainingSettings(
        gpus=2, zero=3, micro_batch=1, seq_len=512, grad_accum=4, offload_optimizer=True, offload_parameters=True
    )
    estimate = estimate_time(LLAMA_1B, settings, A100, TIME)
    window = estimate.compute_s / 4
    assert window < 0.044577  # the weights, and the gradients, take longer than a micro-batch's compute
    assert estimate.cpu_optimizer_s == pytest.approx(0.200652, rel=1e-4)
    assert estimate.host_transfer_s == pytest.approx(0.401195, rel=1e-4)
    assert estimate.host_exposed_s == pytest.approx(4 * (0.089155 - window) + 0.200652, rel=1e-4)
    # the step pays at least the link's time for the weights of every micro-batch, plus the CPU step
    assert estimate.step_s >= 4 * 0.089154 + 0.200651  # rounded down


def test_a_parameter_offloaded_h100_layout_pays_the_weights_over_pcie_each_micro_batch():
    """What the planner times for Llama-3.1-8B with parameters offloaded on one H100: 1 x 2048
    tokens per micro-batch, 4 micro-batches. Per micro-batch 2 x 16.0605 GB / 55.4459 GB/s =
    0.579322 s at least, so the step is at least 4 x 0.579322 = 2.317288 s plus the CPU step
    2.607651 s = 4.924939 s; the layout's note says so in words."""
    base = TrainingSettings(seq_len=2048)
    search = LayoutSearch(LLAMA_8B, base, TIME, sequences=4)
    settings = search.settings(
        zero=3, micro_batch=1, grad_accum=4, checkpointing="full", offload_optimizer=True, offload_parameters=True
    )
    estimate = search.estimate(H100, 8, settings)
    assert estimate.step_s >= 4 * 0.579321 + 2.607650  # rounded down
    note = host_link_note(search, H100, settings, estimate)
    assert "2 x 16.1 GB over PCIe 5 x16 (~55 GB/s) per micro-batch, 0.58 s" in note
    assert "2.61 s of CPU Adam per step" in note


def test_the_planner_on_one_h100_offloads_and_says_what_the_host_link_costs():
    """Llama-3.1-8B on one H100 fits only with offload (16 B a parameter with AdamW = 128 GB > 80 GB):
    the plan offloads, its reason names the host link, and its step includes the CPU step
    (at least 2.607651 s: the shard is all 8.03e9 parameters)."""
    request = PlanRequest(dataset_tokens=2e9, gpus=("H100-SXM5-80GB",), max_gpus=1, include_owned=True)
    result = plan_run(LLAMA_8B, TrainingSettings(seq_len=2048), request, load_gpu_catalogue(), [], TIME)
    assert result.plans
    for plan in result.plans:
        assert plan.offload_optimizer
        assert "host link and CPU add" in plan.reason
        assert plan.step_s >= 2.607650
        assert plan.host_link_s_per_step >= 2.607650


NO_OFFLOAD_GPUS = ("TPU-v5e", "TPU-v5p", "TPU-v6e", "TPU7x", "Trainium1-32GB", "Trainium2-96GB", "Trainium3-144GB")


def test_no_plan_on_a_tpu_or_trainium_offloads_and_their_launch_files_are_notes():
    """Every plan the search returns on TPUs and Trainium keeps states on the device, and its launch
    files are a note naming the stack (XLA or Neuron) instead of DeepSpeed/torchtune/torchtitan/accelerate."""
    for name in NO_OFFLOAD_GPUS:
        assert cpu_offload_problem(find_gpu(name)) is not None
    request = PlanRequest(dataset_tokens=2e9, gpus=NO_OFFLOAD_GPUS, max_gpus=64, deadline_hours=168)
    result = plan_run(LLAMA_8B, TrainingSettings(seq_len=2048), request, load_gpu_catalogue(), load_prices())
    returned = result.plans + [
        plan for plan in (result.best_under_deadline, result.fastest, result.cheapest) if plan is not None
    ]
    assert returned
    for plan in returned:
        assert not plan.offload_optimizer and not plan.offload_parameters, plan.gpu
        files = launch_files(plan)
        assert list(files) == ["launch_note.txt"]
        assert "no launch file" in files["launch_note.txt"]
        assert ("XLA" in files["launch_note.txt"]) or ("Neuron" in files["launch_note.txt"])


def test_cuda_rocm_and_gaudi_keep_offload_and_their_launch_files():
    """H100 and MI300X (CUDA, ROCm) and Gaudi 3 (Habana's DeepSpeed) can offload; a CUDA plan gets
    all four launch files, a Gaudi plan the DeepSpeed config and a note."""
    for name in ("H100-SXM5-80GB", "MI300X-192GB", "Gaudi3-128GB"):
        assert cpu_offload_problem(find_gpu(name)) is None
    files = {}
    for name in ("H100-SXM5-80GB", "Gaudi3-128GB"):
        request = PlanRequest(dataset_tokens=2e9, gpus=(name,), max_gpus=8)
        result = plan_run(LLAMA_8B, TrainingSettings(seq_len=2048), request, load_gpu_catalogue(), load_prices(), TIME)
        files[name] = list(launch_files(result.plans[0]))
    assert files["H100-SXM5-80GB"] == [
        "deepspeed_config.json",
        "torchtune_overrides.txt",
        "torchtitan_fragment.toml",
        "accelerate_fsdp.yaml",
    ]
    assert files["Gaudi3-128GB"] == ["deepspeed_config.json", "launch_note.txt"]
