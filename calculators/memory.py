"""Peak GPU memory of one training step, phase by phase.

The peak is the maximum over the phases of a step (end of forward, the loss
gradient, the backward through the layers, the optimizer step), not a plain sum
of everything that ever exists. All sizes are bytes on one data-parallel GPU.

Sources:
- ZeRO: Rajbhandari et al. 2019, arXiv 1910.02054 (bytes per parameter, sharding).
- Activations: Korthikanti et al. 2022, arXiv 2205.05198 (Sec. 4, per-layer
  activations), adjusted to what PyTorch/Hugging Face code really saves for backward:
  separate autocast casts per linear, fp32 upcasts in RMSNorm and softmax, dropout
  masks as 1-byte bool tensors, fused (flash/SDPA) attention saving only its output
  and the log-sum-exp (Dao et al. 2022, arXiv 2205.14135).
- Logits and cross-entropy in fp32: b*s*V*4 bytes for the log-probabilities and
  the same again for each of their gradients.
"""

from __future__ import annotations

from pydantic import BaseModel

from calculators.model_spec import ModelSpec, ParameterCount, parameter_count
from calculators.training import (
    TrainingSettings,
    compute_bytes,
    gradient_bytes,
    is_autocast,
    master_weight_bytes,
    optimizer_state_element_bytes,
    residual_bytes,
    weight_bytes,
)

GIB = 2**30

COMPONENTS = (
    "weights",
    "master_weights",
    "autocast_weight_copies",
    "gradients",
    "optimizer_states",
    "optimizer_step_temporaries",
    "activations",
    "logits_and_loss",
    "allocator_reserve",
    "framework_overhead",
)

COMPONENT_LABEL = {
    "weights": "Weights",
    "master_weights": "FP32 master weights",
    "autocast_weight_copies": "Autocast weight copies",
    "gradients": "Gradients",
    "optimizer_states": "Optimizer states",
    "optimizer_step_temporaries": "Optimizer step temporaries",
    "activations": "Activations",
    "logits_and_loss": "Logits and loss",
    "allocator_reserve": "Allocator reserve",
    "framework_overhead": "CUDA context, cuBLAS, NCCL",
}


class PhaseMemory(BaseModel):
    """Bytes allocated by torch at one moment of the step, by component."""

    name: str
    components: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.components.values())


class MemoryEstimate(BaseModel):
    """Result of the estimate: the peak (GiB), its breakdown and the phases."""

    peak_gib: float
    allocated_gib: float
    reserved_gib: float
    peak_phase: str
    components_gib: dict[str, float]
    phases_gib: dict[str, float]
    phase_components_gib: dict[str, dict[str, float]]
    activations_per_layer_gib: dict[str, float]
    parameters: int
    trainable_parameters: int
    tokens_per_micro_batch: int
    assumptions: list[str]


# --- Per-parameter state (ZeRO paper, Sec. 3 and 5) ---------------------------------


def shard_divisor(zero: int, stage_that_shards: int, gpus: int) -> int:
    """ZeRO stage 1 shards optimizer states, 2 also gradients, 3 also parameters
    across the data-parallel GPUs (ZeRO paper Sec. 5.1, Fig. 1)."""
    return gpus if zero >= stage_that_shards else 1


def adafactor_state_elements(spec: ModelSpec, params: ParameterCount) -> int:
    """Adafactor keeps one row and one column second-moment vector per weight matrix,
    and a full second moment for vectors; no first moment by default (Shazeer & Stern
    2018, arXiv 1804.04235, Alg. 4; HF transformers Adafactor with beta1=None)."""
    h, f, n_exp = spec.hidden_size, spec.ffn_hidden_size, spec.n_experts
    n_mlp_mats = 3 if spec.is_gated_mlp else 2
    matrices = [(h, spec.q_dim), (h, spec.kv_dim), (h, spec.kv_dim), (spec.q_dim, h)]
    matrices += [(h, f)] * (n_mlp_mats * n_exp)
    matrix_elements = sum(r * c for r, c in matrices)
    factored = sum(r + c for r, c in matrices) * spec.n_layers
    vectors = params.per_layer - matrix_elements
    embedding_factored = spec.vocab_size + h
    other = params.total - spec.n_layers * params.per_layer - spec.vocab_size * h
    return factored + spec.n_layers * vectors + embedding_factored + other


