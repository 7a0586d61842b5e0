"""Hours and USD as the planner prints them (CLI, Plan page, the problems' sentences).

One function, `figure_text`, writes every deadline, budget and plan figure: a limit the user gave
(`digits=None`) exactly as given (a 0.01 h deadline is "0.01 h", a $0.01 budget "$0.01", never
"0.0 h" or "$0"), and a computed figure to a few significant figures (hours 3, dollars 2) without
rounding its whole part away (46.4 h, 0.0123 h, $93, $0.48, $16,705,624), with thousands grouped.
"""

from __future__ import annotations

import math
from decimal import Decimal


def figure_text(value: float, digits: int | None = 3) -> str:
    """`value` with thousands grouped: exactly (the shortest text that reads back to it) when `digits`
    is None, else to `digits` significant figures, whole units always kept; no trailing zeros."""
    if not math.isfinite(value):
        return str(value)
    if digits is None:
        exact = Decimal(repr(float(value)))
    else:
        magnitude = math.floor(math.log10(abs(value))) if value else 0
        exact = Decimal(f"{value:.{max(0, digits - 1 - magnitude)}f}")
    text = f"{exact:,f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def hours_text(hours: float, digits: int | None = 3) -> str:
    """'46.4 h', '0.01 h', '48,434,733 h'."""
    return f"{figure_text(hours, digits)} h"


def usd_text(usd: float, digits: int | None = 2) -> str:
    """'$93', '$0.48', '$16,705,624': computed dollars to two significant figures, whole dollars kept."""
    return f"${figure_text(usd, digits)}"


def hours_range_text(hours: tuple[float, float] | list[float] | None) -> str:
    """'67.8-82.7 h' (each end as hours_text writes it); '' without a range."""
    if hours is None:
        return ""
    return f"{figure_text(hours[0])}-{figure_text(hours[1])} h"


def usd_range_text(usd: tuple[float, float] | list[float] | None) -> str:
    """'$1,200-1,500' (each end to three significant figures, whole dollars kept); '' without a range."""
    if usd is None:
        return ""
    return f"${figure_text(usd[0])}-{figure_text(usd[1])}"
