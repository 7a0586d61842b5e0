"""Interpolation on measured curves, shared by the GEMM shape curve and the attention figures."""

from __future__ import annotations

import bisect
import math


def log2_bracket(values: tuple[float, ...], x: float) -> tuple[float, float, float]:
    """(lower, upper, weight of upper) for x among the sorted measured `values` on a log2 scale,
    clamped to the measured range."""
    x = min(max(x, values[0]), values[-1])
    upper_index = min(bisect.bisect_left(values, x), len(values) - 1)
    upper = values[upper_index]
    lower = values[max(upper_index - 1, 0)]
    if upper == lower:
        return lower, upper, 0.0
    return lower, upper, (math.log2(x) - math.log2(lower)) / (math.log2(upper) - math.log2(lower))
