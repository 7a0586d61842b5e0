"""Encoder-decoder models (T5, Flan-T5): the decoder over the target length and its cross-attention blocks."""

from __future__ import annotations

from calculators.memory.activations.adapters import lora_dropout_sites_bytes
from calculators.memory.activations.attention import (
    attention_output_width,
    attention_score_bytes,
    recomputes_attention_core,
)
from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.activations.linears import (
    dropout_mask_bytes,
    input_saving_linears,
    linear_inputs_saved_bytes,
    per_rank,
)
from calculators.memory.activations.norms import first_norm_unrecorded_bytes, norm_saved_bytes
from calculators.memory.layout import embedding_trainable
from calculators.models.spec import ModelSpec, extension
from calculators.workload.finetune import cross_attention_adapted_linears
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings, decoder_settings


def t5_attention_settings(spec: ModelSpec, settings: TrainingSettings) -> TrainingSettings:
    """The settings as T5 runs them: its attention adds a relative position bias to the scores
    and has no fused (SDPA or flash) path in transformers (T5Attention.forward,
    models/t5/modeling_t5.py @6b8b757d), so it is eager whatever the attention setting says."""
    if spec.position_embedding != "relative" or settings.attention == "eager":
        return settings
    return settings.model_copy(update={"attention": "eager"})


