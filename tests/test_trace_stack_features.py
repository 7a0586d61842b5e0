"""Training-stack features emulated in the traced step: Liger's fused linear cross-entropy
(measure.trace.fused_loss) and torch.compile's partitioner (measure.trace.compile_partition).
The expected bytes are worked out by hand in each docstring."""

from __future__ import annotations

import pytest

from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from measure.trace.compile_partition import saved_per_layer  # noqa: E402
from measure.trace.fused_loss import chunk_rows, fused_linear_cross_entropy  # noqa: E402
from measure.trace.tracer import trace_step  # noqa: E402
from measure.trace.tracking import LiveStorageTracker  # noqa: E402

TINY_LLAMA = ModelSpec(
    name="tiny-llama",
    n_layers=2,
    hidden_size=64,
    vocab_size=256,
    max_position_embeddings=64,
    n_heads=4,
    n_kv_heads=2,
    ffn_hidden_size=172,
)


def test_chunk_rows_follow_liger():
    """inc_factor = ceil(V/H), rows = next_power_of_2(ceil(BT/inc_factor)): Liger's own example
    BT = 4096*4, V = 32000, H = 4096 gives 8 and 2048; Llama-3.2-1B at b2 s2048 gives
    ceil(128256/2048) = 63 and next_power_of_2(66) = 128."""
    assert chunk_rows(4096 * 4, 4096, 32000) == 2048
    assert chunk_rows(4096, 2048, 128256) == 128
    assert chunk_rows(64, 64, 256) == 16


def test_fused_linear_loss_matches_cross_entropy_and_its_gradients():
    """Real fp64 tensors: the loss and both gradients equal F.cross_entropy's on the full logits
    (ignored labels included), also when the loss is scaled before backward."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 24, 16, dtype=torch.float64, generator=generator, requires_grad=True)
    weight = torch.randn(40, 16, dtype=torch.float64, generator=generator, requires_grad=True)
    labels = torch.randint(0, 40, (2, 24), generator=generator)
    labels[0, :5] = -100
    loss = fused_linear_cross_entropy(hidden, weight, labels)
    (0.5 * loss).backward()
    fused = (loss.detach(), hidden.grad.clone(), weight.grad.clone())
    hidden.grad = weight.grad = None
    reference = F.cross_entropy((hidden @ weight.t()).flatten(0, 1), labels.flatten())
    (0.5 * reference).backward()
    torch.testing.assert_close(fused, (reference.detach().float(), hidden.grad, weight.grad))


def test_fused_linear_loss_saves_grad_input_and_grad_weight_and_peaks_at_the_weight_gradient():
    """BT = 64 tokens, H = 64, V = 256, bf16 (fake tensors): chunks of
    next_power_of_2(ceil(64 / ceil(256/64))) = 16 rows. Saved for backward: grad_input,
    BT x H x 2 = 8,192 bytes, and grad_weight in the weight's dtype (accum_dtype None),
    V x H x 2 = 32,768 bytes. The forward's peak, at the fp32 copy of a chunk's weight gradient
    (grad_weight += mm(grad_logits.T, x).float()), holds beyond the inputs: grad_input 8,192,
    grad_weight 32,768, the fp32 loss per token 256, the non-ignored count 8, the chunk's logits
    16 x 256 x 2 = 8,192, the mm output V x H x 2 = 32,768 and its fp32 copy V x H x 4 = 65,536:
    147,720 bytes. The Triton kernel's fp32 upcast is in registers and not counted. For fp32
    the mm output is fp32 already (.float() makes no copy): grad_input and the chunk's logits
    16,384 each, grad_weight and the mm output 65,536 each, and 264: 164,104."""
    for dtype, saved_weight, peak in ((torch.bfloat16, 32_768, 147_720), (torch.float32, 65_536, 164_104)):
        with FakeTensorMode():
            hidden = torch.empty(64, 64, dtype=dtype, requires_grad=True)
            weight = torch.empty(256, 64, dtype=dtype, requires_grad=True)
            labels = torch.zeros(64, dtype=torch.long)
            tracker = LiveStorageTracker()
            with tracker:
                tracker.adopt([hidden, weight, labels], "inputs")
                baseline = tracker.live_bytes
                tracker.recording = True
                loss = fused_linear_cross_entropy(hidden, weight, labels, tracker)
            grad_input, grad_weight = loss.grad_fn.saved_tensors
        assert grad_input.shape == (64, 64) and grad_input.dtype == dtype
        assert grad_input.untyped_storage().nbytes() == 64 * 64 * dtype.itemsize
        assert grad_weight.dtype == dtype and grad_weight.untyped_storage().nbytes() == saved_weight
        assert tracker.peaks["setup"].bytes - baseline == peak


def test_fused_linear_loss_in_the_traced_step_against_the_engine():
    """Tiny Llama, bf16, b2 s128, V = 4096, tied head: 256 tokens, chunks of
    next_power_of_2(ceil(256 / 64)) = 4 rows. At the end of forward the loss holds only
    grad_weight, V x H x 2 = 524,288 bytes (logits_and_loss). During forward each chunk adds the
    mm output of its weight gradient and that output's fp32 copy, V x H x (2 + 4) = 1,572,864
    bytes, plus its logits (4 x 4096 x 2) and the loss per token (256 x 4). The engine's one
    forward phase carries that in-loop peak (fused_linear_loss_bytes with
    liger_weight_update_temporary_bytes), so its end of forward is the trace's forward peak."""
    from calculators.memory.engine import estimate_memory

    spec = TINY_LLAMA.model_copy(update={"vocab_size": 4096, "max_position_embeddings": 256})
    settings = TrainingSettings(micro_batch=2, seq_len=128, precision="bf16", loss="fused-linear")
    traced = trace_step(spec, settings)
    end = traced.phase_components_gib["end of forward"]
    assert end["logits_and_loss"] * 2**30 == 4096 * 64 * 2
    estimate = estimate_memory(spec, settings)
    engine_end = estimate.phase_components_gib["end of forward"]
    assert engine_end["logits_and_loss"] * 2**30 == 4096 * 64 * (2 + 2 + 4) + 4 * 4096 * 2 + 256 * 4
    forward = traced.phase_components_gib["forward"]["logits_and_loss"] * 2**30
    assert forward == 4096 * 64 * (2 + 2 + 4) + 4 * 4096 * 2 + 256 * 4 + 8
    assert estimate.phases_gib["end of forward"] == pytest.approx(traced.phases_gib["forward"], rel=0.01)


