"""Outside the layers: the embedding's output, the LM head's input, the logits and the loss
(full, chunked as torchtune's CEWithChunkedOutputLoss, or fused with the head as Liger's kernel).
"""

from __future__ import annotations

from calculators.memory.activations.linears import linear_inputs_saved_bytes, per_rank
from calculators.memory.activations.norms import norm_output_fp32, norm_saved_bytes
from calculators.memory.layout import embedding_trainable, head_trainable
from calculators.models.geometry import vocab_matrix_elements
from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings


def embedding_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Embedding output dropout mask and embedding LayerNorm (BERT). A frozen embedding
    saves nothing: no tensor before it requires grad, so autograd records nothing."""
    if not embedding_trainable(settings):
        return 0.0
    tokens = settings.tokens
    saved = tokens * spec.hidden_size if spec.dropout > 0 else 0
    if spec.embedding_norm:
        saved += norm_saved_bytes(spec, settings, tokens)
    return per_rank(saved, settings)


def head_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Final norm and the LM head's saved input (classifier heads read one token); a
    frozen LM head saves no input."""
    tokens = settings.tokens
    saved = norm_saved_bytes(spec, settings, tokens, settings.method == "full") if spec.final_norm else 0.0
    if spec.head == "lm" and head_trainable(spec, settings):
        saved += linear_inputs_saved_bytes(settings, tokens, spec.hidden_size, 1, norm_output_fp32(spec, settings))
    return per_rank(saved, settings)


