"""Generated command lines: every one gives JSON (exit 0) or one `error:` line (exit 2).

The flags and their values are drawn from the declarations in calculators.interface.settings, mixed
with garbage (negative, zero, NaN, infinities, huge, words), so a new setting is fuzzed as
soon as it is declared. JSON must never hold NaN or Infinity (strict parsing refuses them).
Examples per property: 150 here, 3000 with GPU_SIZING_LONG_PROPERTIES=1.
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from calculators.interface.cli import main
from calculators.interface.settings import all_settings
from calculators.models.presets import load_presets
from calculators.workload.serving import ServingSettings
from calculators.workload.training import TrainingSettings

LONG = os.environ.get("GPU_SIZING_LONG_PROPERTIES") == "1"
EXAMPLES = 3000 if LONG else 150
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

GARBAGE = ["-1", "0", "nan", "inf", "-inf", "1e400", "1e308", "abc", "", "3.5", "99999999999999999999", "0x10"]
WORKLOAD_FLAGS = [s for s in all_settings() if s.flag and s.model in (None, TrainingSettings, ServingSettings)]
COMMANDS = {
    "memory": WORKLOAD_FLAGS,
    "fit": WORKLOAD_FLAGS,
    # --dataset-samples would always clash with the --dataset-tokens every cost line has
    "cost": [s for s in all_settings() if s.flag and s.flag != "--dataset-samples"],
}


def _strict_json(text: str) -> object:
    """json.loads that refuses NaN and Infinity (which are not JSON)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in the JSON output")

    return json.loads(text, parse_constant=refuse)


@st.composite
def flag_value(draw, item) -> list[str]:
    if item.value_type is bool:
        return [item.flag]
    if draw(st.integers(0, 4)) == 0:  # one value in five is garbage
        return [item.flag, draw(st.one_of(st.sampled_from([*GARBAGE, "fp7"]), st.floats().map(repr)))]
    if item.choices:
        return [item.flag, str(draw(st.sampled_from(item.choices)))]
    low, low_open = item.lower
    high, _ = item.upper
    low = (low or 0) + (1 if low_open and item.value_type is int else 0)
    if item.value_type is int:
        return [item.flag, str(draw(st.integers(min_value=int(low), max_value=int(min(high or 64, 64)))))]
    return [item.flag, repr(draw(st.floats(min_value=low, max_value=min(high or 100.0, 100.0))))]


@st.composite
def command_line(draw) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    model = draw(st.sampled_from([*sorted(load_presets()), "no-such-model"]))
    argv = [command, "--model", model, "--json"]
    if command == "cost":
        argv += ["--dataset-tokens", draw(st.sampled_from(["1e9", "1e12", "2e10", "1e6", "1e9", "-5", "nan", "1e17"]))]
    if command == "memory" and draw(st.booleans()):
        argv += ["--gpu-memory-gib", draw(st.sampled_from(["24", "80", "0", "-3", "nan", "1e300"]))]
    flags = draw(st.lists(st.sampled_from(COMMANDS[command]), max_size=5, unique_by=lambda s: s.flag))
    for item in flags:
        argv += draw(flag_value(item))
    return argv


@FUZZ
@given(command_line())
def test_every_command_line_answers_json_or_one_error_line(argv):
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    event(f"{argv[0]} exit {code}")
    if code == 0:
        _strict_json(out.getvalue())
        return
    assert code == 2, (argv, err.getvalue())
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err.getvalue())
    assert out.getvalue() == ""


def test_the_overflowing_spot_run_of_the_tracker_is_finite(capsys):
    """4,096 GPUs under ZeRO-3 on 1e12 tokens used to print usd_spot_high: Infinity."""
    argv = ["cost", "--model", "llama-3.1-8b", "--gpus", "4096", "--zero", "3", "--dataset-tokens", "1e12", "--json"]
    assert main(argv) == 0
    options = _strict_json(capsys.readouterr().out)
    assert options and all(option["usd_on_demand"] > 0 for option in options)
    assert any(option["spot_not_worth_reason"] for option in options)
