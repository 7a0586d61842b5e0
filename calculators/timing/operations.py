"""Compute time of one training step from its operations, on one GPU of one pipeline stage.

Every operation gets a roofline time, max(FLOPs / achievable rate, bytes / memory bandwidth)
(Williams, Waterman and Patterson 2009, CACM 52(4)):

- GEMMs: the layer's linears as one tensor-parallel rank holds them (calculators.models.geometry),
  on one micro-batch of b x s tokens, forward, input gradient and weight gradient (the weight
  gradient skipped for a frozen base); rate = dense peak x the achievable fraction of large
  GEMMs (mamf-finder, github.com/stas00/ml-engineering compute/accelerator/README.md
  @744d01e; or a measured one) x the shape factor of the GEMM (the measured H100 or B200
  curve of data/matmul_efficiency.csv, relative to its best shape) x the sustained-clock
  factor (0.825, an assumption: see SUSTAINED_CLOCK_FACTOR).
- attention: FlashAttention's FLOPs (causal half of the square, backward 2.5x forward; Dao
  2023, arXiv 2307.08691, Sec. 4) at the kernel's published TFLOPS for the layer's head dim,
  sequence length and mask, forward and backward apart (calculators.timing.attention_kernels).
- norms, residual adds, activations, rotary embeddings, the loss and the optimizer step:
  bandwidth-bound, bytes / memory bandwidth.
- recomputation by the checkpointing policy (Korthikanti et al. 2022, arXiv 2205.05198).
- a floor of one kernel launch per operation.
"""

from __future__ import annotations

import csv
import functools

from pydantic import BaseModel, ConfigDict, Field

from calculators import DATA_DIR
from calculators.hardware.catalogue import GpuSpec
from calculators.memory.mllama import layers_skipped_without_images
from calculators.models.geometry import attention_linears, layer_linears, split
from calculators.models.spec import ModelSpec, extension
from calculators.timing.attention_kernels import (
    BACKWARD_FLOPS_RATIO,
    MEASURED_GPU,
    AttentionKernelRates,
    attention_kernel_rates,
)
from calculators.timing.communication import trainable_parameters_per_rank
from calculators.timing.interpolate import log2_bracket
from calculators.timing.settings import AttentionKernel, Kernels, Launch, LossKernel, TimeSettings
from calculators.workload.precision import (
    compute_bytes,
    gradient_bytes,
    master_weight_bytes,
    optimizer_state_element_bytes,
    weight_bytes,
)
from calculators.workload.training import TrainingSettings, decoder_settings, language_model_settings
from calculators.workload.vision import (
    cross_attention_image_tokens,
    tower_model_spec,
    tower_settings,
    tower_trains,
    vision_tower,
)

# Achievable matmul, fraction of the dense peak on the best large shapes: mamf-finder's MAMF
# over its theoretical peak (github.com/stas00/ml-engineering compute/accelerator/README.md
# @744d01e, "Maximum Achievable Matmul FLOPS comparison table", BF16 and FP8 float8_e4m3fn).
# Where that table's theoretical peak differs from the catalogue's (MI300X and MI325X: 1300
# against 1307.4; MI355X: 2300 against AMD's 2516.6; Gaudi 3: 1677 against 1835), the fraction is
# MAMF over the catalogue's peak, so that peak x fraction is the measured MAMF.
MATMUL_FRACTION: dict[str, float] = {
    "A100": 271.2 / 312,
    "A100-PCIe": 252.9 / 312,
    "H100": 794.5 / 989,
    "H200": 794.5 / 989,  # "H200 is the same" (the BF16 row's note)
    "GH200": 828.6 / 989,
    "B200": 1745.0 / 2250,
    "GB200": 1822.0 / 2500,
    "B300": 1769.0 / 2250,
    "MI300X": 668.4 / 1307.4,
    "MI325X": 784.9 / 1307.4,
    "MI355X": 1565.0 / 2516.6,
    "Gaudi2": 418.7 / 432,
    "Gaudi3": 1243.0 / 1835,
}
DEFAULT_MATMUL_FRACTION = 0.80  # no measurement: near the NVIDIA datacenter figures (0.78-0.87)
# FP8: the same table's FP8 rows; parts with no FP8 row take their bf16 fraction, an assumption.
MATMUL_FRACTION_FP8: dict[str, float] = {
    "H100": 1402.6 / 1979,
    "H200": 1453.4 / 1979,
    "GH200": 1535.0 / 1979,
    "B200": 3432.5 / 4500,
    "GB200": 3615.6 / 5000,
    "B300": 3353.3 / 4500,
    "Gaudi2": 826.5 / 865,
    "Gaudi3": 1289.5 / 1835,
}
# The part whose mamf-finder figure applies, by name prefix, the longest first. A part with no
# figure of its own takes its die family's (H200 and H100 share a die; MI250X takes MI300X's, an
# assumption).
MEASURED_PART_PREFIXES: tuple[tuple[str, str], ...] = (
    ("A100-PCIe", "A100-PCIe"),
    ("H200", "H200"),
    ("GH200", "GH200"),
    ("GB200", "GB200"),
    ("B300", "B300"),
    ("MI325X", "MI325X"),
    ("MI355X", "MI355X"),
    ("Gaudi3", "Gaudi3"),
)
# Name prefixes that share a compute die and software stack (the family for attention
# kernels, the shape curve and parts with no figure of their own).
FAMILY_PREFIXES: tuple[tuple[str, str], ...] = (
    ("A100", "A100"),
    ("H100", "H100"),
    ("H200", "H100"),
    ("GH200", "H100"),
    ("B200", "B200"),
    ("GB200", "B200"),
    ("B300", "B200"),
    ("MI", "MI300X"),
    ("Gaudi2", "Gaudi2"),
)
# The measured shape curves: bf16 TFLOPS of (rows x k) @ (k x n) GEMMs, rows from 256 to 16384,
# n and k from 256 to 4096, on H100 (XLA key sm_90) and B200 (sm_100_B200) (data/
# matmul_efficiency.csv, XLA's default GEMM performance table). B200, GB200 and B300 take B200's
# curve, every other GPU H100's (an assumption for those with no curve of their own).
MATMUL_CURVE_PATH = DATA_DIR / "matmul_efficiency.csv"
CURVE_FAMILIES = ("H100", "B200")
ATTENTION_KERNEL_NAMES: dict[str, str] = {
    "flash2": "FlashAttention-2",
    "flash1": "FlashAttention-1 / Triton",
    "flash3": "FlashAttention-3",
    "cudnn": "cuDNN fused attention",
}
# Kernel launch latency: a few microseconds per launch (NVIDIA developer blog, "Getting
# Started with CUDA Graphs", 2019): no kernel finishes faster than one launch, and the host spends
# about as long issuing it.
KERNEL_LAUNCH_S = 4e-6
# Eager PyTorch's dispatch before each launch: "Overhead for torch functions when run on
# torch.Tensor objects is on the order of 2 us" (pytorch/pytorch benchmarks/overrides_benchmark/
# README.md @v2.1.0).
EAGER_DISPATCH_S = 2e-6


