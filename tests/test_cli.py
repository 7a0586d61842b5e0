"""The CLI contract: `python -m calculators memory ... --json` and one-line errors with exit code 2."""

import json
import subprocess
import sys

import pytest

from calculators.memory.result import COMPONENTS
from calculators.models.geometry import parameter_count
from calculators.models.presets import get_preset
from calculators.units import GIB
from tests.cli_helpers import run_cli


def test_memory_json_has_peak_and_one_key_per_component(capsys):
    code, out, _ = run_cli(
        capsys, "memory", "--model", "llama-2-7b", "--micro-batch", "1", "--seq-len", "2048",
        "--precision", "bf16-mixed", "--optimizer", "adamw", "--zero", "0", "--gpus", "1",
        "--checkpointing", "none", "--json",
    )  # fmt: skip
    assert code == 0
    result = json.loads(out)
    assert set(result["components_gib"]) == set(COMPONENTS)
    # Peak = allocated at the worst phase x (1 + 10% allocator reserve) + CUDA context and cuBLAS.
    assert result["allocated_gib"] == pytest.approx(max(result["phases_gib"].values()))
    assert result["reserved_gib"] == pytest.approx(1.10 * result["allocated_gib"])
    assert result["peak_gib"] == pytest.approx(result["reserved_gib"] + 0.5 + 0.03)
    # ZeRO paper: 16 bytes per parameter of model states under mixed-precision Adam.
    p = parameter_count(get_preset("llama-2-7b")).total
    states = result["components_gib"]
    assert states["weights"] + states["gradients"] + states["master_weights"] + states["optimizer_states"] == (
        pytest.approx(16 * p / GIB)
    )


def test_gpu_memory_flag_adds_a_fit_verdict_and_suggestions(capsys):
    code, out, _ = run_cli(capsys, "memory", "--model", "llama-2-7b", "--gpu-memory-gib", "80", "--json")
    result = json.loads(out)
    assert code == 0
    assert result["fit"]["verdict"] == "does not fit"
    assert result["fit"]["gpu_memory_gib"] == 80
    assert any(s["fits"] for s in result["suggestions"])


def test_readable_table_without_json(capsys):
    code, out, _ = run_cli(capsys, "memory", "--model", "gpt2", "--gpu-memory-gib", "24")
    assert code == 0
    assert out.startswith("gpt2: peak ") and "Optimizer states" in out and "On 24 GiB: fits" in out


