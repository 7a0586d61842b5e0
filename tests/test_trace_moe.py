"""Mixture-of-experts layers the trace now builds (measure.trace.blocks.SparseMoE, make_mlp):
shared experts beside the routed ones, Qwen2-MoE's sigmoid gate on them, and dense first layers.
What the shared experts add at the end of forward is compared with the engine's
'shared_experts' term (calculators.memory.activations.layer.layer_activation_terms)."""

from __future__ import annotations

import pytest

from calculators.memory.engine import estimate_memory
from calculators.models.spec import ModelSpec
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

torch = pytest.importorskip("torch")

from measure.trace.tracer import trace_step  # noqa: E402

TINY_MOE = dict(
    n_layers=3, hidden_size=64, n_heads=4, n_kv_heads=2, ffn_hidden_size=48, vocab_size=256,
    max_position_embeddings=64, n_experts=4, experts_per_token=2,
)  # fmt: skip


def added_at_end_of_forward(source, extra: dict, settings: TrainingSettings) -> float:
    with_extra = source(ModelSpec(**TINY_MOE | extra), settings)
    without = source(ModelSpec(**TINY_MOE), settings)
    return (with_extra.phases_gib["end of forward"] - without.phases_gib["end of forward"]) * GIB


@pytest.mark.parametrize(
    ("extra", "precision"),
    [
        ({"shared_expert_ffn_size": 96}, "bf16-mixed"),
        ({"shared_expert_ffn_size": 96, "shared_expert_gate": True}, "bf16"),
    ],
    ids=["deepseek-shared-bf16-mixed", "qwen2-moe-gated-shared-bf16"],
)
def test_shared_experts_save_what_the_engine_counts(extra, precision):
    """1024 tokens. Without a gate the shared expert keeps gate, act(gate), up and down's input
    (4 x 2 x 1024 x 96 per layer) and, under autocast, its gate and up linears' half copies of the
    input (2 x 2 x 1024 x 64); the sigmoid gate adds the shared output and the sigmoid that its
    multiply keeps, 2 x 1024 x (64 + 1) per layer. Traced and estimated agree to the gate's and the
    expert's own weights."""
    settings = TrainingSettings(seq_len=256, micro_batch=4, precision=precision)
    traced = added_at_end_of_forward(trace_step, extra, settings)
    estimated = added_at_end_of_forward(estimate_memory, extra, settings)
    assert estimated > 2_000_000
    weights = 3 * (3 * 64 * 96 + 64) * 4  # the new weights, fp32 at most
    assert traced == pytest.approx(estimated, abs=weights)


def test_dense_first_layers_are_built_with_their_own_width():
    """DeepSeek-V3's first_k_dense_replace: the first n_dense_layers run one MLP of
    dense_ffn_hidden_size; the traced weights count 3 x 64 x 160 for it, not 4 experts."""
    from measure.trace.models import build_model

    model = build_model(ModelSpec(**TINY_MOE | {"n_dense_layers": 1, "dense_ffn_hidden_size": 160}))
    dense, sparse = model.layers[0].mlp, model.layers[1].mlp
    assert sum(p.numel() for p in dense.parameters()) == 3 * 64 * 160
    assert sum(p.numel() for p in sparse.parameters()) == 64 * 4 + 4 * 3 * 64 * 48


@pytest.mark.parametrize(("precision", "method"), [("amp-bf16", "full"), ("bf16", "lora")])
def test_weighting_the_routed_outputs_saves_what_the_engine_counts(precision, method):
    """Each routed (token, expert) pair's output is multiplied by its routing weight and added with
    index_add_, which keeps the weighted output (r bytes per element); the multiply keeps the
    expert's output too (c bytes), since the routing weights need a gradient (through the layer's
    input when the router is frozen). Measured before the engine counted it, the
    tiny MoE's end of forward was 7-8% under the trace; now it is within 3% (the rest is the
    router's softmax, top-k indices and gathered indices, a few hundred bytes per token here and
    negligible at real widths)."""
    run = TrainingSettings(seq_len=64, micro_batch=4, precision=precision, method=method)
    spec = ModelSpec(**TINY_MOE)
    traced, estimated = trace_step(spec, run), estimate_memory(spec, run)
    end = "end of forward"
    assert estimated.phases_gib[end] == pytest.approx(traced.phases_gib[end], rel=0.03)


@pytest.mark.parametrize("method", ["lora", "full"])
def test_weights_of_dense_first_layers_match_the_trace(method):
    """With a dense first layer (first_k_dense_replace) the engine holds each layer's own weights
    and adapters: its weights at the end of forward equal the trace's to the byte, its optimizer states
    to AdamW's step counts (under LoRA it used to count every layer as sparse)."""
    spec = ModelSpec(**TINY_MOE | {"n_dense_layers": 1, "dense_ffn_hidden_size": 160})
    settings = TrainingSettings(seq_len=64, micro_batch=2, precision="bf16", method=method, lora_targets="all-linear")
    traced = trace_step(spec, settings).phase_components_gib["end of forward"]
    estimated = estimate_memory(spec, settings).phase_components_gib["end of forward"]
    assert estimated["weights"] * GIB == pytest.approx(traced["weights"] * GIB, abs=1)
    # AdamW keeps a 4-byte step count per trained tensor, which the engine leaves out (under 100 here)
    assert estimated["optimizer_states"] * GIB == pytest.approx(traced["optimizer_states"] * GIB, abs=400)


@pytest.mark.parametrize(("experts", "per_token"), [(4, 2), (8, 4)])
@pytest.mark.parametrize("precision", ["bf16", "amp-bf16"])
def test_routing_and_expert_inputs_match_the_trace_per_layer(experts, per_token, precision):
    """Per layer the engine counts what the trace keeps to within 1 B per token. Before: the
    router's bookkeeping was left out (4E + 30k + 4 B per token in bf16: 80 at 4 experts, top 2),
    and under autocast over fp32 weights each expert's gate and up were given one shared cast of
    the gathered tokens where they keep one each, while the router, which reads the block's input
    alone, was given two: (k - 1) x 2h per token short (128 B at h 64, top 2)."""
    spec = ModelSpec(**TINY_MOE | {"n_experts": experts, "experts_per_token": per_token})
    settings = TrainingSettings(seq_len=256, micro_batch=4, precision=precision)

    def per_layer(source) -> float:
        two, four = (source(spec.model_copy(update={"n_layers": n}), settings) for n in (2, 4))
        return (four.phases_gib["end of forward"] - two.phases_gib["end of forward"]) / 2 * GIB

    assert per_layer(estimate_memory) == pytest.approx(per_layer(trace_step), abs=1024)
