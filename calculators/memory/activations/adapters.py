"""What LoRA adapters (Hu et al. 2021, arXiv 2106.09685) keep for backward:
intermediates, dropout masks, QLoRA's dequantised matmuls."""

from __future__ import annotations

from calculators.memory.activations.attention import attention_output_width
from calculators.memory.activations.linears import fuses_qkv, input_saving_linears, trained_linear_names
from calculators.memory.activations.norms import autocast_casts_norm_output
from calculators.models.geometry import layer_ffn_width
from calculators.models.spec import ModelSpec
from calculators.workload.finetune import (
    LORA_TARGET_MODULES,
    adapted_linears,
    dequantised_bytes_per_element,
    qlora_dequantised_weight_bytes,
)
from calculators.workload.training import TrainingSettings


def lora_adapter_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, dense: bool = False) -> float:
    """The layer's 'lora_adapters' term: each adapter's r-wide intermediate (lora_intermediate_bytes),
    litgpt's zero padding of a partly adapted fused q/k/v (lora_zero_pad_bytes) and LoRA dropout's
    masks and outputs (lora_dropout_bytes)."""
    return (
        lora_intermediate_bytes(spec, settings, tokens, dense)
        + lora_zero_pad_bytes(spec, settings, tokens)
        + lora_dropout_bytes(spec, settings, tokens, dense)
    )


def lora_intermediate_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, dense: bool = False) -> float:
    """Per adapted linear, B saves its input, the r-wide output of A: tokens x r in the
    compute dtype (Hu et al. 2021: h = W0 x + B A x); an expert's adapter sees only its
    routed tokens, a MoE's dense layer (`dense=True`) has its MLP's adapters instead.
    lora_dropout = 0 (PEFT's default) saves no mask."""
    c, rank = settings.precision_facts.compute_bytes, settings.lora_rank
    routed = spec.experts_per_token if spec.n_experts > 1 else 1
    linears = adapted_linears(spec, settings.lora_targets, dense=dense)
    return sum((routed if linear.copies > 1 else 1) * c * tokens * rank for linear in linears)


def lora_zero_pad_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """litgpt's adapter on a fused q/k/v linear that adapts only some of q, k and v: zero_pad
    scatters the adapters' output into a zero tensor of the full q/k/v width with index_copy,
    whose derivative keeps that output (its `source`) for backward (pytorch tools/autograd/
    derivatives.yaml: index_copy's source gradient is `grad.index_select(dim, index)
    .expand_as(source)`; lit_gpt/lora.py @8641822 LoRAQKVLinear.zero_pad). Traced on lit-gpt's
    code: Llama-2-7B with q and v adapted saves tokens x (4096 + 4096) in bf16. A model whose own
    code fuses q/k/v is adapted whole by PEFT: no padding."""
    if settings.qkv_projection != "fused" or spec.is_mla:
        return 0.0
    targets = LORA_TARGET_MODULES[settings.lora_targets]
    widths = {"q": spec.q_dim, "k": spec.kv_dim, "v": spec.kv_dim}
    adapted = [width for name, width in widths.items() if name in targets]
    if not adapted or len(adapted) == len(widths):
        return 0.0
    return settings.precision_facts.compute_bytes * tokens * sum(adapted)


def lora_dropout_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, dense: bool = False) -> float:
    """What LoRA dropout (p > 0) saves beyond the adapters' inputs counted elsewhere.

    Each adapter reads dropout(x) (Hu et al. 2021 via PEFT peft/tuners/lora/layer.py:
    `lora_A(lora_dropout(x))`, one dropout per adapted linear; lit_gpt/lora.py @8641822: one per
    LoRA module, so one for a fused q/k/v). A dropout saves its 1-byte mask, and A saves the
    dropout's output in place of x. So per dropout: mask + output (1 + c bytes per element),
    less the one copy of x the engine counts for the adapters when nothing else keeps x (no
    bitsandbytes base saving it; o's input under fused attention is SDPA's saved output and was
    not counted). Under autocast with an fp32 input (a norm's fp32 output: norm_output_fp32) A saves
    its own half cast of the fp32 dropout output (already counted per adapter), so only the masks
    are added; o's and down's inputs are half under autocast, as are the hidden states under LoRA.
    In a mixture of experts' sparse layer each expert's adapters drop out their own gathered
    tokens, experts_per_token x tokens rows in all, and a shared expert's adapters drop out the
    block's input (all tokens) and their own hidden state. Traced (tests/test_trace_lora_autocast.py)."""
    if not settings.lora_dropout or spec.is_mla:
        return 0.0
    gated, fused_in, fused_qkv = spec.is_gated_mlp, spec.fused_gate_up, fuses_qkv(spec, settings)
    normed_fp32 = autocast_casts_norm_output(spec, settings)
    sparse = spec.n_experts > 1 and not dense
    rows = spec.experts_per_token * tokens if sparse else tokens  # token rows each MLP linear reads
    mlp_in = ("gate_up",) if fused_in else (("gate", "up") if gated else ("fc1",))
    mlp_out = ("down",) if gated else ("fc2",)
    sites = [  # (linears reading one tensor, rows, width, one dropout for all, counted copy of x, fp32 input)
        (("q", "k", "v", "qkv"), tokens, spec.hidden_size, fused_qkv, True, normed_fp32),
        (("o",), tokens, attention_output_width(spec), True, settings.attention == "eager", False),
        (mlp_in, rows, spec.hidden_size, fused_in, True, normed_fp32),
        # ReLU keeps its output, down's input, for itself: the adapters' dropout does not free it
        (mlp_out, rows, layer_ffn_width(spec, dense), True, spec.activation != "relu", False),
    ]
    if sparse and spec.shared_expert_ffn_size:
        sites += [
            (mlp_in, tokens, spec.hidden_size, fused_in, True, normed_fp32),
            (mlp_out, tokens, spec.shared_expert_ffn_size, True, True, False),
        ]
    return lora_dropout_sites_bytes(settings, sites, fused_qkv)


def lora_dropout_sites_bytes(settings: TrainingSettings, sites: list[tuple], fused_qkv: bool = False) -> float:
    """LoRA dropout's bytes over `sites`: (linear names reading one tensor, rows, width, one
    dropout for all of them, whether the engine counted a copy of that tensor for the adapters,
    whether the tensor is fp32 under autocast). See lora_dropout_bytes."""
    c = settings.precision_facts.compute_bytes
    targets = LORA_TARGET_MODULES[settings.lora_targets]
    base_keeps_input = input_saving_linears(settings) != trained_linear_names(settings)
    saved = 0.0
    for names, site_rows, width, one_dropout, counted, cast_input in sites:
        adapted = [name for name in names if name in targets and (name != "qkv" or fused_qkv)]
        if not adapted:
            continue
        dropouts = 1 if one_dropout else len(adapted)
        if cast_input:
            saved += dropouts * site_rows * width
            continue
        saved += dropouts * (1 + c) * site_rows * width
        if counted and not base_keeps_input:
            saved -= c * site_rows * width
    return saved


def qlora_matmul_transient_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The largest NF4 weight dequantised for its matmul, with its output (finetune.py)."""
    return qlora_dequantised_weight_bytes(
        spec,
        settings.precision_facts.compute_bytes,
        settings.tokens,
        settings.tensor_parallel,
        settings.quantised_linears or "layers",
        dequantised_bytes_per_element(settings.framework, settings.precision),
    )
