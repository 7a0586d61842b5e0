"""Generated framework configs (issue 37): reading one never raises anything but FrameworkConfigError, whose
message is one line naming the field (or the file), and a valid document reads to the settings it gives.

Two families. Mutated documents: a valid DeepSpeed JSON, HF TrainingArguments JSON, accelerate YAML (FSDP,
DeepSpeed), axolotl YAML (QLoRA, FSDP2 + Liger) or torchtune YAML with one to three of the fields the
reader reads (or a section above them) set to anything: a wrong type, a list or mapping, nesting up to 80
deep, huge or negative integers, NaN and infinities, text with newlines, a near-valid name; one document in
eight is also cut short at a random character (malformed). Valid documents: each format's fields drawn from
their valid values, plus ignored and unknown keys holding anything, compared with the settings written out
here by hand (not by the reader's tables).
Examples: 30 per mutated base document (7), 20 per valid format (4), 15 depths here; 1500, 1000 and 300 with
GPU_SIZING_LONG_PROPERTIES=1.
"""

from __future__ import annotations

import json
import math
import os

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.workload.config_fields import FrameworkConfigError
from calculators.workload.framework_files import FrameworkConfig, read_framework_config
from calculators.workload.training import TrainingSettings
from tests.test_framework_config import ACCELERATE_FSDP, AXOLOTL_FFT_LIGER_FSDP, AXOLOTL_QLORA, TORCHTUNE_QLORA

LONG = os.environ.get("GPU_SIZING_LONG_PROPERTIES") == "1"
MUTATED, VALID, DEPTHS = (1500, 1000, 300) if LONG else (30, 20, 15)


def _fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


BANNED = ("Traceback", "unhashable", "object has no attribute", "object is not", "RecursionError", "Exceeds the limit")

ACCELERATE_DEEPSPEED = """
distributed_type: DEEPSPEED
deepspeed_config:
  gradient_accumulation_steps: 8
  offload_optimizer_device: cpu
  offload_param_device: none
  zero3_init_flag: true
  zero_stage: 3
mixed_precision: bf16
num_processes: 4
dynamo_config:
  dynamo_backend: INDUCTOR
"""
DEEPSPEED = {
    "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto", "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, "optimizer": {"type": "AdamW"},
}  # fmt: skip
HF = {"per_device_train_batch_size": 8, "bf16": True, "gradient_checkpointing": True, "optim": "paged_adamw_32bit"}

# base document, file name, and the fields (dotted) the reader reads, mutated at random
BASES = {
    "deepspeed": (DEEPSPEED, "ds.json", """train_micro_batch_size_per_gpu gradient_accumulation_steps bf16 fp16
        bf16.enabled zero_optimization zero_optimization.stage zero_optimization.offload_optimizer
        zero_optimization.offload_optimizer.device zero_optimization.offload_param.device optimizer optimizer.type"""),
    "hf": (HF, "args.json", """per_device_train_batch_size gradient_accumulation_steps bf16 fp16 gradient_checkpointing
        use_liger_kernel torch_compile max_seq_length max_length optim"""),
    "torchtune": (yaml.safe_load(TORCHTUNE_QLORA), "qlora.yaml", """batch_size gradient_accumulation_steps dtype
        enable_activation_checkpointing enable_activation_offloading optimizer_in_bwd compile loss loss._component_
        optimizer optimizer._component_ optimizer.fused model model._component_ model.lora_rank"""),
    "accelerate-fsdp": (yaml.safe_load(ACCELERATE_FSDP), "fsdp.yaml", """distributed_type mixed_precision fsdp_config
        fsdp_config.fsdp_version fsdp_config.fsdp_sharding_strategy fsdp_config.fsdp_reshard_after_forward
        fsdp_config.fsdp_offload_params fsdp_config.fsdp_activation_checkpointing dynamo_config
        dynamo_config.dynamo_backend num_processes parallelism_config parallelism_config.parallelism_config_tp_size
        parallelism_config.parallelism_config_cp_size"""),
    "accelerate-deepspeed": (yaml.safe_load(ACCELERATE_DEEPSPEED), "ds.yaml", """distributed_type mixed_precision
        deepspeed_config deepspeed_config.zero_stage deepspeed_config.offload_optimizer_device
        deepspeed_config.offload_param_device deepspeed_config.gradient_accumulation_steps
        deepspeed_config.zero3_init_flag deepspeed_config.deepspeed_config_file num_processes"""),
    "axolotl-qlora": (yaml.safe_load(AXOLOTL_QLORA), "qlora.yml", """micro_batch_size sequence_len
        gradient_accumulation_steps tensor_parallel_size chunked_cross_entropy_num_chunks flash_attention
        eager_attention attn_implementation torch_compile chunked_cross_entropy context_parallel_size adapter
        load_in_4bit load_in_8bit lora_r lora_target_linear lora_target_modules fp8 bf16 fp16 bfloat16 optimizer
        gradient_checkpointing activation_offloading deepspeed deepspeed.zero_optimization
        deepspeed.zero_optimization.stage"""),
    "axolotl-fsdp": (yaml.safe_load(AXOLOTL_FFT_LIGER_FSDP), "fsdp.yml", """fsdp fsdp_config fsdp_version
        fsdp_config.reshard_after_forward fsdp_config.offload_params fsdp_config.sharding_strategy plugins
        liger_rms_norm liger_glu_activation liger_fused_linear_cross_entropy cut_cross_entropy bf16 optimizer"""),
}  # fmt: skip

