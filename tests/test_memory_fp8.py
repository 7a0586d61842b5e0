"""--precision fp8: torchao Float8Linear (tensorwise dynamic scaling) as torchtitan converts the
model, every linear but the LM head; hand-worked numbers on Llama-3.2-1B (h 2048, ffn 8192,
q 2048, k/v 512), one sequence of 2048 tokens."""

from __future__ import annotations

import pytest

from calculators.memory.activations.attention import out_projection_input_bytes
from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.activations.linears import linear_inputs_saved_bytes
from calculators.memory.engine import estimate_memory
from calculators.memory.states import fp8_weight_cast_bytes
from calculators.models.presets import get_preset
from calculators.units import GIB
from calculators.workload.support import check_supported
from calculators.workload.training import TrainingSettings

LLAMA_1B = get_preset("llama-3.2-1b")
TOKENS = 2048
# one layer's matmul weights: q and o 2048 x 2048, k and v 2048 x 512, gate, up and down 2048 x 8192
LAYER_MATMUL = 2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 8192  # 60,817,408


def fp8(**changes) -> TrainingSettings:
    return TrainingSettings(**(dict(precision="fp8", micro_batch=1, seq_len=TOKENS) | changes))


def test_each_float8_linear_saves_its_own_one_byte_input_cast():
    """q, k and v each cast the normed input: 3 x 1 B x 2048 x 2048 = 12,582,912 B, against one
    shared bf16 tensor, 2 B x 2048 x 2048 = 8,388,608 B."""
    assert linear_inputs_saved_bytes(fp8(), TOKENS, 2048, 3) == 12_582_912
    assert linear_inputs_saved_bytes(fp8(precision="bf16-mixed"), TOKENS, 2048, 3) == 8_388_608


def test_o_keeps_its_cast_beside_the_attention_output():
    """Fused attention: SDPA saves its output, o adds its e4m3 cast 2048 x 2048 x 1 B = 4,194,304 B."""
    assert out_projection_input_bytes(LLAMA_1B, fp8(), TOKENS) == 4_194_304
    assert out_projection_input_bytes(LLAMA_1B, fp8(precision="bf16-mixed"), TOKENS) == 0


def test_the_mlp_saves_float8_inputs_of_its_linears():
    """bf16: the shared input 8,388,608 + gate, up and silu(gate) 3 x 2 B x 2048 x 8192 = 100,663,296
    + down's input 33,554,432 = 142,606,336 B. fp8: gate's and up's casts 2 x 4,194,304 + the same
    100,663,296 + down's cast 1 B x 2048 x 8192 = 16,777,216: 125,829,120 B."""
    assert layer_activation_terms(LLAMA_1B, fp8(precision="bf16-mixed"))["mlp"] == 142_606_336
    assert layer_activation_terms(LLAMA_1B, fp8())["mlp"] == 125_829_120


def test_weight_casts_are_kept_until_backward_unless_checkpointed():
    """16 layers x 60,817,408 weights x 1 B = 973,078,528 B at the end of forward (the head stays
    bf16); full checkpointing keeps only the rebuilt layer's, 60,817,408 B."""
    assert fp8_weight_cast_bytes(16 * LAYER_MATMUL) == 973_078_528
    plain = estimate_memory(LLAMA_1B, fp8()).phase_components_gib["end of forward"]
    assert plain["autocast_weight_copies"] == pytest.approx(973_078_528 / GIB)
    full = estimate_memory(LLAMA_1B, fp8(checkpointing="full")).phase_components_gib["end of forward"]
    assert full["autocast_weight_copies"] == pytest.approx(LAYER_MATMUL / GIB)


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"checkpointing": "op-selective"}, "op-selective"), ({"method": "lora"}, "full training")],
)
def test_fp8_combinations_not_modelled_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        check_supported(LLAMA_1B, fp8(**changes))
