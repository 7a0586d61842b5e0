"""Step time of one training step of a vision-library image model, built from its traced layers.

data/vision_layers.json lists, per module of each model at its reference resolution, the output
shape and the forward FLOPs measured by tracing the real torchvision/timm module
(bench/vision_library.py). Every operation gets a roofline time, max(FLOPs / achievable rate,
bytes / memory bandwidth) (Williams, Waterman and Patterson 2009, CACM 52(4)), as the text
model's operations do (calculators.timing.operations):

- a convolution is an implicit GEMM (cuDNN's IMPLICIT_GEMM algorithm; Chetlur et al. 2014,
  arXiv:1410.0759 Sec. 3): M = batch x output pixels, N = output channels, K = input channels x
  kernel area / groups, K read off the trace as FLOPs / (2 x pixels x channels). It runs at the
  achievable fraction of the transformer GEMMs, slowed by the measured shape curve's efficiency
  against the roofline of the part it was measured on (shape_efficiency); it moves its input,
  output and weights once (the im2col matrix stays on chip). Backward is two GEMMs of the forward's
  FLOPs: the input gradient and the weight gradient.
- a depthwise or grouped convolution (K smaller than the input's channels) does a few FLOPs per
  byte and is bandwidth-bound: its bytes over the memory bandwidth; a depthwise one's backward takes
  the measured backward / forward of eager PyTorch (DEPTHWISE_BACKWARD_OVER_FORWARD: 16.6x in
  PyTorch's own kernels, which run an NCHW fp32 one and, in builds before pytorch PR #58749, an NCHW
  half 5 x 5 one; 2.4x in cuDNN's, which run every channels-last one: runs_native_depthwise).
- linears (ViT, Swin, ConvNeXt MLPs, the classifier) are GEMMs the same way.
- attention: a ViT's fused SDPA at FlashAttention's fraction of peak (backward 2.5x forward, Dao
  2023, arXiv:2307.08691 Sec. 4) as the text model; Swin's windowed attention runs eager (timm
  lists its Softmax module), two small batched GEMMs on the shape curve plus the softmax.
- BatchNorm, LayerNorm, activations, pooling, softmax and stochastic depth are bandwidth-bound:
  element moves per output element (BATCHNORM_MOVES and friends) at the compute dtype's size, and
  squeeze-and-excitation's scaling as PyTorch's autograd runs it (SE_SCALE_MOVES). A GPU moves bytes
  at the share of its datasheet bandwidth this project measured on its own H200
  (GPU_BANDWIDTH_FRACTION, 0.88).
- without channels-last, cuDNN's tensor-core convolutions transpose NCHW inputs and outputs to
  NHWC and back ("Tensor Layouts In Memory: NCHW vs NHWC", NVIDIA Deep Learning Performance
  Guide, docs.nvidia.com/deeplearning/performance/dl-performance-convolutional/index.html):
  two extra moves of each convolution's input and output per GEMM. PyTorch's own depthwise kernels
  take NCHW (aten Convolution.cpp: `_conv_depthwise2d(input.contiguous(), ...)`) and run only in an
  NCHW run, so they transpose nothing.
- data parallel: one ring all-reduce of the fp32 gradients per step (DDP), hidden under the
  backward by `overlap_fraction` (calculators.timing.communication).
- the optimizer step: bandwidth-bound, bytes per parameter (OPTIMIZER_BYTES_PER_PARAMETER).
- eager PyTorch's host issues every layer's kernels: a step takes at least EAGER_HOST_S_PER_LAYER
  per layer (host_seconds; from this project's own H200 runs).

Resolution: spatial layers grow with the model's size unit (pixels; tokens for a ViT), global
attention with tokens squared, Swin's windowed attention with pixels (its windows are fixed).
Pure: no torch.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from typing import Literal

from pydantic import BaseModel, Field

from calculators import DATA_DIR
from calculators.hardware.catalogue import GpuSpec, find_gpu
from calculators.hardware.cpus import AMX_GEMM_FRACTION, STREAM_FRACTION, is_cpu, uses_amx
from calculators.memory.vision_training import MAX_MICRO_BATCH, VisionTrainingInput, check_image_size, parameters_at
from calculators.models.vision_library import VisionModel
from calculators.timing.attention_kernels import sixteen_bit_peak_tflops
from calculators.timing.communication import allreduce_bytes, link_gbytes_per_s
from calculators.timing.data_loading import DataLoader, InputCeiling, input_ceiling
from calculators.timing.operations import (
    DEFAULT_MATMUL_FRACTION,
    KERNEL_LAUNCH_S,
    attention_rates,
    curve_family,
    matmul_curve,
    matmul_fraction,
    shape_factor,
)
from calculators.timing.rates import rate_and_format
from calculators.timing.settings import (
    DEFAULT_HOST_CORES_PER_GPU,
    DEFAULT_INTER_NODE_GBPS,
    NVLINK_EFFICIENCY,
    SUSTAINED_CLOCK_FACTOR,
)

VISION_LAYERS_PATH = DATA_DIR / "vision_layers.json"
Precision = Literal["fp32", "amp-bf16", "amp-fp16"]
Optimizer = Literal["sgd", "adamw", "lamb"]

# Element moves per output element, forward and backward, of the bandwidth-bound layers.
# BatchNorm in training: PyTorch's CUDA kernels first reduce the batch statistics (read x), then
# normalise (read x, write y); backward reduces (read x and dy) then writes dx (read x and dy,
# write dx) (pytorch aten/src/ATen/native/cuda/Normalization.cuh: batch_norm_collect_statistics,
# batch_norm_transform_input, batch_norm_backward_reduce, batch_norm_backward_elemt).
BATCHNORM_MOVES = (3, 5)
# LayerNorm: one fused forward kernel (read x, write y: aten native_layer_norm, as
# operations.norm_bytes_per_element); backward reads x and dy for dx and again for the weight
# gradients (aten layer_norm_backward_cuda): 5.
LAYERNORM_MOVES = (2, 5)
# Pointwise activations, softmax, stochastic depth: read and write; backward reads the saved
# tensor and dy and writes dx.
POINTWISE_MOVES = (2, 3)
# Pooling: read the input, write the output; backward reads dy (and max-pool's indices) and writes
# the input-sized gradient; counted with the input's elements (see _pool_elements).
POOL_MOVES = (1, 1)
# A residual add reads both branches and writes the sum; backward, autograd adds the two branches'
# gradients where they meet at the block's input (the same three moves).
RESIDUAL_ADD_MOVES = (3, 3)
# Squeeze-and-excitation scales the feature map by a per-channel vector s (torchvision ops/misc.py
# SqueezeExcitation.forward: `return scale * input`; timm layers/squeeze_excite.py SEModule.forward:
# `return x * self.gate(x_se)`): read and write the map. Backward follows mul's entry in PyTorch's
# tools/autograd/derivatives.yaml (`self: mul_tensor_backward(grad, other, ...)`, `other:
# mul_tensor_backward(grad, self, ...)`): dx = dy x s (read dy, write) and ds = dy x x, a full-size
# product (read both, write) that the autograd engine then sums down to s's broadcast shape
# (torch/csrc/autograd/engine.cpp validate_outputs: `grad = metadata.reduce_grad(grad)`, read it
# once); the map also feeds the squeeze branch, so autograd adds x's two gradients (read both,
# write): 2 + 3 + 1 + 3 = 9.
SE_SCALE_MOVES = (2, 9)
# timm's SEModule (its SE-ResNeXts) averages the map with `x.mean((2, 3), keepdim=True)`, no module
# of its own, where torchvision lists an AdaptiveAvgPool2d (POOL_MOVES): the mean reads the map once;
# its backward (derivatives.yaml mean: the gradient expanded and divided by the count) writes one
# map-sized gradient, which SE_SCALE_MOVES's sum adds.
SE_MEAN_MOVES = (1, 1)
SQUEEZE_EXCITATION = {"SqueezeExcitation", "SEModule"}
# Residual adds per block container the trace lists (the add is not a module): timm's ViT `Block`
# and Swin's `SwinTransformerBlock` add twice (x + attn, x + mlp: timm vision_transformer.py,
# swin_transformer.py), torchvision's RegNet `ResBottleneckBlock`, MobileNet `InvertedResidual`
# (listed only where it has a residual) and ConvNeXt `CNBlock` once.
RESIDUAL_ADDS_PER_CONTAINER = {"Block": 2, "SwinTransformerBlock": 2, "ResBottleneckBlock": 1, "InvertedResidual": 1,
                               "CNBlock": 1}  # fmt: skip
# torchvision ResNet blocks ("layer2.0.conv1", ...) are not listed; each adds its shortcut once
# (torchvision models/resnet.py BasicBlock/Bottleneck.forward: `out += identity`).
RESNET_BLOCK = re.compile(r"^layer\d+\.\d+\.")
# Stochastic depth and dropout multiply by a per-sample mask: read and write, both ways.
STOCHASTIC_MOVES = (2, 2)
# Swin's attention windows: 7 x 7 tokens, 32 channels per head in every timm Swin-T/S/B
# (timm swin_transformer.py: window_size=7, embed_dim 96/96/128 with num_heads 3/3/4 at stage 1).
SWIN_WINDOW_TOKENS = 49
SWIN_HEAD_DIM = 32
# Extra moves of a convolution's input and output per GEMM without channels-last (module docstring).
NCHW_TRANSPOSE_MOVES = 2
# fp32 element moves per parameter of one optimizer step (torch.optim, foreach): SGD with momentum
# reads the gradient, parameter and momentum and writes both back, plus weight decay's new gradient
# list (read gradient and parameter, write gradient) (torch/optim/sgd.py _multi_tensor_sgd): 8.
# AdamW reads gradient, parameter and two moments and writes the three back (torch/optim/adamw.py):
# 7, plus the denominator list sqrt(v) (read v, write) and its use (read): 10. LAMB as AdamW plus
# the norms of the parameter and the update (two reads) (You et al. 2020, arXiv:1904.00962 Alg. 2): 12.
OPTIMIZER_MOVES_PER_PARAMETER = {"sgd": 8, "adamw": 10, "lamb": 12}
FP32_BYTES = 4
GRADIENT_BYTES = 4  # DDP all-reduces the fp32 gradients autocast leaves on the fp32 parameters
# A ViT's attention backward over its forward (FlashAttention-2: Dao 2023, Sec. 4), as the text model.
ATTENTION_BACKWARD_FACTOR = 2.5
# A ViT's attention heads (timm vision_transformer.py: embed_dim / num_heads = 64 for ViT-S/B/L)
# and the shortest sequence FlashAttention's figures measure, where a ViT's 197-577 tokens clamp.
VIT_HEAD_DIM = 64
VIT_ATTENTION_TOKENS = 512

ACTIVATIONS = {"ReLU", "ReLU6", "SiLU", "GELU", "Hardswish", "Sigmoid", "Hardsigmoid", "Softmax"}
STOCHASTIC = {"StochasticDepth", "DropPath", "Dropout"}
POOLS = {"MaxPool2d", "AdaptiveAvgPool2d", "FastAdaptiveAvgPool"}
NORMS = {"LayerNorm", "LayerNorm2d"}


class VisionLayer(BaseModel):
    """One traced module: what the table's row says, per image at the reference resolution."""

    name: str
    type: str
    output_shape: list[int]
    forward_flops: float = Field(ge=0)
    saved_bytes: float = Field(ge=0)


