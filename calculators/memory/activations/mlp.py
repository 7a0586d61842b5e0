"""What the MLP saves for backward: gated activations, GELU variants, and a
mixture of experts' router and routed outputs."""

from __future__ import annotations

from calculators.memory.activations.linears import (
    dropout_mask_bytes,
    input_saving_linears,
    linear_inputs_saved_bytes,
    trained_linear_names,
)
from calculators.memory.activations.norms import autocast_casts_norm_output, norm_output_fp32
from calculators.memory.states import FP8_BYTES
from calculators.models.geometry import layer_ffn_width
from calculators.models.spec import ModelSpec
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings


def gated_activation_saved_tensors(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Hidden-width tensors a gated MLP's activation saves, down's input aside.
    SwiGLU and GeGLU: gate, act(gate) and up (the product's operands). Liger's fused SwiGLU saves
    only gate and up (Liger-Kernel src/liger_kernel/ops/swiglu.py @00eba634), and so does
    torch.compile's partitioner, which recomputes the pointwise ops.
    gpt-oss's clamped SwiGLU (transformers models/gpt_oss/modeling_gpt_oss.py @6edf5b31,
    GptOssExperts.forward: gate.clamp(max=7), up.clamp(-7, 7), glu = gate * sigmoid(1.702 gate),
    (up + 1) * glu) saves six: the gate and up inputs of the clamps, sigmoid's output, the clamped
    gate, up + 1 and glu (measured with autograd's saved tensors; compile recomputes all but gate
    and up)."""
    if spec.activation == "clamped-swiglu":
        return 2 if settings.compile else 6
    fused = settings.liger or settings.compile
    return 2 if fused and spec.activation == "swiglu" else 3


def runs_written_out_gelu(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """The model code's "gelu_new" runs op by op: transformers' NewGELUActivation, not under
    torch.compile (whose partitioner recomputes pointwise ops from the saved input) nor in
    litgpt's model code (qkv_projection "fused"), which calls torch's one-kernel tanh GELU
    (lit_gpt/model.py @8641822, gelu_approximate="tanh")."""
    return spec.gelu_written_out and not settings.compile and settings.qkv_projection != "fused"


def mlp_activation_saved_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes the MLP's activation keeps for backward per hidden-width element, down's (fc2's)
    input aside: one input for a one-kernel GELU, gated_activation_saved_tensors for a gated MLP.

    transformers' "gelu_new" (NewGELUActivation, src/transformers/activations.py: 0.5 * x * (1 +
    tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3))))) keeps four tensors: pow's input, tanh's
    output and the last multiply's operands, 0.5 x and 1 + tanh. Under autocast pow runs in fp32
    (CUDA autocast's fp32 list), so its input is an fp32 cast and everything after it is fp32 but
    0.5 x: 4 + 4 + c + 4 bytes, with an fp32 output. A gated GELU (Flan-T5's
    T5DenseGatedActDense) adds the product's operands, act(gate) and up. Measured with autograd's
    saved tensors (tests/test_trace_gelu_new.py)."""
    c = settings.precision_facts.compute_bytes
    if spec.activation == "relu":
        return 0  # ReLU's backward reads its output, fc2's input, counted with it
    if not runs_written_out_gelu(spec, settings):
        return (gated_activation_saved_tensors(spec, settings) if spec.is_gated_mlp else 1) * c
    autocast = settings.precision_facts.autocast
    gelu = 12 + c if autocast else 4 * c
    if not spec.is_gated_mlp:
        return gelu
    return gelu + (4 if autocast else c) + c


def mlp_hidden_gradient_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes per hidden-width element of the gradients alive at the worst moment of the MLP's
    backward: one hidden gradient (two for a gated MLP, act(gate)'s and up's), in the compute
    dtype. The written-out "gelu_new" backward holds one more in the compute dtype (traced in
    bf16 and fp32), and under autocast, where its ops ran in fp32, two fp32 ones (traced: 7.5 to
    9.5 bytes per element with and without checkpointing; counted as 8)."""
    c = settings.precision_facts.compute_bytes
    gradients = (2 if spec.is_gated_mlp else 1) * c
    if runs_written_out_gelu(spec, settings):
        gradients += 2 * 4 if settings.precision_facts.autocast else c
    return gradients


def routed_output_weighting_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What weighting and summing the experts' outputs saves, per routed (token, expert) pair.

    The HF MoE loop (transformers MixtralSparseMoeBlock; Qwen2/3-MoE, DeepseekV3MoE.moe, Phimoe
    and GptOssExperts alike) computes `expert(x) * routing_weights[...]` and adds it into the
    output with `index_add_`, which saves its source, the weighted output in the hidden state's
    dtype (r bytes per element), for backward (PyTorch tools/autograd/derivatives.yaml, index_add:
    source's gradient is `grad.index_select(dim, index).expand_as(source)`; measured:
    IndexAddBackward0._saved_source). The multiply saves the expert's output (compute dtype) because
    the routing weights need a gradient: the router trains in full training, and under LoRA its
    frozen weights still pass the gradient of the layer's input, which the adapters before it make
    require grad. Traced: tests/test_trace_moe.py."""
    dtypes = settings.precision_facts
    per_element = dtypes.residual_bytes + dtypes.compute_bytes
    return spec.experts_per_token * per_element * tokens * spec.hidden_size


def router_bookkeeping_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What top-k routing saves besides the experts' inputs and outputs, per token (HF
    MixtralSparseMoeBlock.forward, huggingface/transformers src/transformers/models/mixtral/
    modeling_mixtral.py; Qwen2/3-MoE alike): the fp32 softmax over the E router logits (4E),
    top-k's int64 indices (8k), the renormalisation's division, which keeps the k fp32 weights and
    their sum (4k + 4), and per routed pair the two int64 indices torch.where gives each expert
    (token, choice: 16k), which its gathers keep, and the gathered routing weight in the block
    input's dtype, which the weighting multiply keeps. Traced: tests/test_trace_moe.py (whose
    router is Mixtral's). Other routers are counted the same way, an approximation: DeepSeek-V2/V3's
    gate computes its logits in fp32 (DeepseekV3TopkRouter: F.linear(hidden.float(),
    weight.float())), which also keeps an fp32 copy of the block's input (4h per token, 28,672 B
    on DeepSeek-V3) and of the router weight, not counted here; gpt-oss softmaxes the top-k
    logits instead of all of them."""
    weight_bytes_per_pair = 4 if norm_output_fp32(spec, settings) else settings.precision_facts.compute_bytes
    k = spec.experts_per_token
    return tokens * (4 * spec.n_experts + (8 + 4 + 16 + weight_bytes_per_pair) * k + 4)


# Mixtures of experts whose router runs in fp32 whatever the weights' dtype: transformers'
# DeepseekV3TopkRouter.forward (models/deepseek_v3/modeling_deepseek_v3.py @00b676f8) and
# DeepseekV2Moe.forward (models/deepseek_v2/modeling_deepseek_v2.py @0233e509) both call
# F.linear(hidden_states.type(torch.float32), weight.type(torch.float32)).
FP32_ROUTER_FAMILIES = ("deepseek_v2", "deepseek_v3")


def fp32_router_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, frozen_router: bool) -> float:
    """What an fp32 router (FP32_ROUTER_FAMILIES) keeps beyond a half one, in half precision
    without autocast: the linear keeps the fp32 copy of the block's input when its weight trains
    (4h per token) and the fp32 copy of its half weight when its input needs a gradient (4 E h
    per layer, under LoRA too). Under autocast the linear runs in half anyway (F.linear is on its
    lower-precision list), and in fp32 the copies are the tensors themselves."""
    if spec.family not in FP32_ROUTER_FAMILIES or settings.precision_facts.autocast:
        return 0.0
    if settings.precision_facts.compute_bytes == 4:
        return 0.0
    input_copy = 0.0 if frozen_router else 4.0 * tokens * spec.hidden_size
    return input_copy + 4.0 * spec.n_experts * spec.hidden_size


def shared_expert_inputs_saved_bytes(
    spec: ModelSpec, settings: TrainingSettings, tokens: int, trained: frozenset[str], in_names: tuple[str, ...]
) -> float:
    """What the shared expert's input linears (and Qwen2-MoE's shared_expert_gate) save of the
    MoE block's input x beyond what the router keeps. Under autocast with an fp32 x each trained
    one keeps its own half cast, the gate's included when it trains (full training). Otherwise
    they read x itself: the trained router already keeps it, but a frozen one (LoRA) does not,
    and then the shared expert's adapters keep it, once. Traced (tests/test_trace_moe.py)."""
    shared_names = trained.intersection("shared_" + name for name in in_names)
    c, h = settings.precision_facts.compute_bytes, spec.hidden_size
    if autocast_casts_norm_output(spec, settings):
        gate_trains = spec.shared_expert_gate and settings.method == "full"
        return (len(shared_names) + int(gate_trains)) * c * tokens * h
    if is_adapter_method(settings.method) and shared_names:
        return c * tokens * h
    return 0.0