def _named_by_prefix(name: str, prefixes: tuple[tuple[str, str], ...]) -> str | None:
    """The value of the first (prefix, value) whose prefix starts `name`, or None."""
    return next((value for prefix, value in prefixes if name.startswith(prefix)), None)


def gpu_family(gpu: GpuSpec) -> str | None:
    """The measured family a GPU belongs to ('A100', 'H100', ...), or None."""
    return _family_named(gpu.name)


def measured_part(gpu: GpuSpec) -> str | None:
    """The part whose mamf-finder figure applies to this GPU ('GH200', 'H100', ...), or None."""
    return _part_named(gpu.name)


# The prefix matches read the name alone, and an estimate asks for them a dozen times: each name
# (a catalogue's few dozen, and the user's own GPUs) is matched once.
@functools.lru_cache(maxsize=1024)
def _family_named(name: str) -> str | None:
    return _named_by_prefix(name, FAMILY_PREFIXES)


@functools.lru_cache(maxsize=1024)
def _part_named(name: str) -> str | None:
    return _named_by_prefix(name, MEASURED_PART_PREFIXES) or _family_named(name)


def matmul_fraction(gpu: GpuSpec, compute_format: str = "bf16") -> float:
    """Achievable fraction of dense peak on large matmuls in `compute_format`: the measured
    part's mamf-finder figure (its fp8 one for fp8 where measured), else
    DEFAULT_MATMUL_FRACTION (an assumption)."""
    part = measured_part(gpu)
    if part is None:
        return DEFAULT_MATMUL_FRACTION
    if compute_format == "fp8" and part in MATMUL_FRACTION_FP8:
        return MATMUL_FRACTION_FP8[part]
    return MATMUL_FRACTION[part]


def curve_family(gpu: GpuSpec) -> str:
    """The measured shape curve this GPU's GEMMs follow: its family's where there is one (H100,
    B200), else H100's (an assumption)."""
    family = gpu_family(gpu)
    return family if family in CURVE_FAMILIES else "H100"


# GpuSpec is frozen: it hashes and compares by every field, an exact key for the GPU's facts.
@functools.lru_cache(maxsize=1024)
def attention_rates(gpu: GpuSpec, kernel: AttentionKernel = "flash2") -> AttentionKernelRates:
    """The published figures that time fused attention `kernel` on this GPU
    (attention_kernels.attention_kernel_rates on its die family)."""
    return attention_kernel_rates(gpu, gpu_family(gpu), kernel)


@functools.lru_cache(maxsize=1024)
def attention_assumption(gpu: GpuSpec, kernel: AttentionKernel = "flash2") -> str:
    """How attention is timed on this GPU, in words: the kernel that runs (FlashAttention-2 where
    the one asked for does not) and whose figures, scaled by what."""
    rates = attention_rates(gpu, kernel)
    words = f"{ATTENTION_KERNEL_NAMES[rates.kernel]} at its published TFLOPS per head dim, sequence length and mask "
    words += f"on {MEASURED_GPU[rates.family]}"
    return words + ("" if rates.scale == 1 else f" x {rates.scale:.2f} (this GPU's 16-bit peak over that one's)")


class GemmRates(BaseModel):
    """How fast this GPU runs the step's matmuls."""

    model_config = ConfigDict(frozen=True)  # hashable: part of the key of a cached step (estimate)

    peak_tflops: float
    fraction: float
    bandwidth_tbps: float
    element_bytes: float
    curve: str = "H100"  # the measured shape curve (curve_family)


class MatmulCurvePoint(BaseModel):
    """One measured GEMM of data/matmul_efficiency.csv: batch x (m x k) @ (k x n) in bf16."""

    gpu_family: str
    batch: int = Field(ge=1)
    m: int = Field(ge=1)
    n: int = Field(ge=1)
    k: int = Field(ge=1)
    measured_tflops: float = Field(gt=0)
    source: str
    as_of: str

    @property
    def rows(self) -> float:
        return float(self.batch * self.m)


class MatmulCurve(BaseModel):
    """A family's measured curve on its (rows, n, k) grid; rows = batch x m."""

    rows: tuple[float, ...]
    ns: tuple[float, ...]
    ks: tuple[float, ...]
    tflops: dict[tuple[float, float, float], float]
    best_tflops: float


@functools.cache
def _matmul_curve_points() -> tuple[MatmulCurvePoint, ...]:
    """Every row of data/matmul_efficiency.csv, read once."""
    with MATMUL_CURVE_PATH.open(newline="") as handle:
        return tuple(MatmulCurvePoint.model_validate(row) for row in csv.DictReader(handle))


@functools.cache
def matmul_curve(family: str) -> MatmulCurve:
    """The measured curve of `family` ('H100' or 'B200'); every grid point must be present."""
    tflops: dict[tuple[float, float, float], float] = {}
    for point in (p for p in _matmul_curve_points() if p.gpu_family == family):
        key = (point.rows, float(point.n), float(point.k))
        if key in tflops:
            raise ValueError(f"{MATMUL_CURVE_PATH.name}: two {family} points for rows, n, k = {key}")
        tflops[key] = point.measured_tflops
    if not tflops:
        raise ValueError(f"{MATMUL_CURVE_PATH.name} has no curve for {family!r}")
    rows, ns, ks = (tuple(sorted({key[axis] for key in tflops})) for axis in range(3))
    if len(tflops) != len(rows) * len(ns) * len(ks):
        raise ValueError(f"{MATMUL_CURVE_PATH.name}: the {family} curve misses points of its grid")
    return MatmulCurve(rows=rows, ns=ns, ks=ks, tflops=tflops, best_tflops=max(tflops.values()))


