"""The planner's offload check against each instance's host RAM (price rows' host_ram_gib), with the
256 GiB-per-GPU assumption only where a row gives none (and for owned servers)."""

from __future__ import annotations

import datetime as dt
import io

import pandas as pd
import pytest

from calculators.cost.prices import CloudPrice, load_prices
from calculators.hardware.catalogue import GpuSpec
from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.plan.exports import plan_assumptions_frame, plans_csv_bytes
from calculators.plan.search import (
    DEFAULT_HOST_MEMORY_GIB_PER_GPU,
    PlanRequest,
    host_limit_per_gpu,
    host_ram_basis,
    host_ram_fits,
    job_gpus_per_instance,
    plan_run,
)
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

GIB = 1024**3
TIME = TimeSettings(dataset_tokens=1.0, utilisation=0.5)


def price_row(
    instance_type: str, host_ram_gib: float | None, count: int = 8, usd: float = 10.0, gpu: str = "H100-SXM5-80GB"
) -> CloudPrice:
    return CloudPrice(
        provider="P",
        instance_type=instance_type,
        gpu=gpu,
        gpu_count=count,
        host_ram_gib=host_ram_gib,
        region="r1",
        on_demand_usd_per_hour=usd,
        source="test",
        as_of=dt.date(2026, 1, 1),
    )


P5 = price_row("p5.48xlarge", 2048)  # 2 TiB over 8 GPUs
P4D = price_row("p4d.24xlarge", 1152)  # 1152 GiB over 8 GPUs
UNPUBLISHED = price_row("unlisted-8x", None)


# --- hand-worked: how much of an instance's RAM one GPU of the job may use -----------------------


def test_a_plan_needing_1_5_tib_per_instance_fits_a_p5_but_not_a_p4d():
    """8 GPUs x 192 GiB of offloaded states each = 1536 GiB = 1.5 TiB on one 8-GPU instance:
    1536 <= 2048 (p5.48xlarge) fits; 1536 > 1152 (p4d.24xlarge) does not. Per GPU the limits are
    2048 / 8 = 256 GiB and 1152 / 8 = 144 GiB."""
    assert host_ram_fits(192.0, 8, P5, DEFAULT_HOST_MEMORY_GIB_PER_GPU)
    assert not host_ram_fits(192.0, 8, P4D, DEFAULT_HOST_MEMORY_GIB_PER_GPU)
    assert host_limit_per_gpu(P5, 8, DEFAULT_HOST_MEMORY_GIB_PER_GPU) == 256.0
    assert host_limit_per_gpu(P4D, 8, DEFAULT_HOST_MEMORY_GIB_PER_GPU) == 144.0
    # Two instances (16 GPUs): each instance holds 8 GPUs of the job, the same 1536 GiB each.
    assert host_ram_fits(192.0, 16, P5, DEFAULT_HOST_MEMORY_GIB_PER_GPU)
    assert not host_ram_fits(192.0, 16, P4D, DEFAULT_HOST_MEMORY_GIB_PER_GPU)


def test_a_job_smaller_than_its_instance_shares_the_whole_instance_ram():
    """2 GPUs of an 8-GPU p4d.24xlarge: 1152 / 2 = 576 GiB per GPU, so 2 x 500 = 1000 GiB fits."""
    assert job_gpus_per_instance(2, 8) == 2 and job_gpus_per_instance(16, 8) == 8
    assert host_limit_per_gpu(P4D, 2, DEFAULT_HOST_MEMORY_GIB_PER_GPU) == 576.0
    assert host_ram_fits(500.0, 2, P4D, DEFAULT_HOST_MEMORY_GIB_PER_GPU)
    assert not host_ram_fits(600.0, 2, P4D, DEFAULT_HOST_MEMORY_GIB_PER_GPU)


def test_rows_without_host_ram_and_owned_servers_fall_back_to_the_assumption():
    """No host_ram_gib: 256 GiB per GPU (8 x 256 = 2048 GiB per 8 GPUs), or what the request sets."""
    assert host_limit_per_gpu(UNPUBLISHED, 8, 256.0) == 256.0
    assert host_limit_per_gpu(None, 8, 256.0) == 256.0
    assert host_ram_fits(192.0, 8, UNPUBLISHED, 256.0) and not host_ram_fits(192.0, 8, UNPUBLISHED, 128.0)
    assert host_ram_fits(256.0, 8, None, 256.0) and not host_ram_fits(256.5, 8, None, 256.0)
    assert "assumed 256 GiB of host RAM per GPU" in host_ram_basis(10.0, 8, UNPUBLISHED, 256.0)
    assert "no host_ram_gib in the P unlisted-8x row" in host_ram_basis(10.0, 8, UNPUBLISHED, 256.0)
    assert "owned server" in host_ram_basis(10.0, 8, None, 256.0)
    basis = host_ram_basis(192.0, 8, P5, 256.0)
    assert "p5.48xlarge host RAM 2048 GiB (price row) for 8 GPU(s)" in basis and "1,536.0 GiB per instance" in basis


