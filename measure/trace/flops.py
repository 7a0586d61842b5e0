"""FLOP counting with the formulas of `torch.utils.flop_counter`, taught the CPU fused attention.

The trace counts FLOPs inside its own dispatch mode (`FlopTally`) with torch's `flop_registry`
formulas, the ones `FlopCounterMode` uses, rather than running `FlopCounterMode` itself:
its module tracker installs `register_multi_grad_hook` closures that form reference cycles
with autograd nodes, which keeps recomputed (checkpointed) graphs alive and so changes the
memory being measured. `flop_counter()` gives a FlopCounterMode with the same extra formulas,
for cross-checking the tally (tests/test_trace.py).

FlopCounterMode knows the CUDA attention kernels (flash, memory-efficient, cuDNN) but not
`aten._scaled_dot_product_flash_attention_for_cpu` and its backward, which is what
`scaled_dot_product_attention` runs on CPU (fake) tensors. They get the formulas torch uses for
the CUDA kernels (`sdpa_flop_count`: 2 matmuls of 2*b*h*s*s*d forward;
`sdpa_backward_flop_count`: 5 in backward, the scores recomputed). Like torch's formulas,
the causal mask is not discounted.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch.utils.flop_counter import (
    FlopCounterMode,
    flop_registry,
    sdpa_backward_flop_count,
    sdpa_flop_count,
    shape_wrapper,
)

SDPA_CPU = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
SDPA_CPU_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def sdpa_cpu_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """Forward of the CPU flash attention (arguments as shapes: query, key, value, ...)."""
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def sdpa_cpu_backward_flop(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    """Backward of the CPU flash attention (grad_out, query, key, value, out, logsumexp, ...)."""
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


CUSTOM_FLOP_FORMULAS = {SDPA_CPU: sdpa_cpu_flop, SDPA_CPU_BACKWARD: sdpa_cpu_backward_flop}


def op_key(packet) -> str:
    return str(packet).removeprefix("aten.")


class FlopTally:
    """FLOPs per op, counted from each op's arguments and outputs as FlopCounterMode counts them."""

    def __init__(self) -> None:
        custom = {op: shape_wrapper(formula) for op, formula in CUSTOM_FLOP_FORMULAS.items()}
        self.registry = {**flop_registry, **custom}
        self.by_op: dict[str, int] = defaultdict(int)

    def add(self, func, args: tuple, kwargs: dict, out) -> None:
        packet = func._overloadpacket
        formula = self.registry.get(packet)
        if formula is not None:
            self.by_op[op_key(packet)] += int(formula(*args, **kwargs, out_val=out))


def flop_counter() -> FlopCounterMode:
    """A silent FlopCounterMode that also counts the CPU fused attention."""
    return FlopCounterMode(display=False, custom_mapping=CUSTOM_FLOP_FORMULAS)


def flops_by_op(counter: FlopCounterMode) -> dict[str, int]:
    """Total FLOPs per aten op (the counter's "Global" entry)."""
    counts = counter.get_flop_counts().get("Global", {})
    return {op_key(op): int(n) for op, n in counts.items()}