@functools.lru_cache(maxsize=65536)
def shape_factor(rows: float, n: float, k: float, family: str = "H100") -> float:
    """Achievable rate of a (rows x k) @ (k x n) GEMM relative to the best measured shape of
    `family`'s curve: interpolated (trilinear in log2 of rows, n and k) and clamped to its range
    (rows 256-16384, n and k 256-4096); larger shapes stay at the edge, the plateau where
    mamf-finder's best shapes lie."""
    curve = matmul_curve(family)
    value = 0.0
    for row_point, row_weight in _corners(curve.rows, rows):
        for n_point, n_weight in _corners(curve.ns, n):
            for k_point, k_weight in _corners(curve.ks, k):
                value += row_weight * n_weight * k_weight * curve.tflops[row_point, n_point, k_point]
    return value / curve.best_tflops


def _corners(values: tuple[float, ...], x: float) -> tuple[tuple[float, float], tuple[float, float]]:
    lower, upper, weight = log2_bracket(values, x)
    return (lower, 1 - weight), (upper, weight)


def gemm_seconds(
    rows: float, inner: float, cols: float, peak_tflops: float, fraction: float, bandwidth_tbps: float,
    element_bytes: float, curve: str = "H100",
) -> float:  # fmt: skip
    """Roofline time of a (rows x inner) @ (inner x cols) GEMM: the larger of 2 x rows x inner x
    cols FLOPs at peak x fraction x the shape factor and the bytes of both inputs and the output
    (element_bytes each) at the memory bandwidth (Williams et al. 2009), at least one launch."""
    flops = 2.0 * rows * inner * cols
    factor = shape_factor(rows, cols, inner, curve)
    rate = peak_tflops * 1e12 * fraction * factor
    moved = element_bytes * (rows * inner + inner * cols + rows * cols)
    return max(flops / rate, moved / (bandwidth_tbps * 1e12), KERNEL_LAUNCH_S)


def linear_seconds(
    rows: float, in_features: float, out_features: float, rates: GemmRates
) -> tuple[float, float, float]:
    """(forward, input-gradient, weight-gradient) seconds of one linear on `rows` tokens: forward
    X @ W (n = out, k = in), input gradient dY @ W^T (n = in, k = out), weight gradient X^T @ dY
    (in x tokens @ tokens x out), each 2 x rows x in x out FLOPs."""
    common = (rates.peak_tflops, rates.fraction, rates.bandwidth_tbps, rates.element_bytes, rates.curve)
    forward = gemm_seconds(rows, in_features, out_features, *common)
    data_grad = gemm_seconds(rows, out_features, in_features, *common)
    weight_grad = gemm_seconds(in_features, rows, out_features, *common)
    return forward, data_grad, weight_grad


# --- what one micro-batch does on one rank -------------------------------------------------


def rows_and_copies(spec: ModelSpec, tokens: float, copies: int, expert_parallel: int = 1) -> tuple[float, float]:
    """(rows per GEMM, GEMMs) of a linear on one rank: `tokens` rows once for a dense linear; for
    an expert MLP the rank's n_experts / ep experts, each on the tokens routed to it from the ep
    ranks of its group, tokens x k x ep / n_experts on average (Fedus et al. 2021, arXiv
    2101.03961; expert parallelism as Megatron-Core's, arXiv 2006.16668 GShard Sec. 2)."""
    if copies == 1:
        return tokens, 1
    return tokens * spec.experts_per_token * expert_parallel / spec.n_experts, copies / expert_parallel


