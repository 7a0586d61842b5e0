"""Transformer Engine's delayed-scaling fp8 casts against torchao's dynamic ones."""

from calculators.models.presets import get_preset
from calculators.timing.operations import fp8_cast_bytes
from calculators.workload.training import TrainingSettings

LLAMA2_7B = get_preset("llama-2-7b")


def test_delayed_scaling_casts_once_and_caches_weights_per_step():
    """One token through a Llama-2-7B layer (tests/test_step_time.py): inputs 35,584 and output
    gradients 42,496 per token, weights 202,375,168. Delayed: cast and transpose in one kernel,
    read 2 + write 1 + 1 = 4 bytes per element, no amax pass; weights cast on the first of the
    step's 2 micro-batches only: 4 x 78,080 + 4 x 202,375,168 / 2 = 405,062,656 per micro-batch."""
    settings = TrainingSettings(micro_batch=1, seq_len=1, grad_accum=2)
    assert fp8_cast_bytes(LLAMA2_7B, settings, recipe="delayed") == 4 * 78_080 + 2 * 202_375_168
    # dynamic (torchao) is unchanged: 7 bytes per element, weights every micro-batch
    assert fp8_cast_bytes(LLAMA2_7B, settings) == 7 * 202_453_248
