"""gpt-oss in the engine (calculators.memory) and the traced step (measure.trace.models): attention
sinks under eager attention, the experts' clamped SwiGLU with biases, and the router's bias.

transformers models/gpt_oss/modeling_gpt_oss.py @6edf5b31: eager_attention_forward concatenates
each head's sink logit to the scores, subtracts the row max and softmaxes in the logits' dtype;
GptOssExperts.forward clamps gate and up, computes (up + 1) * gate * sigmoid(1.702 gate), weights
each expert's output by its routing weight and adds it with index_add_."""

from __future__ import annotations

import pytest

from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.engine import estimate_memory
from calculators.models.geometry import parameter_count
from calculators.models.hf_config import spec_from_config_dict
from calculators.models.library import library_spec
from calculators.units import GIB
from calculators.workload.training import TrainingSettings
from measure.trace.result import UnsupportedConfiguration
from measure.trace.support import check_traceable

torch = pytest.importorskip("torch")

from measure.trace.models import build_model  # noqa: E402
from measure.trace.tracer import trace_step  # noqa: E402

TINY_GPT_OSS = spec_from_config_dict(
    {
        "model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
        "max_position_embeddings": 256, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 32,
    }
)  # fmt: skip


def eager(precision: str = "bf16", **changes) -> TrainingSettings:
    return TrainingSettings(seq_len=64, micro_batch=2, precision=precision, attention="eager", **changes)


def test_gpt_oss_20b_attention_with_sinks_keeps_a_third_of_llamas_scores_in_bf16():
    """gpt-oss-20b, one sequence of 2048 tokens in pure bf16, eager: the bf16 softmax output over
    2049 columns (2 x 2049 B per row of scores) and the int64 index of each row's max (8 B):
    64 heads x 2048 rows x (4098 + 8) = 538,181,632 B per layer. An fp32 softmax with its bf16 copy
    for the weighted sum (Llama-style code, 6 B per score) would keep 64 x 2048^2 x 6 = 1,610,612,736."""
    gpt_oss = library_spec("openai/gpt-oss-20b")
    run = TrainingSettings(seq_len=2048, micro_batch=1, precision="bf16", attention="eager")
    assert layer_activation_terms(gpt_oss, run)["attention_core"] == 538_181_632
    without_sinks = gpt_oss.model_copy(update={"attention_sinks": False})
    assert layer_activation_terms(without_sinks, run)["attention_core"] == 1_610_612_736


def test_gpt_oss_20b_experts_keep_what_the_clamped_swiglu_saves():
    """Per token of one sparse layer in bf16, full training (h = I = 2880, 4 experts per token):
    the normed hidden state read by the router and the experts, 2 x 2880 = 5,760; per routed pair
    the gathered copy (5,760), the clamps' gate and up inputs, sigmoid's output, the clamped gate,
    up + 1, glu and down's input (7 x 2 x 2880 = 40,320), the expert's output kept by the routing
    multiply and the weighted output kept by index_add_ (2 x 2 x 2880 = 11,520): 57,600 per pair,
    as autograd's saved tensors of transformers' loop measure (7 I + 3 H elements); the routing's
    own tensors, counted Mixtral's way (router_bookkeeping_bytes: gpt-oss softmaxes the top-k
    logits instead, a few bytes apart), 4 x 32 + 30 x 4 + 4 = 252.
    5,760 + 4 x 57,600 + 252 = 236,412 B per token."""
    gpt_oss = library_spec("openai/gpt-oss-20b")
    run = TrainingSettings(seq_len=2048, micro_batch=1, precision="bf16")
    assert gpt_oss.activation == "clamped-swiglu"
    assert layer_activation_terms(gpt_oss, run)["mlp"] == 236_412 * 2048


def test_sinks_are_traced_with_eager_attention_only():
    with pytest.raises(UnsupportedConfiguration, match="fused attention with attention sinks"):
        check_traceable(TINY_GPT_OSS, eager().model_copy(update={"attention": "fused"}))
    check_traceable(TINY_GPT_OSS, eager())


@pytest.mark.parametrize(
    ("precision", "method", "expected"),
    [("bf16", "full", -251_904 + 48), ("amp-bf16", "full", 12_288 + 96), ("amp-bf16", "lora", -251_904 + 16)],
)
def test_trace_and_engine_agree_on_what_sinks_change(precision, method, expected):
    """gpt-oss's sink attention against the same model's Llama-style eager attention (fp32 softmax
    and its bf16 copy, 6 B per score). Per score, sinks keep 2 x 65/64 + 8/64 = 2.15625 B in bf16
    (-3.84375 x 65,536 scores = -251,904 B over 2 layers of 2 x 4 heads x 64^2), and under autocast,
    where the fp32 sink logits make the softmax fp32, 4 x 65/64 + 8/64 + 2 = 6.1875 B (+12,288 B).
    Under autocast with LoRA the sink logits are the frozen base's, bf16: the softmax with its
    explicit dtype stays bf16, as in pure bf16. Plus the 8 sink logits' weights and AdamW states:
    8 x (2 + 4) = 48 B in bf16, 8 x (4 + 8) = 96 B with fp32 weights, 8 x 2 = 16 B frozen. The
    trace agrees to within 64 B."""
    no_sinks = TINY_GPT_OSS.model_copy(update={"attention_sinks": False})
    run = eager(precision, method=method)

    def changed(source) -> float:
        return (
            source(TINY_GPT_OSS, run).phases_gib["end of forward"] - source(no_sinks, run).phases_gib["end of forward"]
        ) * GIB

    traced, estimated = changed(trace_step), changed(estimate_memory)
    assert estimated == expected
    assert traced == pytest.approx(estimated, abs=64)


def test_engine_is_within_three_percent_of_the_trace():
    run = eager()
    traced, estimated = trace_step(TINY_GPT_OSS, run), estimate_memory(TINY_GPT_OSS, run)
    for phase in ("end of forward", "backward, last layer"):
        assert estimated.phases_gib[phase] == pytest.approx(traced.phases_gib[phase], rel=0.03)


def test_gpt_oss_20b_builds_with_the_engines_parameter_count():
    """Sinks, router bias and expert biases included: 20,914,757,184 parameters."""
    spec = library_spec("openai/gpt-oss-20b")
    with torch.device("meta"):
        built = build_model(spec, attention="eager")
    assert sum(p.numel() for p in built.parameters()) == parameter_count(spec).total == 20_914_757_184
