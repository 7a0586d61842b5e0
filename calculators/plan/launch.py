"""Launch settings for a plan: the same layout written for DeepSpeed, torchtune, torchtitan and
accelerate, so that what was planned is what runs.

Each writer only sets what the plan decides (batch, accumulation, sharding, parallel degrees,
recomputation, offload, precision); everything else stays the framework's default. Field names
follow each project's documentation:

- DeepSpeed config JSON: https://www.deepspeed.ai/docs/config-json/ (train_batch_size =
  train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel GPUs).
- torchtune recipe overrides (key=value on the `tune run` command line):
  github.com/pytorch/torchtune recipes/configs/llama3_1/8B_full.yaml @v0.6.1
  (batch_size, gradient_accumulation_steps, enable_activation_checkpointing, fsdp_cpu_offload, dtype).
- torchtitan job config TOML: github.com/pytorch/torchtitan docs/fsdp.md and
  torchtitan/config/job_config.py @v0.2.0 ([training] local_batch_size, global_batch_size,
  seq_len; [parallelism] degrees; [activation_checkpoint] mode).
- accelerate FSDP config: https://huggingface.co/docs/accelerate/usage_guides/fsdp
  (fsdp_sharding_strategy FULL_SHARD = ZeRO-3, SHARD_GRAD_OP = ZeRO-2, NO_SHARD = DDP).

These four stacks run on CUDA and ROCm GPUs. A plan on another platform
(calculators.workload.compatibility.software_platform) gets only what runs there: on Intel Gaudi
the DeepSpeed config (Habana's DeepSpeed fork reads the same JSON) and a note; on Google TPUs and
AWS Trainium a note naming the stack that trains there (PLATFORM_STACKS) and saying that the app
writes no launch file for it.
"""

from __future__ import annotations

import json
import math

from calculators.plan.search import Plan
from calculators.workload.compatibility import GAUDI, PLATFORM_STACKS

FSDP_SHARDING = {0: "NO_SHARD", 1: "SHARD_GRAD_OP", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}


def torch_dtype(precision: str) -> str:
    """The half type a precision computes in: bf16 for the bf16 precisions, fp16 for fp16, else fp32."""
    if "bf16" in precision or precision == "fp8":
        return "bf16"
    if "fp16" in precision:
        return "fp16"
    return "fp32"


def deepspeed_config(plan: Plan) -> dict:
    """DeepSpeed's config: micro-batch, accumulation, their product over the data-parallel GPUs,
    the ZeRO stage with its CPU offload, and the precision."""
    zero: dict = {"stage": plan.zero}
    if plan.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if plan.offload_parameters:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config = {
        "train_batch_size": plan.micro_batch * plan.grad_accum * plan.data_parallel,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "zero_optimization": zero,
    }
    dtype = torch_dtype(plan.precision)
    if dtype in ("bf16", "fp16"):
        config[dtype] = {"enabled": True}
    return config


def deepspeed_json(plan: Plan) -> str:
    return json.dumps(deepspeed_config(plan), indent=2) + "\n"


def torchtune_overrides(plan: Plan) -> str:
    """`tune run` overrides for a distributed recipe (FSDP2: ZeRO-3 reshards after forward)."""
    lines = [
        f"batch_size={plan.micro_batch}",
        f"gradient_accumulation_steps={plan.grad_accum}",
        f"enable_activation_checkpointing={plan.checkpointing != 'none'}",
        f"fsdp_cpu_offload={plan.offload_parameters or plan.offload_optimizer}",
        f"dtype={torch_dtype(plan.precision)}",
    ]
    if plan.tensor_parallel > 1:
        lines.append(f"tensor_parallel_dim={plan.tensor_parallel}")
    nodes = math.ceil(plan.gpus / plan.gpus_per_instance)
    per_node = min(plan.gpus, plan.gpus_per_instance)
    command = f"tune run --nnodes {nodes} --nproc_per_node {per_node} <recipe> --config <config> \\\n  "
    return command + " \\\n  ".join(lines) + "\n"


