"""`python -m calculators validation --json` (a contract: memory and throughput rows, each with id,
estimate, measured, ratio or error, and cli_command) and every row's command line, run in-process,
printing the row's estimate."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from cli_helpers import run_cli

from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def report() -> dict:
    from calculators.interface.validation import validation_report

    return validation_report()


def _run_command(capsys, command: str) -> tuple[dict, str]:
    """The JSON a row's command prints and the field its comment names (`... --json  # field`)."""
    words = shlex.split(command, comments=True)
    assert words[:3] == ["python", "-m", "calculators"]
    field = command.rsplit("#", 1)[1].strip()
    code, out, err = run_cli(capsys, *words[3:])
    assert code == 0, err
    return json.loads(out), field


def test_the_json_has_every_row_with_the_contract_keys(capsys):
    code, out, _ = run_cli(capsys, "validation", "--json")
    assert code == 0
    data = json.loads(out)
    assert {"memory", "throughput"} <= set(data)
    assert len(data["throughput"]) == 17 and len(data["memory"]) >= 20
    for row in data["memory"] + data["throughput"]:
        assert "id" in row and ("error" in row or {"estimate", "measured", "ratio", "cli_command"} <= set(row))
        assert row["cli_command"].startswith("python -m calculators ")
        assert row["ratio"] == pytest.approx(row["estimate"] / row["measured"])


def test_the_readable_table_names_every_row(capsys):
    code, out, _ = run_cli(capsys, "validation")
    assert code == 0
    assert "TT-H100-8B-FSDP8" in out and "hf-1" in out and "None" not in out


def test_every_throughput_command_prints_its_estimate(report, capsys, monkeypatch):
    monkeypatch.chdir(REPO)  # MPT rows name their config file from the repository root
    for row in report["throughput"]:
        printed, field = _run_command(capsys, row["cli_command"])
        assert field == "tokens_per_s_per_gpu"
        assert printed[field] == pytest.approx(row["estimate"], rel=1e-12), row["id"]


def test_every_memory_command_prints_its_estimate(report, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    for row in report["memory"]:
        printed, field = _run_command(capsys, row["cli_command"])
        assert printed[field] == pytest.approx(row["estimate"], rel=1e-12), row["id"]


def test_torchtitans_h100_is_a_variant_found_by_name_not_offered():
    """96 GB HBM2e at 2.4 TB/s, 500 W, dense bf16 (989 + 835.5) / 2 = 912.25 TFLOPS."""
    grand_teton = find_gpu("H100-96GB-HBM2e-500W")
    assert (grand_teton.bf16_tflops, grand_teton.memory_bandwidth_tbps, grand_teton.memory_gb) == (912.25, 2.4, 96)
    assert grand_teton.interconnect == "NVLink4"
    assert "H100-96GB-HBM2e-500W" not in {gpu.name for gpu in load_gpu_catalogue()}