@cache
def vision_layers(key: str) -> tuple[VisionLayer, ...]:
    """The traced layers of library model `key`, in the order the forward ran them."""
    for row in _layer_document()["models"]:
        if row["key"] == key:
            columns = _layer_document()["columns"]
            return tuple(VisionLayer(**dict(zip(columns, layer, strict=True))) for layer in row["layers"])
    raise KeyError(f"no traced layers for {key} in {VISION_LAYERS_PATH.name}")


@cache
def _layer_document() -> dict:
    return json.loads(VISION_LAYERS_PATH.read_text())


class VisionStepInput(BaseModel):
    """One data-parallel training step of a library image model."""

    model: VisionModel
    micro_batch: int = Field(gt=0, le=MAX_MICRO_BATCH)  # images per GPU per step
    image_size: int | None = None  # pixels per side; None: the model's reference resolution
    precision: Precision = "fp32"
    channels_last: bool = False
    optimizer: Optimizer = "sgd"
    gpus: int = Field(default=1, ge=1, le=100_000)  # data-parallel replicas
    # PyTorch runs fp32 convolutions in TF32 on Ampere and newer by default
    # (torch.backends.cudnn.allow_tf32 = True) but fp32 matmuls in fp32 (allow_tf32 = False since 1.12):
    # https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices
    conv_tf32: bool = True
    matmul_tf32: bool = False
    # PyTorch hands NCHW half-precision 5 x 5 depthwise convolutions to cuDNN since pytorch PR #58749
    # ("enable better depthwise conv perf on cudnn 8.2+", opened 2021-05-21: "Newly turned on 5x5 cudnn
    # kernel"); before it only 1 x 1 and 3 x 3 ones went there (PR #22302's use_cudnn_depthwise:
    # `(weight.size(3) == 3) || (weight.size(3) == 1)`), 5 x 5 ran PyTorch's own conv_depthwise2d
    # kernels. False for a run on an older build (a channels-last one goes to cuDNN on either).
    cudnn_depthwise_5x5: bool = True
    gpus_per_node: int = Field(default=8, ge=1, le=1024)
    inter_node_gbps: float = Field(default=DEFAULT_INTER_NODE_GBPS, gt=0)
    overlap_fraction: float = Field(default=1.0, ge=0, le=1)  # DDP's bucketed all-reduce under backward

    @property
    def resolution(self) -> int:
        return self.image_size or self.model.reference_resolution

    @classmethod
    def of_training(cls, run: VisionTrainingInput) -> VisionStepInput:
        """The step a memory input describes (its ZeRO stage and checkpointing size memory only)."""
        return cls(
            model=run.model,
            micro_batch=run.micro_batch,
            image_size=run.image_size,
            precision=run.precision,
            channels_last=run.channels_last,
            optimizer=run.optimizer,
            gpus=run.gpus,
        )

    def memory_input(self, precision: str | None = None) -> VisionTrainingInput:
        """This step as the memory engine takes it on one GPU, in `precision` where given."""
        return VisionTrainingInput(
            model=self.model,
            micro_batch=self.micro_batch,
            image_size=self.image_size,
            precision=precision or self.precision,
            channels_last=self.channels_last,
            optimizer=self.optimizer,
        )