def test_compiled_layer_saves_what_the_partitioner_chooses():
    """One tiny Llama layer (h = 64, f = 172, 4 heads of 16, 2 kv heads), bf16, b2 s32 = 64
    tokens, through AOT autograd's min-cut partitioner: per token the layer input 2h = 128 and
    the fp32 rstd 4 of the first norm; the normed input of q/k/v 2h = 128; q after the rotation
    and k, v repeated to every head 3 x 2 x 64 = 384; SDPA's fp32 log-sum-exp 4 x 4 = 16; its
    output (o's input) 128; o's output 128 (the residual sum after attention is recomputed from
    it), the second norm's rstd 4 and output 128; gate, up and their product (down's input)
    3 x 2 x 172 = 1,032. Total 2,080 bytes per token, 133,120 for the layer: the upcast and the
    normalised fp32 tensor of HF's RMSNorm and SiLU's output are recomputed in backward. This
    is what the engine's compile terms add up to."""
    from calculators.memory.activations.layer import layer_activation_terms

    settings = TrainingSettings(micro_batch=2, seq_len=32, precision="bf16", compile=True)
    partition = saved_per_layer(TINY_LLAMA, settings)
    widths = sorted(t.nbytes // 64 for t in partition.saved)
    assert widths == sorted([128, 4, 128, 128, 128, 128, 16, 128, 128, 4, 128, 344, 344, 344])
    assert partition.bytes_per_token == 2080
    assert sum(layer_activation_terms(TINY_LLAMA, settings).values()) == 133_120


def test_compiled_layers_in_the_traced_step_against_the_engine():
    """compile=True in the trace runs each layer's partitioned graphs: the end of forward saves
    less than the eager step by the two fp32 norm tensors and SiLU's output per layer, and the
    engine's end of forward is within 1% of the trace's."""
    from calculators.memory.engine import estimate_memory

    spec = TINY_LLAMA.model_copy(update={"vocab_size": 4096, "max_position_embeddings": 256})
    settings = TrainingSettings(micro_batch=2, seq_len=128, precision="bf16", compile=True)
    traced = trace_step(spec, settings)
    plain = trace_step(spec, settings.model_copy(update={"compile": False}))
    end = "end of forward"
    assert traced.phases_gib[end] < plain.phases_gib[end]
    assert estimate_memory(spec, settings).phases_gib[end] == pytest.approx(traced.phases_gib[end], rel=0.01)