def mlp_input_linear_names(spec: ModelSpec) -> tuple[str, ...]:
    """The MLP's input linears: fc1, or gate and up (one fused gate_up linear in some models)."""
    if not spec.is_gated_mlp:
        return ("fc1",)
    return ("gate_up",) if spec.fused_gate_up else ("gate", "up")


def mlp_inputs_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, dense: bool = False) -> float:
    """What the MLP keeps of its input: a dense MLP's input linears keep the normed input; in a
    mixture of experts' sparse layer the router reads the block's input, each expert gathers its
    routed tokens (HF Mixtral sparse MoE block), and its input linears save that copy, or under
    autocast each its own half cast of it; with routing's own tensors (routed_output_weighting_bytes,
    router_bookkeeping_bytes, fp32_router_bytes)."""
    trained = input_saving_linears(settings)
    n_in = len(trained.intersection(mlp_input_linear_names(spec)))
    input_fp32 = norm_output_fp32(spec, settings)
    h = spec.hidden_size
    if spec.n_experts <= 1 or dense:
        return linear_inputs_saved_bytes(settings, tokens, h, n_in, input_fp32)
    # a trained router keeps the normed input, as a dense MLP's input linears do; a frozen router
    # (LoRA) keeps none, and nothing else reads the block's input but the experts' gathers
    frozen_router = is_adapter_method(settings.method) and trained == trained_linear_names(settings)
    saved = linear_inputs_saved_bytes(settings, tokens, h, 0 if frozen_router else 1, input_fp32)
    saved += linear_inputs_saved_bytes(settings, spec.experts_per_token * tokens, h, n_in, input_fp32)
    saved += routed_output_weighting_bytes(spec, settings, tokens)
    saved += router_bookkeeping_bytes(spec, settings, tokens)
    saved += fp32_router_bytes(spec, settings, tokens, frozen_router)
    return saved


