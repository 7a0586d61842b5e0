"""LayerNorm with rotary positions, partial rotary and parallel attention/MLP blocks (GPT-NeoX/
Pythia, Phi-2, Falcon), and biases on the attention output and LM head alone (Phi-3.5-MoE): the
engine (calculators.memory) against the traced step (measure.trace.models)."""

from __future__ import annotations

import pytest

from calculators.memory.activations.attention import out_projection_input_bytes
from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.activations.norms import parallel_residual_shared_bytes
from calculators.memory.engine import estimate_memory
from calculators.models.geometry import parameter_count
from calculators.models.hf_config import spec_from_config_dict
from calculators.models.library import library_spec
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

torch = pytest.importorskip("torch")

from measure.trace.models import build_model  # noqa: E402
from measure.trace.tracer import trace_step  # noqa: E402

TINY = {"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4}
TINY |= {"vocab_size": 512, "max_position_embeddings": 256}
NEOX = spec_from_config_dict(
    TINY | {"model_type": "gpt_neox", "rotary_pct": 0.25, "use_parallel_residual": True, "hidden_act": "gelu"}
)
PHI2 = spec_from_config_dict(TINY | {"model_type": "phi", "partial_rotary_factor": 0.4, "hidden_act": "gelu_new"})
FALCON7B = spec_from_config_dict(TINY | {"model_type": "falcon", "multi_query": True, "parallel_attn": True})
TOKENS = 2 * 128


def settings(precision: str = "bf16", attention: str = "fused", **changes) -> TrainingSettings:
    return TrainingSettings(seq_len=128, micro_batch=2, precision=precision, attention=attention, **changes)


def end_of_forward(source, spec, run: TrainingSettings) -> float:
    return source(spec, run).phases_gib["end of forward"] * GIB


def test_configs_read_as_the_models_build_them():
    """Pythia: two LayerNorms side by side, a quarter of each head rotated; Phi-2: one LayerNorm
    for both branches and biases on o and the LM head; Falcon-7B: one LayerNorm, multi-query."""
    neox = (NEOX.norm, NEOX.rotary_fraction, NEOX.parallel_residual, NEOX.norms_per_layer)
    assert neox == ("layernorm", 0.25, True, 2)
    assert (PHI2.norm, PHI2.rotary_fraction, PHI2.norms_per_layer, PHI2.out_bias, PHI2.lm_head_bias) == (
        "layernorm", 0.4, 1, True, True
    )  # fmt: skip
    assert (FALCON7B.norm, FALCON7B.parallel_residual, FALCON7B.norms_per_layer, FALCON7B.n_kv_heads) == (
        "layernorm", True, 1, 1
    )  # fmt: skip


def test_pythia_1b_saves_its_layer_input_once_and_copies_the_attention_output():
    """Pythia-1B (h = 2048), 2048 tokens in bf16 with flash attention:
    - both LayerNorms read the layer input x and save it, one tensor: 2 x (2 x 2048 x 2048 +
      8 x 2048) - 2 x 2048 x 2048 = 8,421,376 B of norms per layer, not 16,809,984;
    - q is torch.cat of the rotated quarter and the rest, so flash's output is (b, heads, s, d) in
      memory and o's input is a copy, 2 x 2048 x 2048 = 8,388,608 B; none in fp32 (the
      memory-efficient kernel writes (b, s, heads, d)) or when selective checkpointing recomputes
      the core."""
    pythia = library_spec("EleutherAI/pythia-1b")
    run = TrainingSettings(seq_len=2048, micro_batch=1, precision="bf16", attention="fused")
    assert parallel_residual_shared_bytes(pythia, run, 2048) == 8_388_608
    assert layer_activation_terms(pythia, run)["norms"] == 8_421_376
    assert out_projection_input_bytes(pythia, run, 2048) == 8_388_608
    assert out_projection_input_bytes(pythia, run.model_copy(update={"precision": "fp32"}), 2048) == 0
    assert out_projection_input_bytes(pythia, run.model_copy(update={"checkpointing": "selective"}), 2048) == 0


def test_one_norm_for_both_branches_is_one_saved_input_without_autocast():
    """Phi-2's q/k/v and fc1 read the same normed tensor: saved once in bf16 (2 x 256 x 64 =
    32,768 B counted twice otherwise); autocast casts it for each linear, two copies."""
    assert parallel_residual_shared_bytes(PHI2, settings(), TOKENS) == 32_768
    assert parallel_residual_shared_bytes(PHI2, settings("amp-bf16"), TOKENS) == 0


@pytest.mark.parametrize("precision", ["bf16", "amp-bf16"])
def test_trace_and_engine_agree_on_what_the_parallel_block_saves_less(precision):
    """Pythia's block in parallel against the same block in sequence: one layer input per layer
    less, 2 layers x 256 tokens x 64 x 2 bytes (bf16) or 4 (fp32 residual under autocast)."""
    sequential = NEOX.model_copy(update={"parallel_residual": False})
    run = settings(precision)

    def saved_less(source) -> float:
        return end_of_forward(source, sequential, run) - end_of_forward(source, NEOX, run)

    expected = 2 * TOKENS * 64 * (2 if precision == "bf16" else 4)
    assert saved_less(estimate_memory) == expected
    assert saved_less(trace_step) == expected


def test_trace_and_engine_agree_on_the_partial_rotary_output_copy():
    """Rotating a quarter of each head (torch.cat) against all of it: o's input becomes a copy,
    2 layers x 256 tokens x 64 x 2 bytes = 65,536 B, less the narrower cos and sin tables shared by
    every layer, 2 x 128 positions x (16 - 4) channels x 2 bytes = 6,144 B: 59,392 B, traced and
    estimated (rotary_table_bytes)."""
    full_rotary = NEOX.model_copy(update={"rotary_fraction": 1.0})

    def copies(source) -> float:
        return end_of_forward(source, NEOX, settings()) - end_of_forward(source, full_rotary, settings())

    assert copies(estimate_memory) == 65_536 - 6_144
    assert copies(trace_step) == 65_536 - 6_144


@pytest.mark.parametrize(
    ("spec", "precision", "attention"),
    [(NEOX, "bf16", "fused"), (PHI2, "bf16", "fused"), (FALCON7B, "bf16", "fused"), (NEOX, "amp-bf16", "eager")],
    ids=["pythia", "phi-2", "falcon-7b", "pythia-autocast-eager"],
)
def test_engine_is_within_one_percent_of_the_trace_at_the_end_of_forward(spec, precision, attention):
    """Measured: -0.0% (Pythia), -0.1% (Phi-2), +0.3% (Falcon-7B), -0.5% (Pythia, eager under autocast)."""
    run = settings(precision, attention)
    assert end_of_forward(estimate_memory, spec, run) == pytest.approx(end_of_forward(trace_step, spec, run), rel=0.01)


@pytest.mark.parametrize("model", ["EleutherAI/pythia-1b", "microsoft/Phi-3.5-MoE-instruct"])
def test_bundled_models_build_with_the_engines_parameter_count(model):
    """Pythia-1B (1,011,781,632 parameters, the model card's 1.0B) and Phi-3.5-MoE (biases on o and
    the LM head) build with exactly the parameters the engine counts."""
    spec = library_spec(model)
    with torch.device("meta"):
        built = build_model(spec)
    assert sum(p.numel() for p in built.parameters()) == parameter_count(spec).total