def test_the_shipped_sheet_gives_the_p5_and_p4d_their_published_ram():
    prices = {price.instance_type: price for price in load_prices() if price.provider == "AWS"}
    p5, p4d = prices["p5.48xlarge"], prices["p4d.24xlarge"]
    assert (p5.host_ram_gib, p4d.host_ram_gib) == (2048, 1152)
    assert host_ram_fits(192.0, 8, p5, DEFAULT_HOST_MEMORY_GIB_PER_GPU)
    assert not host_ram_fits(192.0, 8, p4d, DEFAULT_HOST_MEMORY_GIB_PER_GPU)


# --- the search: an offloaded plan lands only where its host RAM fits ----------------------------

# Llama-3.1-8B (P = 8,030,261,248) on one 40 GB GPU: its bf16-mixed AdamW states (16 bytes x P = 120 GiB)
# fit only with the optimizer offloaded (ZeRO-Offload). The host then holds at least the fp32 master,
# fp32 gradient, bf16 copy and m, v: 18 x P bytes = 134.6 GiB, more than 128 GiB and less than 256 GiB.
LLAMA_8B = get_preset("llama-3.1-8b")
P_8B = 8_030_261_248
MID40 = GpuSpec(
    name="Mid40",
    vendor="NVIDIA",
    category="datacenter",
    memory_gb=40,
    memory_bandwidth_tbps=2.0,
    bf16_tflops=300,
    launch_year=2024,
    source="test",
    as_of=dt.date(2026, 1, 1),
)
BASE = TrainingSettings(seq_len=2048)


def offload_plans(rows: list[CloudPrice], **request):
    fields = {"dataset_tokens": 1e8, "max_gpus": 1} | request
    return plan_run(LLAMA_8B, BASE, PlanRequest(**fields), [MID40], rows, TIME)


def test_an_offloaded_plan_is_kept_on_the_roomy_instance_and_refused_on_the_tight_one():
    roomy = price_row("roomy-1x", 256, count=1, usd=2.0, gpu="Mid40")
    tight = price_row("tight-1x", 128, count=1, usd=1.0, gpu="Mid40")  # cheaper: it would win if allowed
    result = offload_plans([roomy, tight])
    (plan,) = result.plans
    assert plan.instance_type == "roomy-1x" and plan.offload_optimizer
    needed = estimate_memory(LLAMA_8B, plan.training_settings(BASE)).host_memory_gib
    assert plan.host_memory_gib == pytest.approx(needed)
    assert 18 * P_8B / GIB <= needed <= 256  # hand-worked floor 134.6 GiB > 128 GiB of the tight row
    assert plan.host_ram_gib == 256
    assert plan.host_ram_basis.startswith("roomy-1x host RAM 256 GiB (price row) for 1 GPU(s)")
    only_tight = offload_plans([tight])
    assert only_tight.plans == [] and "does not fit in memory" in only_tight.problems[0]


def test_a_row_without_host_ram_uses_the_stated_per_gpu_assumption():
    unlisted = price_row("unlisted-1x", None, count=1, usd=1.0, gpu="Mid40")
    (plan,) = offload_plans([unlisted]).plans  # 256 GiB per GPU by default: the ~150 GiB fits
    assert plan.offload_optimizer and plan.host_ram_gib is None
    assert plan.host_ram_basis.startswith("assumed 256 GiB of host RAM per GPU (no host_ram_gib in the P unlisted-1x")
    refused = offload_plans([unlisted], host_memory_gib_per_gpu=128)
    assert refused.plans == []
    assert any("an assumed 128 GiB per GPU" in line for line in refused.assumptions)


def test_plans_that_do_not_offload_need_no_host_ram_and_any_row_takes_them():
    """Eight GPUs hold the 8B model with ZeRO, no offload: a row with tiny host RAM still gets it."""
    small_host = price_row("small-host-8x", 16, count=8, usd=8.0, gpu="Mid40")
    result = offload_plans([small_host], max_gpus=8)
    assert result.plans and all(not plan.offload_optimizer for plan in result.plans)
    assert all(plan.host_memory_gib == 0.0 for plan in result.plans)
    assert any("host_ram_gib" in line for line in result.assumptions)


def test_the_downloads_say_which_host_ram_each_plan_was_checked_against():
    roomy = price_row("roomy-1x", 256, count=1, usd=2.0, gpu="Mid40")
    result = offload_plans([roomy])
    frame = plan_assumptions_frame(result, {"max_gpus": 1})
    host = frame[frame["kind"] == "host RAM"]
    assert list(host["name"]) == ["1 x Mid40, P roomy-1x"]
    assert host["value"].iloc[0].startswith("roomy-1x host RAM 256 GiB (price row)")
    columns = pd.read_csv(io.BytesIO(plans_csv_bytes(result.plans))).columns
    assert {"host_memory_gib", "host_ram_gib", "host_ram_basis"} <= set(columns)


def test_the_downloads_name_the_gpus_left_uncosted():
    result = offload_plans([price_row("roomy-1x", 256, count=1, usd=2.0, gpu="Mid40")])
    uncosted = result.model_copy(update={"unpriced": ["TPU7x: no public price was found; add your own price"]})
    frame = plan_assumptions_frame(uncosted, {"max_gpus": 1})
    rows = frame[frame["kind"] == "not costed"]
    assert list(rows["name"]) == ["TPU7x"] and list(rows["value"]) == ["no public price was found; add your own price"]
