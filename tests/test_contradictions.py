"""Settings that contradict the model are said next to the verdict (page and CLI)."""

from __future__ import annotations

import json

from calculators.interface.cli import main
from calculators.interface.settings import build_workload
from calculators.models.presets import get_preset
from calculators.workload.contradictions import workload_problems
from tests.apptest_helpers import open_app


def test_a_learned_position_model_cannot_take_a_longer_sequence():
    """BERT has 512 learned positions: a 2,048-token sequence cannot run."""
    workload = build_workload("train", get_preset("bert-base-uncased"), {"seq_len": 2048})
    (problem,) = workload_problems(workload)
    assert "2,048 tokens is beyond the 512 positions" in problem and "cannot run" in problem


def test_rope_past_the_trained_positions_runs_with_a_quality_warning():
    """Llama-2-7B was trained with 4,096 positions; serving 8,192 runs but needs scaled RoPE."""
    workload = build_workload("inference", get_preset("llama-2-7b"), {"s_context_len": 8192})
    (problem,) = workload_problems(workload)
    assert "8,192 tokens is beyond the 4,096 positions" in problem and "rotary positions are scaled" in problem


def test_an_encoder_served_for_generation_is_flagged():
    workload = build_workload("inference", get_preset("bert-base-uncased"), {"s_context_len": 512})
    assert workload_problems(workload) == [
        "bert-base-uncased is an encoder with a classification head: it does not generate text, so the KV cache, "
        "concurrency and decode speed below describe no real server. Use a decoder model to size serving."
    ]


def test_consistent_settings_have_no_problem():
    assert workload_problems(build_workload("train", get_preset("llama-3.1-8b"), {"seq_len": 8192})) == []


def test_the_cli_reports_the_contradiction_in_json(capsys):
    code = main(["memory", "--model", "llama-2-7b", "--mode", "inference", "--context-len", "8192", "--json"])
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert code == 0 and len(warnings) == 1 and "4,096 positions" in warnings[0]


def test_the_memory_page_warns_next_to_the_verdict():
    app = open_app(model="llama-2-7b", mode="inference", ctx="8192")
    assert any("beyond the 4,096 positions llama-2-7b was trained with" in w.value for w in app.warning)
