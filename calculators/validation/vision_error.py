"""How far the image-model time model ran from published training runs, for the model a page shows.

The Time and cost page prices hours from the estimated images/s (calculators.timing.vision_step);
each published row of calculators.validation.vision_throughput (NVIDIA DeepLearningExamples'
tables and timm's RTX 3090 benchmark, ../shared/validation/vision_training.csv) says how far that
estimate ran from a measured run. The band shown next to the hours is the spread of estimate /
measured over the counted rows of the same library model, or over every counted row where the model
has no published run. Nothing is fitted: the band only reports.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel

from calculators.validation.vision_throughput import VisionThroughputRow


class VisionErrorBand(BaseModel):
    """Estimate / measured images/s over published runs: below 1 the estimate was slower than the run,
    above 1 faster (the run took longer than estimated)."""

    model_key: str | None  # the library model the rows ran; None: every counted row (no run of the model)
    rows: int
    low_ratio: float
    median_ratio: float
    high_ratio: float


def vision_error_band(key: str, table: Sequence[VisionThroughputRow]) -> VisionErrorBand | None:
    """The band of `key`'s counted rows, else of every counted row; None when no row is counted."""
    counted = [row for row in table if row.counted and row.ratio is not None]
    own = [row for row in counted if row.library_key == key]
    rows = own or counted
    if not rows:
        return None
    ratios = [row.ratio for row in rows]
    return VisionErrorBand(
        model_key=key if own else None,
        rows=len(rows),
        low_ratio=min(ratios),
        median_ratio=statistics.median(ratios),
        high_ratio=max(ratios),
    )


def error_band_words(band: VisionErrorBand) -> str:
    """The band in words for a caption: what the published runs measured against the estimate, and
    what that means for the hours (a run the estimate made `ratio` x faster took `ratio` x the hours)."""
    if band.model_key:
        which = f"Against {band.rows} published runs of {band.model_key}"
    else:
        which = f"No published run of this model; against all {band.rows} published image-model runs"
    return (
        f"How far off: {which} (NVIDIA DeepLearningExamples, timm; see the Validation page), the estimate ran "
        f"{band.low_ratio:.2f}x to {band.high_ratio:.2f}x the measured images/s (median {band.median_ratio:.2f}x): "
        f"those runs took {band.low_ratio:.2f}x to {band.high_ratio:.2f}x the estimated hours, and the hours and "
        "costs below may be off as much."
    )
