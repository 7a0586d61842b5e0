"""The trace emulates NeMo Automodel's per-submodule checkpointing and its recipe keeping the
logits through backward; the engine stays within 3% of the traced peak on each."""

from __future__ import annotations

import pytest

from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.workload.training import TrainingSettings

pytest.importorskip("torch")

from measure.trace.tracer import trace_extrapolated  # noqa: E402

CASES = [
    ("llama-3.2-1b", dict(framework="automodel", precision="bf16", checkpointing="full", micro_batch=4, seq_len=2048)),
    (
        "llama-3.2-1b",
        dict(precision="bf16", checkpointing="full", checkpoint_unit="submodule", attention="eager", loss="chunked")
        | dict(micro_batch=4, seq_len=4096, optimizer="sgd"),
    ),
    ("gpt2", dict(precision="bf16", checkpointing="full", checkpoint_unit="submodule", micro_batch=8, seq_len=1024)),
    ("qwen2.5-0.5b", dict(precision="fp32", logits_in_backward="kept", micro_batch=2, seq_len=1024)),
]


@pytest.mark.parametrize(("model", "values"), CASES, ids=lambda case: str(case)[:60])
def test_engine_is_within_three_percent_of_the_trace(model, values):
    spec, settings = get_preset(model), TrainingSettings(**values)
    traced = trace_extrapolated(spec, settings)
    estimate = estimate_memory(spec, settings)
    assert estimate.allocated_gib == pytest.approx(traced.peak_gib, rel=0.03)


def test_kept_logits_are_alive_in_the_traced_backward():
    """qwen2.5-0.5b, fp32, 2 x 1024 tokens: keeping the logits adds 4 B x 2048 x 151,936 =
    1,244,659,712 B to the traced loss gradient."""
    spec = get_preset("qwen2.5-0.5b")
    freed = trace_extrapolated(spec, TrainingSettings(precision="fp32", micro_batch=2, seq_len=1024))
    kept = trace_extrapolated(
        spec, TrainingSettings(precision="fp32", micro_batch=2, seq_len=1024, logits_in_backward="kept")
    )
    added = (kept.phases_gib["loss backward"] - freed.phases_gib["loss backward"]) * 2**30
    assert added == pytest.approx(4 * 2048 * 151_936, rel=1e-6)
