"""A stack's own configuration file (--framework-config) read into the engine's settings."""

import json

import pytest

from calculators.interface.cli import main
from calculators.workload.config_fields import FrameworkConfigError
from calculators.workload.framework_files import describe_unknown, read_framework_config

TORCHTUNE_QLORA = """
model:
  _component_: torchtune.models.llama3_2.qlora_llama3_2_3b
  lora_rank: 64
batch_size: 2
dtype: bf16
enable_activation_checkpointing: True
enable_activation_offloading: True
compile: True
loss:
  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss
optimizer:
  _component_: torch.optim.AdamW
  fused: True
  lr: 3e-4
output_dir: /tmp/out
learnig_rate: 1
"""


def test_a_torchtune_recipe_gives_its_settings_and_names_unknown_keys():
    config = read_framework_config(TORCHTUNE_QLORA, "3B_qlora.yaml")
    assert config.framework == "torchtune"
    assert config.values == {
        "method": "qlora", "lora_rank": 64, "micro_batch": 2, "precision": "bf16", "checkpointing": "full",
        "activation_offload": True, "compile": True, "loss": "chunked", "optimizer": "adamw",
        "optimizer_impl": "fused",
    }  # fmt: skip
    assert config.unknown_keys == ["learnig_rate"]  # output_dir is known and changes no memory
    assert describe_unknown(config, "3B_qlora.yaml") == (
        "3B_qlora.yaml: unknown torchtune keys ignored: learnig_rate; the other settings were read"
    )


def test_a_deepspeed_config_gives_zero_offload_and_precision():
    text = json.dumps(
        {
            "train_micro_batch_size_per_gpu": 4,
            "gradient_accumulation_steps": "auto",
            "bf16": {"enabled": True},
            "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
            "optimizer": {"type": "AdamW"},
        }
    )
    config = read_framework_config(text, "ds.json")
    assert config.framework == "deepspeed" and not config.unknown_keys
    assert config.values == {
        "micro_batch": 4, "precision": "bf16-mixed", "zero": 3, "offload_optimizer": True,
        "offload_parameters": False, "optimizer": "adamw", "optimizer_impl": "fused",
    }  # fmt: skip


def test_hf_training_arguments_give_batch_precision_and_optimizer():
    text = json.dumps(
        {"per_device_train_batch_size": 8, "bf16": True, "gradient_checkpointing": True,
         "optim": "paged_adamw_32bit", "use_liger_kernel": True, "learning_rate": 2e-5}
    )  # fmt: skip
    config = read_framework_config(text, "args.json")
    assert config.framework == "hf-trainer"
    assert config.values == {
        "micro_batch": 8, "precision": "amp-bf16", "checkpointing": "full", "optimizer": "paged-adamw",
        "liger": True,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "name", "message"),
    [
        ('{"zero_optimization": {"stage": 7}}', "ds.json", "zero_optimization.stage: expected 0 to 3, got 7"),
        ('{"per_device_train_batch_size": 0}', "a.json", "per_device_train_batch_size: expected a positive"),
        ('{"optim": "lion"}', "a.json", "optim: 'lion' is not one the engine models"),
        ("{oops", "a.json", "a.json: not valid JSON"),
        ('{"foo": 1}', "a.json", "neither a DeepSpeed config"),
        ("- 1\n- 2\n", "a.yaml", "expected a mapping"),
    ],
)
def test_bad_files_are_one_clear_error(text, name, message):
    with pytest.raises(FrameworkConfigError, match=message):
        read_framework_config(text, name)


