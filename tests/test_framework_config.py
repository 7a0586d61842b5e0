"""A stack's own configuration file (--framework-config) read into the engine's settings."""

import json

import pytest

from calculators.cli import main
from calculators.framework_config import FrameworkConfigError, describe_unknown, read_framework_config

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
    from calculators.validation import validation_table

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