NAMES = [
    "auto", "none", "cpu", "nvme", "NO", "FSDP", "DEEPSPEED", "MULTI_GPU", "FULL_SHARD", "SHARD_GRAD_OP", "bf16",
    "fp16", "fp32", "fp8", "no", "lora", "qlora", "adamw_torch", "AdamW", "torch.optim.AdamW", "q_proj", "v_proj",
    "all-linear", "offload", "1", "2", "", "x\ny", "a" * 300, "axolotl.integrations.liger.LigerPlugin",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.sampled_from([0, -1, 1, 2, 3, 4, 10**30, 10**300]),
    st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 2.0, 0.5]), st.text(max_size=12),
    st.sampled_from(NAMES),
)  # fmt: skip
KEYS = st.sampled_from(NAMES) | st.text(max_size=5) | st.integers(-5, 5) | st.none() | st.booleans()  # YAML keys
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),  # fmt: skip
    max_leaves=8,
)


def _nest(value: object, depth: int, as_list: bool) -> object:
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


GARBAGE = st.one_of(VALUES, st.builds(_nest, VALUES, st.integers(1, 80), st.booleans()))


def _set(document: dict, path: str, value: object) -> None:
    *parents, last = path.split(".")
    for key in parents:
        if not isinstance(document.get(key), dict):
            document[key] = {}
        document = document[key]
    document[last] = value


def _text(document: dict, name: str) -> str:
    return json.dumps(document) if name.endswith(".json") else yaml.safe_dump(document, sort_keys=False)


def _read(text: str, name: str) -> FrameworkConfig | FrameworkConfigError:
    """The reading, or the reader's own error; anything else raised fails the test."""
    try:
        return read_framework_config(text, name)
    except FrameworkConfigError as error:
        message = str(error)
        assert "\n" not in message and message.strip() == message and message, message
        assert not any(word in message for word in BANNED), message
        return error


@pytest.mark.parametrize("base", BASES)
@_fuzz(MUTATED)
@given(data=st.data())
def test_any_document_reads_or_is_one_clear_error_naming_the_field(base, data):
    document, name, fields = BASES[base]
    document = json.loads(json.dumps(document))  # a copy
    paths = data.draw(st.lists(st.sampled_from(fields.split()), min_size=1, max_size=3, unique=True))
    for path in paths:
        _set(document, path, data.draw(GARBAGE))
    if data.draw(st.integers(0, 3)) == 0:  # and a key that is no name (JSON writes it as a string)
        document[data.draw(st.integers(-5, 5) | st.none() | st.booleans())] = data.draw(GARBAGE)
    text = _text(document, name)
    cut = data.draw(st.integers(0, 7)) == 0
    if cut:
        text = text[: data.draw(st.integers(0, len(text)))]
    result = _read(text, name)
    event(f"{base}: {'read' if isinstance(result, FrameworkConfig) else 'refused'}{' (cut short)' if cut else ''}")
    if isinstance(result, FrameworkConfigError) and not cut:
        named = {part for path in paths for part in path.split(".")} | {name}
        assert any(part in str(result) for part in named), (paths, str(result))


@_fuzz(DEPTHS)
@given(depth=st.integers(65, 3000), kind=st.sampled_from(["json", "yaml-flow", "yaml-block"]))
def test_any_depth_past_the_limit_is_refused_before_parsing(depth, kind):
    if kind == "json":
        text, name = '{"optim": ' + "[" * depth + "]" * depth + "}", "args.json"
    elif kind == "yaml-flow":
        text, name = "base_model: " + "{a: " * depth + "1" + "}" * depth + "\n", "a.yml"
    else:
        text, name = "base_model:\n" + "- " * depth + "x\n", "a.yml"
    with pytest.raises(FrameworkConfigError) as raised:
        read_framework_config(text, name)
    assert str(raised.value) == f"{name} nests lists and mappings more than 64 deep"


# --- valid documents: the settings written out by hand -------------------------------------------