def logits_bytes(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(end of forward, peak at the loss gradient) for logits and cross-entropy.

    The LM head's logits (compute dtype) and the fp32 log-softmax that cross-entropy
    saves: b*s*V*(c+4) at the end of forward. HF Trainer's compute_loss keeps only the
    loss, so the compute-dtype logits are freed before backward; at the loss gradient
    the fp32 log-probabilities and two fp32 gradients (of the log-probabilities and of
    the upcast logits) are alive: b*s*V*12 (measured in the trace at
    _log_softmax_backward_data). Gemma 2's final soft-capping keeps its tanh output through
    both moments (logit_softcap_tanh_bytes). A classifier head's logits are negligible. Under tensor
    parallelism each rank holds its vocabulary slice (Megatron's vocab-parallel
    cross-entropy).
    """
    if spec.head != "lm":
        tokens = settings.micro_batch
        return 4.0 * tokens * spec.num_labels, 12.0 * tokens * spec.num_labels
    if settings.loss == "chunked":
        return chunked_loss_bytes(spec, settings)
    if settings.loss == "fused-linear":
        return fused_linear_loss_bytes(spec, settings)
    elements = settings.tokens * spec.vocab_size
    capped = logit_softcap_tanh_bytes(spec, settings)
    forward = (settings.precision_facts.compute_bytes + 4) * elements + capped
    return per_rank(forward, settings), per_rank(3 * 4 * elements + capped, settings)


def logit_softcap_tanh_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Gemma 2's final soft-capping of the whole logits, `logits / cap`, `tanh`, `* cap` before
    the loss (huggingface/transformers src/transformers/models/gemma2/modeling_gemma2.py @006e8693,
    Gemma2ForCausalLM.forward): tanh saves its output, b*s*V in the compute dtype, alive from the
    end of forward until backward reaches it after the loss gradient. Only the full loss makes
    whole logits; Liger's fused linear cross-entropy caps inside its kernel (`softcap`), and
    torchtune caps the final norm's output, h wide, not the logits (torchtune/models/gemma2/
    _component_builders.py @bd2a0fc7, Gemma2FinalNorm)."""
    if spec.head != "lm" or spec.logit_softcap is None or settings.loss != "full":
        return 0.0
    return float(settings.precision_facts.compute_bytes * settings.tokens * spec.vocab_size)


def kept_logits_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The compute-dtype logits, b*s*V*c, when the training loop keeps the model's output
    referenced while backward runs (NVIDIA-NeMo/Automodel nemo_automodel/recipes/llm/train_ft.py
    @a6f64cb2, _forward_backward_step: `out = model(**batch)` is still in scope at
    `(local_loss * self._get_dp_group_size()).backward()`): alive on top of the loss gradient
    and through the whole backward. Only the full loss makes whole logits; HF Trainer's
    compute_loss returns the loss alone, so there they are freed (logits_bytes)."""
    if settings.logits_in_backward != "kept" or spec.head != "lm" or settings.loss != "full":
        return 0.0
    elements = settings.tokens * spec.vocab_size
    return per_rank(settings.precision_facts.compute_bytes * elements, settings)


def chunked_loss_bytes(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(end of forward, loss backward) for a cross-entropy computed chunk by chunk
    (pytorch/torchtune torchtune/modules/loss/ce_chunked_output_loss.py @ce5433b0,
    CEWithChunkedOutputLoss: the output projection returns n chunks of logits, each is
    upcast with .float() and goes through cross_entropy on its own; litgpt's
    chunked_cross_entropy does the same per 128 tokens).
    End of forward: the logits in the compute dtype and every chunk's fp32 log-softmax, which
    cross_entropy saves: (c + 4) x E, E = b*s*V, as for the full loss, plus, while the last
    chunk's log-softmax runs, that chunk's fp32 upcast, 4 E / n (traced: the forward's peak,
    bench/accuracy.py). The recipe then deletes
    the logits (`del logits`), and backward runs chunk by chunk: the fp32 log-probabilities
    not yet consumed (at most 4 E) plus one chunk's gradients, fp32 for the log-probabilities
    and for the upcast logits and the compute dtype for the logits: (8 + c) x E / n.
    The full loss holds 12 E at that moment.
    Compiled (torchtune's compile: True compiles compute_cross_entropy, torchtune/training/
    _compile.py @0078c31b compile_loss and
    CEWithChunkedOutputLoss.apply_compile_strategy), AOT autograd's partitioner saves each chunk's logits
    (compute dtype, the model's output itself) and the fp32 log-sum-exp per token instead of the
    fp32 log-probabilities: c E + 4 b s at the end of forward. Inductor fuses the backward's
    recomputed softmax and the one-hot subtraction into one kernel whose only output is the
    chunk's gradient in the compute dtype: c E + 4 b s + c E / n in backward."""
    elements = settings.tokens * spec.vocab_size
    tokens = settings.tokens
    c = settings.precision_facts.compute_bytes
    if settings.compile:
        forward = c * elements + 4 * tokens
        backward = c * elements + 4 * tokens + c * elements / settings.loss_chunks
        return per_rank(forward, settings), per_rank(backward, settings)
    forward = (c + 4) * elements + 4 * elements / settings.loss_chunks
    backward = 4 * elements + (8 + c) * elements / settings.loss_chunks
    return per_rank(forward, settings), per_rank(backward, settings)


def fused_linear_chunk_rows(tokens: int, spec: ModelSpec) -> int:
    """Tokens per chunk of Liger's fused linear cross-entropy: next_power_of_2(ceil(BT /
    ceil(V / H))), at most BT, so a chunk's logits are about BT x H elements
    (Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py @00eba634)."""
    inc_factor = -(-spec.vocab_size // spec.hidden_size)
    rows = -(-tokens // inc_factor)
    return min(1 << (rows - 1).bit_length(), tokens)


def fused_linear_loss_bytes(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(end of forward, loss backward) for a fused linear cross-entropy (Liger-Kernel
    src/liger_kernel/ops/fused_linear_cross_entropy.py @00eba634; Cut Cross-Entropy, Wijmans et
    al. 2024, arXiv 2411.09009, keeps even less). The logits are never whole: chunk by chunk
    the forward computes the logits (compute dtype), the loss and, at once, the gradient of the
    head's input (grad_input, b*s*h in the compute dtype, saved instead of the input itself,
    so counted with the head's activations) and of the head's weight (grad_weight, the
    weight's dtype, when the head trains). Left after forward: grad_weight, the fp32 loss per
    token, and the last chunk's logits buffer; in backward only the scaling of grad_input and
    grad_weight by the loss gradient, in place."""
    tokens = settings.tokens
    c = settings.precision_facts.compute_bytes
    chunk_logits = c * fused_linear_chunk_rows(tokens, spec) * spec.vocab_size
    grad_weight = (
        settings.precision_facts.weight_bytes * vocab_matrix_elements(spec) if head_trainable(spec, settings) else 0
    )
    loss_per_token = 4 * tokens
    forward = chunk_logits + grad_weight + loss_per_token + liger_weight_update_temporary_bytes(spec, settings)
    return per_rank(forward, settings), per_rank(grad_weight + loss_per_token, settings)


def liger_weight_update_temporary_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The V x H temporaries of Liger's per-chunk head-weight update (linkedin/Liger-Kernel
    src/liger_kernel/ops/fused_linear_cross_entropy.py @ead96b61, since v0.6.2 #830):
    `grad_weight += torch.mm(grad_logits.t(), input_chunk).float()` makes the product in the
    matmul's dtype and its fp32 copy; a fp32 grad_weight fed half logits (autocast over fp32
    weights) takes `torch.addmm(..., out_dtype=torch.float32, out=grad_weight)` on an Ampere or
    newer GPU instead, with no temporary. 0 when the head does not train. Measured in the trace
    (measure/trace/fused_loss.py)."""
    if not head_trainable(spec, settings):
        return 0.0
    c = settings.precision_facts.compute_bytes
    if settings.precision_facts.weight_bytes == 4 and c < 4:
        return 0.0
    return (c + (4 if c < 4 else 0)) * vocab_matrix_elements(spec)