class VisionStepTime(BaseModel):
    """Seconds of one step on one GPU, by op class, and the images per second they give."""

    gpu: str
    compute_format: str
    forward_flops_per_image: float
    compute_by_class_s: dict[str, float]
    compute_s: float = Field(description="the GPU's work, or eager PyTorch's host time where longer")
    host_s: float = Field(0.0, description="eager PyTorch's host time to issue the step (host_seconds)")
    comm_s: float
    comm_exposed_s: float
    step_s: float
    samples_per_s_per_gpu: float
    samples_per_s: float
    mfu: float = Field(description="model FLOPs (3 x forward) / (step time x dense peak)")
    assumptions: list[str]


class Rates(BaseModel):
    """How fast the device runs a step's GEMMs and moves its bytes."""

    conv_tflops: float
    matmul_tflops: float
    attention_forward_tflops: float
    attention_backward_tflops: float
    conv_tensor_cores: bool  # convolutions on tensor cores (TF32 or half), which want NHWC
    on_gpu: bool
    cudnn_depthwise_5x5: bool  # half 5 x 5 depthwise convolutions in cuDNN (VisionStepInput)
    matmul_tensor_cores: bool
    fraction: float  # achievable fraction x sustained clocks
    bandwidth_bytes_per_s: float
    element_bytes: float
    curve: str


# A bandwidth-bound kernel on a GPU moves its bytes at this share of the datasheet bandwidth: this
# project's own H200 measurement, a 1 GiB `torch.Tensor.copy_` (an ATen elementwise kernel, as
# BatchNorm's and the activations' are) timed at 4,242 GB/s against the datasheet's 4,800
# (data/device_runs/2026-11-27-h200-calibration.json, record memory_bandwidth; measure/calibration/
# benchmarks.py memory_bandwidth_gbps). Taken for every GPU (an assumption: STREAM-like kernels on
# other HBM parts reach a similar share; no other part was measured here).
GPU_BANDWIDTH_FRACTION = 4242.261 / 4800


def element_bytes_of(precision: str) -> int:
    """Activations are half precision under autocast (torch.autocast casts conv and matmul inputs
    and outputs), fp32 otherwise."""
    return FP32_BYTES if precision == "fp32" else 2


def step_rates(gpu: GpuSpec, run: VisionStepInput) -> Rates:
    """The device's peaks for this step: convolutions in TF32 where cuDNN's default allows it,
    matmuls as PyTorch's matmul default, attention at the bf16 peak (SDPA runs in the autocast
    dtype), each at the part's achievable fraction x the sustained-clock factor, as the text model;
    a ViT's fused attention at FlashAttention-2's published figures without the mask at head dim 64
    (timm's ViTs) and the shortest measured sequence (VIT_ATTENTION_TOKENS; a ViT's 197-577
    tokens lie below it), scaled to this GPU (operations.attention_rates). A CPU
    (calculators.hardware.cpus) has no tensor-core shape curve, no NHWC transposes and no
    FlashAttention figure: its GEMMs and attention run at the achievable fraction of its peak
    (cpu_gemm_fraction) and its bytes at STREAM's share of its DRAM peak; a GPU's bytes move at the
    measured share of its datasheet bandwidth (GPU_BANDWIDTH_FRACTION)."""
    conv_tflops, conv_format = rate_and_format(gpu, run.precision, run.conv_tf32)
    matmul_tflops, matmul_format = rate_and_format(gpu, run.precision, run.matmul_tf32)
    on_gpu = not is_cpu(gpu)
    fraction = (
        matmul_fraction(gpu, conv_format) * SUSTAINED_CLOCK_FACTOR if on_gpu else cpu_gemm_fraction(gpu, conv_format)
    )
    bandwidth_fraction = GPU_BANDWIDTH_FRACTION if on_gpu else STREAM_FRACTION
    attention_peak = matmul_tflops if run.precision == "fp32" else (gpu.dense_tflops("bf16") or matmul_tflops)
    attention_forward = attention_backward = attention_peak * fraction
    if on_gpu:
        flash = attention_rates(gpu, "flash2").tflops(False, VIT_HEAD_DIM, VIT_ATTENTION_TOKENS)
        attention_forward, attention_backward = (rate * attention_peak / sixteen_bit_peak_tflops(gpu) for rate in flash)
    return Rates(
        conv_tflops=conv_tflops,
        matmul_tflops=matmul_tflops,
        attention_forward_tflops=attention_forward,
        attention_backward_tflops=attention_backward,
        conv_tensor_cores=on_gpu and conv_format != "fp32",
        on_gpu=on_gpu,
        cudnn_depthwise_5x5=run.cudnn_depthwise_5x5,
        matmul_tensor_cores=on_gpu and matmul_format != "fp32",
        fraction=fraction,
        bandwidth_bytes_per_s=gpu.memory_bandwidth_tbps * 1e12 * bandwidth_fraction,
        element_bytes=element_bytes_of(run.precision),
        curve=curve_family(gpu),
    )