def test_the_cli_reads_the_file_and_explicit_flags_win(tmp_path, capsys):
    """The torchtune QLoRA file on Llama 3.2 3B packed at 4096 tokens with adapters on q, v, o and
    the MLP is the validation row tt-5 (torchtune README): the same 4.93 GiB as its command."""
    path = tmp_path / "3B_qlora.yaml"
    path.write_text(TORCHTUNE_QLORA)
    argv = ["memory", "--model", "llama-3.2-3b", "--seq-len", "4096", "--lora-targets", "qvo-mlp"]
    assert main([*argv, "--framework-config", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert printed["mode"] == "finetune-qlora" and printed["settings"]["lora_rank"] == 64
    assert printed["settings"]["framework"] == "torchtune"
    assert "unknown torchtune keys ignored: learnig_rate" in captured.err
    from calculators.interface.validation import validation_table

    tt5 = next(row for row in validation_table() if row.id == "tt-5")
    assert printed["allocated_gib"] == pytest.approx(tt5.estimate_gib)
    assert main([*argv, "--framework-config", str(path), "--loss", "full", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["loss"] == "full"


def test_a_bad_file_on_the_cli_is_one_line(tmp_path, capsys):
    path = tmp_path / "ds.json"
    path.write_text('{"zero_optimization": {"stage": 7}}')
    assert main(["memory", "--model", "llama-3.2-1b", "--framework-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: zero_optimization.stage")


# --- axolotl YAML (modelled on axolotl-ai-cloud/axolotl @067b021c examples/llama-3/) -------------

AXOLOTL_QLORA = """
base_model: NousResearch/Meta-Llama-3-8B
model_type: AutoModelForCausalLM
tokenizer_type: AutoTokenizer
load_in_8bit: false
load_in_4bit: true
datasets:
  - path: aaditya/alpaca_subset_1
    type: alpaca
dataset_prepared_path:
val_set_size: 0
output_dir: ./outputs/qlora-out
adapter: qlora
lora_model_dir:
sequence_len: 4096
sample_packing: true
lora_r: 32
lora_alpha: 16
lora_dropout: 0.05
lora_target_linear: true
wandb_project:
gradient_accumulation_steps: 4
micro_batch_size: 2
num_epochs: 4
optimizer: paged_adamw_32bit
lr_scheduler: cosine
learning_rate: 0.0002
bf16: auto
tf32: false
gradient_checkpointing: true
logging_steps: 1
flash_attention: true
warmup_ratio: 0.1
special_tokens:
  pad_token: "<|end_of_text|>"
learnig_rate: 1
"""

AXOLOTL_FFT_LIGER_FSDP = """
base_model: NousResearch/Meta-Llama-3.1-8B
plugins:
  - axolotl.integrations.liger.LigerPlugin
liger_rope: true
liger_rms_norm: true
liger_glu_activation: true
liger_fused_linear_cross_entropy: true
datasets:
  - path: mlabonne/FineTome-100k
    type: chat_template
sequence_len: 4096
sample_packing: true
gradient_accumulation_steps: 4
micro_batch_size: 2
optimizer: adamw_torch_fused
learning_rate: 2e-5
bf16: auto
gradient_checkpointing: true
gradient_checkpointing_kwargs:
  use_reentrant: false
attn_implementation: flash_attention_2
fsdp_version: 2
fsdp_config:
  offload_params: false
  cpu_ram_efficient_loading: true
  auto_wrap_policy: TRANSFORMER_BASED_WRAP
  transformer_layer_cls_to_wrap: LlamaDecoderLayer
  state_dict_type: FULL_STATE_DICT
  reshard_after_forward: true
"""


def test_an_axolotl_qlora_config_gives_adapter_batch_and_precision():
    config = read_framework_config(AXOLOTL_QLORA, "qlora.yml")
    assert config.framework == "axolotl"
    assert config.values == {
        "method": "qlora", "lora_rank": 32, "lora_targets": "all-linear", "seq_len": 4096, "micro_batch": 2,
        "grad_accum": 4, "optimizer": "paged-adamw", "precision": "amp-bf16", "checkpointing": "full",
        "attention": "fused",
    }  # fmt: skip
    assert config.unknown_keys == ["learnig_rate"]  # datasets, wandb_project, special_tokens... are axolotl's
    assert describe_unknown(config, "qlora.yml") == (
        "qlora.yml: unknown axolotl keys ignored: learnig_rate; the other settings were read"
    )


def test_an_axolotl_full_fine_tune_with_liger_and_fsdp2():
    config = read_framework_config(AXOLOTL_FFT_LIGER_FSDP, "fft-8b-liger-fsdp.yaml")
    assert config.values == {
        "method": "full", "seq_len": 4096, "micro_batch": 2, "grad_accum": 4, "optimizer": "adamw",
        "optimizer_impl": "fused", "precision": "bf16", "checkpointing": "full", "attention": "fused", "zero": 3,
        "sharding_impl": "fsdp2", "offload_optimizer": False, "offload_parameters": False, "liger": True,
        "loss": "fused-linear",
    }  # fmt: skip
    assert not config.unknown_keys and not config.notes


def test_axolotl_lora_targets_legacy_fsdp_offload_and_cut_cross_entropy():
    text = """
base_model: meta-llama/Llama-3.2-1B
adapter: lora
lora_r: 16
lora_target_modules: [q_proj, v_proj]
micro_batch_size: 1
optimizer: adamw_bnb_8bit
fp16: true
bf16: false
gradient_checkpointing: offload
torch_compile: auto
plugins:
  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin
fsdp:
  - full_shard
  - auto_wrap
fsdp_config:
  fsdp_offload_params: true
  fsdp_sharding_strategy: FULL_SHARD
"""
    values = read_framework_config(text, "lora.yml").values
    assert values["lora_targets"] == "qv" and values["method"] == "lora" and values["lora_rank"] == 16
    assert values["optimizer"] == "adamw-8bit" and values["precision"] == "amp-fp16"
    assert values["checkpointing"] == "full" and values["activation_offload"] is True and values["compile"] is True
    assert values["loss"] == "fused-linear" and values["seq_len"] == 512  # axolotl's default sequence_len
    assert values["zero"] == 3 and values["sharding_impl"] == "zero"  # FSDP1: see TrainingSettings.sharding_impl
    assert values["offload_parameters"] is True and values["offload_optimizer"] is True


def test_an_axolotl_deepspeed_path_is_noted_and_its_precision_keeps_a_master_copy():
    text = "base_model: m\nmicro_batch_size: 4\nsequence_len: 2048\ndeepspeed: deepspeed_configs/zero3_bf16.json\n"
    config = read_framework_config(text, "ds.yml")
    assert config.values["precision"] == "bf16-mixed" and "zero" not in config.values
    warning = describe_unknown(config, "ds.yml")
    assert "deepspeed: deepspeed_configs/zero3_bf16.json is a file of its own" in warning
    inline = text.replace("deepspeed: deepspeed_configs/zero3_bf16.json", "deepspeed: {zero_optimization: {stage: 2}}")
    assert read_framework_config(inline, "ds.yml").values["zero"] == 2


# --- accelerate config YAML (modelled on huggingface/accelerate @16cb6eb8 examples/) -----------

ACCELERATE_FSDP = """
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_activation_checkpointing: true
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: SHARD_GRAD_OP
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_use_orig_params: true
  fsdp_colour: blue
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 2
num_processes: 16
rdzv_backend: static
same_network: true
tpu_env: []
use_cpu: false
"""


def test_an_accelerate_fsdp_config_gives_gpus_sharding_and_precision():
    config = read_framework_config(ACCELERATE_FSDP, "default_config.yaml")
    assert config.framework == "hf-trainer"
    assert config.values == {
        "precision": "bf16-mixed", "zero": 2, "sharding_impl": "zero", "checkpointing": "full",
        "offload_optimizer": False, "offload_parameters": False, "gpus": 16,
    }  # fmt: skip
    assert config.unknown_keys == ["fsdp_config.fsdp_colour"]


def test_accelerate_fsdp2_deepspeed_and_ddp():
    fsdp2 = "distributed_type: FSDP\nnum_processes: 8\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 2\n" \
        "  fsdp_reshard_after_forward: true\n  fsdp_offload_params: true\n"  # fmt: skip
    values = read_framework_config(fsdp2, "fsdp2.yaml").values
    assert values["zero"] == 3 and values["sharding_impl"] == "fsdp2" and values["offload_parameters"] is True
    deepspeed = """
compute_environment: LOCAL_MACHINE
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
    config = read_framework_config(deepspeed, "ds.yaml")
    assert config.framework == "deepspeed"
    assert config.values == {
        "zero": 3, "offload_optimizer": True, "offload_parameters": False, "grad_accum": 8,
        "load_whole_model": False, "precision": "bf16-mixed", "gpus": 4, "compile": True,
    }  # fmt: skip
    ddp = read_framework_config('distributed_type: "MULTI_GPU"\nmixed_precision: "fp16"\nnum_processes: 2', "a.yml")
    assert ddp.values == {"zero": 0, "precision": "amp-fp16", "gpus": 2}


def test_the_planners_accelerate_file_reads_back():
    from calculators.plan.launch import accelerate_fsdp_yaml

    class PlanLike:
        gpus, gpus_per_instance, precision, zero = 16, 8, "bf16-mixed", 3
        offload_parameters, offload_optimizer, checkpointing = False, False, "full"

    values = read_framework_config(accelerate_fsdp_yaml(PlanLike()), "accelerate_fsdp.yaml").values
    assert values == {
        "precision": "bf16-mixed", "gpus": 16, "zero": 3, "sharding_impl": "zero", "offload_optimizer": False,
        "offload_parameters": False, "checkpointing": "full",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "name", "message"),
    [
        ("base_model: m\nadapter: ia3\n", "a.yml", "adapter: 'ia3' is not one the engine models"),
        ("base_model: m\noptimizer: lion_8bit\n", "a.yml", "optimizer: 'lion_8bit' is not one the engine models"),
        ("base_model: m\nmicro_batch_size: 0\n", "a.yml", "micro_batch_size: expected a positive whole number"),
        ("base_model: m\nload_in_4bit: true\n", "a.yml", "load_in_4bit/load_in_8bit: a quantised base needs"),
        ("base_model: m\nadapter: lora\nlora_target_modules: [q_proj]\n", "a.yml", "lora_target_modules:"),
        ("base_model: m\nbf16: sometimes\n", "a.yml", "bf16: expected true, false or auto"),
        ("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: HALF\n", "a.yaml", "sharding_strategy:"),
        ("distributed_type: MULTI_GPU\nmixed_precision: fp4\n", "a.yaml", "mixed_precision: expected no, fp16"),
        ("distributed_type: XLA\n", "a.yaml", "distributed_type: 'XLA' is not one the engine models"),
        ("seed: 1\nepochs: 2\n", "a.yaml", "neither a torchtune recipe .* nor an axolotl config \\(base_model"),
        ("base_model: m\nplugins: [axolotl.integrations.liger.LigerPlugin]\nliger_rms_norm: true\n"
         "chunked_cross_entropy: true\n", "a.yml", "not valid together"),
    ],
)  # fmt: skip
def test_bad_axolotl_and_accelerate_values_name_the_key(text, name, message):
    with pytest.raises(FrameworkConfigError, match=message):
        read_framework_config(text, name)


def test_cli_prints_the_axolotl_settings(tmp_path, capsys):
    from tests.cli_helpers import run_cli

    path = tmp_path / "qlora.yml"
    path.write_text(AXOLOTL_QLORA)
    code, out, err = run_cli(capsys, "memory", "--model", "llama-3.1-8b", "--framework-config", str(path), "--json")
    assert code == 0
    printed = json.loads(out)
    assert printed["mode"] == "finetune-qlora"
    settings = printed["settings"]
    assert (settings["micro_batch"], settings["seq_len"], settings["grad_accum"]) == (2, 4096, 4)
    assert (settings["precision"], settings["optimizer"], settings["lora_rank"]) == ("amp-bf16", "paged-adamw", 32)
    assert (settings["framework"], settings["checkpointing"], settings["lora_targets"]) == ("axolotl", "full",
                                                                                           "all-linear")  # fmt: skip
    assert err == "warning: qlora.yml: unknown axolotl keys ignored: learnig_rate; the other settings were read\n"
    code, out, _ = run_cli(capsys, "memory", "--model", "llama-3.1-8b", "--framework-config", str(path),
                           "--micro-batch", "8", "--json")  # fmt: skip
    assert json.loads(out)["settings"]["micro_batch"] == 8  # an explicit flag wins


def test_cli_reads_an_accelerate_file(tmp_path, capsys):
    from tests.cli_helpers import run_cli

    path = tmp_path / "default_config.yaml"
    path.write_text(ACCELERATE_FSDP.replace("  fsdp_colour: blue\n", ""))
    code, out, err = run_cli(capsys, "memory", "--model", "llama-3.1-8b", "--framework-config", str(path), "--json")
    assert code == 0 and err == ""
    settings = json.loads(out)["settings"]
    assert (settings["gpus"], settings["zero"], settings["precision"]) == (16, 2, "bf16-mixed")


def test_older_and_newer_fsdp_spellings():
    """accelerate wrote fsdp_sharding_strategy as an int (1 = FULL_SHARD ... 4 = HYBRID_SHARD) before the names,
    and FSDP1's strategy as fsdp_reshard_after_forward since FSDP2; FSDP2 reshard_after_forward false = ZeRO-2."""
    hybrid = read_framework_config("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: 4\n", "a.yaml")
    assert hybrid.values["zero"] == 3
    assert hybrid.notes == ("fsdp_config: HYBRID_SHARD shards within a node only; the engine shards over every GPU",)
    assert "HYBRID_SHARD shards within a node only" in describe_unknown(hybrid, "a.yaml")
    v1 = "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 1\n  fsdp_reshard_after_forward: SHARD_GRAD_OP\n"
    assert read_framework_config(v1, "a.yaml").values["zero"] == 2
    v2 = "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: false\n"
    assert read_framework_config(v2, "a.yaml").values == {"zero": 2, "sharding_impl": "fsdp2"}


# --- issue 37: fields of the wrong type, files nested or grown too far ---------------------------

HF_OPTIMS = (
    "adamw_torch, adamw_torch_fused, adamw_hf, adamw_bnb_8bit, adamw_8bit, paged_adamw_8bit, paged_adamw_32bit, "
)
HF_OPTIMS += "adafactor, sgd"
DEEP = 5000
WRONG_TYPES = [
    ('{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": 5}}', "ds.json",
     "optimizer.type: 5 is not one the engine models (Adam, AdamW)"),
    ('{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": 2.5}}', "ds.json",
     "optimizer.type: 2.5 is not one the engine models (Adam, AdamW)"),
    ('{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": ["AdamW"]}}', "ds.json",
     "optimizer.type: ['AdamW'] is not one the engine models (Adam, AdamW)"),
    ('{"zero_optimization": {"stage": true}}', "ds.json", "zero_optimization.stage: expected 0 to 3, got True"),
    ('{"zero_optimization": {"offload_param": {"device": ["cpu"]}}}', "ds.json",
     "zero_optimization.offload_param.device: expected none, cpu or nvme, got ['cpu']"),
    ('{"optim": ["adamw_torch"]}', "args.json", f"optim: expected a name ({HF_OPTIMS}), got ['adamw_torch']"),
    ('{"optim": "sgd", "per_device_train_batch_size": NaN}', "args.json",
     "per_device_train_batch_size: expected a positive whole number up to 1,000,000, got nan"),
    ('{"optim": "sgd", "per_device_train_batch_size": 1e999}', "args.json",
     "per_device_train_batch_size: expected a positive whole number up to 1,000,000, got inf"),
    ("distributed_type: {a: 1}\n", "default_config.yaml",
     "distributed_type: expected a name (NO, MULTI_GPU, FSDP, DEEPSPEED), got {'a': 1}"),
    ("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: true\n", "a.yaml",
     "fsdp_config.fsdp_version: expected 1 or 2, got True"),
    ("distributed_type: MULTI_GPU\ndynamo_config: {dynamo_backend: [INDUCTOR]}\n", "a.yaml",
     "dynamo_config.dynamo_backend: expected a name or path on one line, got ['INDUCTOR']"),
    ("base_model: m\nadapter: lora\nlora_target_modules: [[q_proj], v_proj]\n", "a.yml",
     "lora_target_modules: expected a list of names, got [['q_proj'], 'v_proj']"),
    ("base_model: m\nadapter: lora\nlora_target_modules: {q_proj: 1}\n", "a.yml",
     "lora_target_modules: expected a list of names, got {'q_proj': 1}"),
    ("base_model: m\noptimizer: [adamw_torch]\n", "a.yml",
     f"optimizer: expected a name ({HF_OPTIMS}), got ['adamw_torch']"),
    ("base_model: m\nmicro_batch_size: 1e9\n", "a.yml",
     "micro_batch_size: expected a positive whole number up to 1,000,000, got '1e9'"),
    ("base_model: m\nsequence_len: 20000000\n", "a.yml",
     "sequence_len: expected a positive whole number up to 10,000,000, got 20000000"),
    ("base_model: m\nbf16: 1\n", "a.yml", "bf16: expected true, false or auto, got 1"),
    ("distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: true\n", "a.yaml",
     "fsdp_config.fsdp_reshard_after_forward: expected one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, "
     "HYBRID_SHARD_ZERO2 (under fsdp_version 1; true or false under fsdp_version 2), got True"),
    ("base_model: m\nplugins: [[a]]\n", "a.yml", "plugins: expected a list of plugin classes, got [['a']]"),
    ("base_model: m\ndeepspeed: \"zero3.json\\nzero2.json\"\n", "a.yml",
     "deepspeed: expected a name or path on one line, got 'zero3.json\\nzero2.json'"),
    ("model:\n  _component_: [torchtune.models.lora_llama3]\n", "a.yaml",
     "model: expected a mapping with a _component_, got {'_component_': ['torchtune.models.lora_llama3']}"),
    ("model: {_component_: m.lora_llama3}\noptimizer: {_component_: torch.optim.AdamW, fused: yes please}\n",
     "a.yaml", "optimizer.fused: expected true or false, got 'yes please'"),
    ('{"optim": ' + "[" * DEEP + "]" * DEEP + "}", "args.json", "args.json nests lists and mappings more than 64 deep"),
    ("base_model: " + "[" * DEEP + "]" * DEEP + "\n", "a.yml", "a.yml nests lists and mappings more than 64 deep"),
    ("base_model:\n" + "- " * DEEP + "x\n", "a.yml", "a.yml nests lists and mappings more than 64 deep"),
    ("base_model: m\nloop: &a [*a]\n", "a.yml",
     "a.yml nests lists and mappings more than 64 deep (a YAML alias may refer to itself)"),
    ("base_model: m\nx: 0x" + "f" * 5000 + "\nsequence_len: 0x" + "f" * 5000 + "\n", "a.yml",
     "sequence_len: expected a positive whole number up to 10,000,000, got a 20,000-bit number"),
    ('{"optim": "sgd", "seed": ' + "9" * 5000 + "}", "args.json",
     "args.json: not valid JSON: a number has more than 4,300 digits"),
    ("base_model: m\nseed: " + "9" * 5000 + "\n", "a.yml",
     "a.yml: not valid YAML: a number has more than 4,300 digits"),
    ("base_model: m\nstarted: 2024-02-30\n", "a.yml", "a.yml: not valid YAML: day is out of range for month"),
]  # fmt: skip
WRONG_TYPES.append(
    ("\n".join(["base_model: m", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
               + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]), "laughs.yml",
     "laughs.yml holds more than 100,000 values (counting each YAML alias where it is used); a framework config "
     "holds a few hundred")
)  # fmt: skip
WRONG_TYPE_IDS = [f"{name}-{i}" for i, (_, name, _) in enumerate(WRONG_TYPES)]


@pytest.mark.parametrize(("text", "name", "message"), WRONG_TYPES, ids=WRONG_TYPE_IDS)
def test_a_field_of_the_wrong_type_is_named_with_the_value_it_got(text, name, message):
    with pytest.raises(FrameworkConfigError) as raised:
        read_framework_config(text, name)
    assert str(raised.value) == message


@pytest.mark.parametrize(("text", "name", "message"), WRONG_TYPES, ids=WRONG_TYPE_IDS)
def test_the_cli_gives_one_error_line_for_each(tmp_path, capsys, text, name, message):
    from tests.cli_helpers import run_cli

    path = tmp_path / name
    path.write_text(text)
    code, out, err = run_cli(capsys, "memory", "--model", "llama-3.1-8b", "--framework-config", str(path))
    assert (code, out, err) == (2, "", f"error: {message}\n")


def test_a_file_over_2_mb_or_not_text_is_refused_before_parsing(tmp_path, capsys):
    from tests.cli_helpers import run_cli

    big = '{"optim": "sgd", "note": "' + "\u00e9" * 1_000_000 + '"}'  # 1,000,028 characters, 2,000,028 bytes
    with pytest.raises(FrameworkConfigError, match=r"^args.json is 2,000,028 bytes; a framework config is expected "
                                                   r"to be under 2 MB$"):  # fmt: skip
        read_framework_config(big, "args.json")
    path = tmp_path / "args.json"
    path.write_bytes(b"\xff\xfe{}")
    code, _, err = run_cli(capsys, "memory", "--model", "llama-3.1-8b", "--framework-config", str(path))
    assert (code, err) == (2, "error: args.json: not a text file\n")


def test_odd_yaml_keys_are_named_on_one_line():
    config = read_framework_config('base_model: m\n1: x\n? "two\\nlines"\n: y\nnull: z\n', "a.yml")
    assert config.unknown_keys == ["1", "'two\\nlines'", "None"]
    assert "\n" not in describe_unknown(config, "a.yml")
    fsdp = read_framework_config("distributed_type: FSDP\nfsdp_config: {1: x, fsdp_sharding_strategy: 2}\n", "a.yaml")
    assert (fsdp.values["zero"], fsdp.unknown_keys) == (2, ["fsdp_config.1"])


def test_null_is_a_field_left_out():
    """TrainingArguments.to_json_string writes unset fields as null; accelerate writes dynamo_backend NO or
    leaves it null (which was read as a backend named 'None', so compile on)."""
    hf = read_framework_config('{"optim": "sgd", "max_seq_length": null, "bf16": null}', "args.json")
    assert hf.values == {"optimizer": "sgd"}
    dynamo = read_framework_config("distributed_type: MULTI_GPU\ndynamo_config: {dynamo_backend: null}\n", "a.yaml")
    assert dynamo.values == {"zero": 0, "compile": False}
    ds = read_framework_config('{"zero_optimization": {"stage": null, "offload_param": {"device": null}}}', "ds.json")
    assert ds.values == {"zero": 0, "offload_optimizer": False, "offload_parameters": False}


def test_settings_not_valid_together_say_why_without_pydantic_words():
    with pytest.raises(FrameworkConfigError) as raised:
        read_framework_config('{"zero_optimization": {"stage": 1, "offload_param": {"device": "cpu"}}}', "ds.json")
    assert str(raised.value) == ("ds.json: the settings read are not valid together: offloading parameters to the CPU "
                                 "needs ZeRO stage 3 (parameters sharded), not stage 1")  # fmt: skip
