"""FLOPs per token of a training step: the model's (6N, Kaplan et al. 2020, arXiv 2001.08361, Sec. 2.1,
plus PaLM's attention term, Chowdhery et al. 2022, arXiv 2204.02311, Appendix B), what checkpointing
reruns (Korthikanti et al. 2022, arXiv 2205.05198), and the layers that are not all alike (skipped
Mllama layers, a shorter T5 decoder, cross-attention).
"""

from __future__ import annotations

from calculators.memory.mllama import layers_skipped_without_images
from calculators.models.geometry import active_matmul_parameters, layer_matmul_elements, vocab_matrix_elements
from calculators.models.spec import ModelSpec, extension
from calculators.timing.operations import (
    op_selective_recomputed_linears,
)
from calculators.workload.training import TrainingSettings, decoder_settings, language_model_settings
from calculators.workload.vision import tower_forward_flops_per_image, tower_trains, vision_tower


def attention_flops_per_token(spec: ModelSpec, seq_len: int) -> float:
    """Forward + backward FLOPs of the attention scores and their weighted sum, per token:
    12 * n_layers * seq_len * (heads * head_dim) (PaLM, Chowdhery et al. 2022, Appendix B).

    Forward: Q@K^T and P@V, each 2 * seq_len * (heads*head_dim) FLOPs per token and layer;
    backward is twice the forward. PaLM's figure is kept for causal attention too: fused kernels
    that skip the masked half would halve it, which we do not assume.
    """
    return 12.0 * spec.n_layers * seq_len * spec.q_dim


