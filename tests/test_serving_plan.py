"""Plan for serving (calculators/plan/serving.py): replicas, the cost-latency front, unmet targets."""

import json

from calculators.cost.serving import replicas_for
from calculators.interface.cli import main
from calculators.plan.serving import ServingPlan, cost_latency_front


def _plan(usd_per_hour: float, tpot_s: float) -> ServingPlan:
    return ServingPlan(
        gpu="H100-SXM5-80GB", provider="p", instance_type="i", pricing="on demand", tensor_parallel=1,
        weight_precision="bf16", replicas=1, gpus=1, concurrency=8, usd_per_hour=usd_per_hour,
        usd_per_month=usd_per_hour * 730, usd_per_million_output_tokens=1.0, usd_per_million_input_tokens=0.1,
        ttft_s=0.1, tpot_s=tpot_s, output_tokens_per_s_per_gpu=100.0,
    )  # fmt: skip


class _Speed:
    output_tokens_per_s = 1000.0
    output_len = 500


def test_replicas_cover_the_request_rate():
    """1,000 output tokens/s over 500-token answers = 2 requests/s per replica: 5 requests/s need 3."""
    assert replicas_for(5, _Speed()) == 3
    assert replicas_for(4, _Speed()) == 2
    assert replicas_for(0.1, _Speed()) == 1


def test_the_front_keeps_plans_no_other_beats_on_cost_and_latency():
    plans = [_plan(10, 0.05), _plan(12, 0.06), _plan(20, 0.02), _plan(15, 0.03), _plan(16, 0.03)]
    front = cost_latency_front(plans)
    assert [(p.usd_per_hour, p.tpot_s) for p in front] == [(10, 0.05), (15, 0.03), (20, 0.02)]


def test_plan_inference_prints_the_contract_keys(capsys):
    argv = ["plan", "--model", "llama-2-7b", "--mode", "inference", "--requests-per-s", "4", "--input-len", "512",
            "--output-len", "256", "--tpot-ms", "50", "--json"]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    cheapest = result["cheapest"]
    for key in ("replicas", "tensor_parallel", "weight_precision", "usd_per_hour", "usd_per_million_output_tokens",
                "ttft_s", "tpot_s"):  # fmt: skip
        assert key in cheapest
    assert cheapest["tpot_s"] <= 0.05
    assert all(plan["usd_per_hour"] >= cheapest["usd_per_hour"] for plan in result["plans"])


def test_targets_no_layout_meets_give_the_best_latency_and_its_cost(capsys):
    argv = ["plan", "--model", "llama-2-7b", "--mode", "inference", "--requests-per-s", "1", "--tpot-ms", "0.01",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["cheapest"] is None and result["plans"] == []
    best = result["best_latency"]
    assert best["tpot_s"] > 0.00001 and best["usd_per_hour"] > 0
    assert "no layout meets the targets" in result["problems"][0]


def test_plan_inference_needs_a_request_rate(capsys):
    assert main(["plan", "--model", "llama-2-7b", "--mode", "inference"]) == 2
    assert "needs --requests-per-s" in capsys.readouterr().err
