"""LoRA under autocast: the frozen base is loaded in bf16 (calculators.workload.precision.frozen_weight_bytes),
so the embedding's output and the residual stream are bf16 and autocast casts none of the hidden
states (calculators.workload.training.hidden_states_fp32). The engine counted them fp32 with one half cast
per adapted linear, 20% more than the trace per Llama layer at this width. Per-layer bytes are the
difference between a 4- and a 3-layer model, so the embeddings and the head cancel."""

from __future__ import annotations

import pytest

from calculators.memory.activations.attention import rotary_table_bytes
from calculators.memory.activations.norms import first_norm_unrecorded_bytes
from calculators.memory.engine import estimate_memory
from calculators.models.spec import ModelSpec
from calculators.units import GIB
from calculators.workload.training import TrainingSettings, hidden_states_fp32

torch = pytest.importorskip("torch")

from measure.trace.tracer import trace_step  # noqa: E402

TINY = dict(n_layers=3, hidden_size=64, n_heads=4, n_kv_heads=2, ffn_hidden_size=48, vocab_size=256,
            max_position_embeddings=64)  # fmt: skip
SHARED_MOE = TINY | dict(n_experts=4, experts_per_token=2, shared_expert_ffn_size=96)


def test_hidden_states_are_fp32_only_with_an_fp32_base():
    def fp32(precision: str, method: str) -> bool:
        return hidden_states_fp32(TrainingSettings(precision=precision, method=method))

    assert fp32("amp-bf16", "full") and fp32("fp32", "lora") and fp32("fp32", "full")
    assert not fp32("amp-bf16", "lora") and not fp32("amp-fp16", "qlora") and not fp32("bf16", "full")


def per_layer(source, spec: dict, settings: TrainingSettings) -> float:
    four, three = source(ModelSpec(**spec | {"n_layers": 4}), settings), source(ModelSpec(**spec), settings)
    return (four.phases_gib["end of forward"] - three.phases_gib["end of forward"]) * GIB


def test_a_llama_layer_under_amp_lora_with_dropout_keeps_what_the_trace_keeps():
    """128 tokens, h 64, every linear adapted (rank 16), LoRA dropout 0.1. The trace keeps
    584,504 bytes per layer with the adapters' weights and states; the engine now counts the same
    to 56 bytes (it counted 568,064: fp32 norm outputs, a half cast per adapter and only the
    dropout masks; at 1024 tokens 3.8 MB against the trace's 3.1 MB)."""
    settings = TrainingSettings(seq_len=64, micro_batch=2, precision="amp-bf16", method="lora", lora_dropout=0.1)
    traced, estimated = per_layer(trace_step, TINY, settings), per_layer(estimate_memory, TINY, settings)
    assert traced == pytest.approx(584_504, abs=8)
    assert estimated == pytest.approx(traced, abs=64)


def test_a_shared_expert_layer_under_lora_matches_the_trace():
    """The same width with 4 experts (2 per token) and a 96-wide shared expert, bf16 LoRA with
    dropout. Fixed against the trace: the frozen router keeps no copy of the block's input, the
    shared expert's adapters keep it once, the routing multiply keeps the experts' outputs (the
    routing weights need a gradient through the layer's input), each expert's adapters drop out
    their own gathered tokens, and the router's bookkeeping (softmax output, top-k indices,
    normalised weights, routed-pair indices and gathered weights) is counted: 4 x 4 + 30 x 2 + 4 =
    80 bytes per token, 10,240 on 128 tokens, that the engine used to leave out. Measured now:
    152 bytes apart per layer."""
    settings = TrainingSettings(seq_len=64, micro_batch=2, precision="bf16", method="lora", lora_dropout=0.1)
    traced, estimated = per_layer(trace_step, SHARED_MOE, settings), per_layer(estimate_memory, SHARED_MOE, settings)
    assert traced - estimated == pytest.approx(0, abs=200)


def test_after_a_layernorm_each_adapter_keeps_its_own_half_cast():
    """The same layer with LayerNorms: CUDA autocast runs layer_norm in fp32 (the trace emulates
    it), so the norm keeps its fp32 cast of the bf16 input and each adapter its own half cast of
    the fp32 output, with only masks from the dropouts; the fp32 layer_norm also keeps fp32 casts
    of the two frozen bf16 LayerNorms' weights and biases, 2 x 2 x 64 x 4 = 1,024 bytes
    (layernorm_parameter_casts_bytes). 128 tokens: 586,808 bytes per layer traced, 586,752
    estimated (585,728 before the casts were counted: the gap grew with the width, not the tokens)."""
    settings = TrainingSettings(seq_len=64, micro_batch=2, precision="amp-bf16", method="lora", lora_dropout=0.1)
    spec = TINY | {"norm": "layernorm"}
    traced, estimated = per_layer(trace_step, spec, settings), per_layer(estimate_memory, spec, settings)
    assert traced == pytest.approx(586_808, abs=8)
    assert estimated == pytest.approx(586_752, abs=8)


def test_the_first_layer_norm_records_nothing_under_lora():
    """Under LoRA nothing before the first layer trains: its input norm, frozen, on an input that
    needs no gradient, keeps nothing (256 tokens x (4 x 64 fp32 upcast + 4 rstd) = 66,560 B the
    engine counted before). At the end of forward engine and trace agree but for 8 B of scalars:
    the rotary cos and sin tables, 2 x 128 positions x 16 x 2 B = 8,192 B (rotary_table_bytes),
    are counted by both."""
    spec = ModelSpec(**TINY | {"max_position_embeddings": 128})
    settings = TrainingSettings(seq_len=128, micro_batch=2, precision="bf16", method="lora")
    assert first_norm_unrecorded_bytes(spec, settings) == 256 * (4 * 64 + 4)
    assert first_norm_unrecorded_bytes(spec, settings.model_copy(update={"method": "full"})) == 0
    traced = trace_step(spec, settings).phase_components_gib["end of forward"]["activations"]
    estimated = estimate_memory(spec, settings).phase_components_gib["end of forward"]["activations"]
    assert (traced - estimated) * 2**30 == 8  # scalars
    assert rotary_table_bytes(spec, settings) == 2 * 128 * 16 * 2