def layer_gemm_seconds(
    spec: ModelSpec,
    settings: TrainingSettings,
    rates: GemmRates,
    trains_weights: bool,
    expert_parallel: int = 1,
    linears: list | None = None,
) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's GEMMs on one micro-batch and rank: per linear
    (per expert: b x s x k / E rows each, Fedus et al. 2021) forward, input gradient and, when
    the layer's weights train, the weight gradient, each the forward's FLOPs (Kaplan et al.
    2020, Sec. 2.1: 2 + 4 FLOPs per weight and token). `linears`: a subset of the layer's
    (calculators.models.geometry.layer_linears, the default)."""
    tokens = settings.micro_batch * settings.seq_len
    forward = backward = 0.0
    for linear in linears if linears is not None else layer_linears(spec, settings.tensor_parallel):
        rows, copies = rows_and_copies(spec, tokens, linear.copies, expert_parallel)
        fwd, data_grad, weight_grad = linear_seconds(rows, linear.in_features, linear.out_features, rates)
        forward += copies * fwd
        backward += copies * (data_grad + (weight_grad if trains_weights else 0.0))
    return forward, backward


def head_gemm_seconds(spec: ModelSpec, settings: TrainingSettings, rates: GemmRates) -> tuple[float, float]:
    """(forward, backward) of the LM head, b x s x h @ h x (vocab / t) (vocabulary-parallel);
    its weight gradient only when it trains (full training)."""
    if spec.head != "lm":
        return 0.0, 0.0
    tokens = settings.micro_batch * settings.seq_len
    forward, data_grad, weight_grad = linear_seconds(
        tokens, spec.hidden_size, split(spec.vocab_size, settings.tensor_parallel), rates
    )
    return forward, data_grad + (weight_grad if settings.method == "full" else 0.0)


def attention_seconds(
    spec: ModelSpec, settings: TrainingSettings, rates: AttentionKernelRates, causal: bool = True
) -> tuple[float, float]:
    """(forward, backward) FlashAttention of one layer on one micro-batch and rank: Q@K^T and P@V,
    4 x b x s^2 x (heads/t x head_dim) FLOPs forward, half of it with the causal mask (Dao 2023,
    Sec. 4.1), the backward 2.5x (ibid.); each at the kernel's published TFLOPS for the layer's
    head dim, sequence length and mask (attention_kernels), at least one launch."""
    heads_dim = split(spec.q_dim, settings.tensor_parallel)
    flops = 4.0 * settings.micro_batch * settings.seq_len**2 * heads_dim / (2 if causal else 1)
    forward_tflops, backward_tflops = rates.tflops(causal, spec.attention_head_dim, settings.seq_len)
    forward = max(flops / (forward_tflops * 1e12), KERNEL_LAUNCH_S)
    backward = max(BACKWARD_FLOPS_RATIO * flops / (backward_tflops * 1e12), KERNEL_LAUNCH_S)
    return forward, backward


def kernels_fused(settings: TrainingSettings, compiled: bool, kernels: Kernels = "auto") -> bool:
    """Whether the step's norms, rotary embeddings, gated activation and loss run as fused kernels
    (one read of the inputs, one write of the output) or as PyTorch's eager op sequence.

    `kernels` "fused" or "eager" says so; "auto" takes it from the stack: torch.compile (inductor
    fuses pointwise chains, pytorch.org/docs/stable/torch.compiler.html), Liger-Kernel (fused
    RMSNorm, RoPE, SwiGLU and linear cross-entropy, linkedin/Liger-Kernel README) and Megatron
    (Transformer Engine / Apex fused norms, fused RoPE and bias-SwiGLU, NVIDIA/Megatron-LM
    megatron/core/fusions/; its loss is loss_kernel_in_use's) fuse; everything else runs eager."""
    if kernels != "auto":
        return kernels == "fused"
    return compiled or settings.liger or settings.framework == "megatron"


def norm_bytes_per_element(spec: ModelSpec, element_bytes: float, fused: bool) -> float:
    """Bytes one norm moves per hidden element in forward. LayerNorm is one kernel in eager
    PyTorch too (aten native_layer_norm): read x, write y. RMSNorm in eager is the op sequence HF
    and torchtitan write (transformers models/llama/modeling_llama.py LlamaRMSNorm; torchtitan
    torchtitan/models/norms.py RMSNorm): x.float() (read c, write 4; none when x is fp32),
    pow(2) (read 4, write 4), mean (read 4), x * rsqrt (read 4, write 4), back to the compute
    dtype (read 4, write c; none for fp32), * weight (read c, write c)."""
    c = element_bytes
    if fused or spec.norm == "layernorm":
        return 2 * c
    casts = 0.0 if c == 4 else (c + 4) + (4 + c)
    return casts + 8 + 4 + 8 + 2 * c


def rope_bytes_per_element(element_bytes: float, fused: bool) -> float:
    """Bytes rotary embeddings move per q or k element in forward: fused, read and write once;
    eager, HF's q * cos + rotate_half(q) * sin (transformers modeling_llama.py
    apply_rotary_pos_emb): the multiply by cos (read, write), rotate_half's negated half (read
    and write half) and cat (read, write), the multiply by sin (read, write) and the add (two
    reads, one write): 10 element moves. torchtitan's complex-number form (x.float(), a complex
    multiply in fp32, type_as) moves as many bytes in bf16: (2 + 4) + (4 + 4) + (4 + 2) = 20."""
    return (2 if fused else 10) * element_bytes


def activation_bytes_per_element(spec: ModelSpec, element_bytes: float, fused: bool) -> float:
    """Bytes the MLP activation moves per ffn element in forward: GELU reads f and writes f
    (one kernel, eager or not); a gated activation fused reads gate and up and writes f (3), eager
    runs act(gate) (read, write) then * up (two reads, one write): 5."""
    if not spec.is_gated_mlp:
        return 2 * element_bytes
    return (3 if fused else 5) * element_bytes


def elementwise_bytes_per_token(spec: ModelSpec, settings: TrainingSettings, fused: bool = True) -> float:
    """Bytes one layer's bandwidth-bound forward ops move per token on one rank: the norms, the
    two residual adds (two reads and one write of h each), rotary embeddings on q and k and the
    MLP activation, each as a fused kernel or as eager PyTorch runs it (the functions above), at
    the compute dtype's bytes. With tensor parallelism the h-wide ops are split by sequence
    parallelism (Korthikanti et al. 2022, Sec. 4.2.2)."""
    t = settings.tensor_parallel
    c = compute_bytes(settings.precision)
    h = split(spec.hidden_size, t)
    q, kv, f = split(spec.q_dim, t), split(spec.kv_dim, t), split(spec.ffn_hidden_size, t)
    moved = spec.norms_per_layer * h * norm_bytes_per_element(spec, c, fused)
    moved += 2 * 3 * h * c
    moved += f * activation_bytes_per_element(spec, c, fused)
    if spec.position_embedding == "rope":
        moved += (q + kv) * rope_bytes_per_element(c, fused)
    return moved


def fp8_cast_bytes(
    spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1, recipe: str = "dynamic"
) -> float:
    """Bytes one layer's fp8 casts move per micro-batch on one rank. Each linear's input and
    weight (forward) and output gradient (backward) are scaled tensorwise: first a full read for
    the amax (bf16, 2 bytes), then the scaled cast (read 2, write 1): a dynamic scale needs the
    whole tensor's amax before any element is cast, so these are two passes (pytorch/ao
    torchao/float8/float8_scaling_utils.py hp_tensor_to_float8_dynamic: tensor_to_amax, then
    hp_tensor_and_scale_to_float8). The three also get transposed fp8 copies for the backward
    GEMMs (read 1, write 1): Hopper fp8 GEMMs take only the TN layout (NVIDIA Transformer
    Engine, "Using FP8 with Transformer Engine"), so X and dY are transposed for the weight
    gradient and W for the input gradient.

    recipe="delayed" is Transformer Engine's: the scale comes from the amax history, so no amax
    pass, and its cast_transpose kernel reads once and writes both copies (2 + 1 + 1 bytes); the
    fp8 weights are cached from a step's first micro-batch (is_first_microbatch, "allows caching
    of the FP8 versions of the weights": NVIDIA/TransformerEngine transformer_engine/pytorch/
    module/linear.py), so weights are cast once per step, not per micro-batch."""
    tokens = settings.micro_batch * settings.seq_len
    total = 0.0
    for linear in layer_linears(spec, settings.tensor_parallel):
        rows, copies = rows_and_copies(spec, tokens, linear.copies, expert_parallel)
        inputs = copies * rows * linear.in_features
        weights = copies * linear.in_features * linear.out_features
        output_grad = copies * rows * linear.out_features
        if recipe == "delayed":
            total += 4 * (inputs + output_grad) + 4 * weights / settings.grad_accum
            continue
        cast = 2 + 3  # amax pass + scaled cast
        transpose = 2
        total += (cast + transpose) * (inputs + weights + output_grad)
    return total


LOSS_KERNEL_NAMES: dict[str, str] = {
    "fused": "a fused cross-entropy",
    "eager": "PyTorch's F.cross_entropy on fp32 logits",
    "vocab-parallel": "Megatron-LM's unfused vocab-parallel cross-entropy",
}


def loss_kernel_in_use(settings: TrainingSettings, fused: bool, loss_kernel: LossKernel = "auto") -> str:
    """The cross-entropy kernel the step runs: Liger's or Cut Cross-Entropy's fused linear loss
    when the settings say so, else the one given, else (auto) Megatron-LM's default, its unfused
    vocab-parallel loss, under the Megatron framework (--cross-entropy-loss-fusion is a
    store_true flag: NVIDIA/Megatron-LM megatron/training/arguments.py), and otherwise fused
    with the other fused kernels and eager without them."""
    if settings.loss == "fused-linear":
        return "fused"
    if loss_kernel != "auto":
        return loss_kernel
    if settings.framework == "megatron":
        return "vocab-parallel"
    return "fused" if fused else "eager"


def loss_bytes_per_entry(kernel: str, element_bytes: float) -> float:
    """Bytes cross-entropy moves per logit, forward and backward, with the compute dtype's
    `element_bytes` c:
    - fused (Megatron's --cross-entropy-loss-fusion, llm.c's fused classifier, Liger's fused
      linear cross-entropy, inductor): the logits read once, their gradient written in place: 2c.
    - eager (F.cross_entropy on logits upcast to fp32, as HF's ForCausalLMLoss and autocast do):
      the upcast (read c, write 4), log_softmax (read 4, write 4), the NLL gradient (a
      zero-filled fp32 tensor, write 4), log_softmax's backward (read the gradient and the
      output, write 4 + 4 + 4) and the downcast of the gradient (read 4, write c): 32 + 2c, 24
      with fp32 logits (no casts). Chunking the loss (torchtune) moves as many, in pieces.
    - vocab-parallel (Megatron-LM without --cross-entropy-loss-fusion, its default: NVIDIA/
      Megatron-LM megatron/core/tensor_parallel/cross_entropy.py @core_v0.8.0, each step its own
      pass): .float() (read c, write 4), max (read 4), the in-place subtraction of the max
      (read 4, write 4), exp in place (read 4, write 4), sum (read 4), the in-place division
      (read 4, write 4); backward, the in-place multiply by the output gradient (read 4, write 4)
      and the cast back through .float() (read 4, write c): 40 + 2(c + 4), 40 with fp32 logits."""
    c = element_bytes
    casts = 0.0 if c == 4 else 2 * (c + 4)
    if kernel == "fused":
        return 2 * c
    if kernel == "vocab-parallel":
        return 40 + casts
    return 24.0 if c == 4 else 32 + 2 * c


def loss_bytes_per_token(
    spec: ModelSpec, settings: TrainingSettings, fused: bool = False, loss_kernel: LossKernel = "auto"
) -> float:
    """Bytes cross-entropy moves per token, forward and backward: loss_bytes_per_entry of the
    kernel in use (loss_kernel_in_use) per vocabulary entry on this rank (vocab / t)."""
    if spec.head != "lm":
        return 0.0
    kernel = loss_kernel_in_use(settings, fused, loss_kernel)
    per_entry = loss_bytes_per_entry(kernel, compute_bytes(settings.precision))
    return per_entry * split(spec.vocab_size, settings.tensor_parallel)


def optimizer_bytes_per_parameter(settings: TrainingSettings) -> float:
    """Bytes an optimizer step moves per parameter: read the gradient, read and write the fp32
    master (or the weight itself) and each state, and write the half weight where a master
    copy exists (AdamW: 2 states, SGD with momentum: 1; ZeRO paper Sec. 3.1 for the dtypes)."""
    states = {
        "adamw": 2,
        "sgd": 1,
        "adafactor": 0.1,
        "adamw-8bit": 0.5,
        "paged-adamw": 2,
        "paged-adamw-8bit": 0.5,
        "none": 0,
    }[settings.optimizer]
    master = master_weight_bytes(settings.precision)
    weight = weight_bytes(settings.precision)
    parameter_io = 2 * master + weight if master else 2 * weight
    return (
        gradient_bytes(settings.precision)
        + parameter_io
        + 2 * states * optimizer_state_element_bytes(settings.precision)
    )


class StepCompute(BaseModel):
    """Compute seconds of one step on the busiest GPU, by op class (recomputation apart)."""

    model_config = ConfigDict(frozen=True)  # a cached step's, shared by every estimate of it

    gemm_s: float
    attention_s: float
    elementwise_s: float
    loss_s: float
    optimizer_s: float
    recompute_s: float
    vision_s: float = 0.0

    @property
    def total_s(self) -> float:
        return (
            self.gemm_s
            + self.attention_s
            + self.elementwise_s
            + self.loss_s
            + self.optimizer_s
            + self.recompute_s
            + self.vision_s
        )

    @property
    def by_class_s(self) -> dict[str, float]:
        """The seconds by op class as the estimate lists them; "vision" only where the step has images."""
        by_class = {
            "gemm": self.gemm_s,
            "attention": self.attention_s,
            "elementwise": self.elementwise_s,
            "loss": self.loss_s,
            "recompute": self.recompute_s,
            "optimizer": self.optimizer_s,
        }
        if self.vision_s:
            by_class["vision"] = self.vision_s
        return by_class


class StepKernels(BaseModel):
    """How one GPU runs a step's operations, from the GPU and the time settings (step_kernels):
    the GEMMs at `gemm`'s rates, fused attention at its kernel's published figures (`attention`),
    the norms, rotary embeddings and activation fused or eager (kernels_fused), the loss's kernel
    setting (loss_kernel_in_use) and the expert-parallel degree the MoE layers split over."""

    model_config = ConfigDict(frozen=True)  # hashable: the key of a cached step (estimate)

    gemm: GemmRates
    attention: AttentionKernelRates
    fused: bool
    loss_kernel: LossKernel
    expert_parallel: int
    fp8_recipe: str = "dynamic"
    context_parallel: int = 1

    @property
    def bytes_per_s(self) -> float:
        """The memory bandwidth the bandwidth-bound ops run at, bytes per second."""
        return self.gemm.bandwidth_tbps * 1e12

    def attention_s(self, spec: ModelSpec, settings: TrainingSettings, causal: bool = True) -> tuple[float, float]:
        """(forward, backward) attention_seconds of one layer of `spec` on one micro-batch of
        `settings`. Under context parallel N, `settings` hold a rank's s / N tokens whose queries
        attend over the whole causal sequence, load-balanced: 1/N of the whole attention, N x what
        s / N tokens alone would cost (calculators.timing.context_parallel), each ring step a
        kernel over s / N tokens."""
        forward, backward = attention_seconds(spec, settings, self.attention, causal)
        return forward * self.context_parallel, backward * self.context_parallel


def expert_parallel_of(spec: ModelSpec, time_settings: TimeSettings) -> int:
    """The expert-parallel degree that applies: the setting for a mixture of experts, 1 otherwise."""
    return time_settings.expert_parallel if spec.n_experts > 1 else 1


def step_kernels(
    spec: ModelSpec,
    settings: TrainingSettings,
    gpu: GpuSpec,
    time_settings: TimeSettings,
    peak_tflops: float,
    compute_format: str,
) -> StepKernels:
    """The kernels of a step of `settings` (the language model's) on `gpu`, whose matmuls run at
    `peak_tflops` in `compute_format`: GEMMs at the achievable fraction of peak for large GEMMs
    (the measured one in `time_settings`, else mamf-finder's) x the sustained-clock factor, the
    shape curve on top; fused attention at its kernel's published figures scaled to this GPU's
    16-bit peak (fp8 runs attention in bf16: attention_rates); the bandwidth-bound ops fused or
    eager as kernels_fused decides (torch.compile fuses them; that is its whole effect here)."""
    return _step_kernels(
        gpu,
        peak_tflops,
        compute_format,
        1.0 if settings.precision == "fp8" else compute_bytes(settings.precision),
        time_settings.matmul_fraction,
        time_settings.sustained_clock_factor,
        time_settings.attention_kernel,
        kernels_fused(settings, time_settings.compile, time_settings.kernels),
        time_settings.loss_kernel,
        expert_parallel_of(spec, time_settings),
        time_settings.fp8_recipe,
        time_settings.context_parallel,
    )


# A GPU's kernels, built once per GPU and setting: an estimate needs them each time, and the
# arguments are all they read (the GPU is frozen: hashed and compared by every field).
@functools.lru_cache(maxsize=4096)
def _step_kernels(
    gpu: GpuSpec, peak_tflops: float, compute_format: str, element_bytes: float, matmul_fraction_given: float | None,
    sustained_clock_factor: float, attention_kernel: AttentionKernel, fused: bool, loss_kernel: LossKernel,
    expert_parallel: int, fp8_recipe: str, context_parallel: int,
) -> StepKernels:  # fmt: skip
    fraction = matmul_fraction_given or matmul_fraction(gpu, compute_format)
    rates = GemmRates(
        peak_tflops=peak_tflops,
        fraction=fraction * sustained_clock_factor,
        bandwidth_tbps=gpu.memory_bandwidth_tbps,
        element_bytes=element_bytes,
        curve=curve_family(gpu),
    )
    return StepKernels(
        gemm=rates,
        attention=attention_rates(gpu, attention_kernel),
        fused=fused,
        loss_kernel=loss_kernel,
        expert_parallel=expert_parallel,
        fp8_recipe=fp8_recipe,
        context_parallel=context_parallel,
    )


class LayerSeconds(BaseModel):
    """One layer's seconds on one micro-batch and rank: its GEMMs and attention forward and
    backward, and its bandwidth-bound ops forward (their backward: 2x the forward)."""

    gemm_forward: float
    gemm_backward: float
    attention_forward: float
    attention_backward: float
    elementwise_forward: float

    @property
    def forward_s(self) -> float:
        """The GEMMs', attention's and the bandwidth-bound ops' forward."""
        return self.gemm_forward + self.attention_forward + self.elementwise_forward

    @property
    def backward_s(self) -> float:
        """The GEMMs' and attention's backward and the bandwidth-bound ops' 2x their forward (read
        the inputs and the output gradient, write the input gradient)."""
        return self.gemm_backward + self.attention_backward + 2 * self.elementwise_forward

    def blended(self, other: LayerSeconds, other_share: float) -> LayerSeconds:
        """Each figure as (1 - other_share) of this layer's and other_share of `other`'s."""
        return LayerSeconds(
            **{name: (1 - other_share) * value + other_share * getattr(other, name) for name, value in self}
        )


def elementwise_seconds_forward(spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels) -> float:
    """One layer's bandwidth-bound forward ops on one micro-batch and rank (elementwise_bytes_per_token)."""
    tokens = settings.micro_batch * settings.seq_len
    return tokens * elementwise_bytes_per_token(spec, settings, kernels.fused) / kernels.bytes_per_s


def layer_seconds(spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels) -> LayerSeconds:
    """One layer's seconds on one micro-batch of `settings` (the language model's) and rank; for
    an encoder-decoder, whose decoder layers run on the target's tokens (decoder_settings), the
    encoder's and the decoder's figures weighted by their layer counts."""
    encoder = _one_layer_seconds(spec, settings, kernels)
    decoder = decoder_settings(spec, settings)
    decoder_share = extension(spec, "cross_attention_layers") / spec.n_layers if decoder is not settings else 0.0
    if not decoder_share:
        return encoder
    return encoder.blended(_one_layer_seconds(spec, decoder, kernels), decoder_share)


def _one_layer_seconds(spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels) -> LayerSeconds:
    """One layer's seconds, all its layers alike (layer_seconds weighs an encoder-decoder's two kinds)."""
    forward, backward = layer_gemm_seconds(
        spec, settings, kernels.gemm, settings.method == "full", kernels.expert_parallel
    )
    attention_forward, attention_backward = kernels.attention_s(spec, settings)
    return LayerSeconds(
        gemm_forward=forward,
        gemm_backward=backward,
        attention_forward=attention_forward,
        attention_backward=attention_backward,
        elementwise_forward=elementwise_seconds_forward(spec, settings, kernels),
    )


def stage_layers(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(layers, layers that run backward) of one rank's pipeline stage: its n_layers / p layers,
    less the layers a step without images skips (Llama 3.2 Vision's cross-attention layers;
    `settings` are the workload's, images in). A frozen prefix (full training with frozen first
    layers) needs no backward at all: no gradient flows below the first trained layer. Adapters
    need the input gradient everywhere."""
    layers = (spec.n_layers - layers_skipped_without_images(spec, settings)) / settings.pipeline_parallel
    return layers, layers * (1 - min(1.0, settings.frozen_layers / spec.n_layers))


def vision_seconds(spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels) -> float:
    """One micro-batch's images through a vision-language model's image encoder, on the first
    pipeline stage (calculators.workload.vision): each layer's GEMMs, attention and bandwidth-bound ops
    timed as a language-model layer's are, on the encoder's shapes and patches, with attention
    over the whole square (bidirectional, at the kernel's figures without the mask; within windows
    in Qwen2.5-VL's windowed layers, VisionTower.attention_share) and, for Llama 3.2 Vision, its
    cross-attention layers' keys and values over the image tokens. A frozen encoder runs forward
    only: it sits at the input, so no gradient flows into it; a trained one adds its backward
    (and its recomputation under full checkpointing). `settings` are the workload's, images in;
    the kernels are the language model's (step_kernels)."""
    if not settings.images_per_sample or vision_tower(spec) is None:
        return 0.0
    encoder_spec, encoder_settings = tower_model_spec(spec), tower_settings(spec, settings)
    trains = tower_trains(settings)
    gemm_fwd, gemm_bwd = layer_gemm_seconds(encoder_spec, encoder_settings, kernels.gemm, trains)
    share = vision_tower(spec).attention_share(encoder_settings.seq_len)
    attention_fwd, attention_bwd = kernels.attention_s(encoder_spec, encoder_settings, causal=False)
    layer = LayerSeconds(
        gemm_forward=gemm_fwd,
        gemm_backward=gemm_bwd,
        attention_forward=share * attention_fwd,
        attention_backward=share * attention_bwd,
        elementwise_forward=elementwise_seconds_forward(encoder_spec, encoder_settings, kernels),
    )
    per_layer = layer.forward_s
    if trains:
        per_layer += layer.backward_s
        per_layer += layer.forward_s if settings.checkpointing == "full" else 0.0
    return encoder_spec.n_layers * per_layer + cross_attention_seconds(spec, settings, kernels)


def cross_attention_seconds(spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels) -> float:
    """What Llama 3.2 Vision's cross-attention layers take beyond the self-attention layers the
    step counts them as, per micro-batch (transformers models/mllama/modeling_mllama.py
    MllamaTextCrossAttention): k and v projected from the V image tokens instead of the t text
    tokens (forward, input and weight gradients), and attention of t queries over V keys, 4 b t V
    q_dim FLOPs forward with no causal half, against the causal 2 b t^2 q_dim counted, at the
    kernel's figures without the mask over V keys, backward 2.5x (Dao 2023)."""
    image_tokens_per_sample = cross_attention_image_tokens(spec, settings)
    if not image_tokens_per_sample:
        return 0.0
    b, s = settings.micro_batch, settings.seq_len
    kv_out = split(spec.kv_dim, settings.tensor_parallel)
    image_kv = sum(linear_seconds(b * image_tokens_per_sample, spec.hidden_size, kv_out, kernels.gemm))
    text_kv = sum(linear_seconds(b * s, spec.hidden_size, kv_out, kernels.gemm))
    q_dim = split(spec.q_dim, settings.tensor_parallel)
    attention_flops = 4.0 * b * s * q_dim * (image_tokens_per_sample - s / 2)
    forward_tflops, backward_tflops = kernels.attention.tflops(False, spec.attention_head_dim, image_tokens_per_sample)
    attention_s = attention_flops / (forward_tflops * 1e12) + BACKWARD_FLOPS_RATIO * attention_flops / (
        backward_tflops * 1e12
    )
    per_layer = 2 * (image_kv - text_kv) + attention_s
    return vision_tower(spec).cross_attention_layers * per_layer


def decoder_cross_attention_seconds(
    spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels, trained_share: float
) -> tuple[float, float, float]:
    """(GEMM, attention, recompute) seconds per micro-batch of an encoder-decoder's
    cross-attention blocks, one in each decoder layer of this stage (T5: transformers
    T5LayerCrossAttention, q/k/v/o of the self-attention's shapes; Raffel et al. 2020, arXiv
    1910.10683, Sec. 3.1.1), which the layer's own linears (calculators.models.geometry.layer_linears)
    leave out: q and o over the target's tokens, k and v over the input's (decoder_settings). Its
    core attends from every target token to every input token: the input's whole square
    (attention_seconds without the mask) scaled by target / input, forward and backward; full
    checkpointing reruns the block's forward. `trained_share`: the share of
    layers that run backward."""
    decoder_layers = extension(spec, "cross_attention_layers") / settings.pipeline_parallel
    if not decoder_layers:
        return 0.0, 0.0, 0.0
    decoder, trains = decoder_settings(spec, settings), settings.method == "full"
    linears = attention_linears(spec, settings.tensor_parallel)
    from_target = [linear for linear in linears if linear.name in ("q", "o")]
    from_input = [linear for linear in linears if linear.name not in ("q", "o")]
    q_o = layer_gemm_seconds(spec, decoder, kernels.gemm, trains, linears=from_target)
    k_v = layer_gemm_seconds(spec, settings, kernels.gemm, trains, linears=from_input)
    fwd, bwd = q_o[0] + k_v[0], q_o[1] + k_v[1]
    square_fwd, square_bwd = kernels.attention_s(spec, settings, causal=False)
    core_fwd, core_bwd = (seconds * decoder.seq_len / settings.seq_len for seconds in (square_fwd, square_bwd))
    backward_layers = decoder_layers * trained_share
    gemm = decoder_layers * fwd + backward_layers * bwd
    attention = decoder_layers * core_fwd + backward_layers * core_bwd
    recompute = backward_layers * (fwd + core_fwd) if settings.checkpointing == "full" else 0.0
    return gemm, attention, recompute


def op_selective_recomputed_linears(spec: ModelSpec, tensor_parallel: int = 1) -> list:
    """The linears whose output torchtitan's per-op selective checkpointing recomputes: every
    second matmul of a layer, counted in forward order (the 2nd, 4th, ...; the count restarts in
    each layer), pytorch/torchtitan torchtitan/parallelisms/parallelize_llama.py @004b3148,
    _apply_ac_to_transformer_block(selective_ac_option='op'); calculators.memory keeps the others."""
    return layer_linears(spec, tensor_parallel)[1::2]


def op_selective_recompute_seconds(
    spec: ModelSpec, settings: TrainingSettings, rates: GemmRates, expert_parallel: int = 1
) -> float:
    """Forward GEMM seconds per layer and micro-batch that per-op selective checkpointing reruns
    in backward (the recomputed linears above; the fused attention's output is saved)."""
    recomputed = op_selective_recomputed_linears(spec, settings.tensor_parallel)
    forward, _ = layer_gemm_seconds(spec, settings, rates, False, expert_parallel, linears=recomputed)
    return forward


def recompute_seconds(
    spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels, layer: LayerSeconds, backward_layers: float
) -> float:
    """Seconds per micro-batch that the checkpointing policy reruns in backward (Korthikanti et
    al. 2022), in the layers that run backward: full, the whole forward; selective, the
    attention; per-op selective, every second matmul and every pointwise op (the attention
    output is saved)."""
    if settings.checkpointing == "full":
        return backward_layers * layer.forward_s
    if settings.checkpointing == "selective":
        return backward_layers * layer.attention_forward
    if settings.checkpointing == "op-selective":
        recomputed_gemms = op_selective_recompute_seconds(spec, settings, kernels.gemm, kernels.expert_parallel)
        return backward_layers * (recomputed_gemms + layer.elementwise_forward)
    return 0.0


def optimizer_seconds(spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels) -> float:
    """The optimizer step over the rank's trainable parameters (its ZeRO shard of them from
    ZeRO-1 on), bandwidth-bound (optimizer_bytes_per_parameter); none on the GPU when the
    optimizer is offloaded (the CPU steps it: calculators.timing.host_link.cpu_optimizer_seconds)."""
    if settings.offload_optimizer:
        return 0.0
    sharded = settings.gpus if settings.zero >= 1 else 1
    parameters = trainable_parameters_per_rank(spec, settings, kernels.expert_parallel) / sharded
    return parameters * optimizer_bytes_per_parameter(settings) / kernels.bytes_per_s


def step_compute(spec: ModelSpec, settings: TrainingSettings, kernels: StepKernels) -> StepCompute:
    """Compute seconds of one optimizer step (all micro-batches) on the last pipeline stage of
    one rank: its layers (stage_layers) on the language model's tokens (language_model_settings:
    `settings` are the workload's, images in), the head and loss, and the optimizer on its
    shard; a vision-language model's image encoder too (vision_seconds), though it runs on the
    first stage. Every op runs with `kernels` (step_kernels: the GPU's and the time settings')."""
    language = language_model_settings(spec, settings)
    layers, backward_layers = stage_layers(spec, settings)
    layer = layer_seconds(spec, language, kernels)
    # an encoder-decoder's head runs on the target's tokens
    decoder = decoder_settings(spec, language)
    head_fwd, head_bwd = head_gemm_seconds(spec, decoder, kernels.gemm)
    cross_gemm, cross_attention, cross_recompute = decoder_cross_attention_seconds(
        spec, language, kernels, backward_layers / layers if layers else 0.0
    )
    gemm = layers * layer.gemm_forward + backward_layers * layer.gemm_backward + head_fwd + head_bwd + cross_gemm
    attention = layers * layer.attention_forward + backward_layers * layer.attention_backward + cross_attention
    # backward: read the inputs and the output gradient, write the input gradient
    elementwise = layers * layer.elementwise_forward + backward_layers * layer.elementwise_forward * 2
    if language.precision == "fp8":
        elementwise += (
            layers * fp8_cast_bytes(spec, language, kernels.expert_parallel, kernels.fp8_recipe) / kernels.bytes_per_s
        )
    head_tokens = decoder.micro_batch * decoder.seq_len
    loss = head_tokens * loss_bytes_per_token(spec, decoder, kernels.fused, kernels.loss_kernel) / kernels.bytes_per_s
    recompute = recompute_seconds(spec, language, kernels, layer, backward_layers) + cross_recompute
    m = language.grad_accum
    return StepCompute(
        vision_s=m * vision_seconds(spec, settings, kernels),
        gemm_s=m * gemm,
        attention_s=m * attention,
        elementwise_s=m * elementwise,
        loss_s=m * loss,
        optimizer_s=optimizer_seconds(spec, language, kernels),
        recompute_s=m * recompute,
    )


# --- the host: issuing a step's kernels ------------------------------------------------------


def host_seconds_per_kernel(launch: Launch, compiled: bool) -> float:
    """Host seconds to issue one kernel: eager PyTorch dispatches then launches it
    (EAGER_DISPATCH_S + KERNEL_LAUNCH_S), compiled code (torch.compile's inductor) launches its
    fused kernels (KERNEL_LAUNCH_S), CUDA graphs replay the step's kernels in one launch (0).
    auto: compiled with torch.compile, else eager."""
    mode = launch if launch != "auto" else ("compiled" if compiled else "eager")
    return {"eager": EAGER_DISPATCH_S + KERNEL_LAUNCH_S, "compiled": KERNEL_LAUNCH_S, "cuda-graphs": 0.0}[mode]


def elementwise_kernels_per_layer(spec: ModelSpec, fused: bool) -> int:
    """Kernels of one layer's bandwidth-bound forward ops (the sequences of
    elementwise_bytes_per_token): per norm 1 (LayerNorm, or fused), eager RMSNorm's 6 (cast,
    pow, mean, * rsqrt, cast back, * weight); 2 residual adds; the activation 1, a gated one eager
    2 (act, * up); rotary embeddings fused 1, eager 5 per q and k (* cos, neg, cat, * sin, +)."""
    norm = 1 if fused or spec.norm == "layernorm" else 6
    kernels = spec.norms_per_layer * norm + 2
    kernels += 2 if spec.is_gated_mlp and not fused else 1
    if spec.position_embedding == "rope":
        kernels += 1 if fused else 10
    return kernels


def kernels_per_micro_batch(spec: ModelSpec, settings: TrainingSettings, fused: bool) -> float:
    """Kernels one micro-batch issues on a rank's pipeline stage: per layer each GEMM forward and
    its input and weight gradients (an expert MLP's linear as one grouped GEMM), fused attention forward and
    backward, the bandwidth-bound ops forward and one backward kernel each; recomputation reruns
    the forward; the head's GEMMs and the loss (1 fused kernel, else PyTorch's 6: cast,
    log_softmax, nll, and their backward). The optimizer's few multi-tensor kernels are left out."""
    layers, backward_layers = stage_layers(spec, settings)
    gemms = len(layer_linears(spec, settings.tensor_parallel))
    elementwise = elementwise_kernels_per_layer(spec, fused)
    forward = gemms + 1 + elementwise
    backward = 2 * gemms + 1 + elementwise
    recomputed = forward if settings.checkpointing == "full" else 0
    head = 3 + (1 if fused else 6) if spec.head == "lm" else 0
    return layers * forward + backward_layers * (backward + recomputed) + head


def host_issue_seconds(spec: ModelSpec, settings: TrainingSettings, time_settings: TimeSettings) -> float:
    """Host seconds to issue one step's kernels (all micro-batches of the language model's
    `settings`): no step runs faster, since the GPU can only run what the host has launched."""
    fused = kernels_fused(settings, time_settings.compile, time_settings.kernels)
    per_kernel = host_seconds_per_kernel(time_settings.launch, time_settings.compile)
    return settings.grad_accum * kernels_per_micro_batch(spec, settings, fused) * per_kernel
