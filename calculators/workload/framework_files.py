"""A training stack's own configuration file read into the engine's settings.

Five formats, told apart by their keys: a torchtune recipe YAML (sections with a
`_component_`), an accelerate config YAML (`distributed_type`, `compute_environment`), an
axolotl YAML (`base_model`, `adapter`, `micro_batch_size`, `sequence_len`, ...), a DeepSpeed
JSON and a Hugging Face TrainingArguments JSON (TrainingArguments.to_json_string()). Each
known key becomes a TrainingSettings value; keys that exist in the format but do not change
memory (learning rate, output paths, logging) are dropped silently; keys of the format that
change memory in a way the engine does not model, and files that cannot be read from inside
this one (an axolotl `deepspeed: zero3.json`), are named in notes; any other key is unknown
and named in a warning, and the rest of the file is kept. A bad value for a known key is a
FrameworkConfigError naming the key, and the settings read are checked by TrainingSettings.

Every field goes through one strict reader (calculators.workload.config_fields: read_int, read_bool,
read_choice, read_name, read_text, read_strings, read_mapping, read_component): the type and the
allowed values are checked before the value is used, and the message names the field and quotes
(short, on one line) what the file gave. The file itself is bounded before
parsing: MAX_FILE_BYTES, and MAX_NESTING_DEPTH (counted as config.json's is; for YAML from the parser's
events); after parsing, MAX_VALUES bounds a YAML document that repeats an alias to grow huge.
Pure: text in, values out.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

import yaml
from pydantic import ValidationError

from calculators.models.hf_config import MAX_NESTING_DEPTH, json_nesting_depth
from calculators.workload.config_fields import (
    FrameworkConfigError,
    given_or_default,
    read_bool,
    read_choice,
    read_component,
    read_int,
    read_mapping,
    read_name,
    read_strings,
    read_text,
    refusal,
    same_value,
    show_value,
)
from calculators.workload.modes import MODE_OF_METHOD
from calculators.workload.training import TrainingSettings

MAX_FILE_BYTES = 2_000_000  # real framework configs are a few KB
MAX_VALUES = 100_000  # values in the document, each alias counted again where it is used


class FrameworkConfig(NamedTuple):
    framework: str
    values: dict[str, Any]  # TrainingSettings field -> value
    unknown_keys: list[str]
    notes: tuple[str, ...] = ()  # what was read only in part, or not at all, and why


@dataclass
class _Reading:
    """What a reader has found so far."""

    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    unknown: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def result(self, framework: str) -> FrameworkConfig:
        return FrameworkConfig(framework, self.values, self.unknown, tuple(self.notes))


# --- torchtune recipe YAML (pytorch/torchtune recipes/configs/*.yaml) ---------------------

_TORCHTUNE_IGNORED = {
    "output_dir", "tokenizer", "checkpointer", "resume_from_checkpoint", "dataset", "seed", "shuffle",
    "lr_scheduler", "epochs", "max_steps_per_epoch", "device", "metric_logger", "log_every_n_steps",
    "log_peak_memory_stats", "profiler", "clip_grad_norm", "save_adapter_weights_only", "custom_sharded_layers",
    "fsdp_cpu_offload", "run_val_every_n_steps", "dataset_val", "log_level", "cpu_offload", "base_model_path",
}  # fmt: skip
_TORCHTUNE_OPTIMIZER = {
    "torch.optim.AdamW": "adamw",
    "torch.optim.SGD": "sgd",
    "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw-8bit",
    "bitsandbytes.optim.PagedAdamW": "paged-adamw",
}
_TORCHTUNE_LOSS = {
    "torchtune.modules.loss.CEWithChunkedOutputLoss": "chunked",
    "torchtune.modules.loss.LinearCrossEntropyLoss": "fused-linear",
    "torch.nn.CrossEntropyLoss": "full",
}
_TORCHTUNE_OPTIMIZERS = ", ".join(name.rsplit(".", 1)[-1] for name in _TORCHTUNE_OPTIMIZER)
_TORCHTUNE_LOSSES = ", ".join(name.rsplit(".", 1)[-1] for name in _TORCHTUNE_LOSS)


def _torchtune(config: dict) -> FrameworkConfig:
    values: dict[str, Any] = {}
    unknown = []
    for key, value in config.items():
        if key == "batch_size":
            values["micro_batch"] = read_int(value, key, "micro_batch")
        elif key == "gradient_accumulation_steps":
            values["grad_accum"] = read_int(value, key, "grad_accum")
        elif key == "dtype":
            values["precision"] = read_choice(value, key, ("bf16", "fp32"), "bf16 or fp32")
        elif key == "enable_activation_checkpointing":
            values["checkpointing"] = "full" if read_bool(value, key) else "none"
        elif key == "enable_activation_offloading":
            values["activation_offload"] = read_bool(value, key)
        elif key == "optimizer_in_bwd":
            values["optimizer_in_backward"] = read_bool(value, key)
        elif key == "compile":
            values["compile"] = read_bool(value, key)
        elif key == "loss":
            component = read_component(value, key)
            values["loss"] = _TORCHTUNE_LOSS[
                read_name(component, "loss._component_", _TORCHTUNE_LOSS, _TORCHTUNE_LOSSES)
            ]
        elif key == "optimizer":
            component = read_name(read_component(value, key), "optimizer._component_", _TORCHTUNE_OPTIMIZER,
                              _TORCHTUNE_OPTIMIZERS)  # fmt: skip
            values["optimizer"] = _TORCHTUNE_OPTIMIZER[component]
            if values["optimizer"] == "adamw":
                values["optimizer_impl"] = (
                    "fused" if read_bool(value.get("fused", False), "optimizer.fused") else "foreach"
                )
        elif key == "model":
            values |= _torchtune_model(value)
        elif key not in _TORCHTUNE_IGNORED:
            unknown.append(key)
    return FrameworkConfig("torchtune", values, unknown)


def _torchtune_model(section: Any) -> dict[str, Any]:
    """The model builder: lora_* or qlora_* builders train adapters of rank lora_rank."""
    builder = read_component(section, "model").rsplit(".", 1)[-1]
    values: dict[str, Any] = {}
    if builder.startswith("qlora_"):
        values["method"] = "qlora"
    elif builder.startswith("lora_"):
        values["method"] = "lora"
    if "lora_rank" in section:
        values["lora_rank"] = read_int(section["lora_rank"], "model.lora_rank", "lora_rank")
    return values


# --- DeepSpeed JSON (deepspeed.ai/docs/config-json) -----------------------------------

_DEEPSPEED_IGNORED = {
    "train_batch_size", "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "scheduler",
    "activation_checkpointing", "flops_profiler", "tensorboard", "wandb", "comms_logger", "prescale_gradients",
    "communication_data_type", "zero_allow_untested_optimizer", "dump_state",
}  # fmt: skip


_DEEPSPEED_READ = {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "bf16", "fp16",
                   "zero_optimization", "optimizer"}  # fmt: skip


def _deepspeed(config: dict) -> FrameworkConfig:
    values: dict[str, Any] = {}
    unknown = []
    for key, value in config.items():
        if value is None and key in _DEEPSPEED_READ:
            continue  # null: left out
        if key == "train_micro_batch_size_per_gpu":
            values["micro_batch"] = None if same_value(value, "auto") else read_int(value, key, "micro_batch")
        elif key == "gradient_accumulation_steps":
            values["grad_accum"] = None if same_value(value, "auto") else read_int(value, key, "grad_accum")
        elif key in ("bf16", "fp16"):
            section = read_mapping(value, key, "a mapping such as {'enabled': true}")
            enabled = read_choice(given_or_default(section, "enabled", False), f"{key}.enabled", (True, False, "auto"),
                              "true, false or auto")  # fmt: skip
            if enabled is not False:
                values["precision"] = "bf16-mixed" if key == "bf16" else "fp16-mixed"
        elif key == "zero_optimization":
            values |= _deepspeed_zero(value)
        elif key == "optimizer":
            kind = read_mapping(value, key, "a mapping with a type").get("type")
            if not isinstance(kind, str) or kind.lower() not in ("adam", "adamw"):
                raise FrameworkConfigError(
                    f"optimizer.type: {show_value(kind)} is not one the engine models (Adam, AdamW)"
                )
            values |= {"optimizer": "adamw", "optimizer_impl": "fused"}
        elif key not in _DEEPSPEED_IGNORED:
            unknown.append(key)
    return FrameworkConfig("deepspeed", {k: v for k, v in values.items() if v is not None}, unknown)


def _deepspeed_zero(section: Any, where: str = "zero_optimization") -> dict[str, Any]:
    section = read_mapping(section, where)
    stage = read_choice(given_or_default(section, "stage", 0), f"{where}.stage", (0, 1, 2, 3), "0 to 3")
    values: dict[str, Any] = {"zero": stage}
    for key, field in (("offload_optimizer", "offload_optimizer"), ("offload_param", "offload_parameters")):
        offload = read_mapping(section.get(key) or {}, f"{where}.{key}", "a mapping such as {'device': 'cpu'}")
        device = read_choice(given_or_default(offload, "device", "none"), f"{where}.{key}.device",
                             ("none", "cpu", "nvme"), "none, cpu or nvme")  # fmt: skip
        values[field] = device != "none"
    return values


# --- HF TrainingArguments JSON (transformers training_args.py) -------------------------

_HF_OPTIM = {
    "adamw_torch": ("adamw", "foreach"),
    "adamw_torch_fused": ("adamw", "fused"),
    "adamw_hf": ("adamw", "for-loop"),
    "adamw_bnb_8bit": ("adamw-8bit", None),
    "adamw_8bit": ("adamw-8bit", None),
    "paged_adamw_8bit": ("paged-adamw-8bit", None),
    "paged_adamw_32bit": ("paged-adamw", None),
    "adafactor": ("adafactor", None),
    "sgd": ("sgd", None),
}
_HF_IGNORED = {
    "output_dir", "overwrite_output_dir", "do_train", "do_eval", "eval_strategy", "evaluation_strategy",
    "per_device_eval_batch_size", "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon",
    "max_grad_norm", "num_train_epochs", "max_steps", "lr_scheduler_type", "warmup_ratio", "warmup_steps",
    "logging_dir", "logging_strategy", "logging_steps", "save_strategy", "save_steps", "save_total_limit",
    "seed", "data_seed", "report_to", "run_name", "dataloader_num_workers", "remove_unused_columns",
    "push_to_hub", "hub_model_id", "eval_steps", "load_best_model_at_end", "metric_for_best_model",
    "gradient_checkpointing_kwargs", "ddp_find_unused_parameters", "local_rank", "tf32", "group_by_length",
    "dataset_text_field", "packing", "deepspeed", "fsdp", "fsdp_config", "label_names", "optim_args",
}  # fmt: skip


_HF_READ = {"per_device_train_batch_size", "gradient_accumulation_steps", "bf16", "fp16", "gradient_checkpointing",
            "use_liger_kernel", "torch_compile", "max_seq_length", "max_length", "optim"}  # fmt: skip


def _hf_trainer(config: dict) -> FrameworkConfig:
    values: dict[str, Any] = {}
    unknown = []
    for key, value in config.items():
        if value is None and key in _HF_READ:
            continue  # null: left out (TrainingArguments.to_json_string writes unset fields as null)
        if key == "per_device_train_batch_size":
            values["micro_batch"] = read_int(value, key, "micro_batch")
        elif key == "gradient_accumulation_steps":
            values["grad_accum"] = read_int(value, key, "grad_accum")
        elif key in ("bf16", "fp16"):
            if read_bool(value, key):
                values["precision"] = "amp-bf16" if key == "bf16" else "amp-fp16"
        elif key == "gradient_checkpointing":
            values["checkpointing"] = "full" if read_bool(value, key) else "none"
        elif key == "use_liger_kernel":
            values["liger"] = read_bool(value, key)
        elif key == "torch_compile":
            values["compile"] = read_bool(value, key)
        elif key in ("max_seq_length", "max_length"):  # TRL's SFTConfig
            values["seq_len"] = read_int(value, key, "seq_len")
        elif key == "optim":
            optimizer, impl = _HF_OPTIM[read_name(value, key, _HF_OPTIM, ", ".join(_HF_OPTIM))]
            values["optimizer"] = optimizer
            if impl:
                values["optimizer_impl"] = impl
        elif key not in _HF_IGNORED:
            unknown.append(key)
    return FrameworkConfig("hf-trainer", values, unknown)


# --- FSDP sharding: accelerate's fsdp_config, axolotl's fsdp / fsdp_config --------------
# huggingface/accelerate @16cb6eb8 src/accelerate/utils/dataclasses.py FullyShardedDataParallelPlugin:
# fsdp_version defaults to 1; FSDP1 takes sharding_strategy (or reshard_after_forward) as a name of
# FSDP_SHARDING_STRATEGY (utils/constants.py; an int is its index + 1), default FULL_SHARD; FSDP2 takes
# reshard_after_forward as a bool, default True (FULL_SHARD; False keeps the gathered parameters as
# SHARD_GRAD_OP does). offload_params puts parameters and gradients on the CPU and the optimizer step with
# them (torch CPUOffload). The engine's ZeRO stage is FSDP's strategy (calculators.workload.training.FSDP_NAME).

_FSDP_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")
_FSDP_STAGE = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0, "HYBRID_SHARD": 3, "HYBRID_SHARD_ZERO2": 2}
# options that change no memory (wrapping, prefetch, checkpoint files, loading); named without `fsdp_`
_FSDP_IGNORED = {
    "auto_wrap_policy", "transformer_layer_cls_to_wrap", "min_num_params", "backward_prefetch", "forward_prefetch",
    "state_dict_type", "final_state_dict_type", "sync_module_states", "use_orig_params", "cpu_ram_efficient_loading",
    "cpu_offload_pin_memory", "limit_all_gathers", "mixed_precision_policy", "backward_prefetch_policy",
}  # fmt: skip


def _fsdp(section: Any, where: str, read: _Reading, version: Any = None) -> None:
    """An FSDP section (keys with or without the `fsdp_` prefix): ZeRO stage, implementation, offload."""
    section = read_mapping(section, where, "a mapping of FSDP options")
    options = {key.removeprefix("fsdp_"): (key, value) for key, value in section.items() if value is not None}
    version = options.pop("version", (None, version))[1]
    version = 1 if version is None else int(read_choice(version, f"{where}.fsdp_version", (1, 2, "1", "2"), "1 or 2"))
    strategy = _fsdp_strategy(options, where, version)
    # FSDP1 reads as "zero", not "fsdp1": the HF Trainer wraps a PEFT model's adapters in their own FSDP
    # units (peft.utils.other.fsdp_auto_wrap_policy), so the frozen base gets no flat-parameter gradients
    read.values |= {"zero": _FSDP_STAGE[strategy], "sharding_impl": "fsdp2" if version == 2 else "zero"}
    if strategy.startswith("HYBRID"):
        read.notes.append(f"{where}: {strategy} shards within a node only; the engine shards over every GPU")
    for name, (key, value) in options.items():
        if name == "offload_params":
            offload = read_bool(value, f"{where}.{key}")
            sharded = _FSDP_STAGE[strategy] == 3  # the engine offloads parameters under ZeRO-3 only
            read.values |= {"offload_optimizer": offload, "offload_parameters": offload and sharded}
        elif name == "activation_checkpointing":
            if read_bool(value, f"{where}.{key}"):
                read.values["checkpointing"] = "full"
        elif name not in _FSDP_IGNORED:
            read.unknown.append(f"{where}.{key}")


def _fsdp_strategy(options: dict, where: str, version: int) -> str:
    """FSDP_SHARDING_STRATEGY's name of the section's strategy (the options read are removed)."""
    key, strategy = options.pop("sharding_strategy", ("sharding_strategy", None))
    reshard_key, reshard = options.pop("reshard_after_forward", ("reshard_after_forward", None))
    if version == 2 and reshard is not None:
        return "FULL_SHARD" if read_bool(reshard, f"{where}.{reshard_key}") else "SHARD_GRAD_OP"
    if strategy is None and reshard is not None:  # FSDP1 spells its strategy as reshard_after_forward too
        key, strategy = reshard_key, reshard
    strategy = "FULL_SHARD" if strategy is None else strategy
    if isinstance(strategy, int) and not isinstance(strategy, bool) and 1 <= strategy <= len(_FSDP_STRATEGIES):
        strategy = _FSDP_STRATEGIES[strategy - 1]
    if not isinstance(strategy, str) or strategy.upper() not in _FSDP_STAGE:
        expected = f"one of {', '.join(_FSDP_STRATEGIES)}"
        if key.endswith("reshard_after_forward"):
            expected += " (under fsdp_version 1; true or false under fsdp_version 2)"
        raise refusal(f"{where}.{key}", expected, strategy)
    return strategy.upper()


# --- accelerate config YAML (`accelerate config`, default_config.yaml) -----------------
# huggingface/accelerate @16cb6eb8: src/accelerate/commands/config/config_args.py (BaseConfig, ClusterConfig,
# SageMakerConfig keys), commands/config/cluster.py (deepspeed_config and fsdp_config keys), commands/launch.py
# (dynamo_config -> --dynamo_backend), examples/config_yaml_templates/*.yaml.

_ACCELERATE_DDP = {"NO", "MULTI_GPU", "MULTI_XPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_HPU",
                   "MULTI_NEURON"}  # fmt: skip
_ACCELERATE_IGNORED = {
    "compute_environment", "machine_rank", "num_machines", "gpu_ids", "main_process_ip", "main_process_port",
    "rdzv_backend", "same_network", "main_training_function", "enable_cpu_affinity", "fp8_config",
    "megatron_lm_config", "mpirun_config", "downcast_bf16", "tpu_name", "tpu_zone", "tpu_use_cluster",
    "tpu_use_sudo", "command_file", "commands", "tpu_vm", "tpu_env", "debug", "use_cpu", "ec2_instance_type",
    "iam_role_name", "image_uri", "profile", "region", "base_job_name", "pytorch_version", "transformers_version",
    "py_version", "sagemaker_inputs_file", "sagemaker_metrics_file", "additional_args",
}  # fmt: skip
_ACCELERATE_DEEPSPEED_IGNORED = {
    "gradient_clipping", "zero3_save_16bit_model", "offload_param_nvme_path", "offload_optimizer_nvme_path",
    "deepspeed_hostfile", "deepspeed_multinode_launcher", "deepspeed_exclusion_filter", "deepspeed_inclusion_filter",
    "deepspeed_moe_layer_cls_names",
}  # fmt: skip


def _accelerate(config: dict) -> FrameworkConfig:
    kind = read_name(config.get("distributed_type", "NO"), "distributed_type", _ACCELERATE_DDP | {"FSDP", "DEEPSPEED"},
                 "NO, MULTI_GPU, FSDP, DEEPSPEED")  # fmt: skip
    read = _Reading()
    if kind in _ACCELERATE_DDP:
        read.values["zero"] = 0
    for key, value in config.items():
        if value is None or key in _ACCELERATE_IGNORED or key == "distributed_type":
            continue
        if key == "mixed_precision":
            read.values["precision"] = _accelerate_precision(value, kind)
        elif key == "fsdp_config":
            if kind == "FSDP":
                _fsdp(value, key, read)
        elif key == "deepspeed_config":
            if kind == "DEEPSPEED":
                _accelerate_deepspeed(value, read)
        elif key == "dynamo_config":
            read.values["compile"] = _accelerate_compile(value)
        elif key not in ("num_processes", "parallelism_config"):
            read.unknown.append(key)
    _accelerate_gpus(config, read)
    return read.result("deepspeed" if kind == "DEEPSPEED" else "hf-trainer")


def _accelerate_precision(value: Any, kind: str) -> str:
    """mixed_precision: torch.autocast over the fp32 model (DDP), or half weights with an fp32 master copy
    (DeepSpeed bf16/fp16 enabled; FSDP MixedPrecision over fp32 sharded parameters)."""
    value = read_choice(value, "mixed_precision", ("no", "fp16", "bf16", "fp8"), "no, fp16, bf16 or fp8")
    if value in ("no", "fp8"):
        return "fp32" if value == "no" else "fp8"
    return f"amp-{value}" if kind in _ACCELERATE_DDP else f"{value}-mixed"


def _accelerate_compile(section: Any) -> bool:
    backend = given_or_default(read_mapping(section, "dynamo_config"), "dynamo_backend", "NO")
    return read_text(backend, "dynamo_config.dynamo_backend").upper() != "NO"


def _accelerate_deepspeed(section: Any, read: _Reading) -> None:
    """deepspeed_config: the ZeRO stage and offload `accelerate config` asks for, or the path of a DeepSpeed JSON."""
    section = read_mapping(section, "deepspeed_config")
    stage = section.get("zero_stage")
    if stage is not None:
        stage = read_choice(stage, "deepspeed_config.zero_stage", (0, 1, 2, 3), "0 to 3")
        read.values |= {"zero": stage, "offload_optimizer": False, "offload_parameters": False}
    for key, value in section.items():
        where = f"deepspeed_config.{key}"
        if value is None:
            continue  # null: left out
        if key in ("offload_optimizer_device", "offload_param_device"):
            value = read_choice(value, where, ("none", "cpu", "nvme"), "none, cpu or nvme")
            offload = value != "none" and (key == "offload_optimizer_device" or stage == 3)
            read.values["offload_optimizer" if key == "offload_optimizer_device" else "offload_parameters"] = offload
        elif key == "gradient_accumulation_steps":
            if not same_value(value, "auto"):
                read.values["grad_accum"] = read_int(value, where, "grad_accum")
        elif key == "zero3_init_flag":
            if stage == 3:  # ZeRO-3 without zero.Init moves the whole model to each GPU first
                read.values["load_whole_model"] = not read_bool(value, where)
        elif key == "deepspeed_config_file":
            read.notes.append(f"{where}: {read_text(value, where)} holds the DeepSpeed settings; read it as a "
                              "framework config too")  # fmt: skip
        elif key != "zero_stage" and key not in _ACCELERATE_DEEPSPEED_IGNORED:
            read.unknown.append(where)


def _accelerate_gpus(config: dict, read: _Reading) -> None:
    """num_processes is every GPU of the job; parallelism_config's tensor-parallel size divides it."""
    parallel = read_mapping(config.get("parallelism_config") or {}, "parallelism_config")
    tp = read_int(parallel.get("parallelism_config_tp_size", 1), "parallelism_config.parallelism_config_tp_size",
              "tensor_parallel")  # fmt: skip
    if tp > 1:
        read.values["tensor_parallel"] = tp
    for key in ("parallelism_config_cp_size", "parallelism_config_sp_size", "parallelism_config_dp_replicate_size"):
        if parallel.get(key, 1) not in (1, None):
            read.notes.append(f"parallelism_config.{key}: not modelled (data-parallel GPUs = processes / tp)")
    processes = config.get("num_processes", -1)
    if not (same_value(processes, -1) or processes is None):
        read.values["gpus"] = max(1, read_int(processes, "num_processes") // tp)


# --- axolotl YAML (axolotl-ai-cloud/axolotl @067b021c) ------------------------------
# Keys and defaults: src/axolotl/utils/schemas/config.py (AxolotlInputConfig), training.py (micro_batch_size,
# gradient_accumulation_steps default 1, optimizer default adamw_torch_fused), peft.py (adapter, load_in_4bit,
# lora_*), fsdp.py (fsdp_config), enums.py (legacy attention flags), integrations/liger/args.py and
# integrations/cut_cross_entropy/args.py (plugin keys); precision: src/axolotl/utils/config/__init__.py
# normalize_config (bf16 "auto" -> bf16 where supported, fp16 turns it off; the model is loaded in torch_dtype
# bf16/fp16), docs/multi-gpu.qmd (FSDP1 -> FSDP2 key names).

# Every key of AxolotlInputConfig and its plugins' arguments at @067b021c (the model fields of the schemas'
# classes, read with ast, aliases by their YAML name): a key here that is not read changes no memory or is noted.
_AXOLOTL_KEYS = frozenset(
    """
    accelerator_config activation_offloading adam_beta1 adam_beta2 adam_beta3 adam_epsilon adam_epsilon2 adapter
    added_tokens_overrides attn_implementation auto_find_batch_size auto_resume_from_checkpoints axolotl_config_path
    base_model base_model_config batch_flattening batch_size bench_dataset bench_split bf16 bfloat16
    bnb_config_kwargs center_rewards_coefficient chat_template chat_template_jinja chat_template_kwargs
    chunked_cross_entropy chunked_cross_entropy_num_chunks cls_model_config comet_api_key comet_experiment_config
    comet_experiment_key comet_mode comet_online comet_project_name comet_workspace context_parallel_size
    cosine_constant_lr_ratio cosine_min_lr_ratio cpo_alpha curriculum_sampling cut_cross_entropy
    dataloader_drop_last dataloader_num_workers dataloader_pin_memory dataloader_prefetch_factor
    dataset_exact_deduplication dataset_keep_in_memory dataset_num_proc dataset_prepared_path dataset_processes
    dataset_shard_idx dataset_shard_num datasets ddp ddp_broadcast_buffers ddp_bucket_cap_mb
    ddp_find_unused_parameters ddp_timeout deepcompile deepspeed default_system_message dense_mixer device
    device_map diffusion dion_lr dion_momentum dion_rank_fraction dion_rank_multiple_of do_bench_eval
    do_causal_lm_eval dp_replicate_size dp_shard_size dpo_beta dpo_generate_during_eval dpo_label_smoothing
    dpo_loss_type dpo_loss_weights dpo_norm_loss dpo_padding_free dpo_use_liger_kernel dpo_use_logits_to_keep
    dpo_use_weighting dsv4_bf16_all dsv4_fp4_grouped_mode dsv4_fp8_lora_kernel dsv4_fp8_nonexpert_mode
    dsv4_shared_mlp_lora_kernel dynamic_checkpoint eaft_alpha eaft_k eager_attention early_stopping_patience ebft
    embedding_lr embedding_lr_scale embeddings_skip_upcast eot_tokens eval_batch_size eval_causal_lm_metrics
    eval_max_new_tokens eval_sample_packing eval_sequence_len eval_steps eval_strategy eval_table_size
    evals_per_epoch evaluation_strategy excess_length_strategy experimental_skip_move_to_device expert_backend
    expert_parallel_backend expert_parallel_fallback_on_unsupported expert_parallel_num_nvl_bytes
    expert_parallel_num_rdma_bytes expert_parallel_size expert_parallel_token_capacity experts_implementation
    fix_untrained_tokens flash_attention flash_attn_cross_entropy flash_attn_d512 flash_attn_fuse_mlp
    flash_attn_rms_norm flash_optimum flex_attention flex_attn_compile_kwargs float16 float32 fp16 fp32_norm_classes
    fp32_norms fp8 fp8_enable_fsdp_float8_all_gather freeze_mm_modules fsdp fsdp_config fsdp_final_state_dict_type
    fsdp_version fused_attn_kernel gc_collect_steps gc_steps gemma4_fp8_nonexpert gemma4_hybrid_attn_impl
    gemma4_nf4_nonexpert generate_samples generation_do_sample generation_max_new_tokens generation_prompt_ratio
    generation_temperature generation_top_k generation_top_p gptq gpu_memory_limit gradient_accumulation_steps
    gradient_checkpointing gradient_checkpointing_kwargs gradio_max_new_tokens gradio_server_name gradio_server_port
    gradio_share gradio_temperature gradio_title greater_is_better grokfast_alpha grokfast_lamb group_by_length
    hatchery heads_k_stride hf_mlflow_log_artifacts hf_use_auth_token hub_model_id hub_revision hub_strategy
    image_resize_algorithm image_size include_tkps include_tokens_per_second is_falcon_derived_model
    is_llama_derived_model is_mistral_derived_model is_preprocess is_qwen_derived_model jagged_restart_anneal_steps
    jagged_restart_steps jagged_restart_warmup_steps kd_alpha kd_beta kd_ce_alpha kd_normalize_topk kd_online_server
    kd_online_server_base_url kd_online_timeout kd_online_topk kd_temperature kd_temperature_min kd_trainer
    kto_desirable_weight kto_undesirable_weight large_head_attention layer_offloading learning_rate
    liger_cross_entropy liger_fused_linear_cross_entropy liger_glu_activation liger_layer_norm liger_rms_norm
    liger_rms_norm_gated liger_rope liger_swiglu liger_use_token_scaling lisa_layers_attribute lisa_n_layers
    lisa_step_interval llama4_linearized_experts llmcompressor lm_eval_batch_size lm_eval_model lm_eval_post_train
    lm_eval_tasks load_best_model_at_end load_in_4bit load_in_8bit local_rank logging_steps lora_alpha
    lora_alpha_pattern lora_dropout lora_embedding_kernel lora_fan_in_fan_out lora_mlp_kernel lora_model_dir
    lora_modules_to_save lora_o_kernel lora_on_cpu lora_qkv_kernel lora_r lora_rank_pattern lora_target_linear
    lora_target_modules lora_target_parameters loraplus_lr_embedding loraplus_lr_ratio loss_watchdog_patience
    loss_watchdog_threshold low_cpu_mem_usage lr_div_factor lr_groups lr_quadratic_warmup lr_scheduler
    lr_scheduler_kwargs max_grad_norm max_memory max_packed_sequence_len max_prompt_len max_steps
    mean_resizing_embeddings merge_lora merge_method metric_for_best_model micro_batch_size min_sample_len
    mlflow_experiment_name mlflow_run_name mlflow_tracking_uri model_config model_kwargs model_quantization_config
    model_quantization_config_kwargs model_revision model_type moe_bnb_fast moe_dequant_chunk_size
    moe_grouped_backend mora multipack_real_batches neftune_noise_alpha nemo_gym_auto_clone nemo_gym_auto_start
    nemo_gym_config_paths nemo_gym_datasets nemo_gym_dir nemo_gym_enabled nemo_gym_head_port nemo_gym_max_turns
    nemo_gym_model_name nemo_gym_multi_turn nemo_gym_run_timeout nemo_gym_server_timeout nemo_gym_verify_timeout
    noisy_embedding_alpha nonexpert_quantization num_dataset_shards_to_save num_epochs num_generation_samples
    num_labels nvfp4_merge_aware nvfp4_merge_aware_start_step optim_args optim_target_modules optimizer orpo_alpha
    otel_metrics_host otel_metrics_port output_dir pad_to_multiple_of pad_to_sequence_len peft
    peft_autocast_adapter_dtype peft_ensure_weight_tying peft_init_lora_weights peft_layer_replication
    peft_layers_pattern peft_layers_to_transform peft_trainable_token_indices peft_use_dora peft_use_rslora plugins
    pose_max_context_len pose_num_chunks pose_split_on_token_ids precompute_ref_log_probs preprocess_iterable
    pretrain_multipack_attn pretrain_multipack_buffer_size pretraining_dataset pretraining_sample_concatenation
    process_reward_model processor_kwargs processor_type profiler_steps profiler_steps_start push_dataset_to_hub qat
    qgalore_cos_threshold qgalore_gamma_proj qgalore_proj_bits qgalore_proj_group_size qgalore_proj_quant
    qgalore_proj_type qgalore_queue_size qgalore_rank qgalore_scale qgalore_update_proj_gap
    qlora_sharded_model_loading quantization quantize_moe_experts ray_num_workers ray_run_name recipe reinit_weights
    relora relora_cpu_offload relora_prune_method relora_prune_ratio remove_unused_columns
    resize_token_embeddings_to_32x resources_per_worker resume_from_checkpoint reward_model ring_attn_func rl
    rl_beta role_boundaries rope_scaling rpo_alpha s2_attention sage_attention sample_packing
    sample_packing_bin_size sample_packing_eff_est sample_packing_group_size sample_packing_mp_start_method
    sample_packing_sequentially save_compressed save_first_step save_only_model save_safetensors save_steps
    save_strategy save_total_limit saves_per_epoch scaling_softmax scaling_softmax_bias scaling_softmax_factor
    sdp_attention sdpa_varlen seed selective_checkpointing sequence_len sequence_parallel_degree shrink_embeddings
    shuffle_before_merging_datasets shuffle_merged_datasets simpo_gamma skip_prepare_dataset special_tokens
    spectrum_model_name spectrum_top_fraction streaming streaming_multipack_buffer_size strict tensor_parallel_size
    test_datasets tf32 tiled_mlp tiled_mlp_num_shards tiled_mlp_use_original_mlp tokenizer_config tokenizer_legacy
    tokenizer_save_jinja_files tokenizer_type tokenizer_use_fast tokenizer_use_mistral_common tokens torch_compile
    torch_compile_backend torch_compile_mode torch_compile_options torch_empty_cache_steps torchdistx_path
    total_num_tokens total_supervised_tokens trackio_project_name trackio_run_name trackio_space_id train_on_inputs
    trainer_cls trl trust_remote_code unfrozen_parameters use_comet use_dsv4_kernels use_eaft use_glm_dsa_kernels
    use_kernels use_mlflow use_onebitllms use_otel_metrics use_pose use_ray use_scattermoe use_sonicmoe
    use_tensorboard use_trackio use_wandb val_set_size vllm wandb_entity wandb_log_model wandb_mode wandb_name
    wandb_project wandb_run_id wandb_watch warmup_ratio warmup_steps weight_decay world_size xformers_attention
    """.split()
)
# what axolotl does when the file leaves a memory setting out
_AXOLOTL_DEFAULTS = {"sequence_len": 512, "micro_batch_size": 1, "gradient_accumulation_steps": 1,
                     "optimizer": "adamw_torch_fused", "bf16": "auto", "gradient_checkpointing": False}  # fmt: skip
# keys that change memory in ways the engine does not model: named in a note when set
_AXOLOTL_NOT_MODELLED = (
    "context_parallel_size", "sequence_parallel_degree", "dp_shard_size", "dp_replicate_size", "expert_parallel_size",
    "tiled_mlp", "layer_offloading", "unfrozen_parameters", "lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel",
    "relora", "qat", "quantization", "gptq", "model_quantization_config", "selective_checkpointing", "peft_use_dora",
    "lora_modules_to_save", "quantize_moe_experts", "rl", "reward_model", "float16",
)  # fmt: skip
_AXOLOTL_INT = {
    "micro_batch_size": "micro_batch", "sequence_len": "seq_len", "gradient_accumulation_steps": "grad_accum",
    "tensor_parallel_size": "tensor_parallel", "chunked_cross_entropy_num_chunks": "loss_chunks",
}  # fmt: skip
# legacy attention flags (enums.py LEGACY_ATTN_FLAG_TO_IMPL); every backend but eager is a fused kernel
_AXOLOTL_ATTENTION = {"flash_attention": "fused", "sdp_attention": "fused", "xformers_attention": "fused",
                      "flex_attention": "fused", "sage_attention": "fused", "eager_attention": "eager"}  # fmt: skip
# lora_target_modules as the engine's target sets (calculators.workload.training.LORA_TARGET_LABEL)
_LORA_TARGETS = {
    frozenset({"q_proj", "v_proj"}): "qv",
    frozenset({"q_proj", "k_proj", "v_proj", "o_proj"}): "attention",
    frozenset({"q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}): "qvo-mlp",
    frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}): "all-linear",
}
_LIGER_PLUGIN = ("axolotl.integrations.liger.LigerPlugin", "axolotl.integrations.liger.plugin.LigerPlugin")
_CCE_PLUGIN = "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"
_AXOLOTL_MARKERS = ("base_model", "adapter", "micro_batch_size", "sequence_len", "datasets", "load_in_4bit", "lora_r")


def _axolotl(config: dict) -> FrameworkConfig:
    given = _AXOLOTL_DEFAULTS | {key: value for key, value in config.items() if value is not None}
    read = _Reading()
    for key, value in given.items():
        if key in _AXOLOTL_INT:
            read.values[_AXOLOTL_INT[key]] = read_int(value, key, _AXOLOTL_INT[key])
        elif key in _AXOLOTL_ATTENTION and read_bool(value, key):
            read.values["attention"] = _AXOLOTL_ATTENTION[key]
        elif key == "attn_implementation":
            read.values["attention"] = "eager" if read_text(value, key) == "eager" else "fused"
        elif key == "torch_compile":
            read.values["compile"] = same_value(value, "auto") or read_bool(value, key)
        elif key == "chunked_cross_entropy" and read_bool(value, key):
            read.values["loss"] = "chunked"
        elif key in _AXOLOTL_NOT_MODELLED and value:
            read.notes.append(f"{key}: not modelled by the engine")
        elif key not in _AXOLOTL_KEYS:
            read.unknown.append(key)
    adapter = _axolotl_adapter(given, read)
    deepspeed = _axolotl_sharding(given, read)
    read.values["precision"] = _axolotl_precision(given, adapter, deepspeed, read)
    _axolotl_optimizer(given, read)
    _axolotl_checkpointing(given, read)
    _axolotl_plugins(given, read)
    return read.result("axolotl")


def _flag(given: dict, key: str, default: bool = False) -> bool:
    """An axolotl switch: true or false, left out (or null) for its default."""
    return read_bool(given.get(key, default), key)


def _axolotl_adapter(given: dict, read: _Reading) -> bool:
    """adapter lora or qlora (qlora needs load_in_4bit; lora with load_in_4bit is QLoRA too), rank and targets."""
    adapter = given.get("adapter") or None
    four_bit, eight_bit = _flag(given, "load_in_4bit"), _flag(given, "load_in_8bit")
    if adapter is None:
        if four_bit or eight_bit:
            raise FrameworkConfigError("load_in_4bit/load_in_8bit: a quantised base needs an adapter (lora, qlora)")
        read.values["method"] = "full"
        return False
    adapter = read_name(adapter, "adapter", ("lora", "qlora"), "lora, qlora")
    read.values["method"] = "qlora" if adapter == "qlora" or four_bit else "lora"
    if eight_bit:
        read.notes.append("load_in_8bit: the int8 base is estimated as a half-precision one (an over-estimate)")
    if "lora_r" in given:
        read.values["lora_rank"] = read_int(given["lora_r"], "lora_r", "lora_rank")
    read.values["lora_targets"] = _lora_targets(given)
    return True


def _lora_targets(given: dict) -> str:
    """lora_target_linear: every linear; lora_target_modules: a set the engine models; neither: PEFT's default
    for Llama, q_proj and v_proj (calculators.workload.training.LORA_TARGET_LABEL)."""
    if _flag(given, "lora_target_linear"):
        return "all-linear"
    modules = given.get("lora_target_modules")
    if modules is None:
        return "qv"
    if same_value(modules, "all-linear"):
        return "all-linear"
    modules = read_strings(modules, "lora_target_modules") if not isinstance(modules, str) else [modules]
    if frozenset(modules) not in _LORA_TARGETS:
        raise FrameworkConfigError(f"lora_target_modules: {show_value(modules)} is not a set the engine models (q,v; "
                                   "q,k,v,o; q,v,o and the MLP; every linear)")  # fmt: skip
    return _LORA_TARGETS[frozenset(modules)]


def _axolotl_precision(given: dict, adapter: bool, deepspeed: bool, read: _Reading) -> str:
    """The model is loaded in bf16/fp16 (normalize_config torch_dtype): a full fine-tune trains pure bf16 weights
    and AdamW states; PEFT keeps adapters in fp32 under autocast; DeepSpeed adds its fp32 master copy."""
    if _flag(given, "fp8"):
        return "fp8"
    bf16 = read_choice(given["bf16"], "bf16", (True, False, "auto"), "true, false or auto")
    fp16 = _flag(given, "fp16")
    half = "bf16" if (bf16 is True or (bf16 == "auto" and not fp16) or _flag(given, "bfloat16")) else None
    half = half or ("fp16" if fp16 else None)
    if half is None:
        return "fp32"
    if deepspeed:
        return f"{half}-mixed"
    if adapter or half == "fp16":
        if not adapter:
            read.notes.append("fp16: a full fine-tune in fp16 is estimated as AMP FP16 (fp32 weights)")
        return f"amp-{half}"
    return "bf16"


def _axolotl_optimizer(given: dict, read: _Reading) -> None:
    """optimizer: the HF Trainer's names (transformers OptimizerNames), read as TrainingArguments `optim` is."""
    optimizer, impl = _HF_OPTIM[read_name(given["optimizer"], "optimizer", _HF_OPTIM, ", ".join(_HF_OPTIM))]
    read.values["optimizer"] = optimizer
    if impl:
        read.values["optimizer_impl"] = impl


def _axolotl_checkpointing(given: dict, read: _Reading) -> None:
    """gradient_checkpointing true, or offload / offload_disk (the kept layer inputs go to the host);
    activation_offloading true, legacy, disk or hidden_states."""
    value = read_choice(given["gradient_checkpointing"], "gradient_checkpointing",
                        (True, False, "offload", "offload_disk"), "true, false, offload or offload_disk")  # fmt: skip
    if read.values.get("checkpointing") != "full":  # FSDP's activation_checkpointing may have set it
        read.values["checkpointing"] = "full" if value else "none"
    offload = read_choice(
        given.get("activation_offloading", False),
        "activation_offloading",
        (True, False, "legacy", "disk", "hidden_states"),
        "true, false, legacy, disk or hidden_states",
    )
    if offload or value in ("offload", "offload_disk"):
        read.values["activation_offload"] = True


def _axolotl_sharding(given: dict, read: _Reading) -> bool:
    """deepspeed (a path, read on its own, or the JSON inline), or fsdp / fsdp_config; True under DeepSpeed."""
    deepspeed = given.get("deepspeed")
    if isinstance(deepspeed, str):
        read.notes.append(f"deepspeed: {read_text(deepspeed, 'deepspeed')} is a file of its own; its ZeRO stage and "
                          "offload are not in this one: read it as a framework config too")  # fmt: skip
    elif isinstance(deepspeed, dict):
        read.values |= _deepspeed_zero(deepspeed.get("zero_optimization") or {}, "deepspeed.zero_optimization")
    elif deepspeed is not None:
        raise refusal("deepspeed", "a path or a mapping", deepspeed)
    legacy, section = given.get("fsdp"), given.get("fsdp_config")
    if section is not None:
        read_mapping(section, "fsdp_config", "a mapping of FSDP options")
    if legacy is not None or section is not None:
        _fsdp(_axolotl_fsdp_section(legacy) | (section or {}), "fsdp_config", read, given.get("fsdp_version"))
    return deepspeed is not None


def _axolotl_fsdp_section(legacy: Any) -> dict:
    """The deprecated `fsdp:` list (full_shard, shard_grad_op, hybrid_shard, no_shard, offload, auto_wrap)."""
    if legacy is None:
        return {}
    legacy = read_strings(legacy, "fsdp") if isinstance(legacy, list) else legacy
    if not isinstance(legacy, list):
        raise refusal("fsdp", "a list such as [full_shard, auto_wrap]", legacy)
    section = {"offload_params": True} if "offload" in legacy else {}
    strategies = [item.upper() for item in legacy if item.upper() in _FSDP_STAGE]
    return section | ({"sharding_strategy": strategies[0]} if strategies else {})


def _axolotl_plugins(given: dict, read: _Reading) -> None:
    """Liger (its norm and GLU kernels, its fused linear cross-entropy) and Cut Cross-Entropy replace the loss."""
    plugins = given.get("plugins") or []
    if not isinstance(plugins, list) or not all(isinstance(plugin, str) and plugin.isprintable() for plugin in plugins):
        raise refusal("plugins", "a list of plugin classes", plugins)
    for plugin in plugins:
        if plugin in _LIGER_PLUGIN:
            kernels = any(_flag(given, key) for key in ("liger_rms_norm", "liger_glu_activation", "liger_swiglu"))
            fused_loss = _flag(given, "liger_fused_linear_cross_entropy")
            if kernels:
                read.values["liger"] = True
            if fused_loss or kernels:
                read.values["loss"] = "fused-linear" if fused_loss else read.values.get("loss", "full")
        elif plugin == _CCE_PLUGIN:
            if _flag(given, "cut_cross_entropy", True):
                read.values["loss"] = "fused-linear"
        else:
            read.notes.append(f"plugins: {plugin} is not modelled by the engine")


def read_framework_config(text: str | bytes, name: str = "config") -> FrameworkConfig:
    """The settings a torchtune, axolotl or accelerate YAML, or a DeepSpeed or HF TrainingArguments JSON gives."""
    is_yaml = name.endswith((".yaml", ".yml"))
    config = _plain(_load(text, name, is_yaml), name)
    if not isinstance(config, dict):
        raise FrameworkConfigError(f"{name}: expected a mapping of settings at the top level")
    result = _yaml_config(config, name) if is_yaml else _json_config(config, name)
    _check(result, name)
    return result


def _load(text: str | bytes, name: str, is_yaml: bool) -> Any:
    """The parsed document, refusing what is too large or nests too deep before the parser (which recurses
    once per level) sees it."""
    size = len(text) if isinstance(text, bytes) else len(text) * 4  # at most 4 UTF-8 bytes a character
    if size > MAX_FILE_BYTES:
        size = size if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise FrameworkConfigError(f"{name} is {size:,} bytes; a framework config is expected to be under "
                                   f"{MAX_FILE_BYTES // 1_000_000} MB")  # fmt: skip
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameworkConfigError(f"{name}: not a text file") from None
    kind = "YAML" if is_yaml else "JSON"
    try:
        depth = _yaml_depth(text) if is_yaml else json_nesting_depth(text)
        if depth > MAX_NESTING_DEPTH:
            raise FrameworkConfigError(f"{name} nests lists and mappings more than {MAX_NESTING_DEPTH} deep")
        return yaml.safe_load(text) if is_yaml else json.loads(text)
    except (yaml.YAMLError, ValueError, OverflowError) as error:  # also a number over 4,300 digits, a bad date
        if isinstance(error, FrameworkConfigError):
            raise
        problem = str(error).splitlines()[0] if str(error) else type(error).__name__
        if "integer string conversion" in problem:
            problem = "a number has more than 4,300 digits"
        raise FrameworkConfigError(f"{name}: not valid {kind}: {problem}") from None
    except RecursionError:  # only when the caller's own stack is already nearly full
        raise FrameworkConfigError(f"{name}: nests lists and mappings too deeply to parse") from None


def _yaml_depth(text: str) -> int:
    """How deep YAML's sequences and mappings nest, from the parser's events (which do not recurse):
    block nesting (`- - - x`) has no brackets to count. Stops counting past the limit."""
    depth = deepest = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            deepest = max(deepest, depth)
            if depth > MAX_NESTING_DEPTH:
                break
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return deepest


def _plain(document: Any, name: str) -> Any:
    """The document as plain values, with every mapping key a name on one line (YAML keys may be numbers,
    dates or null; a key that is no printable string is quoted). YAML aliases are copied, so one that refers
    to itself is refused as too deep, and a document that repeats an alias to grow huge is refused by size."""
    count = 0

    def copy(value: Any, depth: int) -> Any:
        nonlocal count
        count += 1
        if count > MAX_VALUES:
            raise FrameworkConfigError(f"{name} holds more than {MAX_VALUES:,} values (counting each YAML alias "
                                       "where it is used); a framework config holds a few hundred")  # fmt: skip
        if depth >= MAX_NESTING_DEPTH and isinstance(value, dict | list):
            raise FrameworkConfigError(f"{name} nests lists and mappings more than {MAX_NESTING_DEPTH} deep (a YAML "
                                       "alias may refer to itself)")  # fmt: skip
        if isinstance(value, dict):
            return {_key(key): copy(item, depth + 1) for key, item in value.items()}
        if isinstance(value, list):
            return [copy(item, depth + 1) for item in value]
        return value

    return copy(document, 0)


def _key(key: Any) -> str:
    return key if isinstance(key, str) and key.isprintable() and len(key) <= 100 else show_value(key)


def _yaml_config(config: dict, name: str) -> FrameworkConfig:
    if any(isinstance(value, dict) and "_component_" in value for value in config.values()):
        return _torchtune(config)
    if "distributed_type" in config or "compute_environment" in config:
        return _accelerate(config)
    if any(key in config for key in _AXOLOTL_MARKERS):
        return _axolotl(config)
    raise FrameworkConfigError(
        f"{name}: neither a torchtune recipe (sections with a _component_), an accelerate config "
        f"(distributed_type, compute_environment) nor an axolotl config ({', '.join(_AXOLOTL_MARKERS)})"
    )


def _json_config(config: dict, name: str) -> FrameworkConfig:
    if "zero_optimization" in config or "train_micro_batch_size_per_gpu" in config:
        return _deepspeed(config)
    if "per_device_train_batch_size" in config or "optim" in config:
        return _hf_trainer(config)
    raise FrameworkConfigError(
        f"{name}: neither a DeepSpeed config (zero_optimization, train_micro_batch_size_per_gpu) nor HF "
        "TrainingArguments (per_device_train_batch_size, optim)"
    )


def _check(config: FrameworkConfig, name: str) -> None:
    """The settings read must be valid TrainingSettings together (ZeRO-3 for offloaded parameters, ...)."""
    try:
        TrainingSettings(**config.values, framework=config.framework)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        why = problem["msg"].removeprefix("Value error, ")
        raise FrameworkConfigError(f"{name}: the settings read are not valid together: "
                                   f"{where + ': ' if where else ''}{why}") from None  # fmt: skip


def describe_unknown(config: FrameworkConfig, name: str) -> str | None:
    """One line naming the keys that were not read and the notes on what was read in part, or None."""
    parts = []
    if config.unknown_keys:
        keys = ", ".join(config.unknown_keys)
        parts.append(f"unknown {config.framework} keys ignored: {keys}; the other settings were read")
    parts.extend(config.notes)
    return f"{name}: " + "; ".join(parts) if parts else None


def setting_fields(config: FrameworkConfig) -> dict[str, Any]:
    """The file's values by TrainingSettings field, its framework included; a method becomes the
    mode that trains it (LoRA and QLoRA are modes), keyed "mode"."""
    fields = config.values | {"framework": config.framework}
    return {
        ("mode" if field == "method" else field): (MODE_OF_METHOD[value] if field == "method" else value)
        for field, value in fields.items()
    }


def merged_values(values: dict[str, Any], config: FrameworkConfig, defaults: dict[str, Any]) -> dict[str, Any]:
    """Setting values (keyed as calculators.interface.settings declares them) with the file's values in
    place of those left at their default: a flag given explicitly wins over the file.
    `defaults` maps each TrainingSettings field (and "mode") to (setting key, default value)."""
    merged = dict(values)
    for field, value in setting_fields(config).items():
        key, default = defaults[field]
        if merged.get(key) == default:
            merged[key] = value
    return merged
