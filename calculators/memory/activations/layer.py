"""One layer's activations assembled from its blocks (layer_activation_terms), and what
checkpointing (none, selective, per-op, per-submodule, full) keeps of them and rebuilds in backward.
"""

from __future__ import annotations

from calculators.memory.activations.adapters import (
    lora_adapter_saved_bytes,
    qlora_matmul_transient_bytes,
)
from calculators.memory.activations.attention import (
    attention_backward_bytes_per_score,
    attention_core_saved_bytes,
    attention_projections_saved_bytes,
    log_sum_exp_bytes,
    out_projection_input_bytes,
    recomputed_core_input_copies_bytes,
    recomputes_attention_core,
)
from calculators.memory.activations.linears import (
    dropout_mask_bytes,
    per_rank,
)
from calculators.memory.activations.mlp import (
    mlp_hidden_gradient_bytes,
    mlp_saved_bytes,
    shared_experts_saved_bytes,
)
from calculators.memory.activations.norms import layer_norms_saved_bytes, norm_output_fp32
from calculators.models.geometry import layer_ffn_width
from calculators.models.spec import ModelSpec
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings


def layer_activation_terms(spec: ModelSpec, settings: TrainingSettings, dense: bool = False) -> dict[str, float]:
    """Bytes one transformer layer saves for backward, by part (no checkpointing), on one
    tensor-parallel rank; for a mixture of experts a sparse layer, or with `dense=True` one of
    its dense layers (a single MLP of dense_ffn_hidden_size that every token runs). The terms and
    their formulas: the table in calculators/memory/activations/__init__.py. With tensor and
    sequence parallelism every term is divided by t (Korthikanti et al. 2022, Sec. 4.2.2:
    sbh(34/t + 5as/(ht)))."""
    tokens = settings.tokens
    terms: dict[str, float] = {
        "norms": layer_norms_saved_bytes(spec, settings, tokens),
        "attention_projections": attention_projections_saved_bytes(spec, settings, tokens),
        "attention_core": attention_core_saved_bytes(spec, settings, tokens),
        "mlp": mlp_saved_bytes(spec, settings, tokens, dense),
    }
    if spec.n_experts > 1 and not dense and spec.shared_expert_ffn_size:
        terms["shared_experts"] = shared_experts_saved_bytes(spec, settings, tokens)
    if is_adapter_method(settings.method):
        terms["lora_adapters"] = lora_adapter_saved_bytes(spec, settings, tokens, dense)
    return {name: per_rank(value, settings) for name, value in terms.items()}


