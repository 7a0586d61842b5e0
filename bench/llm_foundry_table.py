"""The time model against every run of llm-foundry's MPT throughput tables.

data/llm_foundry_throughput_table.csv holds the 216 runs of mosaicml/llm-foundry
scripts/train/benchmarking/README.md @8c8dd48 (MPT-125M to 70B, 8 to 512 GPUs, sequence 512 to
65536, H100 bf16 and fp8, A100 40 and 80 GB; runs with activation CPU offload left out), in the
columns of data/measured_throughput.csv, so each runs through the Validation page's mapping
(calculators.validation.throughput.row_inputs: FSDP FULL_SHARD as ZeRO-3, amp_bf16 as autocast,
MPT's Triton FlashAttention, 1600 Gb/s per A100 node, 400 Gb/s per GPU assumed for H100).
Seven of the runs are on the Validation page; the rest are a check on runs the time model was
not developed against.

    python bench/llm_foundry_table.py [--all]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calculators.validation.throughput import load_rows, throughput_table  # noqa: E402

TABLE = ROOT / "data" / "llm_foundry_throughput_table.csv"


def table_name(row: dict) -> str:
    """The README table a run comes from ('H100 80GB BF16', ...)."""
    return row["source_note"].split(" table ")[-1].strip("'")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="print every run, not only those outside +-20%%")
    args = parser.parse_args()
    rows = {row["id"]: row for row in load_rows(TABLE)}
    table = throughput_table(TABLE)
    ratios_by_table: dict[str, list[float]] = defaultdict(list)
    for estimate in table:
        ratios_by_table[table_name(rows[estimate.id])].append(estimate.ratio)

    print("estimate / measured tokens per second per GPU\n")
    print(f"{'table':58} {'runs':>5} {'median':>7} {'min':>6} {'max':>6} {'within 20%':>11}")
    for name, ratios in [*ratios_by_table.items(), ("all", [estimate.ratio for estimate in table])]:
        within = sum(abs(ratio - 1) <= 0.2 for ratio in ratios)
        print(
            f"{name:58} {len(ratios):5d} {statistics.median(ratios):7.3f} {min(ratios):6.3f} {max(ratios):6.3f} "
            f"{within:5d} ({within / len(ratios):4.0%})"
        )
    print()
    for estimate in sorted(table, key=lambda estimate: estimate.ratio):
        if args.all or abs(estimate.ratio - 1) > 0.2:
            row = rows[estimate.id]
            print(
                f"{estimate.id:44} measured {estimate.measured_tokens_s_gpu:9.0f}  estimate "
                f"{estimate.estimate_tokens_s_gpu:9.0f}  ratio {estimate.ratio:5.3f}  "
                f"(MFU measured {row['measured_mfu']}, estimated {estimate.estimate_mfu:.1%})"
            )


if __name__ == "__main__":
    main()
