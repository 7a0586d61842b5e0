"""Fused attention's throughput per configuration, from the kernels' published benchmarks.

data/attention_kernels.csv holds the TFLOPS that FlashAttention's authors measured for each kernel
(FlashAttention-1, FlashAttention-2, FlashAttention-3, cuDNN) on H100 SXM5 and A100 SXM4, forward,
backward or forward + backward, with and without the causal mask, at head dims 64, 128 and 256 and
sequence lengths 512 to 16k (Dao 2023, arXiv 2307.08691; Shah et al. 2024, arXiv 2407.08608; each
row names its figure). TFLOPS there count FlashAttention's FLOPs: 4 x b x s^2 x heads x head_dim
forward, half of it with the causal mask, backward 2.5x (flash-attention
benchmarks/benchmark_flash_attention.py, flops()), the same FLOPs the time model counts.

The FlashAttention-3 paper's backward figure (Fig. 6) is read as without the causal mask: its
FlashAttention-2 bars agree with the FlashAttention-2 paper's unmasked H100 figures (214 TFLOPS at 512
tokens, head dim 128, against 2.5 / (3.5 / 248 - 1 / 309) = 230 derived from them; the masked ones
give 154).

A configuration between the measured ones is interpolated in log2 of the sequence length and of the
head dim and clamped to the measured range. A GPU outside the two measured families takes the
nearest one's figures scaled by its own 16-bit peak (attention_kernel_rates).
"""

from __future__ import annotations

import csv
import functools
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from calculators import DATA_DIR
from calculators.hardware.catalogue import GpuSpec, find_gpu
from calculators.hardware.csv_rows import check_public_source
from calculators.timing.interpolate import log2_bracket

ATTENTION_KERNELS_PATH = DATA_DIR / "attention_kernels.csv"
Direction = Literal["forward", "backward", "forward+backward"]
# The GPU each family's figures were measured on (the figures' titles: "H100 80GB SXM5",
# "A100 80GB SXM4"): its catalogue peak is what other GPUs' peaks are scaled against.
MEASURED_GPU: dict[str, str] = {"H100": "H100-SXM5-80GB", "A100": "A100-SXM4-80GB"}
# FlashAttention-3 runs on Hopper only (github.com/Dao-AILab/flash-attention README, "FlashAttention-3
# ... for Hopper GPUs (e.g. H100)"); elsewhere the step runs FlashAttention-2.
FLASH3_FAMILIES = ("H100",)
# cuDNN's fused attention is PyTorch SDPA's cuDNN backend on Hopper and newer
# (pytorch.org/blog/pytorch2-5/, "CuDNN backend for SDPA ... H100s or newer GPUs"); elsewhere
# FlashAttention-2.
CUDNN_FAMILIES = ("H100", "B200")
# The backward is 2.5x the forward's FLOPs (Dao 2023, Sec. 4.1; benchmark_flash_attention.py).
BACKWARD_FLOPS_RATIO = 2.5


class AttentionKernelPoint(BaseModel):
    """One published figure of data/attention_kernels.csv."""

    gpu_family: Literal["H100", "A100"]
    kernel: Literal["flash1", "flash2", "flash3", "cudnn"]
    direction: Direction
    causal: bool
    head_dim: int = Field(gt=0)
    seq_len: int = Field(gt=0)
    measured_tflops: float = Field(gt=0)
    figure: str = Field(min_length=1)  # which figure of the source, in words
    source: str = Field(min_length=1)
    as_of: str = Field(min_length=1)

    @field_validator("source")
    @classmethod
    def _public(cls, source: str) -> str:
        return check_public_source(source)


# (family, kernel, direction, causal) -> {head_dim: ((seq_len, ...), (tflops, ...))}
Tables = dict[tuple[str, str, str, bool], dict[int, tuple[tuple[float, ...], tuple[float, ...]]]]


@functools.cache
def attention_tables() -> Tables:
    """Every row of data/attention_kernels.csv, validated and grouped into one curve over the
    sequence length per (family, kernel, direction, causal mask, head dim)."""
    with ATTENTION_KERNELS_PATH.open(newline="") as handle:
        points = [AttentionKernelPoint.model_validate(row) for row in csv.DictReader(handle)]
    grouped: dict[tuple[str, str, str, bool], dict[int, dict[int, float]]] = {}
    for p in points:
        curve = grouped.setdefault((p.gpu_family, p.kernel, p.direction, p.causal), {}).setdefault(p.head_dim, {})
        if p.seq_len in curve:
            raise ValueError(f"{ATTENTION_KERNELS_PATH.name}: two figures for {p.gpu_family} {p.kernel} {p.seq_len}")
        curve[p.seq_len] = p.measured_tflops
    return {
        key: {dim: (tuple(map(float, sorted(c))), tuple(c[s] for s in sorted(c))) for dim, c in by_dim.items()}
        for key, by_dim in grouped.items()
    }


