"""`time`, `cost` and `plan` with --mode inference: the contract's keys and the bad-input lines."""

import json
import math

import pytest

from calculators.interface.cli import main

SERVE = ["--model", "llama-2-7b", "--mode", "inference"]


def _json(capsys, argv):
    code = main(argv + ["--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_time_inference_prints_the_contract_keys(capsys):
    result = _json(capsys, ["time", *SERVE, "--gpu", "H100-SXM5-80GB", "--input-len", "512", "--output-len", "256",
                            "--concurrency", "8"])  # fmt: skip
    for key in ("output_tokens_per_s_per_gpu", "output_tokens_per_s_per_sequence", "ttft_s", "tpot_s", "prefill_s",
                "decode_step_s", "bound", "concurrency"):  # fmt: skip
        assert key in result
    assert result["concurrency"] == 8
    assert result["bound"] in ("compute", "bandwidth", "communication")
    assert result["output_tokens_per_s_per_gpu"] == pytest.approx(8 / result["tpot_s"])


def test_time_inference_concurrency_zero_picks_one_that_fits(capsys):
    result = _json(capsys, ["time", *SERVE, "--gpu", "H100-SXM5-80GB", "--input-len", "2048", "--output-len", "2048",
                            "--concurrency", "0"])  # fmt: skip
    assert 1 <= result["concurrency"] <= result["max_concurrency"] == 33


def test_cost_inference_prices_per_million_tokens(capsys):
    options = _json(capsys, ["cost", *SERVE, "--input-len", "512", "--output-len", "256", "--concurrency", "8"])
    served = [option for option in options if option["excluded_reason"] is None]
    assert served and all(o["usd_per_million_output_tokens"] > 0 for o in served)
    first = served[0]
    # the two prices add up to one replica's share of the instance's bill per request (every replica it
    # holds serving)
    request_s = 256 * first["tpot_s"] / 8
    bill = first["usd_per_hour"] / first["replicas_per_instance"] / 3600 * request_s
    spent = (first["usd_per_million_output_tokens"] * 256 + first["usd_per_million_input_tokens"] * 512) / 1e6
    assert spent == pytest.approx(bill)


def test_weight_precision_accepts_fp4(capsys):
    result = _json(capsys, ["time", *SERVE, "--gpu", "B200-SXM-180GB", "--weight-precision", "fp4"])
    assert result["weight_kernel"] == "fp4"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--input-len", "-3"], "--input-len: must be greater than 0 and at most 10,000,000, not -3"),
        (["--input-len", "0"], "--input-len: must be greater than 0 and at most 10,000,000, not 0"),
        (["--output-len", "abc"], "--output-len: expected a number, got 'abc'"),
        (["--concurrency", "-1"], "--concurrency: must be greater than 0 and at most 16,777,216, not -1"),
        (["--ttft-ms", "-5"], "--ttft-ms: must be greater than 0 and at most 3,600,000, not -5"),
        (["--concurrency", "0", "--ttft-ms", "0.001"], "no concurrency meets the latency targets"),
        (["--input-len", "4000", "--output-len", "500"], "beyond the 4,096 positions"),
        (["--concurrency", "500"], "concurrency 500 does not fit"),
        (["--gpu", "V100-SXM2-32GB", "--weight-precision", "fp4"], "runs no fp4 serving kernel"),
    ],
)
def test_bad_serving_input_is_one_line(capsys, extra, message):
    argv = ["time", *SERVE, "--gpu", "H100-SXM5-80GB", *extra]
    if "--gpu" in extra:
        argv = ["time", *SERVE, *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_cost_inference_gives_the_month_for_a_request_rate_and_holds_the_targets(capsys):
    argv = ["cost", *SERVE, "--input-len", "512", "--output-len", "256", "--concurrency", "8",
            "--requests-per-s", "3", "--tpot-ms", "40"]  # fmt: skip
    options = _json(capsys, argv)
    served = [option for option in options if option["excluded_reason"] is None]
    assert served and all(option["tpot_s"] <= 0.04 for option in served)
    first = served[0]
    per_replica = first["output_tokens_per_s_per_gpu"] * first["tensor_parallel"] / 256  # requests/s
    assert first["replicas"] == math.ceil(3 / per_replica)
    # whole instances hold the replicas: the month bills every instance
    assert first["instances"] == math.ceil(first["replicas"] / first["replicas_per_instance"])
    assert first["usd_per_month"] == pytest.approx(first["usd_per_hour"] * 730)
    missed = [option for option in options if option["excluded_reason"] and "beyond the targets" in
              option["excluded_reason"]]  # fmt: skip
    assert missed  # slower GPUs miss the 40 ms TPOT at concurrency 8


def test_fp4_format_mxfp4_stores_less_than_nvfp4(capsys):
    """MXFP4 keeps one 1-byte scale per 32 weights, NVFP4 one per 16: 0.53125 against 0.5625 B per weight."""
    base = ["memory", *SERVE, "--weight-precision", "fp4"]
    mx = _json(capsys, [*base, "--fp4-format", "mxfp4"])["components_gib"]["weights"]
    nv = _json(capsys, [*base, "--fp4-format", "nvfp4"])["components_gib"]["weights"]
    assert mx < nv


def test_fp4_weights_on_an_a100_run_weight_only(capsys):
    """Ampere has no FP4 tensor cores; vLLM's Marlin kernels dequantise FP4 weights from Turing on."""
    result = _json(capsys, ["time", *SERVE, "--gpu", "A100-SXM4-80GB", "--weight-precision", "fp4"])
    assert result["weight_kernel"] == "weight-only"


def test_a_ttft_target_no_layout_meets_gives_the_best_reachable_and_its_cost(capsys):
    """1 us to the first token: no GPU prefills 1,024 tokens that fast. `cost` keeps each GPU's fastest
    figures and price with the reason; `plan` names the nearest layout, its whole instances and price."""
    options = _json(capsys, ["cost", *SERVE, "--concurrency", "0", "--ttft-ms", "0.001"])
    assert not [option for option in options if option["excluded_reason"] is None]
    missed = [option for option in options if option["usd_per_hour"] is not None]
    assert missed and all("no concurrency meets the latency targets" in o["excluded_reason"] for o in missed)
    assert all(o["concurrency"] == 1 and o["usd_per_million_output_tokens"] > 0 for o in missed)
    result = _json(capsys, ["plan", *SERVE, "--requests-per-s", "1", "--ttft-ms", "0.001"])
    best = result["best_latency"]
    assert result["cheapest"] is None and best["ttft_s"] > 1e-6
    assert best["gpus"] == best["instances"] * best["gpus_per_instance"]
    problem = result["problems"][0]
    assert problem.startswith("no layout meets the targets; the nearest reachable is TTFT")
    assert f"on {best['instances']} x {best['instance_type']} " in problem
    assert f"${best['usd_per_hour']:,.2f} per hour" in problem


def test_cost_refuses_lengths_past_the_models_positions_in_one_line(capsys):
    """Llama 2 was trained on 4,096 positions: 4,000 in + 500 out = 4,500 fit no GPU, said once."""
    assert main(["cost", *SERVE, "--input-len", "4000", "--output-len", "500"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "beyond the 4,096 positions" in err
