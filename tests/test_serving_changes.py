"""Serving: which limit binds the context, and what to change when a model does not fit."""

from __future__ import annotations

import pytest

from calculators.memory.serving import context_limit, total_gib
from calculators.memory.serving_changes import serving_changes
from calculators.models.presets import get_preset
from calculators.workload.serving import ServingSettings, context_beyond_training
from tests.apptest_helpers import open_app

LLAMA2_7B = get_preset("llama-2-7b")
FOUR_USERS_8K = ServingSettings(context_len=8192, concurrent_sequences=4)


def test_an_fp8_kv_cache_is_the_first_change_and_saves_half_the_bf16_cache():
    changes = serving_changes(LLAMA2_7B, FOUR_USERS_8K, 24.0)
    assert changes[0].change == "KV cache in fp8" and changes[0].keeps_requests
    # Llama-2-7B's KV cache: 32 layers x (K + V) x 32 heads x 128 dims = 262,144 elements per token;
    # 4 sequences x 8,192 tokens = 32,768 tokens -> 8 Gi elements: 16 GiB in bf16, 8 GiB in fp8
    assert total_gib(LLAMA2_7B, FOUR_USERS_8K) - changes[0].total_gib == pytest.approx(8.0)
    assert changes[0].total_gib <= 24.0
    # changes that ask less of the users come last
    assert [c.keeps_requests for c in changes] == sorted((c.keeps_requests for c in changes), reverse=True)


def test_fewer_users_and_a_shorter_context_are_offered_with_what_they_give_up():
    changes = {c.change: c for c in serving_changes(LLAMA2_7B, FOUR_USERS_8K, 24.0)}
    # 29.75 GiB with 4 users: one user's 8k bf16 cache is 4 GiB, so 2 users (21.75 GiB) fit, 3 (25.75) do not
    assert changes["2 concurrent sequences"].cost == "2 fewer users at once"
    assert changes["context of 4,096 tokens"].total_gib == pytest.approx(21.754, abs=0.01)


def test_the_context_limit_names_what_binds_it():
    one_user = ServingSettings(context_len=4096, concurrent_sequences=1)
    assert context_limit(LLAMA2_7B, one_user, 80.0) == (4096, "trained positions")
    many = ServingSettings(context_len=4096, concurrent_sequences=64)
    longest, binds = context_limit(LLAMA2_7B, many, 24.0)
    assert binds == "memory" and longest < 4096


def test_a_context_past_the_trained_positions_is_warned_about():
    warning = context_beyond_training(LLAMA2_7B, FOUR_USERS_8K)
    assert warning.startswith("8,192 tokens is beyond the 4,096 positions llama-2-7b was trained on")
    assert context_beyond_training(LLAMA2_7B, ServingSettings(context_len=4096)) is None


def test_the_memory_page_in_serve_mode_says_what_to_change_and_what_binds():
    app = open_app(mode="inference", model="llama-2-7b", gpu="RTX-4090-24GB", ctx="8192", conc="4")
    assert not app.exception
    changes = next(frame.value for frame in app.dataframe if "change" in frame.value.columns)
    assert changes["change"].iloc[0] == "KV cache in fp8"
    assert list(changes.columns) == ["change", "needs (GiB per GPU)", "gives up"]
    assert any("beyond the 4,096 positions" in w.value for w in app.warning)
    labels = [metric.label for metric in app.metric]
    assert any(label.startswith("Longest context (") for label in labels)