def recompute_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Extra forward work of activation recomputation, per token (Korthikanti et al. 2022):
    full checkpointing reruns the whole forward (2N + the attention forward, i.e. 8N instead of 6N);
    selective recomputation reruns the attention core only (its forward: a third of PaLM's term);
    per-op selective reruns every second matmul of each layer (torchtitan's policy)."""
    return rerun_flops_per_token(
        settings.checkpointing,
        active_matmul_parameters(spec),
        attention_flops_per_token(spec, settings.seq_len),
        spec.n_layers * op_selective_recomputed_weights_per_token(spec),
    )


def rerun_flops_per_token(
    checkpointing: str, matmul_weights: float, attention_flops: float, op_selective_weights: float = 0.0
) -> float:
    """FLOPs per token that `checkpointing` reruns of work with `matmul_weights` matmul weights
    per token and `attention_flops` of PaLM's attention term (forward and backward; the forward
    is a third): full, the whole forward (2 x weights + the attention forward); selective, the
    attention forward; per-op selective, 2 x `op_selective_weights` (every second matmul)."""
    if checkpointing == "full":
        return 2.0 * matmul_weights + attention_flops / 3
    if checkpointing == "selective":
        return attention_flops / 3
    if checkpointing == "op-selective":
        return 2.0 * op_selective_weights
    return 0.0


def op_selective_recomputed_weights_per_token(spec: ModelSpec) -> float:
    """Matmul weights per layer that per-op selective checkpointing reruns for each token (the
    recomputed linears of calculators.timing.operations; an expert linear counts for the experts a
    token is routed to, k of E)."""
    weights = 0.0
    for linear in op_selective_recomputed_linears(spec):
        share = 1.0 if linear.copies == 1 else spec.experts_per_token
        weights += share * linear.in_features * linear.out_features
    return weights


def training_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> float:
    """FLOPs executed per trained token: 6N (Kaplan et al. 2020; PaLM Appendix B) + attention
    12*L*s*(heads*head_dim) (PaLM Appendix B) + recomputation (Korthikanti et al. 2022).

    N counts matmul weights including the LM head (embedding lookups are not matmuls). Norms,
    activations and the optimizer step are left out: they are a few percent of the total.
    """
    matmul = matmul_flops_factor(settings) * active_matmul_parameters(spec)
    return matmul + attention_flops_per_token(spec, settings.seq_len) + recompute_flops_per_token(spec, settings)


def matmul_flops_factor(settings: TrainingSettings) -> float:
    """FLOPs per matmul weight and token: 2 forward + 2 for the input gradient + 2 for the
    weight gradient (Kaplan et al. 2020, Sec. 2.1). A frozen base (LoRA/QLoRA) skips the
    weight gradient: 4 (Hu et al. 2021 report the same saving); the adapters' own work,
    r x (in + out) per linear, is under 1% at the ranks used and is left out."""
    return 4.0 if settings.method in ("lora", "qlora") else 6.0


def vision_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The image encoder's FLOPs per token of the language model's sequence (text and image
    tokens): images per sample x the encoder's forward FLOPs per image, x 3 when it trains
    (forward + 2x backward, Kaplan et al. 2020) and x 1 when frozen (no backward reaches it), over
    the sequence. `settings` are the workload's, images in."""
    if not settings.images_per_sample or vision_tower(spec) is None:
        return 0.0
    passes = 3.0 if tower_trains(settings) else 1.0
    per_sample = settings.images_per_sample * tower_forward_flops_per_image(spec, settings) * passes
    return per_sample / language_model_settings(spec, settings).seq_len


def skipped_layer_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, recomputed FLOPs) per token of the layers a step without images skips (Llama
    3.2 Vision's cross-attention layers, calculators.memory.mllama.layers_skipped_without_images): each
    layer's 6N (4N) and attention share over the language model's sequence, and what
    checkpointing would have rerun of it. `settings`: the workload's, images in."""
    skipped = layers_skipped_without_images(spec, settings)
    if not skipped:
        return 0.0, 0.0
    weights = layer_matmul_elements(spec)
    attention = attention_flops_per_token(spec, language_model_settings(spec, settings).seq_len) / spec.n_layers
    recomputed = rerun_flops_per_token(
        settings.checkpointing, weights, attention, op_selective_recomputed_weights_per_token(spec)
    )
    return skipped * (matmul_flops_factor(settings) * weights + attention), skipped * recomputed


def target_length_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, recomputed FLOPs) per input token that an encoder-decoder's decoder does not
    do because its target is shorter than the input (T5 with target_len t < seq_len s; negative
    when longer). Its layers (their cross-attention blocks included) and the LM head run on t
    tokens per sample, not s: their matmul weights on t / s of the tokens (the cross-attention
    blocks' q and o; k and v read the encoder's s), and its self-attention (PaLM's term, Appendix
    B) over t instead of s."""
    decoder = decoder_settings(spec, settings)
    if decoder is settings:
        return 0.0, 0.0
    source, target = settings.seq_len, decoder.seq_len
    decoder_layers = extension(spec, "cross_attention_layers")
    head = vocab_matrix_elements(spec) if spec.head == "lm" else 0
    # the cross-attention block's q and o read the target; its k and v read the encoder's output
    cross_q_o = 2 * spec.hidden_size * spec.q_dim
    weights = decoder_layers * (layer_matmul_elements(spec) + cross_q_o) + head
    matmul_weights = weights * (1 - target / source)
    attention = 12.0 * decoder_layers * spec.q_dim * (source - target**2 / source)
    recomputed = rerun_flops_per_token(settings.checkpointing, matmul_weights, attention)  # per-op selective: none
    return matmul_flops_factor(settings) * matmul_weights + attention, recomputed


def cross_attention_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, recomputed FLOPs) per input token of an encoder-decoder's cross-attention
    cores, which PaLM's self-attention term leaves out: each of the t target tokens attends to all
    s input tokens in every decoder layer, Q@K^T and P@V 4 s q_dim forward, backward twice that
    (PaLM Appendix B's accounting), over the s input tokens per sample: 12 x layers x q_dim x t.
    Full or selective checkpointing reruns the forward."""
    decoder_layers = extension(spec, "cross_attention_layers")
    if not decoder_layers:
        return 0.0, 0.0
    target = decoder_settings(spec, settings).seq_len
    flops = 12.0 * decoder_layers * spec.q_dim * target
    return flops, rerun_flops_per_token(settings.checkpointing, 0.0, flops)


def unlike_layers_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, recomputed FLOPs) per token to add to the count that takes every layer as
    alike (model_flops_per_token, training_flops_per_token): less the layers a step without
    images skips and what a decoder shorter than the input does not run, plus an encoder-decoder's
    cross-attention cores. `settings`: the workload's, images in; the last two count on the
    language model's (language_model_settings)."""
    language = language_model_settings(spec, settings)
    skipped = skipped_layer_flops_per_token(spec, settings)
    shorter = target_length_flops_per_token(spec, language)
    cross = cross_attention_flops_per_token(spec, language)
    return tuple(c - s - t for c, s, t in zip(cross, skipped, shorter, strict=True))


def model_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Model FLOPs per token, the MFU numerator: 6N (4N with a frozen base) + PaLM's attention
    term; recomputation excluded."""
    return matmul_flops_factor(settings) * active_matmul_parameters(spec) + attention_flops_per_token(
        spec, settings.seq_len
    )
