"""LoRA adapters on the linears of a transformer layer, and QLoRA's 4-bit base.

Sources:
- LoRA: Hu et al. 2021, arXiv 2106.09685. An adapter on a frozen linear W (in x out)
  is A (r x in) and B (out x r): r * (in + out) trainable parameters (Sec. 4.1).
- QLoRA: Dettmers et al. 2023, arXiv 2305.14314. The base's linear weights are stored in
  4-bit NormalFloat with double quantisation (Sec. 3).
- The linears and their tensor-parallel split: calculators/models/geometry.py.
"""

from __future__ import annotations

from calculators.models.geometry import MLP_LINEAR_NAMES, Linear, attention_linears, largest_linear, layer_linears
from calculators.models.spec import ModelSpec, extension

# NF4 with double quantisation (QLoRA Sec. 3): 4 bits per weight, one 8-bit quantised
# absmax per block of 64 weights, and one fp32 constant per 256 of those absmax values.
NF4_BITS_PER_WEIGHT = 4 + 8 / 64 + 32 / (64 * 256)

# Module names each target choice adapts ("qkv" and "gate_up" are fused projections,
# adapted when any of their parts is: PEFT targets the fused module, e.g. GPT-2 c_attn).
LORA_TARGET_MODULES: dict[str, frozenset[str]] = {
    "qv": frozenset({"q", "v", "qkv"}),
    "attention": frozenset({"q", "k", "v", "qkv", "o"}),
    "qvo-mlp": frozenset({"q", "v", "qkv", "o"}) | MLP_LINEAR_NAMES,
    "all-linear": frozenset({"q", "k", "v", "qkv", "o"}) | MLP_LINEAR_NAMES,
}
ALL_LINEARS = LORA_TARGET_MODULES["all-linear"]


# Multi-head latent attention's projections answer to the names of those they replace: q_a and
# q_b make q, kv_a and kv_b make k and v (calculators.memory.activations.attention.mla_attention_saved_bytes).
LATENT_PROJECTION_ROLES = {"q_a": ("q",), "q_b": ("q",), "kv_a": ("k", "v"), "kv_b": ("k", "v")}


def is_adapted(linear_name: str, targets: str) -> bool:
    """Whether the preset `targets` puts a LoRA adapter on the linear `linear_name`."""
    names = LORA_TARGET_MODULES[targets]
    return linear_name in names or any(role in names for role in LATENT_PROJECTION_ROLES.get(linear_name, ()))


def adapted_linears(spec: ModelSpec, targets: str, tensor_parallel: int = 1, dense: bool = False) -> list[Linear]:
    """The linears of a layer that get a LoRA adapter (`dense=True`: one of a mixture of
    experts' dense layers)."""
    linears = layer_linears(spec, tensor_parallel, dense=dense)
    return [linear for linear in linears if is_adapted(linear.name, targets)]


def cross_attention_adapted_linears(spec: ModelSpec, targets: str, tensor_parallel: int = 1) -> list[Linear]:
    """The adapted linears of a decoder layer's cross-attention block (T5's EncDecAttention has
    q, k, v and o like its self-attention, and PEFT matches them by the same names); none for a
    model without one."""
    if not extension(spec, "cross_attention_layers"):
        return []
    return [linear for linear in attention_linears(spec, tensor_parallel) if is_adapted(linear.name, targets)]


def adapter_parameters(linears: list[Linear], rank: int) -> float:
    """Trainable parameters of the adapters on `linears`: r * (in + out) per adapted linear and
    expert (Hu et al. 2021, Sec. 4.1). Under tensor parallelism A and B follow their base
    linear's split, so each rank holds r * (in + out) of its local shape."""
    return sum(linear.copies * rank * (linear.in_features + linear.out_features) for linear in linears)


def adapter_matrix_shapes(linears: list[Linear], rank: int) -> list[tuple[float, float]]:
    """(rows, columns) of every adapter matrix on `linears`: A is r x in, B is out x r."""
    shapes: list[tuple[float, float]] = []
    for linear in linears:
        shapes += [(rank, linear.in_features), (linear.out_features, rank)] * linear.copies
    return shapes


def lora_parameters_per_layer(
    spec: ModelSpec, rank: int, targets: str, tensor_parallel: int = 1, dense: bool = False
) -> float:
    """Trainable parameters of one layer's adapters (a sparse layer for a mixture of experts,
    one of its dense layers with `dense=True`)."""
    return adapter_parameters(adapted_linears(spec, targets, tensor_parallel, dense), rank)