def _table_tflops(key: tuple[str, str, str, bool], head_dim: float, seq_len: float) -> float | None:
    """The table's TFLOPS at (head_dim, seq_len): interpolated in log2 of each, clamped to the
    measured range; None where the table has no figures."""
    by_dim = attention_tables().get(key)
    if not by_dim:
        return None
    dims = tuple(float(d) for d in sorted(by_dim))
    low, high, weight = log2_bracket(dims, head_dim)

    def along_seq(dim: float) -> float:
        seqs, values = by_dim[int(dim)]
        s_low, s_high, s_weight = log2_bracket(seqs, seq_len)
        return (1 - s_weight) * values[seqs.index(s_low)] + s_weight * values[seqs.index(s_high)]

    return (1 - weight) * along_seq(low) + weight * along_seq(high)


@functools.lru_cache(maxsize=4096)
def measured_tflops(family: str, kernel: str, causal: bool, head_dim: float, seq_len: float) -> tuple[float, float]:
    """(forward, backward) TFLOPS of `kernel` on `family`'s measured GPU, from its figures:
    - forward: the forward figures, else the forward + backward ones (both passes at that rate);
    - backward: from forward + backward and forward, the backward's share of the combined time,
      2.5 / (3.5 / combined - 1 / forward) (the combined figures cover head dims 64 and 128, the
      backward ones only 128); else the combined rate; else the backward figures (head dim 128's
      for every head dim, an assumption); else (FlashAttention-3 and cuDNN with the causal mask,
      whose backward was published without it) the backward without the mask x the forward's
      with / without the mask, an assumption: the mask costs the backward what it costs the
      forward."""
    forward = _table_tflops((family, kernel, "forward", causal), head_dim, seq_len)
    combined = _table_tflops((family, kernel, "forward+backward", causal), head_dim, seq_len)
    if forward is None:
        forward = combined
    if forward is None:
        raise ValueError(f"{ATTENTION_KERNELS_PATH.name} has no {family} {kernel} figures")
    backward = None
    if combined is not None:
        backward_share = (1 + BACKWARD_FLOPS_RATIO) / combined - 1 / forward
        backward = BACKWARD_FLOPS_RATIO / backward_share if backward_share > 0 else combined
    if backward is None:
        backward = _table_tflops((family, kernel, "backward", causal), head_dim, seq_len)
    if backward is None:
        unmasked_backward = _table_tflops((family, kernel, "backward", not causal), head_dim, seq_len)
        unmasked_forward = _table_tflops((family, kernel, "forward", not causal), head_dim, seq_len)
        if unmasked_backward is None or unmasked_forward is None:
            raise ValueError(f"{ATTENTION_KERNELS_PATH.name} has no {family} {kernel} backward figures")
        backward = unmasked_backward * forward / unmasked_forward
    return forward, backward


class AttentionKernelRates(BaseModel):
    """Fused attention on one GPU: the figures of `kernel` on the measured `family`, times
    `scale` (this GPU's 16-bit peak over the measured GPU's)."""

    model_config = ConfigDict(frozen=True)  # a GPU's rates are cached (operations.attention_rates) and hashed

    family: str
    kernel: str
    scale: float = Field(gt=0)

    def tflops(self, causal: bool, head_dim: float, seq_len: float) -> tuple[float, float]:
        """(forward, backward) TFLOPS at this configuration (measured_tflops x scale)."""
        forward, backward = measured_tflops(self.family, self.kernel, causal, float(head_dim), float(seq_len))
        return forward * self.scale, backward * self.scale


def measured_family(gpu: GpuSpec, family: str | None) -> str:
    """The family whose figures apply: H100's for Hopper and newer (the GPU's own family 'H100' or
    'B200', or any GPU with FP8 tensor cores: MI300X, Gaudi, Ada), A100's for the GPUs before
    them, whose FlashAttention-2 lacks Hopper's asynchronous kernels. An assumption for every GPU
    but those two, stated in the estimate."""
    if family in ("H100", "B200") or (family != "A100" and gpu.fp8_tflops):
        return "H100"
    return "A100"


def sixteen_bit_peak_tflops(gpu: GpuSpec) -> float:
    """The dense 16-bit tensor peak attention runs at (bf16, else fp16, else fp32)."""
    peak = gpu.bf16_tflops or gpu.fp16_tflops or gpu.fp32_tflops
    if peak is None:
        raise ValueError(f"{gpu.name} has no 16-bit rate in the GPU catalogue")
    return peak


def attention_kernel_rates(gpu: GpuSpec, family: str | None, kernel: str) -> AttentionKernelRates:
    """The figures that time `kernel` on `gpu` (whose die family is `family`, operations.gpu_family):
    FlashAttention-3 only on Hopper, cuDNN only on Hopper and Blackwell (FlashAttention-2 elsewhere),
    measured on the nearest measured family (measured_family), scaled by this GPU's 16-bit peak over
    the measured GPU's."""
    if kernel == "flash3" and family not in FLASH3_FAMILIES:
        kernel = "flash2"
    if kernel == "cudnn" and family not in CUDNN_FAMILIES:
        kernel = "flash2"
    measured = measured_family(gpu, family)
    scale = sixteen_bit_peak_tflops(gpu) / measured_gpu_peak_tflops(measured)
    return AttentionKernelRates(family=measured, kernel=kernel, scale=scale)


@functools.cache
def measured_gpu_peak_tflops(family: str) -> float:
    """The catalogue's 16-bit peak of the GPU `family`'s figures were measured on (MEASURED_GPU)."""
    return sixteen_bit_peak_tflops(find_gpu(MEASURED_GPU[family]))
