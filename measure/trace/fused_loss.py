"""Liger-Kernel's fused linear cross-entropy as autograd and the allocator see it.

Emulates `LigerFusedLinearCrossEntropyFunction` (linkedin/Liger-Kernel
src/liger_kernel/ops/fused_linear_cross_entropy.py @ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c,
fused_linear_cross_entropy_forward / _backward) as Hugging Face models patched by Liger call
it (src/liger_kernel/transformers/model/loss_utils.py, LigerForCausalLMLoss: the hidden
states viewed as (b*s, h), no copy; reduction "mean", accum_dtype None). Written from that
description, not copied:

- chunk rows: inc_factor = ceil(V / H), chunk = next_power_of_2(ceil(BT / inc_factor)), so a
  chunk's logits hold about BT x H elements;
- allocated before the loop: grad_input = zeros_like(input) (b*s x h, the input's dtype),
  grad_weight = zeros_like(weight) (V x H in the weight's dtype: accum_dtype None), the fp32
  loss per token, and the mask of labels that are not ignore_index;
- per chunk: logits = input_chunk @ weight.T (chunk x V, the matmul's dtype); Liger's Triton
  cross-entropy kernel reads each row, upcasts it to fp32 in registers, writes the row's loss
  and overwrites the row with the gradient of the loss w.r.t. the logits (in place, the logits'
  dtype); then grad_input[chunk] = grad_logits @ weight (a chunk x H temporary copied in) and
  grad_weight += mm(grad_logits.T, input_chunk).float() (a V x H temporary in the matmul's
  dtype, and its fp32 copy unless it is fp32 already); a fp32 grad_weight fed half logits
  (autocast over fp32 weights) takes Liger's `addmm(..., out_dtype=float32, out=grad_weight)`
  on an Ampere or newer GPU, which writes in place with no temporary;
- saved for backward: grad_input and grad_weight (not the input nor the weight); backward
  scales them in place by the loss gradient (element_mul_kernel) and returns them.

The kernel's fp32 work is emulated with torch ops inside `tracker.in_registers()`: their
temporaries stand for registers and are not counted; only what the kernel writes in place is.
Liger counts the non-ignored labels with `.item()`; here the count stays a tensor (fake tensors
have no values), which changes no memory.
"""

from __future__ import annotations

import contextlib
import math

import torch

IGNORE_INDEX = -100


def chunk_rows(tokens: int, hidden: int, vocab: int) -> int:
    """Liger's chunk size: next_power_of_2(ceil(BT / ceil(V / H)))."""
    inc_factor = math.ceil(vocab / hidden)
    rows = math.ceil(tokens / inc_factor)
    return 1 << (rows - 1).bit_length()


def _context(tracker, name: str, *args):
    return getattr(tracker, name)(*args) if tracker is not None else contextlib.nullcontext()


def _cross_entropy_kernel(logits: torch.Tensor, labels: torch.Tensor, count: torch.Tensor, loss: torch.Tensor) -> None:
    """Liger's liger_cross_entropy_kernel, reduction "mean": per row, the loss (lse - x_y) / n
    into `loss`, and (softmax(x) - onehot(y)) / n written over the row of `logits` (zero for
    ignored rows), all computed in fp32."""
    valid = labels != IGNORE_INDEX
    scale = valid.float().unsqueeze(-1) / count
    upcast = logits.float()
    lse = torch.logsumexp(upcast, dim=-1, keepdim=True)
    target = labels.clamp(min=0).unsqueeze(-1)
    loss.copy_(((lse - upcast.gather(-1, target)) * scale).squeeze(-1))
    grad = torch.exp(upcast - lse)
    grad.scatter_add_(-1, target, -torch.ones_like(lse))
    logits.copy_(grad * scale)


class FusedLinearCrossEntropy(torch.autograd.Function):
    """loss = mean cross-entropy of (input @ weight.T) against labels, with the gradients of
    input and weight computed in forward chunk by chunk (see the module docstring).

    input: (BT, H); weight: (V, H); labels: (BT,); tracker: the `LiveStorageTracker` (or None)."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, tracker=None):
        tokens, width = hidden.shape
        vocab = weight.shape[0]
        rows = chunk_rows(tokens, width, vocab)
        grad_input = torch.zeros_like(hidden)
        with _context(tracker, "kind_as", "logits_and_loss"):
            grad_weight = torch.zeros_like(weight) if weight.requires_grad else None
            loss_per_token = torch.zeros(tokens, dtype=torch.float32, device=hidden.device)
            count = (labels != IGNORE_INDEX).sum()
            for start in range(0, tokens, rows):
                end = min(start + rows, tokens)
                part = hidden[start:end]
                logits = (part @ weight.t()).contiguous()
                with _context(tracker, "in_registers"):
                    _cross_entropy_kernel(logits, labels[start:end], count, loss_per_token[start:end])
                with _context(tracker, "kind_as", "activations"):
                    grad_input[start:end] = logits @ weight
                if grad_weight is not None:
                    _accumulate_weight_gradient(tracker, grad_weight, logits, part)
                del logits
            loss = loss_per_token.sum()
        ctx.save_for_backward(grad_input, grad_weight)
        return loss

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        grad_input, grad_weight = ctx.saved_tensors
        # element_mul_kernel: in place (Liger skips it when grad_output is exactly 1.0; fake
        # tensors have no value to compare, and the bytes are the same)
        grad_input.mul_(grad_output.to(grad_input.dtype))
        if grad_weight is not None:
            grad_weight.mul_(grad_output.to(grad_weight.dtype))
        return grad_input, grad_weight, None, None


def fused_linear_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, tracker=None
) -> torch.Tensor:
    """LigerForCausalLMLoss's call: hidden (..., H) viewed as (BT, H), labels flattened."""
    return FusedLinearCrossEntropy.apply(hidden.reshape(-1, hidden.shape[-1]), weight, labels.reshape(-1), tracker)


def _accumulate_weight_gradient(tracker, grad_weight: torch.Tensor, logits: torch.Tensor, part: torch.Tensor) -> None:
    """grad_weight += logits.T @ part as Liger does it on a CUDA GPU: in place through addmm's
    out_dtype path when grad_weight is fp32 and the logits are half (its temporaries stand for
    the kernel's registers), else through an mm in the logits' dtype and its fp32 copy."""
    if grad_weight.dtype == torch.float32 and logits.dtype in (torch.float16, torch.bfloat16):
        with _context(tracker, "in_registers"):
            grad_weight += torch.mm(logits.t().float(), part.float())
        return
    grad_weight += torch.mm(logits.t(), part).float()
