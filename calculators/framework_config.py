"""A training stack's own configuration file read into the engine's settings.

Three formats, told apart by their keys: a torchtune recipe YAML, a DeepSpeed JSON and a
Hugging Face TrainingArguments JSON (TrainingArguments.to_json_string()). Each known key
becomes a TrainingSettings value; keys that exist in the format but do not change memory
(learning rate, output paths, logging) are dropped silently; any other key is unknown and
named in a warning, and the rest of the file is kept. A bad value for a known key is a
FrameworkConfigError naming the key. Pure: text in, values out.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import yaml


class FrameworkConfigError(ValueError):
    """The file cannot be read, or a known key has a bad value; the message is one line."""


class FrameworkConfig(NamedTuple):
    framework: str
    values: dict[str, Any]  # TrainingSettings field -> value
    unknown_keys: list[str]


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


def _component(section: Any, key: str) -> str:
    if not isinstance(section, dict) or not isinstance(section.get("_component_"), str):
        raise FrameworkConfigError(f"{key}: expected a mapping with a _component_")
    return section["_component_"]


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise FrameworkConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FrameworkConfigError(f"{key}: expected a positive whole number, got {value!r}")
    return value


def _torchtune(config: dict) -> FrameworkConfig:
    values: dict[str, Any] = {}
    unknown = []
    for key, value in config.items():
        if key == "batch_size":
            values["micro_batch"] = _int(value, key)
        elif key == "gradient_accumulation_steps":
            values["grad_accum"] = _int(value, key)
        elif key == "dtype":
            if value not in ("bf16", "fp32"):
                raise FrameworkConfigError(f"dtype: expected bf16 or fp32, got {value!r}")
            values["precision"] = "bf16" if value == "bf16" else "fp32"
        elif key == "enable_activation_checkpointing":
            values["checkpointing"] = "full" if _bool(value, key) else "none"
        elif key == "enable_activation_offloading":
            values["activation_offload"] = _bool(value, key)
        elif key == "optimizer_in_bwd":
            values["optimizer_in_backward"] = _bool(value, key)
        elif key == "compile":
            values["compile"] = _bool(value, key)
        elif key == "loss":
            component = _component(value, key)
            if component not in _TORCHTUNE_LOSS:
                raise FrameworkConfigError(f"loss: {component} is not one the engine models")
            values["loss"] = _TORCHTUNE_LOSS[component]
        elif key == "optimizer":
            component = _component(value, key)
            if component not in _TORCHTUNE_OPTIMIZER:
                raise FrameworkConfigError(f"optimizer: {component} is not one the engine models")
            values["optimizer"] = _TORCHTUNE_OPTIMIZER[component]
            if values["optimizer"] == "adamw":
                values["optimizer_impl"] = "fused" if value.get("fused") else "foreach"
        elif key == "model":
            values |= _torchtune_model(value)
        elif key not in _TORCHTUNE_IGNORED:
            unknown.append(key)
    return FrameworkConfig("torchtune", values, unknown)


def _torchtune_model(section: Any) -> dict[str, Any]:
    """The model builder: lora_* or qlora_* builders train adapters of rank lora_rank."""
    builder = _component(section, "model").rsplit(".", 1)[-1]
    values: dict[str, Any] = {}
    if builder.startswith("qlora_"):
        values["method"] = "qlora"
    elif builder.startswith("lora_"):
        values["method"] = "lora"
    if "lora_rank" in section:
        values["lora_rank"] = _int(section["lora_rank"], "model.lora_rank")
    return values


# --- DeepSpeed JSON (deepspeed.ai/docs/config-json) -----------------------------------

_DEEPSPEED_IGNORED = {
    "train_batch_size", "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "scheduler",
    "activation_checkpointing", "flops_profiler", "tensorboard", "wandb", "comms_logger", "prescale_gradients",
    "communication_data_type", "zero_allow_untested_optimizer", "dump_state",
}  # fmt: skip


def _deepspeed(config: dict) -> FrameworkConfig:
    values: dict[str, Any] = {}
    unknown = []
    for key, value in config.items():
        if key == "train_micro_batch_size_per_gpu":
            values["micro_batch"] = _int(value, key) if value != "auto" else None
        elif key == "gradient_accumulation_steps":
            values["grad_accum"] = _int(value, key) if value != "auto" else None
        elif key in ("bf16", "fp16"):
            if isinstance(value, dict) and value.get("enabled") in (True, "auto"):
                values["precision"] = "bf16-mixed" if key == "bf16" else "fp16-mixed"
        elif key == "zero_optimization":
            values |= _deepspeed_zero(value)
        elif key == "optimizer":
            kind = value.get("type", "") if isinstance(value, dict) else ""
            if kind.lower() not in ("adam", "adamw"):
                raise FrameworkConfigError(f"optimizer.type: {kind!r} is not one the engine models (Adam, AdamW)")
            values |= {"optimizer": "adamw", "optimizer_impl": "fused"}
        elif key not in _DEEPSPEED_IGNORED:
            unknown.append(key)
    return FrameworkConfig("deepspeed", {k: v for k, v in values.items() if v is not None}, unknown)


def _deepspeed_zero(section: Any) -> dict[str, Any]:
    if not isinstance(section, dict):
        raise FrameworkConfigError("zero_optimization: expected a mapping")
    stage = section.get("stage", 0)
    if stage not in (0, 1, 2, 3):
        raise FrameworkConfigError(f"zero_optimization.stage: expected 0 to 3, got {stage!r}")
    values: dict[str, Any] = {"zero": stage}
    for key, field in (("offload_optimizer", "offload_optimizer"), ("offload_param", "offload_parameters")):
        device = section.get(key, {}).get("device", "none") if isinstance(section.get(key), dict) else "none"
        values[field] = device in ("cpu", "nvme")
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


def _hf_trainer(config: dict) -> FrameworkConfig:
    values: dict[str, Any] = {}
    unknown = []
    for key, value in config.items():
        if key == "per_device_train_batch_size":
            values["micro_batch"] = _int(value, key)
        elif key == "gradient_accumulation_steps":
            values["grad_accum"] = _int(value, key)
        elif key in ("bf16", "fp16"):
            if _bool(value, key):
                values["precision"] = "amp-bf16" if key == "bf16" else "amp-fp16"
        elif key == "gradient_checkpointing":
            values["checkpointing"] = "full" if _bool(value, key) else "none"
        elif key == "use_liger_kernel":
            values["liger"] = _bool(value, key)
        elif key == "torch_compile":
            values["compile"] = _bool(value, key)
        elif key in ("max_seq_length", "max_length"):  # TRL's SFTConfig
            values["seq_len"] = _int(value, key)
        elif key == "optim":
            if value not in _HF_OPTIM:
                raise FrameworkConfigError(f"optim: {value!r} is not one the engine models ({', '.join(_HF_OPTIM)})")
            optimizer, impl = _HF_OPTIM[value]
            values["optimizer"] = optimizer
            if impl:
                values["optimizer_impl"] = impl
        elif key not in _HF_IGNORED:
            unknown.append(key)
    return FrameworkConfig("hf-trainer", values, unknown)


def read_framework_config(text: str, name: str = "config") -> FrameworkConfig:
    """The settings a torchtune YAML, a DeepSpeed JSON or an HF TrainingArguments JSON gives."""
    try:
        config = yaml.safe_load(text) if name.endswith((".yaml", ".yml")) else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        raise FrameworkConfigError(f"{name}: not valid {'YAML' if name.endswith(('yaml', 'yml')) else 'JSON'}: "
                                   f"{str(error).splitlines()[0]}") from None  # fmt: skip
    if not isinstance(config, dict):
        raise FrameworkConfigError(f"{name}: expected a mapping of settings at the top level")
    if name.endswith((".yaml", ".yml")):
        return _torchtune(config)
    if "zero_optimization" in config or "train_micro_batch_size_per_gpu" in config:
        return _deepspeed(config)
    if "per_device_train_batch_size" in config or "optim" in config:
        return _hf_trainer(config)
    raise FrameworkConfigError(
        f"{name}: neither a DeepSpeed config (zero_optimization, train_micro_batch_size_per_gpu) nor HF "
        "TrainingArguments (per_device_train_batch_size, optim)"
    )


def describe_unknown(config: FrameworkConfig, name: str) -> str | None:
    """One line naming the keys that were not read, or None."""
    if not config.unknown_keys:
        return None
    keys = ", ".join(config.unknown_keys)
    return f"{name}: unknown {config.framework} keys ignored: {keys}; the other settings were read"


def merged_values(values: dict[str, Any], config: FrameworkConfig, defaults: dict[str, Any]) -> dict[str, Any]:
    """Setting values (keyed as calculators.settings declares them) with the file's values in
    place of those left at their default: a flag given explicitly wins over the file.
    `defaults` maps each TrainingSettings field to (setting key, default value)."""
    merged = dict(values)
    for field, value in (config.values | {"framework": config.framework}).items():
        if field == "method":  # the mode says what is trained: LoRA and QLoRA are modes
            field, value = "mode", {"lora": "finetune-lora", "qlora": "finetune-qlora"}[value]
        key, default = defaults[field]
        if merged.get(key) == default:
            merged[key] = value
    return merged
