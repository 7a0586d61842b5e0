"""Serving speed: prefill, decode steps and continuous batching on one tensor-parallel group.

One decode step of B running sequences, on each GPU of the group (Pope et al. 2022, "Efficiently
Scaling Transformer Inference", arXiv 2211.05102, Sec. 2-3: decode reads every weight once per step
and is bandwidth-bound at small batch, compute-bound at large):

- the linears: the larger of reading the rank's weights once (quantised bytes; the experts the batch
  routes to) and their 2 x B FLOPs per weight on the measured GEMM shape curve;
- attention: the larger of reading every sequence's KV cache (in whole paged blocks) and its FLOPs;
- two tensor-parallel all-reduces of B x hidden activations per layer (Megatron-LM, arXiv
  1909.08053, Sec. 3), each a latency plus its ring bytes over the link;
- CUDA-graph kernel gaps (SERVING_KERNELS_PER_LAYER x GRAPH_KERNEL_GAP_S per layer).

Prefill of the prompt runs as GEMMs of up to max_batched_tokens rows (vLLM's chunked prefill) on the
same curve plus causal FlashAttention. Continuous batching (Yu et al. 2022, Orca, OSDI; vLLM's
chunked prefill, docs.vllm.ai "Optimization and Tuning") at concurrency B mixes each request's
prefill FLOPs into the decode steps: every output token of a sequence waits one decode step plus
B / output_len requests' prefill FLOPs, which gives TPOT, throughput and TTFT together.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.memory.serving import (
    TENSOR_PARALLEL_SIZES,
    activation_element_bytes,
    decode_weight_read_bytes,
    kv_cache_bytes_per_sequence,
    max_concurrency,
    serving_weight_bytes,
)
from calculators.models.geometry import layer_linears, split
from calculators.models.spec import ModelSpec
from calculators.timing.attention_kernels import AttentionKernelRates
from calculators.timing.communication import NVLINK_EFFICIENCY, allreduce_bytes
from calculators.timing.host_link import PCIE_ACHIEVABLE_FRACTION, pcie_payload_gbytes_per_s
from calculators.timing.operations import (
    KERNEL_LAUNCH_S,
    attention_rates,
    curve_family,
    matmul_fraction,
    rows_and_copies,
    shape_factor,
)
from calculators.workload.serving import ServingSettings, serving_problem

# --- GPU architectures and the kernels they run --------------------------------------------------

# NVIDIA architecture by catalogue name prefix, the longest first (NVIDIA CUDA GPUs list,
# developer.nvidia.com/cuda-gpus: compute capability 6.0 Pascal, 7.0 Volta, 7.5 Turing, 8.0/8.6
# Ampere, 8.9 Ada, 9.0 Hopper, 10.0/12.0 Blackwell).
NVIDIA_ARCHITECTURES: tuple[tuple[str, str], ...] = (
    ("RTX-PRO-6000-Blackwell", "blackwell"),
    ("RTX-6000-Ada", "ada"),
    ("RTX-5090", "blackwell"),
    ("RTX-4090", "ada"),
    ("RTX-3090", "ampere"),
    ("RTX-A6000", "ampere"),
    ("Quadro-RTX", "turing"),
    ("GB200", "blackwell"),
    ("GH200", "hopper"),
    ("B200", "blackwell"),
    ("B300", "blackwell"),
    ("H100", "hopper"),
    ("H200", "hopper"),
    ("L40", "ada"),
    ("L4", "ada"),
    ("A100", "ampere"),
    ("A10", "ampere"),
    ("A30", "ampere"),
    ("A40", "ampere"),
    ("T4", "turing"),
    ("V100", "volta"),
    ("P100", "pascal"),
)
ARCHITECTURE_ORDER = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")
# AMD parts with FP4 (MXFP4) matrix cores: CDNA 4 (AMD Instinct MI355X datasheet, 2025).
AMD_FP4_PREFIXES = ("MI355X",)
# FP4 GEMMs as measured, over 16-bit ones on the same GPU and shape: vLLM's NVFP4 CUTLASS kernel
# with its activation quantisation (W4A4, as NVFP4 checkpoints are served) ran 3,038.8 TFLOPS
# against torch bf16's 1,360.1 on a B200 at 16,384 x 6,144 x 4,096 (vllm-project/vllm PR #20578,
# benchmarks/kernels/bench_nvfp4_gemm.py, 2025-07-07): 2.23x, well short of the datasheet's 4x
# (9 PFLOPS FP4 against 2.25 bf16 dense). CDNA 4's MXFP4 is taken at the same ratio (no measurement).
FP4_OVER_BF16_ACHIEVED = 3038.844961 / 1360.143047
# Oldest NVIDIA architecture whose vLLM kernels run each weight precision weight-only (dequantised
# to 16 bits in the GEMM) when the GPU has no tensor cores of that precision (docs.vllm.ai
# features/quantization "Supported Hardware" table: GPTQ from Volta, AWQ from Turing,
# bitsandbytes from Volta, Marlin GPTQ/AWQ/FP8/FP4 from Turing; FP8 W8A8 from Ada).
WEIGHT_ONLY_FROM = {"int8": "volta", "int4": "volta", "nf4": "volta", "fp8": "turing", "fp4": "turing"}
SIXTEEN_BIT = ("fp32", "fp16", "bf16")


def nvidia_architecture(gpu: GpuSpec) -> str | None:
    """The NVIDIA architecture of a catalogue GPU ('hopper', ...), or None for other vendors."""
    if gpu.vendor != "NVIDIA":
        return None
    return next((arch for prefix, arch in NVIDIA_ARCHITECTURES if gpu.name.startswith(prefix)), None)


def has_fp4_tensor_cores(gpu: GpuSpec) -> bool:
    """FP4 matrix units: NVIDIA Blackwell (NVFP4 and MXFP4) and AMD CDNA 4 (MXFP4)."""
    return nvidia_architecture(gpu) == "blackwell" or gpu.name.startswith(AMD_FP4_PREFIXES)


def weight_kernel(gpu: GpuSpec, weight_precision: str) -> str:
    """How `gpu` multiplies by weights of `weight_precision`: 'fp4' or 'fp8' on tensor cores of that
    precision, 'weight-only' (dequantised to 16 bits inside the GEMM), or '16-bit'. Raises
    ValueError with the reason when no serving kernel runs it (WEIGHT_ONLY_FROM)."""
    if weight_precision in SIXTEEN_BIT:
        return "16-bit"
    if weight_precision == "fp4" and has_fp4_tensor_cores(gpu):
        return "fp4"
    if weight_precision == "fp8" and gpu.fp8_tflops:
        return "fp8"
    arch = nvidia_architecture(gpu)
    oldest = WEIGHT_ONLY_FROM[weight_precision]
    if arch is None or ARCHITECTURE_ORDER.index(arch) < ARCHITECTURE_ORDER.index(oldest):
        raise ValueError(
            f"{gpu.name} runs no {weight_precision} serving kernel (vLLM: {weight_precision} weights need an NVIDIA "
            f"GPU from {oldest.title()} on{', or FP8 tensor cores' if weight_precision == 'fp8' else ''}); "
            "choose bf16 weights for it"
        )
    return "weight-only"


def matmul_rate_tflops(gpu: GpuSpec, weight_precision: str) -> float:
    """Achievable dense TFLOPS of the serving GEMMs on the best shapes: fp8 kernels at the fp8 peak
    x its measured fraction, weight-only and 16-bit kernels at the 16-bit peak x its fraction
    (operations.matmul_fraction, mamf-finder), fp4 kernels at that 16-bit rate x the measured
    FP4_OVER_BF16_ACHIEVED."""
    kernel = weight_kernel(gpu, weight_precision)
    if kernel == "fp8":
        return gpu.fp8_tflops * matmul_fraction(gpu, "fp8")
    rate = gpu.bf16_tflops or gpu.fp16_tflops or gpu.fp32_tflops
    if rate is None:
        raise ValueError(f"{gpu.name} has no 16-bit rate in the GPU catalogue")
    achieved = rate * matmul_fraction(gpu, "bf16")
    return achieved * FP4_OVER_BF16_ACHIEVED if kernel == "fp4" else achieved


# vLLM's attention backend: FlashAttention-3 on Hopper (compute capability 9.x), FlashAttention-2
# elsewhere (vllm-project/vllm vllm/v1/attention/backends/fa_utils.py, get_flash_attn_version);
# attention_rates falls back to FlashAttention-2 off Hopper.
SERVING_ATTENTION_KERNEL = "flash3"
DECODE_ATTENTION_KEYS = 16384  # the longest sequence FlashAttention's figures measure


def attention_forward_tflops(rates: AttentionKernelRates, spec: ModelSpec, causal: bool, keys: float) -> float:
    """Fused attention's forward TFLOPS over `keys` keys per query at the model's head dim (the
    training step's figures: operations.attention_rates)."""
    forward, _ = rates.tflops(causal, spec.attention_head_dim, max(keys, 1.0))
    return forward


# --- links and fixed costs ------------------------------------------------------------------------

# One small all-reduce inside a node: vLLM's custom all-reduce on H100, 512 B to 32 KB messages at
# tensor parallel 2, 4 and 8, measured 8.5-11.8 us, mean 9.4 us (sgl-project/sglang PR #2904,
# "unit test performance in H100", the vllm table).
ALLREDUCE_LATENCY_S = 9.4e-6
ALLREDUCES_PER_LAYER = 2  # after attention and after the MLP (Megatron-LM, arXiv 1909.08053, Fig. 3)
# Kernels of one decode layer: input norm, qkv GEMM, rotary, KV-cache write, attention, output
# GEMM, all-reduce, post-attention norm, gate/up GEMM, activation, down GEMM, all-reduce: 12 (vLLM's
# LlamaDecoderLayer forward, vllm/model_executor/models/llama.py).
SERVING_KERNELS_PER_LAYER = 12
# Gap between kernels replayed from one CUDA graph: an ASSUMPTION of a quarter of a launch
# (operations.KERNEL_LAUNCH_S, a few us per stream launch, NVIDIA developer blog "Getting Started
# with CUDA Graphs", 2019, where a graph removes most of the per-kernel launch cost). Both vLLM and
# TensorRT-LLM replay decode steps from CUDA graphs and overlap scheduling with the GPU.
GRAPH_KERNEL_GAP_S = KERNEL_LAUNCH_S / 4
# Achieved fraction of datasheet memory bandwidth in decode GEMV and paged attention:
# ServingSettings.memory_bandwidth_efficiency (0.8, its docstring's sources).
# Throughput-optimal concurrency: the smallest searched that reaches this share of the best.
OPTIMAL_SHARE = 0.99


def tensor_parallel_link_gbytes_per_s(gpu: GpuSpec) -> float:
    """GB/s per direction an all-reduce inside one node runs at: the GPU's interconnect /2 x
    NVLINK_EFFICIENCY (communication.link_gbytes_per_s' intra-node rule), else PCIe x16 of its
    generation at the achievable fraction (host_link), else PCIe 4."""
    if gpu.interconnect_gbps:
        return gpu.interconnect_gbps / 2 * NVLINK_EFFICIENCY
    return pcie_payload_gbytes_per_s(gpu.pcie_gen or 4) * PCIE_ACHIEVABLE_FRACTION


def tp_allreduce_seconds(spec: ModelSpec, tokens: float, tp: int, gpu: GpuSpec, element_bytes: int = 2) -> float:
    """All-reduces of one forward over `tokens` rows on tensor parallel `tp`: layers x 2 x (latency
    + 2(tp-1)/tp x tokens x hidden x element bytes / link) (nccl-tests doc/PERFORMANCE.md bus
    bandwidth; ALLREDUCE_LATENCY_S). 0 on one GPU."""
    if tp == 1:
        return 0.0
    buffer = tokens * spec.hidden_size * element_bytes
    one = ALLREDUCE_LATENCY_S + allreduce_bytes(buffer, tp) / (tensor_parallel_link_gbytes_per_s(gpu) * 1e9)
    return spec.n_layers * ALLREDUCES_PER_LAYER * one


def kernel_gap_seconds(spec: ModelSpec) -> float:
    """Per forward: layers x SERVING_KERNELS_PER_LAYER x GRAPH_KERNEL_GAP_S."""
    return spec.n_layers * SERVING_KERNELS_PER_LAYER * GRAPH_KERNEL_GAP_S


# --- FLOPs --------------------------------------------------------------------------------------


def linear_flop_seconds(spec: ModelSpec, rows: float, tp: int, rate_tflops: float, curve: str) -> float:
    """Seconds of every layer's linears on `rows` tokens on one rank: 2 x rows x in x out FLOPs per
    linear (per expert on rows x k / E tokens, operations.rows_and_copies) at rate x the shape
    factor of the measured curve (operations.shape_factor)."""
    seconds = 0.0
    for linear in layer_linears(spec, tp):
        expert_rows, copies = rows_and_copies(spec, rows, linear.copies)
        flops = 2.0 * expert_rows * linear.in_features * linear.out_features
        factor = shape_factor(expert_rows, linear.out_features, linear.in_features, curve)
        seconds += copies * flops / (rate_tflops * 1e12 * factor)
    return spec.n_layers * seconds


def head_flop_seconds(spec: ModelSpec, rows: float, tp: int, rate_tflops: float, curve: str) -> float:
    """The LM head on `rows` tokens (vocabulary split over tp; vLLM's ParallelLMHead)."""
    if spec.head != "lm" or rows <= 0:
        return 0.0
    vocab = split(spec.vocab_size, tp)
    flops = 2.0 * rows * spec.hidden_size * vocab
    return flops / (rate_tflops * 1e12 * shape_factor(rows, vocab, spec.hidden_size, curve))


def attended_tokens(spec: ModelSpec, context: float) -> float:
    """Keys one query attends to, summed over layers: every full-attention layer the whole context,
    a sliding-window layer at most its window."""
    sliding = spec.sliding_window_layers
    windowed = min(context, spec.sliding_window) if sliding else 0.0
    return (spec.n_layers - sliding) * context + sliding * windowed


def decode_attention_flops(spec: ModelSpec, context: float, sequences: float, tp: int) -> float:
    """QK^T and softmax x V of one new token per sequence: 4 x attended keys x heads x head_dim
    (Kaplan et al. 2020, arXiv 2001.08361, Table 1), split over tp."""
    return 4.0 * sequences * attended_tokens(spec, context) * split(spec.q_dim, tp)


def prefill_attention_flops(spec: ModelSpec, prompt: float, tp: int) -> float:
    """Causal attention over a prompt of `prompt` tokens: 4 x prompt^2 / 2 x heads x head_dim per
    full layer (Dao 2023, arXiv 2307.08691, Sec. 4.1 counts the causal half), a sliding-window layer
    at most window keys per query, split over tp."""
    sliding = spec.sliding_window_layers
    full = (spec.n_layers - sliding) * prompt * prompt / 2
    windowed = sliding * prompt * min(prompt / 2, spec.sliding_window) if sliding else 0.0
    return 4.0 * (full + windowed) * split(spec.q_dim, tp)


# --- one decode step and one prefill ------------------------------------------------------------


class DecodeStep(BaseModel):
    """One decode step of `sequences` on each GPU of the group, in seconds."""

    sequences: int
    mean_context: float
    weights_read_s: float
    linear_compute_s: float
    kv_read_s: float
    attention_compute_s: float
    communication_s: float
    overhead_s: float
    step_s: float
    bound: str = Field(description="compute, bandwidth or communication: the largest share of the step")


class ServingRates(BaseModel):
    """What one GPU of the group does per second, worked out once per GPU and precision."""

    bandwidth_bytes_per_s: float
    matmul_tflops: float
    attention: AttentionKernelRates
    curve: str
    kernel: str


def serving_rates(gpu: GpuSpec, settings: ServingSettings) -> ServingRates:
    """The GPU's achievable bandwidth and rates for these weights (raises ValueError if it cannot
    run them)."""
    return ServingRates(
        bandwidth_bytes_per_s=gpu.memory_bandwidth_tbps * 1e12 * settings.memory_bandwidth_efficiency,
        matmul_tflops=matmul_rate_tflops(gpu, settings.weight_precision),
        attention=attention_rates(gpu, SERVING_ATTENTION_KERNEL),
        curve=curve_family(gpu),
        kernel=weight_kernel(gpu, settings.weight_precision),
    )


def paged_tokens(tokens: float, block_tokens: int) -> float:
    """KV tokens read for a sequence of `tokens`: whole blocks of `block_tokens` (PagedAttention,
    arXiv 2309.06180, Sec. 4.1; vLLM's block size 16); half a block wasted on average."""
    return math.ceil(tokens / block_tokens) * block_tokens


def decode_step(
    spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, sequences: int, mean_context: float,
    rates: ServingRates | None = None, weights_read_bytes: float | None = None,
) -> DecodeStep:  # fmt: skip
    """One decode step of `sequences` whose KV caches hold `mean_context` tokens each;
    `weights_read_bytes`: the weights read per step when the caller has worked them out (a dense
    model reads the same at every batch)."""
    rates = rates or serving_rates(gpu, settings)
    tp = settings.tensor_parallel
    weights = weights_read_bytes or decode_weight_read_bytes(spec, settings, sequences)
    kv_tokens = paged_tokens(mean_context, settings.kv_block_tokens)
    kv = sequences * kv_cache_bytes_per_sequence(
        spec, settings.kv_cache_precision, tp, kv_tokens, settings.images_per_sequence
    )
    linear = linear_flop_seconds(spec, sequences, tp, rates.matmul_tflops, rates.curve)
    linear += head_flop_seconds(spec, sequences, tp, rates.matmul_tflops, rates.curve)
    # one query per sequence over its whole context, no causal mask, at the kernel's plateau (its
    # longest measured sequence): reading the KV cache bounds decode attention, its FLOPs rarely
    attention_tflops = attention_forward_tflops(rates.attention, spec, False, DECODE_ATTENTION_KEYS)
    attention = decode_attention_flops(spec, mean_context, sequences, tp) / (attention_tflops * 1e12)
    weights_s = weights / rates.bandwidth_bytes_per_s
    kv_s = kv / rates.bandwidth_bytes_per_s
    comm = tp_allreduce_seconds(spec, sequences, tp, gpu, activation_element_bytes(settings.weight_precision))
    overhead = kernel_gap_seconds(spec)
    shares = {
        "bandwidth": (weights_s if weights_s >= linear else 0.0) + (kv_s if kv_s >= attention else 0.0),
        "compute": (linear if linear > weights_s else 0.0) + (attention if attention > kv_s else 0.0),
        "communication": comm,
    }
    return DecodeStep(
        sequences=sequences,
        mean_context=mean_context,
        weights_read_s=weights_s,
        linear_compute_s=linear,
        kv_read_s=kv_s,
        attention_compute_s=attention,
        communication_s=comm,
        overhead_s=overhead,
        step_s=max(weights_s, linear) + max(kv_s, attention) + comm + overhead,
        bound=max(shares, key=shares.get),
    )


class Prefill(BaseModel):
    """The prompt of one sequence on each GPU of the group, in seconds."""

    tokens: int
    chunks: int
    alone_s: float = Field(description="the prompt by itself: chunks read the weights, compute, all-reduce")
    flops_s: float = Field(description="its compute and all-reduces only, as when mixed into decode steps")


def prefill(
    spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, tokens: int, rates: ServingRates | None = None
) -> Prefill:
    """Prefill of `tokens` prompt tokens in chunks of max_batched_tokens: per chunk the larger of
    reading the rank's weights and the chunk's GEMM FLOPs, plus causal attention, the LM head on the
    last token (vLLM computes logits only where a token is sampled) and the all-reduces."""
    rates = rates or serving_rates(gpu, settings)
    tp = settings.tensor_parallel
    chunk = min(tokens, settings.max_batched_tokens)
    chunks = math.ceil(tokens / chunk)
    weights_s = serving_weight_bytes(spec, settings) / rates.bandwidth_bytes_per_s
    # every chunk on the shape curve at its own row count (the last one taken as full)
    linear_s = linear_flop_seconds(spec, chunk, tp, rates.matmul_tflops, rates.curve) * tokens / chunk
    attention_tflops = attention_forward_tflops(rates.attention, spec, True, tokens)
    attention_s = prefill_attention_flops(spec, tokens, tp) / (attention_tflops * 1e12)
    head_s = head_flop_seconds(spec, 1, tp, rates.matmul_tflops, rates.curve)
    comm = tp_allreduce_seconds(spec, tokens, tp, gpu, activation_element_bytes(settings.weight_precision))
    comm += tp_allreduce_seconds(spec, 0, tp, gpu) * (chunks - 1)  # each chunk pays the latencies again
    flops_s = linear_s + attention_s + comm
    alone = max(linear_s, chunks * weights_s) + attention_s + head_s + comm + chunks * kernel_gap_seconds(spec)
    return Prefill(tokens=tokens, chunks=chunks, alone_s=alone, flops_s=flops_s)


# --- continuous batching --------------------------------------------------------------------------


class ServingRequest(BaseModel):
    """Requests of fixed lengths served at a concurrency (0: the throughput-optimal one that fits)."""

    input_len: int = Field(gt=0, le=10_000_000, description="prompt tokens per request")
    output_len: int = Field(gt=0, le=10_000_000, description="generated tokens per request")
    concurrency: int = Field(default=0, ge=0, le=1 << 24, description="sequences in flight; 0 = best that fits")


class ServingSpeed(BaseModel):
    """Steady state of continuous batching on one tensor-parallel group."""

    gpu: str
    tensor_parallel: int
    weight_precision: str
    weight_kernel: str
    concurrency: int
    max_concurrency: int = Field(description="most sequences of input + output tokens whose KV cache fits")
    input_len: int
    output_len: int
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s_per_sequence: float
    output_tokens_per_s: float = Field(description="the whole group")
    total_tokens_per_s_per_gpu: float = Field(description="input + output tokens")
    ttft_s: float
    tpot_s: float
    prefill_s: float
    decode_step_s: float
    bound: str
    step: DecodeStep


def context_problem(spec: ModelSpec, request: ServingRequest) -> str | None:
    """Why the lengths exceed what the model was trained on, or None."""
    total = request.input_len + request.output_len
    if total > spec.max_position_embeddings:
        return (
            f"input {request.input_len:,} + output {request.output_len:,} = {total:,} tokens is beyond the "
            f"{spec.max_position_embeddings:,} positions {spec.name} was trained on"
        )
    return None


def request_beyond_context(spec: ModelSpec, settings: ServingSettings, request: ServingRequest) -> str | None:
    """Why requests of these lengths cannot run on a deployment sized for settings.context_len tokens
    per sequence, or None: vLLM rejects a prompt + max_tokens beyond its --max-model-len
    (vllm/entrypoints/openai/serving_engine.py, "This model's maximum context length is ...").
    Lengths beyond the model's trained positions are context_problem's to name: a longer context
    would not help them."""
    total = request.input_len + request.output_len
    if total <= settings.context_len or context_problem(spec, request):
        return None
    return (
        f"input {request.input_len:,} + output {request.output_len:,} = {total:,} tokens per request is longer than "
        f"the context of {settings.context_len:,} tokens per sequence the deployment is sized for (vLLM rejects "
        "requests beyond its --max-model-len): raise the context or shorten the requests"
    )


def fitting_concurrency(spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, request: ServingRequest) -> int:
    """Most sequences of input + output tokens that fit on each GPU of the group (memory.serving)."""
    full = settings.model_copy(update={"context_len": request.input_len + request.output_len})
    return max_concurrency(spec, full, gpu_memory_gib(gpu))


def speed_at(
    spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, request: ServingRequest, concurrency: int,
    rates: ServingRates, prompt: Prefill, fits: int, dense_weights_bytes: float | None = None,
) -> ServingSpeed:  # fmt: skip
    """Continuous batching at `concurrency`: each decode step holds the running sequences at the
    mean context, input + output / 2 (positions spread evenly over the generation), and every output
    token carries concurrency / output_len requests' prefill FLOPs (chunked prefill), so
    TPOT = step + concurrency x prefill FLOPs / output_len. TTFT: the prompt alone, plus one decode
    step per chunk when other sequences are running."""
    tp = settings.tensor_parallel
    context = request.input_len + request.output_len / 2
    step = decode_step(spec, settings, gpu, concurrency, context, rates, dense_weights_bytes)
    tpot = step.step_s + concurrency * prompt.flops_s / request.output_len
    ttft = prompt.alone_s + (prompt.chunks * step.step_s if concurrency > 1 else 0.0)
    group_output = concurrency / tpot
    return ServingSpeed(
        gpu=gpu.name,
        tensor_parallel=tp,
        weight_precision=settings.weight_precision,
        weight_kernel=rates.kernel,
        concurrency=concurrency,
        max_concurrency=fits,
        input_len=request.input_len,
        output_len=request.output_len,
        output_tokens_per_s_per_gpu=group_output / tp,
        output_tokens_per_s_per_sequence=1 / tpot,
        output_tokens_per_s=group_output,
        total_tokens_per_s_per_gpu=group_output * (request.input_len + request.output_len) / request.output_len / tp,
        ttft_s=ttft,
        tpot_s=tpot,
        prefill_s=prompt.alone_s,
        decode_step_s=step.step_s,
        bound=step.bound,
        step=step,
    )


def searched_concurrencies(fits: int) -> list[int]:
    """Powers of two up to the most that fit, and that most."""
    return sorted({2**i for i in range(fits.bit_length()) if 2**i <= fits} | {fits})


class LatencyLimits(BaseModel):
    """Targets a deployment must meet; None = no target."""

    ttft_s: float | None = Field(default=None, gt=0, le=3600, description="time to first token, s")
    tpot_s: float | None = Field(default=None, gt=0, le=3600, description="time per output token, s")

    def met_by(self, speed: ServingSpeed) -> bool:
        return (self.ttft_s is None or speed.ttft_s <= self.ttft_s) and (
            self.tpot_s is None or speed.tpot_s <= self.tpot_s
        )


NODE_GPUS = max(TENSOR_PARALLEL_SIZES)  # the largest tensor parallel searched: one 8-GPU node (HGX, DGX)


class DoesNotFit(ValueError):
    """Not one sequence fits on the tensor-parallel group: the planner tells this from a GPU that runs no
    kernel for the weights."""


def does_not_fit_text(spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, tokens: int) -> str:
    """Why not one sequence fits, and what would: more tensor-parallel GPUs inside one node, else smaller
    weights, as serving across nodes needs pipeline parallel, which this model does not time."""
    tp = settings.tensor_parallel
    where = f"not one sequence of {tokens:,} tokens fits on {tp} x {gpu.name} with {settings.weight_precision} weights"
    if tp >= NODE_GPUS:
        return (
            f"{where}: {spec.name} needs more than one node ({NODE_GPUS} GPUs): pipeline parallel serving is not "
            "modelled; use smaller weights or a GPU with more memory"
        )
    return f"{where}: use more tensor-parallel GPUs (up to {NODE_GPUS}, one node) or smaller weights"


def serving_speeds(
    spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, request: ServingRequest
) -> list[ServingSpeed]:
    """The speed at request.concurrency, or (0) at each searched concurrency up to the most that fit.
    Raises ValueError, in words, when the settings cannot serve the model, the GPU cannot run the
    weights, the lengths exceed the model's positions, or the concurrency does not fit."""
    problem = serving_problem(spec, settings) or context_problem(spec, request)
    if problem:
        raise ValueError(problem)
    rates = serving_rates(gpu, settings)
    fits = fitting_concurrency(spec, settings, gpu, request)
    tokens = request.input_len + request.output_len
    if fits < 1:
        raise DoesNotFit(does_not_fit_text(spec, settings, gpu, tokens))
    if request.concurrency > fits:
        raise ValueError(
            f"concurrency {request.concurrency:,} does not fit on {settings.tensor_parallel} x {gpu.name}: at most "
            f"{fits:,} sequences of {tokens:,} tokens ({settings.kv_cache_precision} KV cache)"
        )
    prompt = prefill(spec, settings, gpu, request.input_len, rates)
    counts = [request.concurrency] if request.concurrency else searched_concurrencies(fits)
    # a dense model reads the same weights at every batch: worked out once
    dense = decode_weight_read_bytes(spec, settings, 1) if spec.n_experts == 1 else None
    return [speed_at(spec, settings, gpu, request, n, rates, prompt, fits, dense) for n in counts]


def best_speed(speeds: list[ServingSpeed], limits: LatencyLimits | None = None) -> ServingSpeed | None:
    """The throughput-optimal speed among those within `limits`: the smallest concurrency reaching
    OPTIMAL_SHARE of the best throughput (more sequences would only lengthen every latency); None
    when none is within the limits."""
    within = [speed for speed in speeds if limits is None or limits.met_by(speed)]
    if not within:
        return None
    best = max(speed.output_tokens_per_s for speed in within)
    return next(speed for speed in within if speed.output_tokens_per_s >= OPTIMAL_SHARE * best)


def latency_miss(speeds: list[ServingSpeed], limits: LatencyLimits) -> str:
    """Why no concurrency meets the limits: the best TTFT and TPOT reachable (one sequence)."""
    fastest = min(speeds, key=lambda speed: speed.concurrency)
    return (
        f"no concurrency meets the latency targets on {fastest.tensor_parallel} x {fastest.gpu}: the best "
        f"reachable is TTFT {fastest.ttft_s * 1e3:,.1f} ms and TPOT {fastest.tpot_s * 1e3:,.2f} ms at "
        f"concurrency {fastest.concurrency}"
    )


def estimate_serving_speed(
    spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, request: ServingRequest,
    limits: LatencyLimits | None = None,
) -> ServingSpeed:  # fmt: skip
    """Steady-state throughput, TTFT and TPOT of `request` on tensor_parallel x `gpu`; with
    concurrency 0 the throughput-optimal concurrency that fits (and meets `limits`). Raises
    ValueError as serving_speeds does, and when no concurrency meets `limits`."""
    speeds = serving_speeds(spec, settings, gpu, request)
    if request.concurrency:
        return speeds[0]
    chosen = best_speed(speeds, limits)
    if chosen is None:
        raise ValueError(latency_miss(speeds, limits))
    return chosen


def serving_assumptions(speed: ServingSpeed) -> list[str]:
    """The model's assumptions in words, for the pages and the CLI's readable table."""
    return [
        f"Weights run as {speed.weight_kernel} GEMMs; decode reads them once per step and each sequence's KV "
        f"cache at the mean context (input + half the output), in whole paged blocks.",
        "Continuous batching with chunked prefill: each output token also carries its share of new prompts.",
        f"Tensor parallel: {ALLREDUCES_PER_LAYER} all-reduces per layer, {ALLREDUCE_LATENCY_S * 1e6:.1f} us each "
        "plus the bytes over the link (vLLM custom all-reduce on H100).",
        f"Each decode step replays CUDA graphs: {SERVING_KERNELS_PER_LAYER} kernels per layer, "
        f"{GRAPH_KERNEL_GAP_S * 1e6:g} us apart (an assumption).",
    ]