def cpu_gemm_fraction(cpu: GpuSpec, compute_format: str) -> float:
    """What a CPU's GEMMs reach of its peak: AMX's measured all-core fraction for Intel bf16
    (calculators.hardware.cpus.AMX_GEMM_FRACTION); on the AVX-512 vector units (fp32, AMD's bf16)
    the default achievable fraction x sustained clocks, as an unmeasured GPU (an assumption)."""
    if uses_amx(cpu, compute_format):
        return AMX_GEMM_FRACTION
    return DEFAULT_MATMUL_FRACTION * SUSTAINED_CLOCK_FACTOR


# The part each family's shape curve was measured on (XLA's default_matmul_perf_table.txtpb keys
# sm_90 and sm_100_B200, data/matmul_efficiency.csv), taken as the SXM part of each (an assumption:
# the table names the architecture, not the board), and the curve's element size (bf16).
CURVE_REFERENCE_GPU = {"H100": "H100-SXM5-80GB", "B200": "B200-SXM-180GB"}
CURVE_ELEMENT_BYTES = 2


@cache
def curve_bandwidth_bytes_per_s(curve: str) -> float:
    """Memory bandwidth the part `curve` was measured on achieves (CURVE_REFERENCE_GPU, at
    GPU_BANDWIDTH_FRACTION of its datasheet, as the device's own roofline in gemm_s: the curve's
    efficiency then holds only what the shape itself loses)."""
    return find_gpu(CURVE_REFERENCE_GPU[curve]).memory_bandwidth_tbps * 1e12 * GPU_BANDWIDTH_FRACTION


@cache
def shape_efficiency(rows: float, n: float, k: float, curve: str) -> float:
    """How close a (rows x k) @ (k x n) GEMM of this shape came to its own roofline on the part the
    curve was measured on: the measured rate over min(best measured rate, the shape's FLOPs per byte x
    that part's bandwidth) (Williams, Waterman and Patterson 2009, CACM 52(4)), the shape clamped to
    the curve's grid as shape_factor does. A small-channel convolution's shape is memory-bound on an
    H100 (989 TFLOPS over 3.35 TB/s) but not on a GPU with more bytes per FLOP (an RTX 3090: 71 over
    0.936); the curve's factor alone (rate / best) would charge it the H100's bandwidth limit on every
    GPU, so the efficiency is taken against the roofline and the caller applies it to the device's own."""
    grid = matmul_curve(curve)
    r, nn, kk = (min(max(x, axis[0]), axis[-1]) for x, axis in ((rows, grid.rows), (n, grid.ns), (k, grid.ks)))
    measured_tflops = shape_factor(r, nn, kk, curve) * grid.best_tflops
    flops_per_byte = 2.0 * r * nn * kk / (CURVE_ELEMENT_BYTES * (r * kk + kk * nn + r * nn))
    roofline_tflops = min(grid.best_tflops, flops_per_byte * curve_bandwidth_bytes_per_s(curve) / 1e12)
    return min(measured_tflops / roofline_tflops, 1.0)


def gemm_s(rows: float, n: float, k: float, tflops: float, rates: Rates, moved_bytes: float,
           tensor_cores: bool = True) -> float:  # fmt: skip
    """Roofline time of one (rows x k) @ (k x n) GEMM moving `moved_bytes`: the larger of the FLOPs at
    peak x the achievable fraction and the bytes at the memory bandwidth, over the shape's measured
    efficiency against its roofline (shape_efficiency), at least one kernel launch
    (operations.gemm_seconds, without its explicit-operand bytes). Plain fp32 runs on the CUDA cores
    and takes no shape efficiency: the curve measures tensor-core GEMMs, whose large tiles leave small
    shapes idle (an assumption; no fp32 curve is published)."""
    flops = 2.0 * rows * n * k
    efficiency = shape_efficiency(rows, n, k, rates.curve) if tensor_cores else 1.0
    roofline_s = max(flops / (tflops * 1e12 * rates.fraction), moved_bytes / rates.bandwidth_bytes_per_s)
    return max(roofline_s / efficiency, KERNEL_LAUNCH_S)


def bandwidth_s(moved_bytes: float, rates: Rates) -> float:
    """A bandwidth-bound kernel: its bytes at the memory bandwidth, at least one launch."""
    return max(moved_bytes / rates.bandwidth_bytes_per_s, KERNEL_LAUNCH_S)


def elements(shape: list[int]) -> int:
    return math.prod(shape) if shape else 0


def is_spatial(layer: VisionLayer) -> bool:
    """Whether a layer's work grows with the image: a feature map of more than one pixel or a
    sequence of more than one token has more elements than its widest dimension; a pooled vector
    or the classifier's logits do not. Attention modules (no shape) grow too."""
    shape = layer.output_shape
    return not shape or elements(shape) > max(shape)


def conv_k(layer: VisionLayer) -> float:
    """K of a convolution's implicit GEMM from the trace: forward FLOPs / (2 x pixels x channels)."""
    channels, pixels = layer.output_shape[0], math.prod(layer.output_shape[1:])
    return layer.forward_flops / (2.0 * pixels * channels)


def is_grouped(layer: VisionLayer, input_channels: int | None) -> bool:
    """A depthwise or grouped convolution: K (input channels x kernel area / groups) below the
    input's channels (layer_inputs) can only come from groups."""
    if input_channels is None:
        return False
    return conv_k(layer) < input_channels


def gemm_pass_seconds(rows: float, n: float, k: float, tflops: float, moved_bytes: float,
                      rates: Rates, tensor_cores: bool) -> tuple[float, float]:  # fmt: skip
    """(forward, backward) of a GEMM layer: forward (rows x k) @ (k x n), then the input gradient
    (rows x n) @ (n x k) and the weight gradient (k x rows) @ (rows x n), each of the forward's FLOPs
    (operations.linear_seconds), each moving the layer's activations and weights once."""
    forward = gemm_s(rows, n, k, tflops, rates, moved_bytes, tensor_cores)
    input_grad = gemm_s(rows, k, n, tflops, rates, moved_bytes, tensor_cores)
    weight_grad = gemm_s(k, n, rows, tflops, rates, moved_bytes, tensor_cores)
    return forward, input_grad + weight_grad


