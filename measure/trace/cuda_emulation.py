"""Make a CPU trace allocate what the same step allocates on a CUDA GPU.

The trace runs on the CPU (fake CUDA tensors abort a CPU-only torch build), but the engine
models a CUDA device. Two CPU behaviours change what is saved for backward and are replaced:

1. Autocast op lists. CUDA autocast runs softmax, log_softmax, layer_norm, pow, rsqrt, exp,
   sum, ... in fp32 (`AT_FORALL_FP32` and `AT_FORALL_FP32_SET_OPT_DTYPE` in
   aten/src/ATen/autocast_mode.h); CPU autocast leaves them in bf16/fp16. `cuda_autocast_policy()`
   registers AutocastCPU kernels for those ops that cast their inputs to fp32 (or pass
   dtype=float32), exactly as the CUDA kernels do. The lower-precision list (linear, matmul,
   bmm, scaled_dot_product_attention, ...) and the weight-cast cache are the same on both.
2. Fused-attention output layout. CUDA's flash kernel allocates its output with
   `empty_like(q.transpose(1, 2))` (flash_api.cpp mha_fwd) and the memory-efficient kernel,
   which CUDA uses for fp32, as (batch, seq, heads, dim); the CPU flash kernel returns a
   (batch, heads, seq, dim)-contiguous tensor. The layout decides whether the
   `transpose(1, 2).reshape(...)` before the output projection copies.
   `cuda_sdpa_layout(func, args, out)` re-lays the CPU op's outputs as CUDA would.

Not emulated (small, stated in the result notes): LayerNorm's mean/rstd are kept in the input
dtype on the CPU (fp32 on CUDA, 4 bytes per token and norm), the memory-efficient kernel's
log-sum-exp padding to a multiple of 32 positions, and backward kernels' internal layouts
(gradients of q/k/v are given the layout of q/k/v).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch

HALF_DTYPES = (torch.float16, torch.bfloat16)

# CUDA autocast ops that run in fp32 and that the reference models (or their losses) can reach.
# Ops CPU autocast already runs in fp32 (nll_loss, cross_entropy_loss, mse_loss, ...) are left alone.
CUDA_FP32_OPS = (
    "exp",
    "log",
    "rsqrt",
    "reciprocal",
    "pow.Tensor_Scalar",
    "pow.Tensor_Tensor",
    "softplus",
    "layer_norm",
    "native_layer_norm",
    "group_norm",
    "logsumexp",
)
# CUDA autocast ops that get dtype=float32 when none is given.
CUDA_FP32_SET_DTYPE_OPS = ("softmax.int", "log_softmax.int", "sum", "sum.dim_IntList", "cumsum", "prod")

AUTOCAST_CPU = torch._C.DispatchKey.AutocastCPU


def _op(qualified: str) -> torch._ops.OpOverload:
    name, _, overload = qualified.partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def _to_fp32(value):
    if isinstance(value, torch.Tensor) and value.dtype in HALF_DTYPES:
        return value.float()
    return value


def _below_autocast():
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(AUTOCAST_CPU))


def _fp32_kernel(op: torch._ops.OpOverload):
    def kernel(*args, **kwargs):
        args = [_to_fp32(a) for a in args]
        kwargs = {k: _to_fp32(v) for k, v in kwargs.items()}
        with _below_autocast():
            return op(*args, **kwargs)

    return kernel


def _set_dtype_kernel(op: torch._ops.OpOverload):
    position = [argument.name for argument in op._schema.arguments].index("dtype")

    def kernel(*args, **kwargs):
        args = list(args)
        given = args[position] if position < len(args) else kwargs.get("dtype")
        first = args[0]
        if given is None and first.is_floating_point() and first.dtype != torch.float64:
            if position < len(args):
                args[position] = torch.float32
            else:
                kwargs["dtype"] = torch.float32
        with _below_autocast():
            return op(*args, **kwargs)

    return kernel


@contextlib.contextmanager
def cuda_autocast_policy() -> Iterator[None]:
    """While active, CPU autocast casts to fp32 the ops CUDA autocast casts to fp32."""
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in CUDA_FP32_OPS:
            library.impl(name, _fp32_kernel(_op(name)), "AutocastCPU")
        for name in CUDA_FP32_SET_DTYPE_OPS:
            library.impl(name, _set_dtype_kernel(_op(name)), "AutocastCPU")
    try:
        yield
    finally:
        library._destroy()


# --- Fused attention layouts -----------------------------------------------------------

SDPA_CPU = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
SDPA_CPU_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default


def _like_transposed(reference: torch.Tensor, last_dim: int | None = None) -> torch.Tensor:
    """An empty (batch, heads, seq, dim) tensor laid out as `empty_like(reference.transpose(1, 2))`
    transposed back: the reference's strides when it is dense, else (batch, seq, heads, dim)."""
    batch, heads, seq, dim = reference.shape
    if last_dim is not None and last_dim != dim:
        return torch.empty((batch, seq, heads, last_dim), dtype=reference.dtype).transpose(1, 2)
    return torch.empty_like(reference.transpose(1, 2)).transpose(1, 2)


def _relayout(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if target.stride() == source.stride():
        return source
    return target.copy_(source)


def cuda_sdpa_layout(func, args: tuple, out):
    """Return the CPU flash-attention op's outputs laid out as the CUDA kernel lays them out.

    Forward: flash (half precision) keeps the layout of q; memory-efficient (fp32 on CUDA)
    always returns (batch, seq, heads, dim). Backward: dq, dk, dv take the layout of q, k, v.
    Runs inside a dispatch mode, so the extra copy is neither tracked nor counted.
    """
    if func is SDPA_CPU:
        query, _, value = args[:3]
        output, logsumexp = out
        if query.dtype in HALF_DTYPES:
            target = _like_transposed(query, value.shape[-1])
        else:
            batch, heads, seq, _ = query.shape
            target = torch.empty((batch, seq, heads, value.shape[-1]), dtype=query.dtype).transpose(1, 2)
        return _relayout(output, target), logsumexp
    if func is SDPA_CPU_BACKWARD:
        query, key, value = args[1:4]
        return tuple(_relayout(grad, _like_transposed(ref)) for grad, ref in zip(out, (query, key, value), strict=True))
    return out
