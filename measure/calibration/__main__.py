"""Run a calibration from the command line and print or store the result.

python -m measure.calibration --device auto --budget 110 --usd-per-hour 2.5 --save calibrations.sqlite3
python -m measure.calibration --device cpu --budget 10 --json
"""

from __future__ import annotations

import argparse
import sys

from measure.calibration.result import CalibrationResult
from measure.calibration.runner import DEFAULT_BUDGET_S, run_calibration
from measure.calibration.store import CalibrationStore, export_json


def _format_record_lines(result: CalibrationResult) -> list[str]:
    lines = []
    for record in result.records:
        if record.ok:
            percent = f" ({record.percent_of_datasheet:.0f}% of datasheet)" if record.percent_of_datasheet else ""
            lines.append(f"{record.name:18} {record.value:12.4g} {record.unit}{percent}")
        else:
            lines.append(f"{record.name:18} {'error: ' + record.error if record.error else record.skipped_reason}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m measure.calibration", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="total seconds for all benchmarks")
    parser.add_argument("--usd-per-hour", type=float, help="price of this host, for the cost per epoch")
    parser.add_argument("--save", metavar="DB", help="append the result to this SQLite store")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = run_calibration(args.device, args.budget, lambda label, _: print(f"... {label}", file=sys.stderr),
                             args.usd_per_hour)  # fmt: skip
    if args.save:
        CalibrationStore(args.save).save(result)
    print(export_json(result) if args.json else "\n".join(_format_record_lines(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