ANYTHING = VALUES  # what an ignored or unknown key may hold
POSITIVE = st.integers(1, 1_000_000)
HF_OPTIM = {
    "adamw_torch": {"optimizer": "adamw", "optimizer_impl": "foreach"},
    "adamw_torch_fused": {"optimizer": "adamw", "optimizer_impl": "fused"},
    "adamw_hf": {"optimizer": "adamw", "optimizer_impl": "for-loop"},
    "paged_adamw_8bit": {"optimizer": "paged-adamw-8bit"},
    "paged_adamw_32bit": {"optimizer": "paged-adamw"},
    "adafactor": {"optimizer": "adafactor"},
    "sgd": {"optimizer": "sgd"},
}
# key -> (valid values, the settings each gives)
HF_FIELDS = {
    "per_device_train_batch_size": (POSITIVE, lambda v: {"micro_batch": v}),
    "gradient_accumulation_steps": (POSITIVE, lambda v: {"grad_accum": v}),
    "bf16": (st.booleans(), lambda v: {"precision": "amp-bf16"} if v else {}),
    "gradient_checkpointing": (st.booleans(), lambda v: {"checkpointing": "full" if v else "none"}),
    "use_liger_kernel": (st.booleans(), lambda v: {"liger": v}),
    "torch_compile": (st.booleans(), lambda v: {"compile": v}),
    "max_seq_length": (st.integers(1, 10_000_000), lambda v: {"seq_len": v}),
    "optim": (st.sampled_from(sorted(HF_OPTIM)), HF_OPTIM.__getitem__),
}
DEVICE = st.sampled_from(["none", "cpu", "nvme"])
DEEPSPEED_FIELDS = {
    "train_micro_batch_size_per_gpu": (POSITIVE | st.just("auto"), lambda v: {} if v == "auto" else {"micro_batch": v}),
    "gradient_accumulation_steps": (POSITIVE | st.just("auto"), lambda v: {} if v == "auto" else {"grad_accum": v}),
    "bf16": (st.fixed_dictionaries({"enabled": st.sampled_from([True, False, "auto"])}),
             lambda v: {"precision": "bf16-mixed"} if v["enabled"] else {}),
    "zero_optimization": (st.fixed_dictionaries({"stage": st.integers(0, 3), "offload_optimizer": st.fixed_dictionaries(
        {"device": DEVICE}), "offload_param": st.fixed_dictionaries({"device": DEVICE})}),
        lambda v: {"zero": v["stage"], "offload_optimizer": v["offload_optimizer"]["device"] != "none",
                   "offload_parameters": v["offload_param"]["device"] != "none"}),
    "optimizer": (st.fixed_dictionaries({"type": st.sampled_from(["Adam", "AdamW", "adamw"])}),
                  lambda v: {"optimizer": "adamw", "optimizer_impl": "fused"}),
}  # fmt: skip
TORCHTUNE_FIELDS = {
    "batch_size": (POSITIVE, lambda v: {"micro_batch": v}),
    "gradient_accumulation_steps": (POSITIVE, lambda v: {"grad_accum": v}),
    "dtype": (st.sampled_from(["bf16", "fp32"]), lambda v: {"precision": v}),
    "enable_activation_checkpointing": (st.booleans(), lambda v: {"checkpointing": "full" if v else "none"}),
    "compile": (st.booleans(), lambda v: {"compile": v}),
    "loss": (st.sampled_from([("torchtune.modules.loss.CEWithChunkedOutputLoss", "chunked"),
                              ("torch.nn.CrossEntropyLoss", "full")]),
             lambda v: {"loss": v[1]}),
    "optimizer": (st.tuples(st.sampled_from(["torch.optim.AdamW", "torch.optim.SGD"]), st.booleans()),
                  lambda v: {"optimizer": "sgd"} if v[0].endswith("SGD") else
                  {"optimizer": "adamw", "optimizer_impl": "fused" if v[1] else "foreach"}),
    "model": (st.tuples(st.sampled_from(["lora_", "qlora_", ""]), st.integers(1, 4096)),
              lambda v: {"method": v[0].rstrip("_"), "lora_rank": v[1]} if v[0] else {"lora_rank": v[1]}),
}  # fmt: skip
TORCHTUNE_SPELLING = {
    "loss": lambda v: {"_component_": v[0]},
    "optimizer": lambda v: {"_component_": v[0], "fused": v[1], "lr": 3e-4},
    "model": lambda v: {"_component_": f"torchtune.models.llama3_2.{v[0]}llama3_2_3b", "lora_rank": v[1]},
}
FORMATS = {
    "hf": (HF_FIELDS, {}, "args.json", "hf-trainer", ("per_device_train_batch_size", "optim"),
           ["learning_rate", "output_dir", "seed", "report_to"]),
    "deepspeed": (DEEPSPEED_FIELDS, {}, "ds.json", "deepspeed", ("zero_optimization", "train_micro_batch_size_per_gpu"),
                  ["gradient_clipping", "scheduler", "wandb", "steps_per_print"]),
    "torchtune": (TORCHTUNE_FIELDS, TORCHTUNE_SPELLING, "recipe.yaml", "torchtune", ("model", "loss", "optimizer"),
                  ["output_dir", "tokenizer", "dataset", "seed", "epochs", "metric_logger"]),
}  # fmt: skip


