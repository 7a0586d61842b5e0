"""Axes a person reads at a glance: log axes with ticks at 1, 2 and 5 of each decade written
out in the axis's unit ($10, $100, $1k; 1 h, 10 h), and a linear axis from zero where the
values span too little for a log scale to mean anything."""

from __future__ import annotations

import math
from collections.abc import Iterable

# Below this ratio of largest to smallest value a log axis shows no whole decade and its
# ticks read as noise ("5 6 7 8 9 100 2 3"): such ranges are drawn on a linear axis.
LOG_AXIS_MIN_SPAN = 10.0
STEPS_PER_DECADE = (1, 2, 5)


def short_number(value: float) -> str:
    """1,000 -> 1k, 2,500,000 -> 2.5M, 0.5 -> 0.5."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


# Each unit's (prefix, suffix) around a tick's number.
UNIT_AFFIXES = {"usd": ("$", ""), "hours": ("", " h"), "ms": ("", " ms"), "plain": ("", "")}


def tick_label(value: float, unit: str = "plain") -> str:
    """$1k, but 1,000 h: hours read better written out below 10,000."""
    prefix, suffix = UNIT_AFFIXES[unit]
    number = f"{value:,.0f}" if unit == "hours" and 1000 <= value < 10_000 else short_number(value)
    return f"{prefix}{number}{suffix}"


def log_tick_values(low: float, high: float) -> list[float]:
    """1-2-5 ticks covering [low, high] (only the 1s when that spans more than 3 decades), with
    the nearest tick beyond each end so no point sits past the last label."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = STEPS_PER_DECADE if last - first <= 3 else (1,)
    values = [step * 10.0**decade for decade in range(first, last + 1) for step in steps]
    below = [v for v in values if v < low / 1.0001][-1:]
    inside = [v for v in values if low / 1.0001 <= v <= high * 1.0001]
    above = [v for v in values if v > high * 1.0001][:1]
    return below + inside + above


def linear_tick_values(top: float, most_ticks: int = 6) -> list[float]:
    """Ticks from 0 at a 1-2-5 step (0, 0.2, 0.4 ... or 0, 50, 100 ...), the last at or above `top`:
    written out by tick_label, so $0.8 never reads as Plotly's SI "$800m"."""
    rough = top / most_ticks
    decade = 10.0 ** math.floor(math.log10(rough))
    step = next(s * decade for s in (1, 2, 5, 10) if s * decade >= rough)
    count = math.ceil(top / step - 1e-9)
    return [round(i * step, 12) for i in range(count + 1)]


def axis(values: Iterable[float], title: str, unit: str = "plain") -> dict:
    """A Plotly axis dict for these values: log with labelled 1-2-5 ticks when they span at least
    a decade, else linear from zero, so a flat series is drawn flat."""
    positive = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not positive:
        return dict(title=title)
    low, high = min(positive), max(positive)
    if high / low < LOG_AXIS_MIN_SPAN:
        ticks = linear_tick_values(high * 1.1)
        return dict(
            title=title,
            type="linear",
            range=[0, max(high * 1.1, ticks[-1])],
            tickvals=ticks,
            ticktext=[tick_label(v, unit) for v in ticks],
        )
    ticks = log_tick_values(low, high)
    return dict(
        title=title,
        type="log",
        tickvals=ticks,
        ticktext=[tick_label(v, unit) for v in ticks],
        range=[math.log10(ticks[0]), math.log10(ticks[-1])],
    )
