"""Whether the image-model throughput validation meets its target, group by group.

The target is issue 32's "Done when": the visible NVIDIA DeepLearningExamples rows (ResNet-50,
ResNeXt-101, SE-ResNeXt-101, EfficientNet) each within +-20% of their measured images/s, and their
median within 10%. timm's RTX 3090 benchmark rows are shown beside them but are not part of it.
Each group is one published model of calculators.validation.vision_throughput.summary_by_model.
"""

from __future__ import annotations

import statistics

from pydantic import BaseModel

from calculators.validation.vision_throughput import VisionThroughputRow, summary_by_model

ROW_BAND = 0.20  # each row's estimate / measured within 1 +- this
MEDIAN_BAND = 0.10  # the median estimate / measured within 1 +- this
TARGET_SOURCE = "github.com/NVIDIA/DeepLearningExamples"  # the rows the target is set on


class GroupTarget(BaseModel):
    """One model's counted rows against the target."""

    model: str
    rows: int
    within_band: int
    median_ratio: float
    met: bool


class TargetCheck(BaseModel):
    """Every group of the target, and the median over all of their rows."""

    groups: list[GroupTarget]
    median_ratio: float | None
    median_met: bool

    @property
    def missed(self) -> list[GroupTarget]:
        return [group for group in self.groups if not group.met]

    @property
    def met(self) -> bool:
        return self.median_met and not self.missed


def in_target(row: VisionThroughputRow) -> bool:
    """A counted DeepLearningExamples row."""
    return row.counted and TARGET_SOURCE in row.source


def check_target(table: list[VisionThroughputRow]) -> TargetCheck:
    """Each target group meets it when every row is within +-20% and its median within 10%."""
    rows = [row for row in table if in_target(row)]
    groups = [
        GroupTarget(
            model=summary.model,
            rows=summary.rows,
            within_band=summary.within_20_pct,
            median_ratio=summary.median_ratio,
            met=summary.within_20_pct == summary.rows and abs(summary.median_ratio - 1) <= MEDIAN_BAND,
        )
        for summary in summary_by_model(rows)
    ]
    median = statistics.median(row.ratio for row in rows) if rows else None
    return TargetCheck(
        groups=groups, median_ratio=median, median_met=median is not None and abs(median - 1) <= MEDIAN_BAND
    )