# Backward over forward of a 3 x 3 depthwise convolution in eager PyTorch, measured on an
# A100-SXM4-40GB (PyTorch 1.12.1, cuDNN 8.3.2, CUDA 11.6; github.com/pytorch/pytorch issue #18631,
# comment of 2022-10-20): fp32 forward 272 us, forward and backward 4.8 ms, so backward 16.6x forward
# in PyTorch's own conv_depthwise2d kernels (every fp32 depthwise convolution runs there: PyTorch hands
# only half ones to cuDNN), whose weight gradient reduces over the whole batch; fp16 forward 201 us,
# both 684 us, so 2.4x in cuDNN's depthwise kernels. Taken as the same for every depthwise shape and
# GPU, for bf16, and for a half convolution in PyTorch's own kernels (the same conv_depthwise2d
# templates for every dtype, aten/src/ATen/native/cuda/DepthwiseConv2d.cu) (assumptions).
DEPTHWISE_BACKWARD_OVER_FORWARD = {"native": (4.8e-3 - 272e-6) / 272e-6, "cudnn": (684e-6 - 201e-6) / 201e-6}
# A grouped convolution that is not depthwise runs in cuDNN's grouped kernels: backward reads and
# writes what forward does, twice (input and weight gradients).
GROUPED_BACKWARD_OVER_FORWARD = 2.0


def is_depthwise(layer: VisionLayer) -> bool:
    """One input channel per group: K (input channels x kernel area / groups) is the kernel's area,
    the square of an odd side (3 x 3, 5 x 5, 7 x 7 in the library); a grouped convolution's K is the
    area times its channels per group (ResNeXt 32x4d: 4 x 9 = 36, RegNet's 8 x 9 = 72 and wider)."""
    side = round(math.sqrt(conv_k(layer)))
    return side % 2 == 1 and side * side == round(conv_k(layer))


def runs_native_depthwise(layer: VisionLayer, channels_last: bool, rates: Rates) -> bool:
    """Whether PyTorch runs this depthwise convolution in its own kernels rather than cuDNN's. A
    channels-last one on a GPU always goes to cuDNN, whatever its dtype (aten/src/ATen/native/
    Convolution.cpp `use_cudnn_depthwise` at pytorch 954cecd: "always use cudnn_depthwise for
    channels_last format", from pytorch PR #38904 of May 2020, before the 2021 builds DLE ran: an
    assumption on its release). An NCHW one runs there unless it is half precision, and then a 5 x 5
    one only where the build has cuDNN's 5 x 5 kernels (VisionStepInput.cudnn_depthwise_5x5)."""
    if not is_depthwise(layer):
        return False
    if channels_last and rates.on_gpu:
        return False
    if rates.element_bytes == FP32_BYTES:
        return True
    return not rates.cudnn_depthwise_5x5 and round(conv_k(layer)) == 25


def grouped_backward_over_forward(layer: VisionLayer, channels_last: bool, rates: Rates) -> float:
    """Backward over forward of a grouped convolution: a depthwise one's measured ratio for the
    kernels that run it (DEPTHWISE_BACKWARD_OVER_FORWARD, runs_native_depthwise), else
    GROUPED_BACKWARD_OVER_FORWARD."""
    if not is_depthwise(layer):
        return GROUPED_BACKWARD_OVER_FORWARD
    native = runs_native_depthwise(layer, channels_last, rates)
    return DEPTHWISE_BACKWARD_OVER_FORWARD["native" if native else "cudnn"]


def layout_transposes(layer: VisionLayer, grouped: bool, channels_last: bool, rates: Rates) -> bool:
    """Whether a convolution's kernels want the other memory layout than the run's tensors, so it
    transposes its input and output (module docstring): cuDNN's tensor-core kernels want NHWC.
    PyTorch's own depthwise kernels take NCHW and run only in an NCHW run (runs_native_depthwise):
    no transposes."""
    if grouped and runs_native_depthwise(layer, channels_last, rates):
        return False
    return rates.conv_tensor_cores and not channels_last


def conv_seconds(layer: VisionLayer, batch: float, grow: float, input_elements: float, grouped: bool,
                 channels_last: bool, rates: Rates) -> tuple[float, float]:  # fmt: skip
    """(forward, backward) of one convolution on `batch` images grown by `grow` (size units over the
    reference's), `input_elements` per image at the reference: implicit GEMMs on the shape curve
    (forward, input gradient, weight gradient), or bandwidth-bound when grouped (module docstring);
    where its kernels want the other layout (layout_transposes) each GEMM also transposes its input and
    output."""
    channels = layer.output_shape[0]
    rows = batch * grow * math.prod(layer.output_shape[1:])
    k = conv_k(layer)
    activations = batch * grow * input_elements + rows * channels
    moved = rates.element_bytes * (activations + channels * k)
    transposes = layout_transposes(layer, grouped, channels_last, rates)
    extra = bandwidth_s(NCHW_TRANSPOSE_MOVES * rates.element_bytes * activations, rates) if transposes else 0.0
    if grouped:
        forward = bandwidth_s(moved, rates)
        return forward + extra, grouped_backward_over_forward(layer, channels_last, rates) * forward + 2 * extra
    forward, backward = gemm_pass_seconds(rows, channels, k, rates.conv_tflops, moved, rates, rates.conv_tensor_cores)
    return forward + extra, backward + 2 * extra


def linear_seconds(layer: VisionLayer, batch: float, grow: float, tokens: float | None,
                   rates: Rates) -> tuple[float, float]:  # fmt: skip
    """(forward, backward) of a linear on `batch` images: rows are its output's tokens per image
    (a Swin window's linears run on every window: `tokens` of the block), K from the FLOPs."""
    n = layer.output_shape[-1]
    rows_per_image = tokens or math.prod(layer.output_shape[:-1])
    k = layer.forward_flops / (2.0 * rows_per_image * n)
    rows = batch * grow * rows_per_image
    moved = rates.element_bytes * (rows * (k + n) + k * n)
    return gemm_pass_seconds(rows, n, k, rates.matmul_tflops, moved, rates, rates.matmul_tensor_cores)


