"""Run a calibration from the command line and print or store the result.

python -m measure.calibration --device auto --budget-s 110 --usd-per-hour 2.5 --save calibrations.sqlite3
python -m measure.calibration --device cpu --budget-s 10 --json

Everything that can be checked before the benchmarks is checked first (the price, the
budget, the store and this host's lock), so a mistake is reported in a second, not after
the whole budget. A bad argument prints one line starting with `error:` and exits with 2;
a result that could not be saved is still printed, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import sys

from measure.calibration.result import CalibrationResult
from measure.calibration.runner import (
    DEFAULT_BUDGET_S,
    CalibrationBusyError,
    CalibrationRequestError,
    check_budget_s,
    check_usd_per_hour,
    run_calibration,
)
from measure.calibration.store import CalibrationStore, CalibrationStoreError, export_json


def _format_record_lines(result: CalibrationResult) -> list[str]:
    lines = []
    for record in result.records:
        if record.ok:
            percent = f" ({record.percent_of_datasheet:.0f}% of datasheet)" if record.percent_of_datasheet else ""
            lines.append(f"{record.name:18} {record.value:12.4g} {record.unit}{percent}")
        else:
            lines.append(f"{record.name:18} {'error: ' + record.error if record.error else record.skipped_reason}")
    return lines


def _warn(lines: list[str]) -> None:
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m measure.calibration", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")
    parser.add_argument(
        "--budget-s", "--budget", type=float, default=DEFAULT_BUDGET_S, help="total seconds for all benchmarks"
    )
    parser.add_argument("--usd-per-hour", type=float, help="price of this host, for the cost per epoch")
    parser.add_argument("--save", metavar="DB", help="append the result to this store (SQLite file or database URL)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    store = CalibrationStore(args.save) if args.save else None
    try:
        check_budget_s(args.budget_s)
        check_usd_per_hour(args.usd_per_hour)
        if store is not None:
            _warn(store.check())
        result = run_calibration(args.device, args.budget_s, lambda label, _: print(f"... {label}", file=sys.stderr),
                                 args.usd_per_hour)  # fmt: skip
    except (CalibrationRequestError, CalibrationBusyError, CalibrationStoreError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    exit_code = 0
    if store is not None:
        reported = len(store.problems)
        try:
            store.save(result)
        except CalibrationStoreError as error:
            print(f"error: the result below was not saved: {error}", file=sys.stderr)
            exit_code = 1
        _warn(store.problems[reported:])
    print(export_json(result) if args.json else "\n".join(_format_record_lines(result)))
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
