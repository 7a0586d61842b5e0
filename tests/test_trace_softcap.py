"""Gemma's soft-capping and RMSNorm in the engine (calculators.memory) and in the traced step
(measure.trace.models).

Gemma 2 caps the attention scores, cap * tanh(scores / cap) with cap 50, and the logits with cap
30 (transformers models/gemma2/modeling_gemma2.py @006e8693, eager_attention_forward and
Gemma2ForCausalLM.forward); tanh saves its output for backward. Gemma's RMSNorm multiplies the
fp32 normalised tensor by (1 + weight) before casting, so the copy it saves for the weight's
gradient is fp32 where Llama's is in the input dtype."""

from __future__ import annotations

import pytest

from calculators.memory.activations.head import logits_bytes
from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.activations.norms import norm_saved_bytes
from calculators.memory.engine import estimate_memory
from calculators.models.hf_config import spec_from_config_dict
from calculators.models.presets import get_preset
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

torch = pytest.importorskip("torch")

from measure.trace.tracer import trace_step  # noqa: E402

TINY_GEMMA2 = spec_from_config_dict(
    {
        "model_type": "gemma2", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512,
        "max_position_embeddings": 256, "hidden_activation": "gelu_pytorch_tanh",
    }
)  # fmt: skip
UNCAPPED = TINY_GEMMA2.model_copy(update={"attention_softcap": None, "logit_softcap": None})


def test_a_gemma2_config_without_caps_gets_transformers_defaults_and_null_turns_them_off():
    """Gemma2Config defaults attn_logit_softcapping 50.0 and final_logit_softcapping 30.0
    (configuration_gemma2.py @008e5743); transformers tests `is not None`, so null means no cap."""
    assert (TINY_GEMMA2.attention_softcap, TINY_GEMMA2.logit_softcap) == (50.0, 30.0)
    uncapped = spec_from_config_dict(
        {
            "model_type": "gemma2", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512,
            "attn_logit_softcapping": None, "final_logit_softcapping": None,
        }
    )  # fmt: skip
    assert (uncapped.attention_softcap, uncapped.logit_softcap) == (None, None)
    assert get_preset("gemma-2-9b").attention_softcap == 50.0
    assert get_preset("gemma-2-9b").logit_softcap == 30.0


def test_softcap_adds_one_tanh_output_per_score_and_per_logit_for_gemma_2_9b():
    """Gemma-2-9B, micro-batch 1 x 4096 tokens, pure bf16, eager attention, full loss:
    - per layer the tanh of the capped scores, 2 bytes x 16 heads x 4096^2 = 536,870,912 B;
    - the tanh of the capped logits, 2 bytes x 4096 x 256,000 = 2,097,152,000 B, at the end of
      forward and at the loss gradient alike.
    Flash attention caps in its kernel and the chunked loss makes no whole logits: nothing added."""
    capped = get_preset("gemma-2-9b")
    uncapped = capped.model_copy(update={"attention_softcap": None, "logit_softcap": None})
    settings = TrainingSettings(seq_len=4096, micro_batch=1, precision="bf16", attention="eager")

    def core(spec, s):
        return layer_activation_terms(spec, s)["attention_core"]

    assert core(capped, settings) - core(uncapped, settings) == 536_870_912
    forward_capped, backward_capped = logits_bytes(capped, settings)
    forward, backward = logits_bytes(uncapped, settings)
    assert (forward_capped - forward, backward_capped - backward) == (2_097_152_000, 2_097_152_000)
    fused = settings.model_copy(update={"attention": "fused", "loss": "chunked"})
    assert core(capped, fused) == core(uncapped, fused)
    assert logits_bytes(capped, fused) == logits_bytes(uncapped, fused)


def test_gemma_norm_saves_its_normalised_copy_in_fp32():
    """One RMSNorm over 4096 tokens of Gemma-2-9B (h = 3584) in pure bf16 saves the fp32 upcast
    (4 x 4096 x 3584 = 58,720,256 B), the fp32 rstd (16,384 B) and the normalised tensor for the
    weight's gradient in fp32 (58,720,256 B): 117,456,896 B, where Llama's norm keeps that copy in
    bf16 (29,360,128 B): 88,096,768 B. A frozen weight (LoRA) needs no copy in either."""
    gemma = get_preset("gemma-2-9b")
    llama_style = gemma.model_copy(update={"family": "llama"})
    settings = TrainingSettings(seq_len=4096, micro_batch=1, precision="bf16")
    assert norm_saved_bytes(gemma, settings, 4096) == 117_456_896
    assert norm_saved_bytes(llama_style, settings, 4096) == 88_096_768
    assert norm_saved_bytes(gemma, settings, 4096, weight_trainable=False) == 58_736_640


@pytest.mark.parametrize(("precision", "attention"), [("bf16", "eager"), ("bf16-mixed", "fused")])
def test_trace_and_engine_agree_on_what_softcapping_adds_in_every_phase(precision, attention):
    """Traced differences (capped model minus uncapped) equal the engine's in every phase the
    engine reports: with eager attention, 2 bytes per score of both layers plus the capped logits'
    tanh output; with fused attention only the logits' (measured 2,621,440 B and 262,144 B at the
    end of forward for these shapes)."""
    settings = TrainingSettings(seq_len=256, micro_batch=2, precision=precision, attention=attention)

    def added(source) -> dict[str, float]:
        capped, uncapped = source(TINY_GEMMA2, settings), source(UNCAPPED, settings)
        return {phase: (capped.phases_gib[phase] - uncapped.phases_gib[phase]) * GIB for phase in PHASES}

    traced, estimated = added(trace_step), added(estimate_memory)
    logits = 2 * 2 * 256 * 512
    scores = 2 * 2 * 4 * 256 * 256 * 2 if attention == "eager" else 0
    assert estimated["end of forward"] == logits + scores
    assert traced == pytest.approx(estimated, abs=1)


PHASES = ("end of forward", "loss backward", "backward, last layer", "backward, first layer")


def test_trace_and_engine_agree_on_what_gemmas_norm_adds():
    """Gemma's norm against Llama's on the same tiny model (pure bf16, full training): the engine
    adds 2 bytes per element of each of the 9 norms' inputs (2 layers x 4 + the final norm),
    9 x 2 x 512 x 64 = 589,824 B; the trace adds that and each norm's fp32 (1 + weight),
    9 x 4 x 64 = 2,304 B."""
    settings = TrainingSettings(seq_len=256, micro_batch=2, precision="bf16")
    llama_style = UNCAPPED.model_copy(update={"family": "llama"})

    def added(source) -> float:
        return (
            source(UNCAPPED, settings).phases_gib["end of forward"]
            - source(llama_style, settings).phases_gib["end of forward"]
        ) * GIB

    assert added(estimate_memory) == 589_824
    assert added(trace_step) == 589_824 + 2_304