def attention_seconds(layer: VisionLayer, batch: float, grow: float, rates: Rates) -> tuple[float, float]:
    """(forward, backward) of the attention matmuls (Q K^T and P V, the module's own FLOPs). A
    ViT's runs fused (timm's F.scaled_dot_product_attention) at FlashAttention's rates (step_rates),
    backward 2.5x the FLOPs; Swin's windows run eager: batched 49 x 32 GEMMs on the shape curve, backward two
    GEMMs per forward GEMM (its softmax is a layer of its own)."""
    flops = layer.forward_flops * batch * grow
    if layer.type == "WindowAttention":
        rows = flops / (2.0 * 2 * SWIN_WINDOW_TOKENS * SWIN_HEAD_DIM)  # query rows over both GEMMs
        factor = shape_factor(rows, SWIN_WINDOW_TOKENS, SWIN_HEAD_DIM, rates.curve)
        forward = max(flops / (rates.matmul_tflops * 1e12 * rates.fraction * factor), KERNEL_LAUNCH_S)
        return forward, 2 * forward
    forward = max(flops / (rates.attention_forward_tflops * 1e12), KERNEL_LAUNCH_S)
    backward = max(ATTENTION_BACKWARD_FACTOR * flops / (rates.attention_backward_tflops * 1e12), KERNEL_LAUNCH_S)
    return forward, backward


def moves_of(layer_type: str) -> tuple[int, int] | None:
    """(forward, backward) element moves of a bandwidth-bound layer type, None for the others."""
    if layer_type == "BatchNorm2d":
        return BATCHNORM_MOVES
    if layer_type in NORMS:
        return LAYERNORM_MOVES
    if layer_type in ACTIVATIONS:
        return POINTWISE_MOVES
    if layer_type in STOCHASTIC:
        return STOCHASTIC_MOVES
    if layer_type in POOLS:
        return POOL_MOVES
    return None


@cache
def lists_activations(key: str) -> bool:
    """Whether the model's table lists an activation outside a squeeze-excitation module (whose
    sigmoid gate is listed)."""
    return any(layer.type in ACTIVATIONS and ".se." not in layer.name for layer in vision_layers(key))


def unlisted_relu(key: str, layer: VisionLayer) -> bool:
    """torchvision's ResNets and our U-Net apply an in-place ReLU module the trace does not list
    (it makes no tensor): after every BatchNorm but a ResNet's downsample one (whose ReLU follows
    the residual add instead, the same elements) (torchvision models/resnet.py Bottleneck.forward;
    measure/vision/unet.py); timm's ResNets (its ResNeXts and SE-ResNeXts) the same (timm
    models/resnet.py Bottleneck.forward). Only for a model that lists no activation of its own
    (lists_activations)."""
    return layer.type == "BatchNorm2d" and not lists_activations(key)


def residual_blocks(layers: tuple[VisionLayer, ...]) -> dict[str, tuple[int, VisionLayer]]:
    """Each block that adds a shortcut: its name prefix -> (adds, the block's last layer, whose output
    the adds write). Listed containers (RESIDUAL_ADDS_PER_CONTAINER), torchvision ResNet blocks by
    name, and, outside those, each stochastic-depth layer (torchvision's MBConv applies it only on
    its residual: `result = self.stochastic_depth(result); result += input`, models/efficientnet.py)."""
    blocks: dict[str, tuple[int, VisionLayer]] = {}
    for layer in layers:
        if layer.type in RESIDUAL_ADDS_PER_CONTAINER:
            blocks[layer.name + "."] = (RESIDUAL_ADDS_PER_CONTAINER[layer.type], layer)
        elif match := RESNET_BLOCK.match(layer.name):
            blocks.setdefault(match.group(0), (1, layer))
        elif layer.type in STOCHASTIC and not any(layer.name.startswith(prefix) for prefix in blocks):
            blocks[layer.name] = (1, layer)
        # a block's last layer with an output carries what its adds write (layers run in order);
        # timm's SE module comes after a block's last BatchNorm, and its pooled layers are not it
        for prefix, (adds, _) in blocks.items():
            if layer.name.startswith(prefix) and layer.output_shape and ".se." not in layer.name:
                blocks[prefix] = (adds, layer)
    return blocks


@cache
def unlisted_moves_per_image(key: str) -> tuple[float, float]:
    """(element moves that grow with the image, element moves that do not) per image at the
    reference resolution, forward and backward, of the pointwise work no traced module makes:
    residual adds (residual_blocks) and squeeze-and-excitation's scaling of its input feature map.
    Worked out once per model."""
    layers = vision_layers(key)
    growing = fixed = 0.0
    for adds, last in residual_blocks(layers).values():
        moves = adds * sum(RESIDUAL_ADD_MOVES) * elements(last.output_shape)
        growing, fixed = (growing + moves, fixed) if is_spatial(last) else (growing, fixed + moves)
    previous = None
    for layer in layers:
        if layer.type in SQUEEZE_EXCITATION and previous is not None:
            mean = sum(SE_MEAN_MOVES) if layer.type == "SEModule" else 0
            moves = (sum(SE_SCALE_MOVES) + mean) * elements(previous.output_shape)
            growing, fixed = (growing + moves, fixed) if is_spatial(previous) else (growing, fixed + moves)
        if layer.output_shape:
            previous = layer
    return growing, fixed


def unlisted_elementwise_seconds(model: VisionModel, batch: float, unit_growth: float, rates: Rates) -> float:
    """Forward and backward seconds of the untraced pointwise work (unlisted_moves_per_image)."""
    growing, fixed = unlisted_moves_per_image(model.key)
    moved = batch * (unit_growth * growing + fixed) * rates.element_bytes
    return bandwidth_s(moved, rates) if moved else 0.0


@cache
def layer_inputs(key: str, reference_resolution: int) -> tuple[list[int], ...]:
    """Per traced layer of model `key`, the shape (per image, at the reference) of the map it reads:
    the last output before it, the image first. timm's SEModule takes the map's mean itself (no module
    of its own), so its fc1 reads one pixel (SE_MEAN_MOVES); after a squeeze-excitation module the
    next layer reads the map it scaled, not its gate (SE returns `scale * input`). A ResNet block's
    shortcut convolution, traced after the block's own layers, reads the block's input (torchvision and
    timm models/resnet.py Bottleneck.forward: `shortcut = self.downsample(x)`)."""
    inputs: list[list[int]] = []
    previous = [3, reference_resolution, reference_resolution]  # the image
    squeeze = None  # (name prefix, map) of the squeeze-excitation module being walked
    block_inputs: dict[str, list[int]] = {}  # a block's name prefix -> the input of its first layer
    for layer in vision_layers(key):
        if squeeze and not layer.name.startswith(squeeze[0]):
            previous, squeeze = squeeze[1], None
        if layer.type in SQUEEZE_EXCITATION:
            squeeze = (layer.name + ".", previous)
        if match := RESNET_BLOCK.match(layer.name):
            block_inputs.setdefault(match.group(0), previous)
            if layer.name == match.group(0) + "downsample.0":
                previous = block_inputs[match.group(0)]
        inputs.append(previous)
        if layer.output_shape:
            previous = layer.output_shape
        elif layer.type == "SEModule":
            previous = [previous[0], 1, 1]
    return tuple(inputs)