def _valid_together(values: dict, framework: str) -> bool:
    try:
        TrainingSettings(**values, framework=framework)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("kind", FORMATS)
@_fuzz(VALID)
@given(data=st.data())
def test_a_valid_document_reads_to_the_settings_it_gives(kind, data):
    fields, spelling, name, framework, markers, ignored = FORMATS[kind]
    keys = data.draw(st.lists(st.sampled_from(sorted(fields)), unique=True, max_size=len(fields)))
    keys = keys if any(key in markers for key in keys) else [*keys, data.draw(st.sampled_from(markers))]
    document, expected = {}, {}
    for key in keys:
        value = data.draw(fields[key][0])
        document[key] = spelling[key](value) if key in spelling else value
        expected |= fields[key][1](value)
    extra = data.draw(st.dictionaries(st.sampled_from(ignored), ANYTHING, max_size=3))
    unknown = data.draw(st.dictionaries(st.sampled_from(["learnig_rate", "colour", "my_key"]), ANYTHING, max_size=2))
    order = data.draw(st.permutations([*document.items(), *extra.items(), *unknown.items()]))
    text = _text(dict(order), name)
    if not _valid_together(expected, framework):  # e.g. offloaded parameters below ZeRO-3
        event(f"{kind}: refused as not valid together")
        with pytest.raises(FrameworkConfigError, match=f"^{name}: the settings read are not valid together: "):
            read_framework_config(text, name)
        return
    config = read_framework_config(text, name)
    event(f"{kind}: read")
    assert (config.framework, config.values) == (framework, expected)
    assert config.unknown_keys == [key for key, _ in order if key in unknown]


AXOLOTL_OPTIM = {"adamw_torch_fused": ("adamw", "fused"), "adamw_torch": ("adamw", "foreach"), "sgd": ("sgd", None)}


@_fuzz(VALID)
@given(
    micro=st.none() | POSITIVE, seq=st.none() | st.integers(1, 10_000_000), accum=st.none() | POSITIVE,
    adapter=st.sampled_from([None, "lora", "qlora"]), rank=st.none() | st.integers(1, 4096),
    optimizer=st.none() | st.sampled_from(sorted(AXOLOTL_OPTIM)), bf16=st.sampled_from([None, True, False, "auto"]),
    checkpointing=st.sampled_from([None, True, False, "offload"]), ignored=st.dictionaries(
        st.sampled_from(["learning_rate", "datasets", "output_dir", "wandb_project", "special_tokens"]), ANYTHING),
)  # fmt: skip
def test_a_valid_axolotl_document_reads_to_the_settings_it_gives(
    micro, seq, accum, adapter, rank, optimizer, bf16, checkpointing, ignored
):
    given_ = {"base_model": "m", "micro_batch_size": micro, "sequence_len": seq, "gradient_accumulation_steps": accum,
              "adapter": adapter, "load_in_4bit": adapter == "qlora", "lora_r": rank, "optimizer": optimizer,
              "bf16": bf16, "gradient_checkpointing": checkpointing}  # fmt: skip
    document = {key: value for key, value in given_.items() if value is not None} | ignored
    optimizer_, impl = AXOLOTL_OPTIM[optimizer or "adamw_torch_fused"]
    half = bf16 in (None, True, "auto")
    expected = {
        "micro_batch": micro or 1, "seq_len": seq or 512, "grad_accum": accum or 1,
        "method": adapter or "full", "precision": ("amp-bf16" if adapter else "bf16") if half else "fp32",
        "optimizer": optimizer_, "checkpointing": "full" if checkpointing else "none",
    }  # fmt: skip
    if impl:
        expected["optimizer_impl"] = impl
    if adapter:
        expected["lora_targets"] = "qv"
        if rank is not None:
            expected["lora_rank"] = rank
    if checkpointing == "offload":
        expected["activation_offload"] = True
    assume(_valid_together(expected, "axolotl"))
    config = read_framework_config(_text(document, "a.yml"), "a.yml")
    assert (config.framework, config.values, config.unknown_keys) == ("axolotl", expected, [])
