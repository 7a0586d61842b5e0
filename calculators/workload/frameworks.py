"""What each training stack does by default, with the source of each default.

`--framework NAME` fills the settings a user leaves unset (the loss, the AdamW
implementation, the NF4 kernels, what full checkpointing wraps, whether the loop keeps the
logits through backward, and how ZeRO-3 is implemented) with the values below; an explicit
setting always wins. The other rows
of a stack's recipe (precision, checkpointing, sharding) differ from recipe to recipe, so
they are listed as what the stack's reference recipe uses and must be set explicitly.
Pure data: no imports from the engine.
"""

from __future__ import annotations

from typing import NamedTuple


class FrameworkDefault(NamedTuple):
    framework: str
    setting: str  # a TrainingSettings field
    value: object
    applied: bool  # True: fills the setting when unset; False: the reference recipe's value, shown only
    source: str


FRAMEWORK_LABEL = {
    "hf-trainer": "Hugging Face Trainer",
    "torchtune": "torchtune",
    "torchtitan": "torchtitan",
    "deepspeed": "DeepSpeed",
    "megatron": "Megatron-LM / Megatron-Core",
    "litgpt": "LitGPT",
    "axolotl": "axolotl",
    "automodel": "NeMo Automodel",
}

_HF_LOSS = (
    "huggingface/transformers src/transformers/loss/loss_utils.py ForCausalLMLoss: logits.float(), then cross_entropy"
)
_TORCH_ADAMW = "torch/optim/adamw.py: foreach=None picks the foreach implementation on CUDA"
_AUTOMODEL = "NVIDIA-NeMo/Automodel @a6f64cb2 "
_FSDP2_ROOT = (
    "pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py @1fd469d0 FSDPState._lazy_init: the root's "
    "post_forward_mesh_info = None (not resharded after forward); _fsdp_collectives.py @010ae4a8 foreach_reduce: "
    "the reduce-scatter input in reduce_dtype, held until the next unit's reduce-scatter"
)