class _Walk(BaseModel):
    """Seconds by op class of one micro-batch, forward and backward summed."""

    by_class: dict[str, float]
    backward_s: float
    layers: int  # layers that launch work (a container launches none of its own)


def layer_seconds(run: VisionStepInput, rates: Rates) -> _Walk:
    """Every traced layer of the model timed on the micro-batch at the run's resolution."""
    model, batch = run.model, float(run.micro_batch)
    layers = vision_layers(model.key)
    unit_growth = model.size_unit(run.resolution) / model.size_unit(model.reference_resolution)
    by_class = dict.fromkeys(("convolution", "grouped convolution", "linear", "attention", "elementwise"), 0.0)
    backward_total = 0.0
    timed_layers = 0
    tokens = None  # a Swin block's tokens per image, for its windowed linears
    for layer, previous in zip(layers, layer_inputs(model.key, model.reference_resolution), strict=True):
        grow = unit_growth if is_spatial(layer) else 1.0
        if layer.type == "Attention" and model.kind == "vit":
            grow = unit_growth**2  # global attention: tokens squared
        windowed = model.kind == "swin" and ".attn." in layer.name
        kind, seconds = _layer_kind_seconds(layer, previous, batch, grow, tokens if windowed else None,
                                            run.channels_last, rates, unlisted_relu(model.key, layer))  # fmt: skip
        if kind:
            by_class[kind] += sum(seconds)
            timed_layers += 1
            backward_total += seconds[1]
        if layer.type in NORMS and len(layer.output_shape) >= 2:
            tokens = math.prod(layer.output_shape[:-1])
    unlisted = unlisted_elementwise_seconds(model, batch, unit_growth, rates)
    by_class["elementwise"] += unlisted
    backward_total += unlisted / 2
    return _Walk(by_class=by_class, backward_s=backward_total, layers=timed_layers)


def _layer_kind_seconds(
    layer: VisionLayer, previous: list[int], batch: float, grow: float, tokens: float | None, channels_last: bool,
    rates: Rates, relu_after: bool,
) -> tuple[str, tuple[float, float]]:  # fmt: skip
    """(op class, (forward, backward) seconds) of one layer; ('', (0, 0)) for a container."""
    if layer.type in ("Conv2d", "ConvTranspose2d"):
        grouped = is_grouped(layer, previous[0] if len(previous) == 3 else None)
        seconds = conv_seconds(layer, batch, grow, elements(previous), grouped, channels_last, rates)
        return ("grouped convolution" if grouped else "convolution"), seconds
    if layer.type == "Linear":
        return "linear", linear_seconds(layer, batch, grow, tokens, rates)
    if layer.type in ("Attention", "WindowAttention") and layer.forward_flops:
        return "attention", attention_seconds(layer, batch, grow, rates)
    moves = moves_of(layer.type)
    if moves is None:
        return "", (0.0, 0.0)
    count = batch * grow * elements(layer.output_shape)
    if tokens and layer.output_shape:  # a Swin window's softmax: one per window
        count *= tokens / layer.output_shape[-1]
    if layer.type in POOLS:
        count += batch * grow * elements(previous)
    if relu_after:
        moves = (moves[0] + POINTWISE_MOVES[0], moves[1] + POINTWISE_MOVES[1])
    e = rates.element_bytes
    return "elementwise", (bandwidth_s(moves[0] * e * count, rates), bandwidth_s(moves[1] * e * count, rates))


# Eager PyTorch issues every layer's forward, backward and optimizer kernels from one host thread; a
# step of many small layers waits for the host, not the GPU. Per timed layer (layer_seconds), the
# lower envelope of step time / layers over this project's own 26 H200 runs
# (data/device_runs/2026-11-27-h200-vision-library.json, torch 2.11, 16 vCPUs): EfficientNet-B0 fp32,
# 21.9 ms per step over 223 layers; no run issued its layers faster. A calibration on our own host,
# standing for the host cost of eager PyTorch elsewhere (an assumption: a faster CPU issues faster);
# no published validation row is used.
EAGER_HOST_S_PER_LAYER = 98e-6


def host_seconds(layers: int, gpu: GpuSpec) -> float:
    """The host's time to issue one step on a GPU: EAGER_HOST_S_PER_LAYER per timed layer. A CPU
    device runs its kernels on the cores that issue them, counted in its own op times: 0."""
    return 0.0 if is_cpu(gpu) else layers * EAGER_HOST_S_PER_LAYER


def optimizer_seconds(parameters: int, optimizer: str, rates: Rates) -> float:
    """The optimizer step: fp32 element moves per parameter (OPTIMIZER_MOVES_PER_PARAMETER) at the
    memory bandwidth."""
    return bandwidth_s(OPTIMIZER_MOVES_PER_PARAMETER[optimizer] * FP32_BYTES * parameters, rates)


def allreduce_seconds(gpu: GpuSpec, run: VisionStepInput, parameters: int) -> float:
    """DDP's ring all-reduce of the fp32 gradients over the data-parallel GPUs (2(n-1)/n of the
    buffer, nccl-tests doc/PERFORMANCE.md) at the link's rate: NVLink inside a node, the network
    beyond, every NIC of the node in flight (communication.link_gbytes_per_s)."""
    if run.gpus == 1:
        return 0.0
    crosses = run.gpus > run.gpus_per_node
    link = link_gbytes_per_s(gpu.interconnect_gbps, crosses, run.inter_node_gbps, NVLINK_EFFICIENCY,
                             min(run.gpus, run.gpus_per_node))  # fmt: skip
    return allreduce_bytes(GRADIENT_BYTES * parameters, run.gpus) / (link * 1e9)


