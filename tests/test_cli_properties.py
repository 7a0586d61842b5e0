"""Generated command lines: every one gives JSON (exit 0) or one `error:` line (exit 2).

The flags and their values are drawn from the declarations in calculators.interface.settings, mixed
with garbage (negative, zero, NaN, infinities, huge, words), so a new setting is fuzzed as
soon as it is declared. JSON must never hold NaN or Infinity (strict parsing refuses them).
Examples per property: 150 here, 3000 with GPU_SIZING_LONG_PROPERTIES=1 (the --help, control-character
and framework-config properties: 30, 60 and 60 here, 1000 each in the long profile).

`--help` of every command exits 0 whatever follows it; user text with control characters (a newline in
a provider, a path, a model name, a setting's value) never breaks the one `error:` line; a framework
config with unknown keys warns only when the command succeeds, and a failure is still one line.
"""

from __future__ import annotations

import argparse
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from calculators.hardware.csv_rows import control_character
from calculators.interface.cli import build_parser, main
from calculators.interface.settings import all_settings
from calculators.models.presets import load_presets
from calculators.workload.serving import ServingSettings
from calculators.workload.training import TrainingSettings

LONG = os.environ.get("GPU_SIZING_LONG_PROPERTIES") == "1"
EXAMPLES = 3000 if LONG else 150
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def fuzz(ci_examples: int) -> settings:
    """`ci_examples` here, 1000 in the long profile."""
    return settings(
        max_examples=1000 if LONG else ci_examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


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


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exited:  # --help exits through argparse
            code = exited.code
    return code, out.getvalue(), err.getvalue()


def _assert_one_error_line(argv: list[str], code: int, out: str, err: str) -> None:
    assert code == 2 and out == "", (argv, code, err)
    lines = err.split("\n")
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1] == "", (argv, err)
    assert control_character(lines[0]) is None, (argv, err)  # escaped, not printed raw


SUBCOMMANDS = sorted(
    next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)).choices
)
# what may follow --help: words (not options: argparse refuses an ambiguous option before any action runs)
AFTER_HELP = st.lists(st.text(max_size=12).filter(lambda word: not word.startswith("-")), max_size=3)


@fuzz(30)
@given(st.sampled_from(["", *SUBCOMMANDS]), st.sampled_from(["-h", "--help"]), AFTER_HELP)
@example("plan", "--help", [])  # the two whose help ended in "ValueError: incomplete format"
@example("cost", "-h", ["memory"])
def test_help_of_every_command_exits_0_whatever_follows(command, flag, after):
    argv = [command, flag, *after] if command else [flag, *after]
    code, out, err = _run(argv)
    event(f"--help of {command or 'the top level'}")
    assert (code, err) == (0, ""), (argv, err)
    assert out.startswith("usage: python -m calculators" + (f" {command}" if command else "")), out[:80]


# argv cannot hold NUL (the OS ends a C string there) nor a lone surrogate other than the \udc80-\udcff that
# decode undecodable bytes, so the generated text leaves both out
CONTROL = st.characters(min_codepoint=1, max_codepoint=0x1F) | st.just("\x7f")
NO_NUL = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)
WITH_CONTROL = st.tuples(NO_NUL, CONTROL, NO_NUL).map("".join)
ECHOED = {  # where the CLI echoes user text, and the rest of a line that reaches it
    "providers": ["plan", "--model", "gpt2", "--dataset-tokens", "1e9", "--providers"],
    "prices": ["cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--prices"],
    "config-json": ["memory", "--config-json"],
    "framework-config": ["memory", "--model", "gpt2", "--framework-config"],
    "model": ["fit", "--model"],
    "gpu": ["time", "--model", "gpt2", "--gpu"],
}


@fuzz(60)
@given(st.sampled_from(sorted(ECHOED)), WITH_CONTROL)
def test_user_text_with_control_characters_is_one_error_line(where, text):
    argv = [*ECHOED[where], "/no/such/" + text if where in ("prices", "config-json", "framework-config") else text]
    event(where)
    _assert_one_error_line(argv, *_run(argv))


@fuzz(60)
@given(st.sampled_from([s for s in all_settings() if s.flag and s.value_type is not bool]), WITH_CONTROL)
def test_a_setting_value_with_control_characters_answers_or_is_one_error_line(item, text):
    argv = ["memory", "--model", "gpt2", "--json", item.flag, text]
    code, out, err = _run(argv)
    event(f"exit {code}")
    if code == 0:  # float() reads "1\n" as 1: white space around a number is not an error
        _strict_json(out)
        return
    _assert_one_error_line(argv, code, out, err)


UNKNOWN_KEYS = "base_model: NousResearch/Meta-Llama-3-8B\nadapter: lora\nsequence_len: 1024\nlearnig_rate: 2e-4\n"
WARNING = "warning: lora.yml: unknown axolotl keys ignored: learnig_rate; the other settings were read\n"


@pytest.fixture(scope="module")
def unknown_keys_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("framework") / "lora.yml"
    path.write_text(UNKNOWN_KEYS)
    return str(path)


@fuzz(60)
@given(line=command_line(), late=st.booleans())
def test_unknown_framework_keys_warn_only_on_success(unknown_keys_config, line, late):
    if late and line[0] == "cost":  # without tokens `cost` fails after the config is read
        at = line.index("--dataset-tokens")
        line = line[:at] + line[at + 2 :]
    argv = [*line, "--framework-config", unknown_keys_config]
    code, out, err = _run(argv)
    event(f"{argv[0]} exit {code}")
    if code == 0:
        _strict_json(out)
        assert err == WARNING, (argv, err)
        return
    _assert_one_error_line(argv, code, out, err)
