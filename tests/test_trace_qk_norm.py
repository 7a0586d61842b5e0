"""q/k RMSNorms in the traced step (measure.trace.blocks.Attention) against the engine's
calculators.memory.activations.attention.qk_norm_saved_bytes: Qwen3 and Gemma 3 normalise each head, OLMo 2 the whole
projection."""

from __future__ import annotations

import pytest

from calculators.memory.engine import estimate_memory
from calculators.models.hf_config import spec_from_config_dict
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

torch = pytest.importorskip("torch")

from measure.trace.tracer import trace_step  # noqa: E402

TINY_QWEN3 = spec_from_config_dict(
    {
        "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 256,
        "max_position_embeddings": 64, "tie_word_embeddings": True,
    }
)  # fmt: skip


@pytest.mark.parametrize(
    ("qk_norm", "changes"),
    [
        ("head", {}),
        ("head", {"method": "lora"}),
        ("head", {"liger": True, "precision": "bf16"}),
        ("full", {"precision": "bf16"}),
        ("full", {"checkpointing": "selective", "attention": "eager"}),
    ],
)
def test_trace_and_engine_agree_on_what_qk_norms_save(qk_norm, changes):
    """The q/k RMSNorms of Qwen3 (per head) and OLMo 2 (whole projection): what they add at the
    end of forward, traced (model with the norms minus model without) against the engine's
    qk_norm_saved_bytes, to within the norms' own weights (2 x 32 or 128 + 64 elements).
    (The same held in all 10 pairs of these settings when measured; 5 run here to keep the suite fast.)"""
    settings = TrainingSettings(**({"seq_len": 256, "micro_batch": 4, "precision": "bf16-mixed"} | changes))

    def added(source) -> float:
        with_norms = source(TINY_QWEN3.model_copy(update={"qk_norm": qk_norm}), settings)
        without = source(TINY_QWEN3.model_copy(update={"qk_norm": "none"}), settings)
        return (with_norms.phases_gib["end of forward"] - without.phases_gib["end of forward"]) * GIB

    traced, estimated = added(trace_step), added(estimate_memory)
    assert estimated > 500_000
    assert traced == pytest.approx(estimated, abs=4 * (128 + 64))