def mlp_hidden_saved_bytes_per_element(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes per hidden-width element (per routed token in an expert): what the activation saves
    (mlp_activation_saved_bytes) and its output, the down (fc2) projection's input, which only a
    trained output linear saves (a float8 one its one-byte cast instead), and ReLU, whose backward
    (threshold_backward) reads its result, whether or not fc2 trains."""
    c = settings.precision_facts.compute_bytes
    output_input_saved = ("down" if spec.is_gated_mlp else "fc2") in input_saving_linears(settings)
    output_kept = output_input_saved or spec.activation == "relu"
    per_element = mlp_activation_saved_bytes(spec, settings) + (c if output_kept else 0)
    if settings.precision == "fp8" and output_input_saved:
        # the down (fc2) projection keeps the float8 cast of its input, not the input itself
        per_element -= c - FP8_BYTES
    return per_element


def mlp_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, dense: bool = False) -> float:
    """The layer's 'mlp' term: what it keeps of its input (mlp_inputs_saved_bytes), its hidden
    tensors (mlp_hidden_saved_bytes_per_element x tokens x width, each token in experts_per_token
    experts of a sparse layer) and the output dropout's mask; `dense=True`: a mixture of experts'
    dense layer."""
    routed = spec.experts_per_token if spec.n_experts > 1 and not dense else 1
    f = layer_ffn_width(spec, dense)
    per_element = mlp_hidden_saved_bytes_per_element(spec, settings)
    mask = dropout_mask_bytes(spec, tokens)
    # T5's feed-forward also drops out its hidden activation (T5DenseActDense, T5DenseGatedActDense)
    inner_mask = tokens * f if spec.position_embedding == "relative" and spec.dropout > 0 else 0
    return mlp_inputs_saved_bytes(spec, settings, tokens, dense) + routed * per_element * tokens * f + mask + inner_mask


def shared_experts_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """The 'shared_experts' term of a mixture of experts' sparse layer with shared experts
    (DeepseekV3MoE.shared_experts, Qwen2-MoE's shared_expert), which run on every token: what their
    input linears keep (shared_expert_inputs_saved_bytes), their hidden tensors, tokens x shared
    width, and Qwen2-MoE's gate."""
    trained = input_saving_linears(settings)
    shared_inputs = shared_expert_inputs_saved_bytes(spec, settings, tokens, trained, mlp_input_linear_names(spec))
    shared_hidden = mlp_hidden_saved_bytes_per_element(spec, settings) * tokens * spec.shared_expert_ffn_size
    # Qwen2-MoE scales the shared expert by sigmoid(shared_expert_gate(x)) (transformers
    # Qwen2MoeSparseMoeBlock): the multiply keeps the shared output and the sigmoid (traced)
    c = settings.precision_facts.compute_bytes
    shared_gate = c * tokens * (spec.hidden_size + 1) if spec.shared_expert_gate else 0.0
    return shared_inputs + shared_hidden + shared_gate