FRAMEWORK_DEFAULTS: tuple[FrameworkDefault, ...] = (
    FrameworkDefault("hf-trainer", "loss", "full", True, _HF_LOSS),
    FrameworkDefault(
        "hf-trainer",
        "optimizer_impl",
        "foreach",
        True,
        "transformers src/transformers/training_args.py: optim='adamw_torch' (torch.optim.AdamW); " + _TORCH_ADAMW,
    ),
    FrameworkDefault(
        "hf-trainer", "precision", "amp-bf16", False, "TrainingArguments bf16=True: fp32 weights under autocast"
    ),
    FrameworkDefault(
        "torchtune",
        "loss",
        "chunked",
        True,
        "pytorch/torchtune recipes/configs/llama3_2/3B_full_single_device.yaml: loss CEWithChunkedOutputLoss; "
        "torchtune/modules/loss/ce_chunked_output_loss.py @ce5433b0 (num_output_chunks=8)",
    ),
    FrameworkDefault(
        "torchtune",
        "optimizer_impl",
        "fused",
        True,
        "pytorch/torchtune recipes/configs/llama3_2/3B_full_single_device.yaml: torch.optim.AdamW fused: True",
    ),
    FrameworkDefault(
        "torchtune",
        "quant_backend",
        "torchao",
        True,
        "pytorch/torchtune torchtune/modules/peft/lora.py: QLoRA base weights are torchao NF4Tensor (linear_nf4)",
    ),
    FrameworkDefault("torchtune", "precision", "bf16", False, "torchtune recipe configs: dtype: bf16 (pure bf16)"),
    FrameworkDefault(
        "torchtune", "checkpointing", "full", False, "torchtune configs: enable_activation_checkpointing: True"
    ),
    FrameworkDefault(
        "torchtitan",
        "loss",
        "full",
        True,
        "pytorch/torchtitan torchtitan/train.py @9dec370: cross_entropy(pred.flatten(0, 1).float(), labels)",
    ),
    FrameworkDefault(
        "torchtitan",
        "optimizer_impl",
        "foreach",
        True,
        "pytorch/torchtitan torchtitan/optimizer.py @9dec370: AdamW(fused=False, foreach=True)",
    ),
    FrameworkDefault(
        "torchtitan",
        "sharding_impl",
        "fsdp2",
        True,
        "pytorch/torchtitan torchtitan/parallelisms/parallelize_llama.py @9dec370 apply_fsdp: fully_shard per "
        "TransformerBlock, then on the root model; " + _FSDP2_ROOT,
    ),
    FrameworkDefault(
        "torchtitan",
        "checkpointing",
        "op-selective",
        False,
        "pytorch/torchtitan train_configs/llama3_8b.toml @9dec370: mode='selective', selective_ac_option='op'",
    ),
    FrameworkDefault(
        "torchtitan",
        "precision",
        "bf16-mixed",
        False,
        "torchtitan FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), fp32 sharded parameters",
    ),
    FrameworkDefault("deepspeed", "loss", "full", True, "DeepSpeed trains the HF model as given: " + _HF_LOSS),
    FrameworkDefault(
        "deepspeed",
        "optimizer_impl",
        "fused",
        True,
        "microsoft/DeepSpeed deepspeed/ops/adam/fused_adam.py: FusedAdam for optimizer type Adam/AdamW",
    ),
    FrameworkDefault("deepspeed", "precision", "bf16-mixed", False, "DeepSpeed bf16.enabled: bf16 + fp32 master"),
    FrameworkDefault(
        "megatron",
        "loss",
        "full",
        True,
        "NVIDIA/Megatron-LM megatron/core/tensor_parallel/cross_entropy.py: vocab-parallel cross-entropy in fp32",
    ),
    FrameworkDefault(
        "megatron",
        "optimizer_impl",
        "fused",
        True,
        "NVIDIA/Megatron-LM megatron/core/optimizer/__init__.py: Apex / Transformer Engine FusedAdam",
    ),
    FrameworkDefault("megatron", "precision", "bf16-mixed", False, "Megatron --bf16: bf16 weights, fp32 main params"),
    FrameworkDefault(
        "litgpt",
        "loss",
        "chunked",
        True,
        "Lightning-AI/litgpt finetune/lora.py @8641822: lm_head_chunk_size=128 and chunked_cross_entropy",
    ),
    FrameworkDefault("litgpt", "optimizer_impl", "foreach", True, "litgpt: torch.optim.AdamW; " + _TORCH_ADAMW),
    FrameworkDefault("litgpt", "precision", "bf16", False, "litgpt --precision bf16-true (everything in bf16)"),
    FrameworkDefault(
        "litgpt",
        "lora_dropout",
        0.05,
        True,
        "Lightning-AI/litgpt finetune/lora.py @8641822: lora_dropout = 0.05 (litgpt/finetune/lora.py keeps 0.05)",
    ),
    FrameworkDefault(
        "litgpt",
        "qkv_projection",
        "fused",
        True,
        "Lightning-AI/litgpt lit_gpt/model.py @8641822 CausalSelfAttention: one `attn` linear for q, k and v of "
        "every model (litgpt/model.py: `qkv`); lit_gpt/lora.py LoRAQKVLinear adapts it",
    ),
    FrameworkDefault(
        "litgpt",
        "quantised_linears",
        "all",
        True,
        "Lightning-AI/lightning src/lightning/fabric/plugins/precision/bitsandbytes.py @71aed751: init_context "
        "replaces torch.nn.Linear with the NF4 class, so lm_head is quantised too",
    ),
    FrameworkDefault(
        "axolotl",
        "loss",
        "full",
        True,
        "axolotl-ai-cloud/axolotl trains with the HF Trainer (the Liger / cut_cross_entropy plugins are opt-in): "
        + _HF_LOSS,
    ),
    FrameworkDefault(
        "automodel",
        "loss",
        "full",
        True,
        _AUTOMODEL + "examples/llm_finetune/llama3_2/llama3_2_1b_squad.yaml: loss_fn MaskedCrossEntropy; "
        "nemo_automodel/components/loss/masked_ce.py: logits.float(), then cross_entropy",
    ),
    FrameworkDefault(
        "automodel",
        "optimizer_impl",
        "foreach",
        True,
        _AUTOMODEL + "examples/llm_finetune/llama3_2/llama3_2_1b_squad.yaml: torch.optim.Adam; " + _TORCH_ADAMW,
    ),
    FrameworkDefault(
        "automodel",
        "checkpoint_unit",
        "submodule",
        True,
        _AUTOMODEL + "nemo_automodel/components/distributed/parallelizer.py DefaultParallelizationStrategy: "
        "checkpoint_wrapper on each layer's mlp, self_attn, input_layernorm and post_attention_layernorm",
    ),
    FrameworkDefault(
        "automodel",
        "logits_in_backward",
        "kept",
        True,
        _AUTOMODEL + "nemo_automodel/recipes/llm/train_ft.py _forward_backward_step: `out = model(**batch)` stays "
        "referenced while `(local_loss * dp_group_size).backward()` runs",
    ),
    FrameworkDefault(
        "automodel",
        "sharding_impl",
        "fsdp2",
        True,
        _AUTOMODEL + "nemo_automodel/components/distributed/parallelizer.py: fully_shard per layer, then the root "
        "(reshard_after_forward=False); " + _FSDP2_ROOT,
    ),
    FrameworkDefault(
        "automodel",
        "precision",
        "bf16",
        False,
        _AUTOMODEL + "nemo_automodel/components/distributed/fsdp2.py FSDP2Manager: MixedPrecisionPolicy(param_dtype, "
        "reduce_dtype, output_dtype = bf16) on the checkpoint's bf16 weights",
    ),
    FrameworkDefault(
        "axolotl", "optimizer_impl", "foreach", True, "axolotl: HF Trainer optimizer adamw_torch; " + _TORCH_ADAMW
    ),
)


def framework_defaults(framework: str | None) -> dict[str, object]:
    """The settings `framework` fills when they are unset ({} for no framework)."""
    return {row.setting: row.value for row in FRAMEWORK_DEFAULTS if row.framework == framework and row.applied}


def framework_rows(framework: str | None = None) -> list[FrameworkDefault]:
    """The table's rows, for one framework or all of them."""
    return [row for row in FRAMEWORK_DEFAULTS if framework is None or row.framework == framework]
