"""Launch settings and downloads of a plan, checked against a plan written out by hand."""

from __future__ import annotations

import datetime as dt
import io
import json

import pandas as pd
import pytest

from calculators.plan.exports import plans_csv_bytes, plans_excel_bytes
from calculators.plan.launch import accelerate_fsdp_yaml, deepspeed_config, launch_files, torchtitan_toml
from calculators.plan.search import Plan, PlanResult

# 16 B200 in two 8-GPU instances: ZeRO-3 over 16 data-parallel ranks, micro-batch 4 x 8
# accumulation steps = 32 sequences per rank, 512 per step; full recomputation, no offload.
PLAN = Plan(
    gpu="B200-SXM-180GB", gpus=16, provider="P", instance_type="x8", region="r", instances=2, gpus_per_instance=8,
    pricing="on-demand", precision="bf16-mixed", zero=3, tensor_parallel=1, pipeline_parallel=1, data_parallel=16,
    checkpointing="full", offload_optimizer=False, offload_parameters=False, micro_batch=4, grad_accum=8,
    seq_len=4096, global_batch_tokens=2_097_152, peak_gib=150.0, gpu_memory_gib=180.0, headroom_gib=30.0,
    step_s=10.0, tokens_per_s=209_715.2, mfu=0.4, hours=10.0, hours_on_demand=10.0, usd=1000.0,
    usd_on_demand=1000.0, usd_spot_expected=None, usd_per_hour=100.0, price_as_of=dt.date(2026, 1, 1),
    source="https://example.com/prices", reason="the only plan",
)  # fmt: skip


def test_deepspeed_config_sets_the_batch_product_and_the_zero_stage():
    config = deepspeed_config(PLAN)
    assert config["train_batch_size"] == 512  # 4 x 8 x 16
    assert config["train_micro_batch_size_per_gpu"] == 4 and config["gradient_accumulation_steps"] == 8
    assert config["zero_optimization"] == {"stage": 3} and config["bf16"] == {"enabled": True}
    offloaded = deepspeed_config(PLAN.model_copy(update={"offload_optimizer": True}))
    assert offloaded["zero_optimization"]["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    assert json.loads(launch_files(PLAN)["deepspeed_config.json"]) == config


def test_torchtitan_and_accelerate_fragments():
    toml = torchtitan_toml(PLAN)
    assert "local_batch_size = 4" in toml and "global_batch_size = 512" in toml
    assert "data_parallel_shard_degree = 16" in toml and 'mode = "full"' in toml
    yaml = accelerate_fsdp_yaml(PLAN)
    assert "num_processes: 16" in yaml and "num_machines: 2" in yaml and "FULL_SHARD" in yaml
    assert "fsdp_activation_checkpointing: true" in yaml
    overrides = launch_files(PLAN)["torchtune_overrides.txt"]
    assert "--nnodes 2 --nproc_per_node 8" in overrides and "gradient_accumulation_steps=8" in overrides


def test_downloads_hold_the_plan_the_request_and_the_price_date():
    frame = pd.read_csv(io.BytesIO(plans_csv_bytes([PLAN])))
    assert frame.loc[0, "gpu"] == "B200-SXM-180GB" and frame.loc[0, "usd"] == 1000.0
    result = PlanResult(
        model="m", mode="train", dataset_tokens=1e9, epochs=1, global_batch_tokens=2_097_152,
        global_batch_source="given", plans=[PLAN], candidates=1, best_under_deadline=PLAN, best_under_budget=PLAN,
        fastest=PLAN, cheapest=PLAN, problems=[], searched=1, seconds=0.1, assumptions=["one"],
    )  # fmt: skip
    sheets = pd.read_excel(io.BytesIO(plans_excel_bytes(result, {"deadline_hours": 72})), sheet_name=None)
    assumptions = sheets["assumptions"]
    assert ("request", "deadline_hours", "72") in set(map(tuple, assumptions.itertuples(index=False)))
    dates = assumptions[assumptions["kind"] == "price as of"]
    assert list(dates["value"]) == ["2026-01-01"]


def test_the_deepspeed_config_reads_back_to_the_plans_settings():
    framework_config = pytest.importorskip("calculators.workload.framework_files")
    plan = PLAN.model_copy(update={"offload_optimizer": True})
    read = framework_config.read_framework_config(launch_files(plan)["deepspeed_config.json"], "ds.json")
    assert read.unknown_keys == []
    assert read.values == {
        "micro_batch": 4,
        "grad_accum": 8,
        "zero": 3,
        "offload_optimizer": True,
        "offload_parameters": False,
        "precision": "bf16-mixed",
    }