def model_lora_parameters(
    spec: ModelSpec, rank: int, targets: str, tensor_parallel: int = 1, frozen_layers: int = 0
) -> float:
    """Adapters of every layer from `frozen_layers` on: a mixture of experts' dense first layers
    (DeepSeek's first_k_dense_replace) with their own MLP's, an encoder-decoder's decoder layers
    (its last cross_attention_layers) with their cross-attention block's too."""
    trained = max(0, spec.n_layers - frozen_layers)
    dense = max(0, spec.n_dense_layers - frozen_layers) if spec.n_experts > 1 else 0
    cross = min(extension(spec, "cross_attention_layers"), trained)
    total = (trained - dense) * lora_parameters_per_layer(spec, rank, targets, tensor_parallel)
    total += dense * lora_parameters_per_layer(spec, rank, targets, tensor_parallel, dense=True)
    total += cross * adapter_parameters(cross_attention_adapted_linears(spec, targets, tensor_parallel), rank)
    return total


def nf4_bytes(elements: float, scales: str = "double-quant") -> float:
    """Bytes of `elements` weights in NF4, 4 bits each plus their block scales:
    - double-quant (QLoRA Sec. 3): an 8-bit scale per 64 weights and an fp32 scale per 256 of
      those, 4 + 8/64 + 32/(64*256) = 4.127 bits per weight;
    - fp32: one fp32 absmax per block of 64 (bitsandbytes quantize_4bit without
      compress_statistics, bitsandbytes/functional.py), 4 + 32/64 = 4.5 bits per weight."""
    bits = NF4_BITS_PER_WEIGHT if scales == "double-quant" else 4 + 32 / 64
    return elements * bits / 8


def largest_quantised_matrix(spec: ModelSpec, quantised_linears: str, tensor_parallel: int = 1) -> tuple[float, float]:
    """(elements, output width) of the largest NF4 weight: a layer's largest linear, or the LM
    head when every nn.Linear is quantised (quantised_linears "all", litgpt)."""
    linear = largest_linear(spec, tensor_parallel)
    largest = (linear.in_features * linear.out_features, linear.out_features)
    if quantised_linears == "all" and spec.head == "lm":
        head = spec.vocab_size / tensor_parallel
        largest = max(largest, (spec.hidden_size * head, head))
    return largest


def dequantised_bytes_per_element(framework: str | None, precision: str) -> int:
    """Bytes per element of one dequantised NF4 weight during a matmul. bitsandbytes dequantises
    to the dtype the weight was quantised from (its quant_state) and MatMul4Bit casts that to the
    input's dtype (bitsandbytes/autograd/_functions.py @0.41.1: `F.dequantize_4bit(B, state)
    .to(A.dtype)`). transformers and torchao quantise from the compute dtype: 2 bytes. Lightning's
    _Linear4bit (litgpt) quantises an fp16 copy (`weight.to(dtype=torch.half)`,
    src/lightning/fabric/plugins/precision/bitsandbytes.py @71aed751), so a bf16 run holds the
    fp16 dequantised weight and its bf16 cast: 4 bytes."""
    return 4 if framework == "litgpt" and "bf16" in precision else 2


def qlora_dequantised_weight_bytes(
    spec: ModelSpec,
    compute_bytes: int,
    tokens: int,
    tensor_parallel: int = 1,
    quantised_linears: str = "layers",
    bytes_per_element: int = 2,
) -> float:
    """Transient of a QLoRA matmul: bitsandbytes/torchao dequantise one NF4 linear weight to
    the compute dtype (dequantised_bytes_per_element), multiply, and free it; the largest such
    weight and its output are alive together (QLoRA Sec. 3, 'dequantise the storage data type
    to the computation data type to perform the forward and backward pass')."""
    elements, out_features = largest_quantised_matrix(spec, quantised_linears, tensor_parallel)
    return bytes_per_element * elements + compute_bytes * tokens * out_features


def nf4_quantisation_staging_bytes(
    spec: ModelSpec,
    quant_backend: str,
    framework: str | None,
    tensor_parallel: int = 1,
    quantised_linears: str = "layers",
) -> float:
    """Bytes alive beside the already-quantised weights while the largest linear is quantised
    at load time (every other weight is already NF4 by then, so this is the load's peak excess):
    - bitsandbytes through transformers: the checkpoint's half-precision tensor is moved to the
      GPU and quantised there (transformers src/transformers/quantizers/quantizer_bnb_4bit.py,
      create_quantized_param -> bitsandbytes Params4bit._quantize: `w = self.data.contiguous()
      .to(device)`, then quantize_4bit): 2 bytes per element;
    - litgpt (Lightning's BitsandbytesPrecision, src/lightning/fabric/plugins/precision/
      bitsandbytes.py @71aed751, _Linear4bit): the layer is built in bf16 on the GPU and
      `_quantize_weight` copies it to fp16 before quantising: 2 + 2 bytes per element;
    - torchao (torchtune's to_nf4): NF4Tensor.convert_to_norm_float_weight holds the bf16 input,
      the bf16 scaled blocks and one uint8 index per element before packing two per byte
      (pytorch/ao torchao/dtypes/nf4tensor.py): 2 + 2 + 1 bytes per element."""
    elements, _ = largest_quantised_matrix(spec, quantised_linears, tensor_parallel)
    if quant_backend == "torchao":
        return 5 * elements
    if framework == "litgpt":
        return 4 * elements
    return 2 * elements