def encoder_decoder_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What T5's decoder keeps beyond the self-attention layers the engine counts each of its
    layers as, for one micro-batch (transformers models/t5/modeling_t5.py @6b8b757d,
    T5LayerCrossAttention), the encoder on seq_len tokens and the decoder on target_len
    (decoder_settings; what a decoder layer keeps on the target's tokens rather than the input's is
    stage_phases', by the stage's decoder layers):
    - per decoder layer, a cross-attention block: its norm, q's input, the q/k/v copies the
      score matmuls keep (q over the target, k and v over the input), the eager core (target x
      input scores) and o's input, as a self-attention block keeps them, with k and v reading the
      encoder's output instead of the normed hidden state (under autocast each of them keeps its
      own half cast of it);
    - once, the encoder's output (without autocast the k/v linears of every decoder layer keep
      that one tensor), the encoder's final norm, the dropout masks outside the blocks, the
      relative positions' bucket indices (int64 queries x keys per stack, kept by the trained
      bias embedding) and the decoder's int64 input ids.
    Under full checkpointing (each block checkpointed, as transformers' gradient checkpointing
    does) the encoder's output is kept, and so are the three position biases every block is
    given: batch x heads x queries x keys each, in the model's dtype; the bucket indices are
    rebuilt inside the first blocks. Traced (tests/test_trace_t5.py)."""
    decoder_layers = extension(spec, "cross_attention_layers")
    if not decoder_layers:
        return 0.0
    target_settings = decoder_settings(spec, settings)
    b, source, target = settings.micro_batch, settings.seq_len, target_settings.seq_len
    inputs, targets = settings.tokens, target_settings.tokens
    h, c = spec.hidden_size, settings.precision_facts.compute_bytes
    trained = input_saving_linears(settings)
    encoder_output = c * inputs * h
    # outside the blocks: the encoder's final norm and the dropout masks of the encoder's output,
    # the decoder's final output and (when it trains) the decoder embedding's output; the decoder's
    # int64 input ids (the labels shifted right, T5ForConditionalGeneration._shift_right) when the
    # embedding keeps them; with the embeddings frozen (LoRA) the decoder's first norm, like the
    # encoder's, records nothing
    final_norm = norm_saved_bytes(spec, settings, inputs, weight_trainable=settings.method == "full")
    masks = dropout_mask_bytes(spec, inputs) + dropout_mask_bytes(spec, targets)
    replicated = 0.0  # int64 indices every tensor-parallel rank holds whole
    if embedding_trainable(settings):
        masks += dropout_mask_bytes(spec, targets)
        replicated += 8 * targets
    outside = final_norm + masks - first_norm_unrecorded_bytes(spec, target_settings)
    if settings.checkpointing == "full":
        # every checkpointed block keeps the stack's position bias it was given, batch x heads x
        # queries x keys in the model's dtype: the encoder's, the decoder's and the cross-attention's;
        # the first block of each stack makes its bias inside itself (T5Attention.compute_bias), so its
        # bucket indices are rebuilt in backward, not kept
        squares = source**2 + target**2 + target * source
        model_dtype = settings.precision_facts.model_dtype_bytes
        biases = b * spec.n_heads * squares * model_dtype
        # and the attention masks they are given (get_extended_attention_mask): the encoder's
        # padding mask (batch, 1, 1, input) and the decoder's causal one (batch, 1, target, target)
        biases += b * (source + target**2) * model_dtype
        # the encoder's output itself, an argument of every decoder block: fp32 where the hidden
        # states are (T5LayerNorm casts down only to a half weight's dtype)
        kept_output = settings.precision_facts.residual_bytes * inputs * h
        return per_rank(kept_output + biases + outside, settings) + replicated
    if embedding_trainable(settings):
        replicated += 8 * (source**2 + target**2)  # the bucket indices the bias embeddings keep
    kv_names = trained.intersection(("k", "v"))
    dropped_out = is_adapter_method(settings.method) and settings.lora_dropout > 0
    if settings.precision_facts.autocast_casts_hidden_states or not kv_names or dropped_out:
        # under autocast each k/v linear keeps its own half cast of the fp32 output instead; no k/v
        # linear keeps it without a trained one; LoRA dropout's adapters keep their dropouts' outputs
        encoder_output = 0.0
    block = cross_attention_block_bytes(spec, settings)
    return decoder_layers * block + per_rank(encoder_output + outside, settings) + replicated


def cross_attention_block_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What one of T5's cross-attention blocks keeps, per decoder layer and rank, beyond the
    self-attention block the engine counts its layer as (encoder_decoder_activation_bytes): its
    norm, q's input, the q/k/v copies the score matmuls keep (q over the target, k and v over the
    input), the eager core (target x input scores) and o's input; under autocast k's and v's own
    half casts of the encoder's output; adapters' intermediates and dropouts under LoRA. What a
    checkpointed decoder layer rebuilds in its backward on top of its self-attention block."""
    target_settings = decoder_settings(spec, settings)
    b, source, target = settings.micro_batch, settings.seq_len, target_settings.seq_len
    inputs, targets = settings.tokens, target_settings.tokens
    h, c = spec.hidden_size, settings.precision_facts.compute_bytes
    trained = input_saving_linears(settings)
    terms = layer_activation_terms(spec, target_settings)
    self_inputs = linear_inputs_saved_bytes(settings, targets, h, len(trained.intersection(("q", "k", "v"))))
    cross_inputs = linear_inputs_saved_bytes(settings, targets, h, len(trained.intersection(("q",))))
    if settings.precision_facts.autocast_casts_hidden_states:
        cross_inputs += linear_inputs_saved_bytes(settings, inputs, h, len(trained.intersection(("k", "v"))))
    norm = norm_saved_bytes(spec, settings, targets, weight_trainable=settings.method == "full")
    # k and v over the input's tokens, the scores over target x input, rather than the target's
    keys_over_input = 2 * c * (inputs - targets) * spec.kv_dim
    scores_over_input = attention_score_bytes(spec, target_settings) * b * spec.n_heads * target * (source - target)
    block = norm + per_rank(cross_inputs - self_inputs, settings) + terms["attention_projections"]
    if not recomputes_attention_core(target_settings):  # selective checkpointing rebuilds the eager core
        block += terms["attention_core"] + per_rank(scores_over_input, settings)
    block += per_rank(keys_over_input, settings)
    block += per_rank(cross_adapter_intermediate_bytes(spec, settings, targets, inputs), settings)
    if is_adapter_method(settings.method) and settings.lora_dropout:
        # each adapter drops out its own input: q the normed decoder state, k and v the encoder's
        # output (whose one counted copy no adapter keeps then), o the attention output
        sites = [
            (("q",), targets, h, True, True, False),
            (("k", "v"), inputs, h, False, False, False),
            (("o",), targets, attention_output_width(spec), True, settings.attention == "eager", False),
        ]
        block += per_rank(lora_dropout_sites_bytes(settings, sites), settings)
    return block


def cross_adapter_intermediate_bytes(spec: ModelSpec, settings: TrainingSettings, targets: int, inputs: int) -> float:
    """Under LoRA, each adapted linear of a cross-attention block keeps its adapter's r-wide
    intermediate, as a self-attention block's do (lora_intermediate_bytes): q's and o's over the
    target's tokens, k's and v's over the input's; LoRA dropout's masks and outputs are
    encoder_decoder_activation_bytes'."""
    if not is_adapter_method(settings.method):
        return 0.0
    adapted = cross_attention_adapted_linears(spec, settings.lora_targets)
    rows = sum(inputs if linear.name in ("k", "v") else targets for linear in adapted)
    return settings.precision_facts.compute_bytes * rows * settings.lora_rank