def optimizer_state_bytes(spec: ModelSpec, params: ParameterCount, settings: TrainingSettings) -> float:
    """Optimizer state bytes for all trainable parameters, before sharding.

    AdamW: exp_avg and exp_avg_sq (Loshchilov & Hutter 2019), 2 states.
    SGD with momentum: 1 state. Adafactor: factored second moment (see above).
    8-bit AdamW: 2 states of 1 byte plus one fp32 absmax per 2048-element block
    (Dettmers et al. 2021, arXiv 2110.02861; bitsandbytes blockwise quantisation).
    """
    n = params.total
    element = optimizer_state_element_bytes(settings.precision)
    if settings.optimizer == "adamw":
        return 2 * element * n
    if settings.optimizer == "sgd":
        return element * n
    if settings.optimizer == "adafactor":
        return element * adafactor_state_elements(spec, params)
    return 2 * (1 + 4 / 2048) * n  # adamw-8bit


def optimizer_step_temporary_bytes(params: ParameterCount, settings: TrainingSettings, divisor: int) -> float:
    """Transient memory of optimizer.step().

    torch AdamW with foreach=True (the default on CUDA) computes
    `_foreach_sqrt(exp_avg_sqs)` over every parameter at once: one extra tensor
    per parameter in the state dtype (torch/optim/adam.py, _multi_tensor_adam).
    fused=True and bitsandbytes' 8-bit kernels update in place. A for-loop
    implementation holds one such temporary for the largest parameter at a time.
    Adafactor (HF) builds about two full-size fp32 temporaries per parameter.
    Mixed precision (DeepSpeed ZeRO, Megatron) converts the gradient partition to
    fp32 and updates the master copy with fused kernels, so only that copy counts.
    """
    if master_weight_bytes(settings.precision):
        return 4 * params.total / divisor
    element = optimizer_state_element_bytes(settings.precision)
    temporary = 0.0
    if settings.optimizer == "adamw":
        if settings.optimizer_impl == "foreach":
            temporary = element * params.total / divisor
        elif settings.optimizer_impl == "for-loop":
            temporary = element * params.largest_tensor
    elif settings.optimizer == "adafactor":
        temporary = 2 * 4 * params.largest_tensor
    return temporary


# --- Activations (Korthikanti et al. 2022, adjusted to PyTorch) --------------------


def norm_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """Bytes one norm saves for backward.

    LayerNorm (native op) saves its input plus fp32 mean and rstd per token.
    RMSNorm as written in HF Llama upcasts to fp32 (saved), keeps fp32 rstd, and
    saves the normalised tensor cast back to the input dtype for the weight multiply.
    """
    h = spec.hidden_size
    r = residual_bytes(settings.precision)
    if spec.norm == "layernorm":
        return r * tokens * h + 8 * tokens
    return 4 * tokens * h + r * tokens * h + 4 * tokens


def linear_inputs_saved_bytes(settings: TrainingSettings, tokens: int, width: int, n_linears: int) -> float:
    """Inputs saved by linears that read the same tensor.

    Under autocast each linear casts its fp32 input to half separately and saves
    its own copy (autocast caches only weight casts); otherwise they share one tensor.
    """
    c = compute_bytes(settings.precision)
    copies = n_linears if is_autocast(settings.precision) else 1
    return copies * c * tokens * width