def torchtitan_toml(plan: Plan) -> str:
    """A torchtitan job config fragment: batch, sequence, parallel degrees, recomputation."""
    sharded = plan.zero >= 1
    mode = {"none": "none", "full": "full"}.get(plan.checkpointing, "selective")
    dtype = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[torch_dtype(plan.precision)]
    return "\n".join(
        [
            "[training]",
            f"local_batch_size = {plan.micro_batch}",
            f"global_batch_size = {plan.micro_batch * plan.grad_accum * plan.data_parallel}",
            f"seq_len = {plan.seq_len}",
            f'mixed_precision_param = "{dtype}"',
            "",
            "[parallelism]",
            f"data_parallel_shard_degree = {plan.data_parallel if sharded else 1}",
            f"data_parallel_replicate_degree = {1 if sharded else plan.data_parallel}",
            f'fsdp_reshard_after_forward = "{"always" if plan.zero == 3 else "never"}"',
            f"tensor_parallel_degree = {plan.tensor_parallel}",
            f"pipeline_parallel_degree = {plan.pipeline_parallel}",
            "",
            "[activation_checkpoint]",
            f'mode = "{mode}"',
            "",
        ]
    )


def accelerate_fsdp_yaml(plan: Plan) -> str:
    """An accelerate config with FSDP: processes, machines, sharding strategy, offload, checkpointing."""
    nodes = math.ceil(plan.gpus / plan.gpus_per_instance)
    mixed = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}[torch_dtype(plan.precision)]
    return "\n".join(
        [
            "compute_environment: LOCAL_MACHINE",
            "distributed_type: FSDP",
            f"mixed_precision: {mixed}",
            f"num_machines: {nodes}",
            f"num_processes: {plan.gpus}",
            "fsdp_config:",
            "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP",
            f"  fsdp_sharding_strategy: {FSDP_SHARDING[plan.zero]}",
            f"  fsdp_offload_params: {'true' if plan.offload_parameters or plan.offload_optimizer else 'false'}",
            f"  fsdp_activation_checkpointing: {'true' if plan.checkpointing != 'none' else 'false'}",
            "  fsdp_state_dict_type: SHARDED_STATE_DICT",
            "",
        ]
    )


def launch_note(plan: Plan) -> str:
    """What launches a plan on a platform the app writes no (or not every) launch file for, in words."""
    stack = PLATFORM_STACKS[plan.software_platform]
    layout = (
        f"the plan's layout: {plan.data_parallel} data-parallel x {plan.tensor_parallel} tensor x "
        f"{plan.pipeline_parallel} pipeline parallel, ZeRO-{plan.zero}-style sharding, micro-batch {plan.micro_batch} "
        f"x {plan.grad_accum} accumulation steps, checkpointing {plan.checkpointing}, {torch_dtype(plan.precision)}"
    )
    if plan.software_platform == GAUDI:
        written = "deepspeed_config.json is written for it; torchtune, torchtitan and accelerate files are not"
    else:
        written = (
            "the app writes no launch file for it (DeepSpeed, torchtune, torchtitan and accelerate do not run there)"
        )
    return f"{plan.gpu} ({plan.software_platform}) trains with {stack}: {written}.\n{layout}.\n"


def launch_files(plan: Plan) -> dict[str, str]:
    """File name -> text of every launch setting for a plan that runs on its accelerator: all four
    on CUDA and ROCm GPUs, the DeepSpeed config and a note on Gaudi, a note alone on TPUs and Trainium."""
    if plan.software_platform == GAUDI:
        return {"deepspeed_config.json": deepspeed_json(plan), "launch_note.txt": launch_note(plan)}
    if plan.software_platform:
        return {"launch_note.txt": launch_note(plan)}
    return {
        "deepspeed_config.json": deepspeed_json(plan),
        "torchtune_overrides.txt": torchtune_overrides(plan),
        "torchtitan_fragment.toml": torchtitan_toml(plan),
        "accelerate_fsdp.yaml": accelerate_fsdp_yaml(plan),
    }
