"""ModernBERT in the trace: LayerNorms without bias (ModernBertConfig.norm_bias = False), rotary
positions, a fused q/k/v and a fused GeGLU Wi, no linear biases. The engine (calculators.memory)
against the traced step (measure.trace.models)."""

from __future__ import annotations

import pytest

from calculators.memory.engine import estimate_memory
from calculators.models.geometry import parameter_count
from calculators.models.hf_config import spec_from_config_dict
from calculators.models.library import library_spec
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

torch = pytest.importorskip("torch")

from measure.trace.models import build_model  # noqa: E402
from measure.trace.tracer import trace_step  # noqa: E402

TINY_MODERNBERT = {
    "model_type": "modernbert", "vocab_size": 512, "max_position_embeddings": 256, "hidden_size": 64,
    "intermediate_size": 96, "num_attention_heads": 4, "hidden_activation": "gelu", "norm_bias": False,
    "attention_bias": False, "mlp_bias": False, "global_attn_every_n_layers": 3, "local_attention": 128,
}  # fmt: skip


def test_modernbert_base_builds_with_the_engines_parameter_count():
    """ModernBERT-base: 149,015,810 parameters built and counted (the paper's 149M, arXiv
    2412.13663, Table 3), its 45 LayerNorms each one 768-wide weight and no bias."""
    spec = library_spec("answerdotai/ModernBERT-base")
    with torch.device("meta"):
        built = build_model(spec)
    assert sum(p.numel() for p in built.parameters()) == parameter_count(spec).total == 149_015_810
    norms = [m for m in built.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert all(norm.bias is None for norm in norms)


def test_each_layer_saves_what_the_engine_counts():
    """Four layers against two, 2 x 128 tokens with fused attention: one layer saves 1,476,120 B
    in fp32 and 1,087,000 B under autocast (traced), and the engine counts the same to 24 B
    (allocator rounding). In pure bf16 the CPU keeps LayerNorm's mean and rstd in bf16 where CUDA
    keeps fp32 (measure.trace.cuda_emulation), 2,048 B per layer, so it is not compared here."""
    run = TrainingSettings(seq_len=128, micro_batch=2, precision="fp32", attention="fused")

    def per_layer(source) -> float:
        two, four = (spec_from_config_dict(TINY_MODERNBERT | {"num_hidden_layers": n}) for n in (2, 4))
        return (source(four, run).phases_gib["end of forward"] - source(two, run).phases_gib["end of forward"]) / 2

    traced = per_layer(trace_step) * GIB
    assert traced == 1_476_120  # and 1,087,000 B under autocast, counted alike (measured)
    assert per_layer(estimate_memory) * GIB == pytest.approx(traced, abs=64)