def core_bytes_not_kept(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """What selective checkpointing does not keep of the attention core until backward: eager,
    the whole core (its scores), rebuilt in backward; fused, its log-sum-exp, since the rebuilt
    kernel makes it again while the core's output stays, the output projection's saved input
    (traced: -16 B per token and layer on a 4-head layer, tests/test_trace_mla.py)."""
    if settings.checkpointing != "selective":
        return 0.0
    if settings.attention == "eager":
        return terms["attention_core"]
    return per_rank(log_sum_exp_bytes(spec, settings.tokens), settings)


def kept_per_layer_bytes(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """What each layer keeps from its forward until its backward.

    Full checkpointing keeps only each layer's input (Chen et al. 2016, arXiv
    1604.06174) and rebuilds the layer in backward. Selective checkpointing keeps all
    but the attention core, which it recomputes (Korthikanti Sec. 5).
    """
    full_layer = sum(terms.values())
    tokens = settings.tokens
    layer_input = per_rank(settings.precision_facts.residual_bytes * tokens * spec.hidden_size, settings)
    if settings.checkpointing == "full" and settings.checkpoint_unit == "submodule":
        return per_rank(submodule_checkpoint_inputs_bytes(spec, settings, tokens), settings)
    if settings.checkpointing == "full":
        return layer_input
    if settings.checkpointing == "op-selective":
        return layer_input + per_rank(op_selective_saved_bytes(spec, settings, tokens), settings)
    return full_layer - core_bytes_not_kept(terms, spec, settings)


def submodule_checkpoint_inputs_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What a layer keeps when full checkpointing wraps each of its submodules on its own
    (NVIDIA-NeMo/Automodel nemo_automodel/components/distributed/parallelizer.py @a6f64cb2,
    DefaultParallelizationStrategy: checkpoint_wrapper on mlp, self_attn, input_layernorm and
    post_attention_layernorm): each checkpoint keeps its input, so a pre-norm layer keeps the
    residual stream before each norm and each norm's output (the attention's and the MLP's
    input): norms + 2 hidden-sized tensors, the residual stream in its dtype and the norms' outputs
    in theirs (fp32 after a LayerNorm under autocast: norm_output_fp32), against one for a
    checkpointed layer."""
    r = settings.precision_facts.residual_bytes
    normed = 4 if norm_output_fp32(spec, settings) else r
    return (spec.norms_per_layer * r + 2 * normed) * tokens * spec.hidden_size


def submodule_backward_peak_bytes(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """The worst moment of a layer's backward when each submodule is checkpointed on its own:
    only one submodule is rebuilt at a time, so the larger of the MLP (its saved tensors and
    the gradients of its hidden activations: two for a gated MLP) and the attention (its saved
    tensors, the gradients of its output in head layout and of v, and of the residual stream).
    QLoRA adds the bf16 copy of one dequantised weight and its output."""
    tokens = settings.tokens
    dtypes = settings.precision_facts
    c, r = dtypes.compute_bytes, dtypes.residual_bytes
    width = max(spec.ffn_hidden_size, spec.shared_expert_ffn_size)
    hidden_gradients = mlp_hidden_gradient_bytes(spec, settings) * tokens * width
    mlp = terms["mlp"] + terms.get("shared_experts", 0.0) + per_rank(hidden_gradients, settings)
    attention_gradients = 2 * c * tokens * spec.q_dim + r * tokens * spec.hidden_size
    core = terms["attention_core"]
    if settings.attention == "eager":
        # the score-sized tensors at the worst moment of the core's backward, its saved ones included
        scores = settings.micro_batch * spec.n_heads * settings.seq_len**2
        core = per_rank(attention_backward_bytes_per_score(spec, settings) * scores, settings)
    attention = terms["attention_projections"] + core + per_rank(attention_gradients, settings)
    peak = max(mlp, attention)
    if settings.method == "qlora":
        peak += qlora_matmul_transient_bytes(spec, settings)
    return peak


def layer_matmul_outputs(spec: ModelSpec) -> list[int]:
    """Widths of one layer's aten.mm outputs per token, in the order its forward runs them:
    q, k, v (or the fused qkv), the output projection, then gate and up (or the fused gate-up,
    or fc1) and the down projection (torchtitan FeedForward: w2(silu(w1(x)) * w3(x))). A linear
    with a bias runs aten.addmm instead, which the per-op policy neither counts nor saves."""
    qkv_bias = spec.qkv_bias or spec.linear_bias
    attention = [spec.q_dim + 2 * spec.kv_dim] if spec.fused_qkv else [spec.q_dim, spec.kv_dim, spec.kv_dim]
    f = spec.ffn_hidden_size
    if not spec.is_gated_mlp:
        mlp = [f]
    elif spec.fused_gate_up:
        mlp = [2 * f]
    else:
        mlp = [f, f]
    widths = ([] if qkv_bias else attention) + ([] if spec.linear_bias else [spec.hidden_size, *mlp, spec.hidden_size])
    return widths


def op_selective_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What torchtitan's per-op selective checkpointing keeps of one layer, besides its input
    (pytorch/torchtitan torchtitan/parallelisms/parallelize_llama.py @004b3148,
    _apply_ac_to_transformer_block with selective_ac_option='op'): the outputs of the ops in
    _save_list, that is every mm except every second one (the count restarts in each
    layer's checkpoint: the 1st, 3rd, 5th... are saved) and the fused attention's output with
    its fp32 log-sum-exp; everything else is recomputed in backward. Eager attention's
    bmm and softmax are not on the list, so its core is recomputed."""
    c = settings.precision_facts.compute_bytes
    kept_widths = layer_matmul_outputs(spec)[::2]
    saved = sum(c * tokens * width for width in kept_widths)
    if settings.attention == "fused":
        saved += c * tokens * spec.q_dim + 4 * tokens * spec.n_heads
    return saved


def saved_after_attention_core_bytes(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """What a layer saved after its attention core, all freed by the time backward reaches
    the core: o's input and the output dropout mask, the MLP, and the norms that follow
    the attention (pre-norm layers normalise once before attention, so all but one;
    post-norm layers like BERT, which have no final norm, all of them)."""
    tokens = settings.tokens
    norms_after = spec.norms_per_layer - (1 if spec.final_norm else 0)
    norm = terms["norms"] / spec.norms_per_layer if spec.norms_per_layer else 0.0
    after_core = out_projection_input_bytes(spec, settings, tokens) + dropout_mask_bytes(spec, tokens)
    return terms["mlp"] + terms.get("shared_experts", 0.0) + norms_after * norm + per_rank(after_core, settings)


def layer_backward_peak_bytes(
    terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings, dense: bool = False
) -> float:
    """Bytes of one layer alive at the worst moment of its backward, the larger of two
    moments (under full checkpointing the layer has been rebuilt by then):
    - the MLP backward: every tensor the layer saved (selective checkpointing rebuilds the
      attention core only later), plus the gradient of the MLP's hidden activation (gated
      MLPs: two, for the gate and the up projection);
    - the eager attention core's backward: only what was saved up to the core is left
      (saved_after_attention_core_bytes), plus the score-sized tensors
      (attention_backward_bytes_per_score), the gradients of the attention output (in head
      layout) and of v, and the gradient of the residual stream; selective checkpointing
      adds the copies of q, k and v its rebuilt core makes.
    QLoRA adds the bf16 copy of one dequantised linear weight and its output. The MLP's hidden
    width is a MoE dense layer's own (`dense=True`), or the wider of a routed and the shared
    expert (each runs its backward in turn)."""
    if settings.checkpointing == "full" and settings.checkpoint_unit == "submodule":
        return submodule_backward_peak_bytes(terms, spec, settings)
    b, s = settings.micro_batch, settings.seq_len
    tokens = settings.tokens
    dtypes = settings.precision_facts
    c, r = dtypes.compute_bytes, dtypes.residual_bytes
    full_layer = sum(terms.values())
    recomputed_core = recomputes_attention_core(settings)
    mlp_moment = full_layer - core_bytes_not_kept(terms, spec, settings)
    width = max(spec.ffn_hidden_size, spec.shared_expert_ffn_size)
    if dense and spec.n_experts > 1:
        width = layer_ffn_width(spec, dense)
    peak = mlp_moment + per_rank(mlp_hidden_gradient_bytes(spec, settings) * tokens * width, settings)
    if settings.attention == "eager":
        up_to_core = full_layer - terms["attention_core"] - saved_after_attention_core_bytes(terms, spec, settings)
        scores = b * spec.n_heads * s * s
        temporaries = attention_backward_bytes_per_score(spec, settings) * scores
        temporaries += 2 * c * tokens * spec.q_dim + r * tokens * spec.hidden_size
        if recomputed_core:
            temporaries += recomputed_core_input_copies_bytes(spec, settings, tokens)
        peak = max(peak, up_to_core + per_rank(temporaries, settings))
    if settings.method == "qlora":
        peak += qlora_matmul_transient_bytes(spec, settings)
    return peak
