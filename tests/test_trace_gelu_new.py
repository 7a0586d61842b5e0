"""transformers' "gelu_new" (NewGELUActivation: GPT-2, GPT-J, GPT-Neo, Phi-1/2, Flan-T5) is the
tanh GELU written out op by op, and each op keeps its own tensor for backward. The engine
(calculators.memory) against the hand count and the traced step (measure.trace.models)."""

from __future__ import annotations

import pytest

from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.activations.mlp import mlp_activation_saved_bytes
from calculators.memory.engine import estimate_memory
from calculators.models.hf_config import spec_from_config_dict
from calculators.models.library import library_spec
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

TINY_GPT2 = {
    "model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512, "n_positions": 256,
    "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "written_out"),
    [
        ({"model_type": "gpt2"}, True),  # GPT2Config.activation_function defaults to "gelu_new"
        ({"model_type": "gpt2", "activation_function": "gelu"}, False),
        ({"model_type": "phi"}, True),  # PhiConfig.hidden_act defaults to "gelu_new"
        ({"model_type": "gpt_bigcode", "activation_function": "gelu_pytorch_tanh"}, False),
        ({"model_type": "t5", "feed_forward_proj": "gated-gelu"}, True),  # T5Config maps it to "gelu_new"
        ({"model_type": "t5", "feed_forward_proj": "relu"}, False),
        ({"model_type": "llama", "hidden_act": "silu"}, False),
    ],
)
def test_configs_say_when_gelu_is_written_out(config, written_out):
    shape = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 512}
    shape |= {"d_model": 64, "num_heads": 4, "num_layers": 2, "d_ff": 256, "n_embd": 64, "n_head": 4, "n_layer": 2}
    assert spec_from_config_dict(shape | config).gelu_written_out is written_out


def test_gpt2_mlp_keeps_what_the_written_out_gelu_saves():
    """GPT-2 small (h = 768, f = 3072), one sequence of 1024 tokens:
    - bf16: c_fc's input 2 x 1024 x 768 = 1,572,864 B, then per hidden element pow's input, tanh's
      output, 0.5 x and 1 + tanh (4 x 2 B) and c_proj's input (2 B): 10 x 1024 x 3072 =
      31,457,280 B; 33,030,144 B in all (a one-kernel GELU keeps 4 B per element, 14,155,776 B);
    - autocast: pow runs in fp32, so its input is an fp32 cast and tanh, 1 + tanh and the output
      are fp32: 4 + 4 + 2 + 4 = 14 B, plus c_proj's bf16 cast 2 B: 16 x 3,145,728 + 1,572,864 =
      51,904,512 B."""
    gpt2 = library_spec("openai-community/gpt2")
    run = TrainingSettings(seq_len=1024, micro_batch=1, precision="bf16", attention="fused")
    assert mlp_activation_saved_bytes(gpt2, run) == 8
    assert layer_activation_terms(gpt2, run)["mlp"] == 33_030_144
    autocast = run.model_copy(update={"precision": "amp-bf16"})
    assert mlp_activation_saved_bytes(gpt2, autocast) == 14
    assert layer_activation_terms(gpt2, autocast)["mlp"] == 51_904_512
    # torch.compile recomputes the pointwise ops from the saved input, one tensor
    assert mlp_activation_saved_bytes(gpt2, run.model_copy(update={"compile": True})) == 2


def test_flan_t5_gated_gelu_keeps_the_products_operands_too():
    """Flan-T5's T5DenseGatedActDense: act(wi_0 x) * wi_1 x with the written-out GELU keeps the
    GELU's four tensors and the product's two operands: 6 x 2 B in bf16; under autocast
    act(gate) is fp32: 14 + 4 + 2 = 20 B."""
    flan = library_spec("google/flan-t5-base")
    run = TrainingSettings(seq_len=512, micro_batch=1, precision="bf16", attention="eager")
    assert mlp_activation_saved_bytes(flan, run) == 12
    assert mlp_activation_saved_bytes(flan, run.model_copy(update={"precision": "amp-bf16"})) == 20


def test_trace_and_engine_agree_on_what_the_written_out_gelu_adds():
    """Tiny GPT-2 with "gelu_new" against the same with torch's GELU, 2 x 128 tokens, 2 layers of
    f = 256: the engine and the trace differ by the same bytes in every phase: 2 layers x 3 more
    saved tensors x 65,536 elements x c at the end of forward, and one more hidden gradient in the
    layer's backward."""
    torch = pytest.importorskip("torch")  # noqa: F841
    from measure.trace.tracer import trace_step

    run = TrainingSettings(seq_len=128, micro_batch=2, precision="bf16", attention="fused")
    c = 2  # and the same in fp32 with c = 4 (measured)

    def added(source, phase: str) -> float:
        written_out = spec_from_config_dict(TINY_GPT2)
        one_kernel = spec_from_config_dict(TINY_GPT2 | {"activation_function": "gelu"})
        return (source(written_out, run).phases_gib[phase] - source(one_kernel, run).phases_gib[phase]) * GIB

    assert added(trace_step, "end of forward") == 2 * 3 * 65_536 * c
    assert added(estimate_memory, "end of forward") == 2 * 3 * 65_536 * c
    assert added(estimate_memory, "backward, last layer") == added(trace_step, "backward, last layer")
