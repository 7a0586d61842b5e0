"""Prints the serving step model against published serving results that are not in shared/validation.

The rows are data/serving_published_extra.csv (TensorRT-LLM v0.9.0's performance table and
Oracle's vLLM blog on 8 x MI300X); each is compared in its own reading (output tokens/s per GPU,
of the whole group, or time to first token). Nothing is fitted to these rows. Run from the
repository root:

    python bench/serving_published.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from calculators.validation.serving import summary_by_source  # noqa: E402
from calculators.validation.serving_published import published_serving_table  # noqa: E402


def print_rows() -> None:
    table = published_serving_table()
    print(f"{'row':<5}{'source':<24}{'system':<20}{'lengths':<19}{'load':<11}{'reading':<31}"
          f"{'measured':>10}{'estimate':>10}{'ratio':>7}")  # fmt: skip
    for row in table:
        load = row.load if row.load.startswith("batch") else "offline"
        head = f"{row.id:<5}{row.source_kind:<24}{row.system:<20}{row.lengths:<19}{load:<11}{row.reading:<31}"
        if row.ratio is None:
            print(f"{head}{row.measured:>10,.1f}  not estimated: {row.why_not}")
            continue
        print(f"{head}{row.measured:>10,.1f}{row.estimate:>10,.1f}{row.ratio:>7.2f}")
    print(f"\n{'source':<24}{'rows':>6}{'estimated':>11}{'median ratio':>14}{'within 30%':>12}")
    for summary in summary_by_source(table):
        median = "-" if summary.median_ratio is None else f"{summary.median_ratio:.3f}"
        share = "-" if summary.within_30_percent is None else f"{summary.within_30_percent:.0%}"
        print(f"{summary.source_kind:<24}{summary.rows:>6}{summary.estimated:>11}{median:>14}{share:>12}")


if __name__ == "__main__":
    print_rows()