def softmax_in_fp32(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Softmax output is fp32 under fp32 and autocast (softmax is on autocast's fp32
    list) and in Llama-style code, which calls softmax(dtype=torch.float32)."""
    return (
        compute_bytes(settings.precision) == 4 or is_autocast(settings.precision) or (spec.position_embedding == "rope")
    )


def attention_score_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes saved per element of the b x heads x s x s score matrix (eager attention).

    Korthikanti Sec. 4.1 at 16 bits: softmax output 2, dropout mask 1, dropout output 2
    (5 bytes). Here the softmax output may be fp32 and the matmul with V then saves
    its own half-precision copy.
    """
    c = compute_bytes(settings.precision)
    softmax_out = 4 if softmax_in_fp32(spec, settings) else c
    mask = 1 if spec.dropout > 0 else 0
    probs_for_value_matmul = c if (softmax_out != c or spec.dropout > 0) else 0
    return softmax_out + mask + probs_for_value_matmul


def layer_activation_terms(spec: ModelSpec, settings: TrainingSettings) -> dict[str, float]:
    """Bytes one transformer layer saves for backward, by part (no checkpointing)."""
    b, s = settings.micro_batch, settings.seq_len
    tokens = b * s
    h, qd, f = spec.hidden_size, spec.q_dim, spec.ffn_hidden_size
    c = compute_bytes(settings.precision)
    mask = tokens * h if spec.dropout > 0 else 0  # 1-byte bool dropout masks

    terms: dict[str, float] = {}
    terms["norms"] = spec.norms_per_layer * norm_saved_bytes(spec, settings, tokens)
    qkv_inputs = linear_inputs_saved_bytes(settings, tokens, h, 1 if spec.fused_qkv else 3)
    # q, k and v as attention reads them; HF repeats grouped k/v to every head
    # (repeat_kv) before the matmuls or SDPA, so they are saved at full width.
    qkv = 3 * c * tokens * qd
    out_projection_input = c * tokens * qd
    terms["attention_projections"] = qkv_inputs + qkv + out_projection_input + mask
    if settings.attention == "fused":
        # flash/SDPA saves its output and the fp32 log-sum-exp per head and token.
        terms["attention_core"] = c * tokens * qd + 4 * tokens * spec.n_heads
    else:
        terms["attention_core"] = attention_score_bytes(spec, settings) * b * spec.n_heads * s * s

    routed = spec.experts_per_token if spec.n_experts > 1 else 1
    gated = spec.is_gated_mlp
    n_in = 1 if (not gated or spec.fused_gate_up) else 2
    mlp_inputs = linear_inputs_saved_bytes(settings, tokens, h, n_in)
    if spec.n_experts > 1:
        # each expert gathers a copy of its routed tokens (HF Mixtral sparse MoE block)
        mlp_inputs += routed * c * tokens * h
    # GELU: its input and output. Gated: gate, act(gate), up, and their product.
    hidden_tensors = 4 if gated else 2
    terms["mlp"] = mlp_inputs + routed * hidden_tensors * c * tokens * f + mask
    return terms


def recomputed_bytes(terms: dict[str, float], settings: TrainingSettings) -> tuple[float, float]:
    """(saved across the whole forward, rebuilt one layer at a time in backward).

    Full checkpointing keeps only each layer's input (Chen et al. 2016, arXiv
    1604.06174) and recomputes the layer in backward. Selective checkpointing
    recomputes only the attention core (Korthikanti Sec. 5).
    """
    full_layer = sum(terms.values())
    if settings.checkpointing == "full":
        return 0.0, full_layer
    if settings.checkpointing == "selective" and settings.attention == "eager":
        return full_layer - terms["attention_core"], terms["attention_core"]
    return full_layer, 0.0


def embedding_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Embedding output dropout mask and embedding LayerNorm (BERT)."""
    tokens = settings.micro_batch * settings.seq_len
    saved = tokens * spec.hidden_size if spec.dropout > 0 else 0
    if spec.embedding_norm:
        saved += norm_saved_bytes(spec, settings, tokens)
    return saved


def head_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Final norm and the LM head's saved input (classifier heads read one token)."""
    tokens = settings.micro_batch * settings.seq_len
    saved = norm_saved_bytes(spec, settings, tokens) if spec.final_norm else 0.0
    if spec.head == "lm":
        saved += linear_inputs_saved_bytes(settings, tokens, spec.hidden_size, 1)
    return saved


def logits_bytes(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(end of forward, peak at the loss gradient) for logits and cross-entropy.

    The LM head's logits (compute dtype, kept by the model output) and the fp32
    log-softmax that cross-entropy saves: b*s*V*(c+4). In backward the gradient of
    the log-probabilities and of the fp32 logits add 2 * b*s*V*4 while the saved
    tensors are still alive. A classifier head's logits are negligible.
    """
    if spec.head != "lm":
        tokens = settings.micro_batch
        return 4.0 * tokens * spec.num_labels, 12.0 * tokens * spec.num_labels
    elements = settings.micro_batch * settings.seq_len * spec.vocab_size
    forward = (compute_bytes(settings.precision) + 4) * elements
    return forward, forward + 2 * 4 * elements


def backward_workspace_bytes(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """While one layer runs backward, two gradient tensors the size of its largest
    activation are alive (e.g. the grads of softmax output and of the scores)."""
    b, s = settings.micro_batch, settings.seq_len
    c = compute_bytes(settings.precision)
    if settings.attention == "eager":
        largest = max(4 if softmax_in_fp32(spec, settings) else c, c) * b * spec.n_heads * s * s
    else:
        largest = 0.0
    largest = max(largest, c * b * s * spec.ffn_hidden_size)
    return 2 * largest


# --- Phases of the step ------------------------------------------------------------


def _assumptions(settings: TrainingSettings, grads_persist: bool) -> list[str]:
    o = settings.overheads
    notes = [
        "Weights, gradients and optimizer states per ZeRO paper (arXiv 1910.02054): "
        f"ZeRO stage {settings.zero} over {settings.gpus} data-parallel GPU(s).",
        "Activations per Korthikanti et al. 2022 (arXiv 2205.05198), counted as PyTorch saves "
        "them: fp32 upcasts in norms/softmax, per-linear autocast casts, 1-byte dropout masks.",
        "Grouped k/v heads are repeated to all heads before attention (HF repeat_kv).",
        "Cross-entropy in fp32: log-probabilities b*s*V*4 bytes plus two gradients of that size.",
        f"CUDA context {o.cuda_context_gib} GiB and cuBLAS workspace {o.cublas_workspace_gib} GiB "
        "(not seen by torch); replace with a calibrated figure for your host.",
        f"Caching allocator reserve: {o.allocator_reserve_fraction:.0%} of the allocated peak (reported range 5-15%).",
    ]
    if settings.attention == "fused":
        notes.append("Fused attention (flash/SDPA) saves q, k, v, output and log-sum-exp, no score matrix.")
    if settings.gpus > 1:
        notes.append(f"NCCL buffers {o.nccl_gib} GiB per GPU.")
        if settings.zero == 0:
            notes.append("DDP keeps gradient buckets equal to the gradients (gradient_as_bucket_view=False).")
    if grads_persist:
        notes.append("Gradients stay allocated through the forward pass (accumulation or set_to_none=False).")
    else:
        notes.append("Gradients are freed after each step (zero_grad(set_to_none=True), torch >= 2.0).")
    if settings.optimizer == "adamw":
        notes.append(f"AdamW implementation: {settings.optimizer_impl}.")
    return notes


def estimate_memory(spec: ModelSpec, settings: TrainingSettings) -> MemoryEstimate:
    """Peak memory of one training step on each GPU, phase by phase."""
    params = parameter_count(spec)
    n, gpus, zero = params.total, settings.gpus, settings.zero
    precision = settings.precision
    state_div = shard_divisor(zero, 1, gpus)
    grad_div = shard_divisor(zero, 2, gpus)
    weight_div = shard_divisor(zero, 3, gpus)

    weights = weight_bytes(precision) * n / weight_div
    if zero == 3 and gpus > 1:
        # FSDP/ZeRO-3 gathers the layer in use and prefetches the next one.
        weights += 2 * weight_bytes(precision) * params.per_layer
    master = master_weight_bytes(precision) * n / state_div
    states = optimizer_state_bytes(spec, params, settings) / state_div
    gradients = gradient_bytes(precision) * n / grad_div
    if gpus > 1 and zero == 0:
        gradients *= 2  # DDP gradient buckets
    if zero >= 2 and gpus > 1:
        gradients += gradient_bytes(precision) * params.per_layer  # one unsharded layer before reduce-scatter
    autocast_copies = 2.0 * params.matmul_total if is_autocast(precision) else 0.0
    step_temporaries = optimizer_step_temporary_bytes(params, settings, state_div)

    terms = layer_activation_terms(spec, settings)
    saved_per_layer, rebuilt_per_layer = recomputed_bytes(terms, settings)
    tokens = settings.micro_batch * settings.seq_len
    if settings.checkpointing == "full":
        saved_per_layer = residual_bytes(precision) * tokens * spec.hidden_size
    embedding_act = embedding_activation_bytes(spec, settings)
    head_act = head_activation_bytes(spec, settings)
    all_activations = embedding_act + spec.n_layers * saved_per_layer + head_act
    workspace = backward_workspace_bytes(terms, spec, settings)
    logits_forward, logits_backward = logits_bytes(spec, settings)

    grads_persist = settings.grad_accum > 1 or not settings.grads_freed_after_step
    base = {
        "weights": weights,
        "master_weights": master,
        "autocast_weight_copies": autocast_copies,
        "gradients": gradients if grads_persist else 0.0,
        "optimizer_states": states,
    }
    phases = [
        PhaseMemory(
            name="end of forward",
            components=base | {"activations": all_activations, "logits_and_loss": logits_forward},
        ),
        PhaseMemory(
            name="loss backward",
            components=base | {"activations": all_activations, "logits_and_loss": logits_backward},
        ),
        PhaseMemory(
            name="backward, last layer",
            components=base | {"activations": all_activations + rebuilt_per_layer + workspace},
        ),
        PhaseMemory(
            name="backward, first layer",
            components=base
            | {
                "gradients": gradients,
                # only the first layer's autocast casts are still saved by now
                "autocast_weight_copies": 2.0 * params.matmul_per_layer if autocast_copies else 0.0,
                "activations": embedding_act + saved_per_layer + rebuilt_per_layer + workspace,
            },
        ),
        PhaseMemory(
            name="optimizer step",
            components=base
            | {
                "autocast_weight_copies": 0.0,
                "gradients": gradients,
                "optimizer_step_temporaries": step_temporaries,
            },
        ),
    ]
    peak = max(phases, key=lambda phase: phase.total)
    allocated = peak.total
    o = settings.overheads
    reserve = allocated * o.allocator_reserve_fraction
    framework = (o.cuda_context_gib + o.cublas_workspace_gib + (o.nccl_gib if gpus > 1 else 0.0)) * GIB

    def device_view(phase: PhaseMemory) -> dict[str, float]:
        """A phase's components as the device sees them, reserve and context included."""
        view = {name: phase.components.get(name, 0.0) / GIB for name in COMPONENTS}
        view["allocator_reserve"] = phase.total * o.allocator_reserve_fraction / GIB
        view["framework_overhead"] = framework / GIB
        return view

    components = device_view(peak)
    return MemoryEstimate(
        peak_gib=(allocated + reserve + framework) / GIB,
        allocated_gib=allocated / GIB,
        reserved_gib=(allocated + reserve) / GIB,
        peak_phase=peak.name,
        components_gib=components,
        phases_gib={phase.name: phase.total / GIB for phase in phases},
        phase_components_gib={phase.name: device_view(phase) for phase in phases},
        activations_per_layer_gib={k: v / GIB for k, v in terms.items()},
        parameters=n,
        trainable_parameters=n,
        tokens_per_micro_batch=tokens,
        assumptions=_assumptions(settings, grads_persist),
    )