def test_config_json_file_is_accepted(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257, "n_positions": 1024}
        )
    )
    code, out, _ = run_cli(capsys, "memory", "--config-json", str(config), "--json")
    assert code == 0 and json.loads(out)["parameters"] == 124_439_808


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["memory", "--model", "llama-9b"], "unknown model preset"),
        (["memory", "--model", "gpt2", "--micro-batch", "-1"], "--micro-batch: must be greater than 0 and at most"),
        (["memory", "--model", "gpt2", "--seq-len", "0"], "--seq-len: must be greater than 0"),
        (["memory", "--model", "gpt2", "--seq-len", "nan"], "--seq-len: must be a finite number"),
        (
            ["cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--checkpoint-write-min", "-1"],
            "--checkpoint-write-min: must be at least 0",
        ),
        (
            ["cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--restart-min", "inf"],
            "--restart-min: must be a finite number",
        ),
        (
            ["cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--discount-pct", "100"],
            "--discount-pct: must be at least 0 and less than 100, not 100",
        ),
        (
            ["cost", "--model", "gpt2", "--mode", "inference", "--input-len", "0"],
            "--input-len: must be greater than 0 and at most 10,000,000, not 0",
        ),
        (
            ["trace", "--model", "gpt2", "--mode", "inference"],
            "`trace` runs a training step; --mode inference is answered by `memory`, `fit`, `time`, `cost` and `plan`",
        ),
        (["memory", "--model", "gpt2", "--precision", "fp7"], "invalid choice"),
        (["memory", "--model", "gpt2", "--micro-batch", "two"], "--micro-batch: expected a number, got 'two'"),
        (["memory", "--model", "gpt2", "--gpu-memory-gib", "-3"], "--gpu-memory-gib"),
        (["memory", "--model", "gpt2", "--params", "7e9"], "exactly one of"),
        (["memory"], "exactly one of"),
        (["memory", "--config-json", "/no/such/config.json"], "cannot read"),
        (["memory", "--params", "-7"], "between 1 million"),
        ([], "required"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_code_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("content", ["{broken", "x" * 2_000_000])
def test_malformed_or_huge_config_is_a_usage_error(capsys, tmp_path, content):
    config = tmp_path / "config.json"
    config.write_text(content)
    code, _, err = run_cli(capsys, "memory", "--config-json", str(config))
    assert code == 2 and ("not valid JSON" in err or "under 1 MB" in err)


def test_module_entry_point_exits_2_in_a_real_process():
    process = subprocess.run(
        [sys.executable, "-m", "calculators", "memory", "--model", "gpt2", "--zero", "5"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert process.returncode == 2
    assert process.stderr.startswith("error: ") and "--zero" in process.stderr


def test_presets_lists_every_required_family(capsys):
    code, out, _ = run_cli(capsys, "presets")
    names = out.split()
    assert code == 0
    for required in ("gpt2", "bert-large-uncased", "llama-2-70b", "llama-3.1-405b", "mixtral-8x7b", "phi-3-mini-4k"):
        assert required in names


def test_gpus_json_lists_the_catalogue_with_datasheet_figures(capsys):
    code, out, _ = run_cli(capsys, "gpus", "--json")
    gpus = {row["name"]: row for row in json.loads(out)}
    assert code == 0 and len(gpus) >= 40
    assert (gpus["H100-SXM5-80GB"]["memory_gb"], gpus["H100-SXM5-80GB"]["bf16_tflops"]) == (80, 989)


def test_fit_json_has_one_entry_per_gpu_with_the_contract_keys(capsys):
    code, out, _ = run_cli(
        capsys, "fit", "--model", "llama-3.1-8b", "--zero", "3", "--gpus", "8", "--checkpointing", "full", "--json"
    )
    rows = {row["gpu"]: row for row in json.loads(out)}
    assert code == 0 and len(rows) >= 40
    for row in rows.values():
        assert {"gpu", "fits", "max_micro_batch", "min_gpus"} <= set(row)
    assert rows["MI300X-192GB"]["fits"] and not rows["T4-16GB"]["fits"]
    assert rows["T4-16GB"]["min_gpus"] > 8  # ZeRO-3 spreads the states over more T4s until they fit


def test_cost_json_ranks_options_with_the_contract_keys(capsys):
    code, out, _ = run_cli(
        capsys, "cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--fits-only", "--json"
    )  # fmt: skip
    options = json.loads(out)
    assert code == 0 and len(options) > 20
    for option in options:
        assert {"gpu", "provider", "gpus", "hours", "usd_on_demand", "usd_spot_expected"} <= set(option)
    costs = [option["usd_on_demand"] for option in options]
    assert costs == sorted(costs)


def test_cost_discount_scales_every_price(capsys):
    _, full, _ = run_cli(capsys, "cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--json")
    _, cut, _ = run_cli(capsys, "cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--discount-pct", "25", "--json")
    assert json.loads(cut)[0]["usd_on_demand"] == pytest.approx(0.75 * json.loads(full)[0]["usd_on_demand"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["cost", "--model", "gpt2"], "exactly one of --dataset-tokens or --dataset-samples"),
        (["cost", "--model", "gpt2", "--dataset-tokens", "-5"], "--dataset-tokens: must be at least 1"),
        (["cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--discount-pct", "120"], "--discount-pct"),
        (["cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--utilisation", "3"], "utilisation"),
        (["cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--prices", "/no/file.csv"], "cannot read"),
        (["fit", "--model", "gpt2", "--gpus", "0"], "gpus"),
    ],
)
def test_bad_cost_and_fit_arguments_exit_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1


def test_a_malformed_price_sheet_is_a_usage_error(capsys, tmp_path):
    sheet = tmp_path / "prices.csv"
    sheet.write_text("provider,instance_type\nAWS,p5\n")
    code, _, err = run_cli(capsys, "cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--prices", str(sheet))
    assert code == 2 and "prices.csv" in err and "missing column" in err


def test_calibrate_on_the_cpu_writes_a_result_the_app_imports(capsys, tmp_path):
    from measure.calibration.store import import_json

    out = tmp_path / "result.json"
    code, stdout, _ = run_cli(capsys, "calibrate", "--device", "cpu", "--budget-s", "3", "--out", str(out))
    assert code == 0 and out.exists() and str(out) in stdout
    result = import_json(out.read_text())
    assert result.device == "cpu" and any(record.ok for record in result.records)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["calibrate", "--budget-s", "0", "--out", "x.json"], "--budget-s"),
        (["calibrate", "--device", "tpu", "--out", "x.json"], "invalid choice"),
        (["calibrate"], "--out"),
    ],
)
def test_bad_calibrate_arguments_exit_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--out", "/nonexistent/dir/x.json"],
            "--out /nonexistent/dir/x.json: the folder /nonexistent/dir does not exist",
        ),
        (["--out", "OUT", "--usd-per-hour", "-5"], "--usd-per-hour"),
        (["--out", "OUT", "--usd-per-hour", "nan"], "--usd-per-hour"),
    ],
)
def test_bad_calibrate_requests_are_refused_before_the_run(capsys, tmp_path, argv, message):
    """A bad --out or price is reported at once (well under the budget), never after it."""
    import time

    argv = [str(tmp_path / "r.json") if item == "OUT" else item for item in argv]
    started = time.monotonic()
    code, out, err = run_cli(capsys, "calibrate", "--device", "cpu", "--budget-s", "60", *argv)
    assert code == 2 and message in err and err.count("\n") == 1
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("mode", ["train", "finetune-lora", "finetune-qlora", "inference"])
@pytest.mark.parametrize("command", ["memory", "fit"])
def test_memory_and_fit_answer_every_mode(capsys, command, mode):
    """Both dispatch on the workload's type: JSON for each mode, never a traceback."""
    code, out, err = run_cli(capsys, command, "--model", "llama-3.1-8b", "--mode", mode, "--json")
    assert code == 0 and err == ""
    answer = json.loads(out)
    rows = answer if command == "fit" else [answer]
    assert rows and all(row["peak_gib"] > 0 for row in rows)