def estimate_vision_step(run: VisionStepInput, gpu: GpuSpec) -> VisionStepTime:
    """Seconds of one data-parallel training step of a library image model on `gpu`, by op class,
    and the images per second it gives. An image size the model cannot take raises
    VisionInputError; a precision the device has no rate for, ValueError."""
    model, size = run.model, run.resolution
    check_image_size(model, size)
    rates = step_rates(gpu, run)
    walk = layer_seconds(run, rates)
    parameters = parameters_at(model, size)
    by_class = walk.by_class | {"optimizer": optimizer_seconds(parameters, run.optimizer, rates)}
    compute_s = max(sum(by_class.values()), host_seconds(walk.layers, gpu))
    comm_s = allreduce_seconds(gpu, run, parameters)
    exposed_s = comm_s - min(run.overlap_fraction * comm_s, walk.backward_s)
    step_s = compute_s + exposed_s
    forward_flops = forward_flops_at(model, size)
    per_gpu = run.micro_batch / step_s
    return VisionStepTime(
        gpu=gpu.name,
        compute_format=rate_and_format(gpu, run.precision, run.conv_tf32)[1],
        forward_flops_per_image=forward_flops,
        compute_by_class_s=by_class,
        compute_s=compute_s,
        host_s=host_seconds(walk.layers, gpu),
        comm_s=comm_s,
        comm_exposed_s=exposed_s,
        step_s=step_s,
        samples_per_s_per_gpu=per_gpu,
        samples_per_s=per_gpu * run.gpus,
        mfu=3 * forward_flops * per_gpu / (rates.conv_tflops * 1e12),
        assumptions=step_assumptions(run, rates, gpu),
    )


def forward_flops_at(model: VisionModel, image_size: int) -> float:
    """Forward FLOPs per image at `image_size`: the traced figure grown by the traced FLOPs per size
    unit and per unit squared (data/vision_library.json)."""
    unit, reference = model.size_unit(image_size), model.size_unit(model.reference_resolution)
    return (
        model.forward_flops_per_image
        + model.forward_flops_per_unit * (unit - reference)
        + model.forward_flops_per_unit_squared * (unit * unit - reference * reference)
    )


def cpu_rates_line(rates: Rates) -> str:
    """How a CPU device is timed, in words (step_rates, cpu_gemm_fraction)."""
    return (
        f"CPU: convolutions as GEMMs at {rates.fraction:.2f} of the socket's peak (AMX BF16: oneDNN's all-core "
        "benchdnn figure; AVX-512: the default fraction x sustained clocks), no tensor-core shape curve; norms, "
        "activations and pooling at STREAM Triad's share of the DDR5 peak "
        f"({rates.bandwidth_bytes_per_s / 1e9:,.0f} GB/s)."
    )


def step_assumptions(run: VisionStepInput, rates: Rates, gpu: GpuSpec) -> list[str]:
    on_cpu = is_cpu(gpu)
    gpu_rates_line = (
        "Each convolution an implicit GEMM on the measured shape curve (data/matmul_efficiency.csv) at the "
        f"achievable fraction x sustained clocks ({rates.fraction:.2f} of peak at best); grouped and depthwise "
        "convolutions, norms, activations and pooling bandwidth-bound, at "
        f"{rates.bandwidth_bytes_per_s / 1e9:,.0f} GB/s (the share of the datasheet measured on this project's H200)."
    )
    lines = [
        cpu_rates_line(rates) if on_cpu else gpu_rates_line,
        "Residual adds and squeeze-excitation scaling (not traced modules) counted from the blocks the trace lists.",
    ]
    if not on_cpu:
        lines.append(
            "Eager PyTorch's host time to issue the kernels is a floor on the step: 98 µs per layer, the fastest "
            "of this project's H200 runs (a faster host CPU issues faster)."
        )
    if not on_cpu and not run.cudnn_depthwise_5x5 and run.precision != "fp32" and not run.channels_last:
        lines.append("Half NCHW 5 x 5 depthwise convolutions in PyTorch's own kernels (a build before cuDNN ran them).")
    if rates.conv_tensor_cores and not run.channels_last:
        lines.append("NCHW on tensor cores: each convolution transposes its input and output (use --channels-last).")
    if run.gpus > 1:
        devices = "sockets" if on_cpu else "GPUs"
        lines.append(
            f"Data parallel over {run.gpus} {devices}: one fp32 gradient all-reduce per step under the backward."
        )
    return lines


# ImageNet-1k (ILSVRC 2012) training images: 1,281,167 (Russakovsky et al. 2015, IJCV 115, Table 2;
# torchvision.datasets.ImageNet reads the same split).
IMAGENET_1K_TRAIN_IMAGES = 1_281_167


class VisionRunTime(BaseModel):
    """Images per second and hours of a vision training run on one GPU type, the loader included."""

    model: str
    gpu: str
    gpus: int
    image_size: int
    precision: str
    micro_batch: int
    step: VisionStepTime
    gpu_samples_per_s_per_gpu: float = Field(description="what the GPU alone would train")
    samples_per_s_per_gpu: float = Field(description="images/s per GPU, the loader's ceiling applied")
    input_bound: bool
    input_ceiling: InputCeiling
    dataset_samples: int
    epochs: float
    hours_per_epoch: float
    hours_total: float
    warnings: list[str]


def estimate_vision_run(
    run: VisionStepInput,
    gpu: GpuSpec,
    dataset_samples: int = IMAGENET_1K_TRAIN_IMAGES,
    epochs: float = 1.0,
    host_cores_per_gpu: float = DEFAULT_HOST_CORES_PER_GPU,
    loader: DataLoader = "cpu",
) -> VisionRunTime:
    """The step on `gpu`, capped by the data loader's ceiling (calculators.timing.data_loading), and
    the hours of one epoch of `dataset_samples` images and of `epochs` of them."""
    step = estimate_vision_step(run, gpu)
    ceiling = input_ceiling(step.samples_per_s_per_gpu, host_cores_per_gpu, loader)
    per_gpu = min(step.samples_per_s_per_gpu, ceiling.ceiling_images_per_s_per_gpu or math.inf)
    hours_per_epoch = dataset_samples / (per_gpu * run.gpus) / 3600
    return VisionRunTime(
        model=run.model.key,
        gpu=gpu.name,
        gpus=run.gpus,
        image_size=run.resolution,
        precision=run.precision,
        micro_batch=run.micro_batch,
        step=step,
        gpu_samples_per_s_per_gpu=step.samples_per_s_per_gpu,
        samples_per_s_per_gpu=per_gpu,
        input_bound=ceiling.input_bound,
        input_ceiling=ceiling,
        dataset_samples=dataset_samples,
        epochs=epochs,
        hours_per_epoch=hours_per_epoch,
        hours_total=hours_per_epoch * epochs,
        warnings=[ceiling.warning] if ceiling.warning else [],
    )
