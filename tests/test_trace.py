"""Traced training steps (measure.trace): fake tensors against a real CPU step, parameter
counts, FLOPs, layer extrapolation, the subprocess runner and its failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from calculators.models.geometry import parameter_count
from calculators.models.presets import get_preset
from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings
from measure.trace import TraceError, run_trace
from measure.trace.worker import FAULT_ENV

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from measure.trace.flops import flop_counter, flops_by_op  # noqa: E402
from measure.trace.models import build_model  # noqa: E402
from measure.trace.tracer import Step, make_inputs, trace_extrapolated, trace_raw, trace_step  # noqa: E402

TINY = dict(n_layers=2, hidden_size=64, vocab_size=256, max_position_embeddings=64)
TINY_LLAMA = ModelSpec(name="tiny-llama", n_heads=4, n_kv_heads=2, ffn_hidden_size=172, **TINY)
TINY_GPT2 = get_preset("gpt2").model_copy(update=dict(n_heads=4, n_kv_heads=4, ffn_hidden_size=256, **TINY))
TINY_BERT = get_preset("bert-base-uncased").model_copy(
    update=dict(n_heads=4, n_kv_heads=4, ffn_hidden_size=256, **TINY)
)
TINY_MOE = get_preset("mixtral-8x7b").model_copy(update=dict(n_heads=4, n_kv_heads=2, ffn_hidden_size=128, **TINY))


def tiny_settings(**changes) -> TrainingSettings:
    return TrainingSettings(micro_batch=2, seq_len=32, **changes)


def test_importing_the_package_does_not_import_torch():
    code = "import measure.trace, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize(
    "name",
    [
        "gpt2",
        "bert-base-uncased",
        "llama-2-7b",
        "llama-3.1-8b",
        "qwen2.5-0.5b",
        "gemma-2-2b",
        "phi-3-mini-4k",
        "mixtral-8x7b",
    ],
)
def test_reference_models_have_the_engines_parameter_count(name):
    spec = get_preset(name)
    with torch.device("meta"):
        model = build_model(spec)
    assert sum(p.numel() for p in model.parameters()) == parameter_count(spec).total


@pytest.mark.parametrize(
    ("spec", "attention"),
    [(TINY_LLAMA, "eager"), (TINY_LLAMA, "fused"), (TINY_GPT2, "eager"), (TINY_BERT, "fused"), (TINY_MOE, "fused")],
    ids=["llama-eager", "llama-fused", "gpt2-eager", "bert-fused", "moe-fused"],
)
def test_tensors_made_in_forward_follow_the_inputs_device(spec, attention):
    """The calibration trains this model on a GPU: rotary tables, masks, positions and MoE routing
    indices must be made on the input's device. The meta device stands in for CUDA here (mixing a
    meta and a CPU tensor raises, as mixing CUDA and CPU does)."""
    with torch.device("meta"):
        model = build_model(spec, attention)
    tokens = torch.zeros(2, 16, dtype=torch.long, device="meta")
    logits = model(tokens)
    width = spec.vocab_size if spec.head == "lm" else spec.num_labels
    assert logits.device.type == "meta"
    assert tuple(logits.shape) == ((2, 16, width) if spec.head == "lm" else (2, width))


@pytest.mark.parametrize(
    ("spec", "settings"),
    [
        (TINY_LLAMA, tiny_settings(precision="amp-bf16", attention="fused", checkpointing="selective")),
        (TINY_LLAMA, tiny_settings(precision="bf16-mixed", attention="eager", optimizer_impl="for-loop")),
        (TINY_GPT2, tiny_settings(precision="fp32", attention="eager", checkpointing="full", optimizer="sgd")),
        (TINY_BERT, tiny_settings(precision="amp-fp16", attention="fused", grad_accum=2)),
        (TINY_MOE, tiny_settings(precision="fp32", attention="fused", optimizer_impl="fused")),
        (TINY_LLAMA, tiny_settings(precision="amp-bf16", method="lora", lora_rank=4, lora_targets="qvo-mlp")),
    ],
    ids=["llama-amp-selective", "llama-mixed-eager", "gpt2-fp32-full", "bert-amp-accum", "moe-fp32", "llama-lora"],
)
def test_fake_trace_matches_a_real_cpu_step_to_the_byte(spec, settings):
    fake, real = trace_raw(spec, settings), trace_raw(spec, settings, fake=False)
    assert fake.phases == real.phases
    assert max(fake.phases.values()) == max(real.phases.values())
    assert fake.phase_components == real.phase_components
    assert fake.phase_components["end of forward"]["activations"] > 0
    assert fake.saved_by_op == real.saved_by_op
    assert fake.flops_by_op == real.flops_by_op


def test_model_states_at_the_optimizer_step_are_exact():
    """bf16-mixed with fused AdamW: 2 + 4 + 8 + 2 bytes per parameter (plus fused AdamW's 4-byte
    step count per tensor), the fp32 copy of the gradients (ZeRO paper Sec. 3.1), and nothing
    else but the token ids."""
    n = parameter_count(TINY_LLAMA).total
    with torch.device("meta"):
        n_tensors = len(list(build_model(TINY_LLAMA).parameters()))
    result = trace_step(TINY_LLAMA, tiny_settings(precision="bf16-mixed", optimizer_impl="fused"))
    step = {k: round(v * 2**30) for k, v in result.phase_components_gib["optimizer step"].items()}
    expected = dict(weights=2 * n, master_weights=4 * n, optimizer_states=8 * n + 4 * n_tensors, gradients=2 * n)
    assert step == expected | {"optimizer_step_temporaries": 4 * n, "inputs": 2 * 2 * 32 * 8}


@pytest.mark.parametrize(("attention", "per_head_flops"), [("eager", 12), ("fused", 14)])
def test_flops_are_6_n_tokens_plus_attention(attention, per_head_flops):
    """Matmuls: forward 2N, backward 4N per token. Attention per layer: q@k^T and p@v forward
    (4*b*h*s*s*d), backward twice that for eager; the flash backward also recomputes the scores."""
    settings = tiny_settings(precision="fp32", attention=attention)
    result = trace_step(TINY_LLAMA, settings)
    b, s, h, d = 2, 32, TINY_LLAMA.n_heads, TINY_LLAMA.attention_head_dim
    tokens = b * s
    attention_flops = per_head_flops * TINY_LLAMA.n_layers * b * h * s * s * d
    assert result.flops_total == 6 * parameter_count(TINY_LLAMA).matmul_total * tokens + attention_flops
    assert result.flops_per_token == result.flops_total / tokens
    if attention == "fused":
        assert result.flops_by_op["_scaled_dot_product_flash_attention_for_cpu"] > 0
        assert result.flops_by_op["_scaled_dot_product_flash_attention_for_cpu_backward"] > 0


def test_flop_tally_equals_flop_counter_mode_on_the_same_micro_batch():
    """The trace tallies FLOPs with torch's formulas inside its own dispatch mode; FlopCounterMode
    (with the same CPU attention formulas) must count the same micro-batch identically."""
    spec, settings = TINY_MOE, tiny_settings(precision="amp-bf16", checkpointing="full")
    traced = trace_raw(spec, settings)
    with FakeTensorMode():
        step = Step(spec, settings)
        tokens, labels = make_inputs(spec, settings)
        with flop_counter() as counter:
            step.micro_batch(tokens, labels, recorded=False)
    assert flops_by_op(counter) == traced.flops_by_op


def test_extrapolation_over_layers_is_exact():
    spec = TINY_GPT2.model_copy(update={"n_layers": 6})
    settings = tiny_settings(precision="amp-bf16", attention="eager", checkpointing="full")
    full, extended = trace_step(spec, settings), trace_extrapolated(spec, settings)
    assert extended.extrapolated and extended.traced_layers == [3, 4, 5]
    assert extended.phases_gib == full.phases_gib
    assert extended.phase_components_gib == full.phase_components_gib
    assert extended.flops_total == full.flops_total
    assert extended.warmup_peak_gib == full.warmup_peak_gib


def test_run_trace_in_a_subprocess_gives_the_in_process_result():
    settings = tiny_settings(precision="bf16-mixed")
    result = run_trace(TINY_LLAMA, settings, timeout_s=120)
    assert result.peak_gib == trace_step(TINY_LLAMA, settings).peak_gib
    assert result.allocated_gib == result.peak_gib
    assert result.peak_phase in result.phases_gib


@pytest.mark.parametrize(
    ("fault", "timeout_s", "message"),
    [
        ("abort", 10, "killed by SIGABRT"),
        ("hang", 0.5, "took longer than 0.5 s"),
        ("garbage", 10, "printed no result"),
    ],
)
def test_a_failing_trace_raises_a_one_line_trace_error(fault, timeout_s, message):
    with pytest.raises(TraceError) as caught:
        run_trace(TINY_LLAMA, tiny_settings(), timeout_s=timeout_s, env={FAULT_ENV: fault})
    text = str(caught.value)
    assert text.startswith("could not trace this configuration: ") and message in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("settings", "message"),
    [(TrainingSettings(optimizer="adamw-8bit"), "8-bit AdamW"), (TrainingSettings(gpus=8, zero=3), "several GPUs")],
)
def test_an_untraceable_configuration_raises_trace_error(settings, message):
    with pytest.raises(TraceError, match=message):
        run_trace(TINY_LLAMA, settings)


def test_lora_trains_only_the_adapters_and_qlora_is_refused_clearly():
    """Tiny Llama (h 64, kv width 32, FFN 172), rank 4 on q, v, o and the MLP: per layer
    4 x [(64+64) + (64+32) + (64+64) + 3 x (64+172)] = 4 x 1,060 = 4,240; 2 layers: 8,480,
    as the engine counts them."""
    from calculators.memory.engine import estimate_memory
    from measure.trace.tracer import Step

    settings = tiny_settings(precision="bf16", method="lora", lora_rank=4, lora_targets="qvo-mlp")
    with FakeTensorMode():
        step = Step(TINY_LLAMA, settings)
    assert sum(p.numel() for p in step.params) == 8_480 == estimate_memory(TINY_LLAMA, settings).trainable_parameters
    assert not any(p.requires_grad for name, p in step.model.named_parameters() if "lora_" not in name)
    with pytest.raises(TraceError, match="could not trace this configuration: QLoRA"):
        run_trace(TINY_LLAMA, tiny_settings(method="qlora"), timeout_s=60)


def test_chunked_loss_is_traced_and_the_engine_follows_it():
    """torchtune's chunked cross-entropy emulated in the traced step: the engine's peak is within
    3% of the trace's, and the loss-backward moment holds far less than the full loss's 12 b*s*V."""
    from calculators.memory.engine import estimate_memory

    spec = TINY_LLAMA.model_copy(update={"vocab_size": 4096, "max_position_embeddings": 256})
    chunked = TrainingSettings(micro_batch=2, seq_len=128, precision="bf16", loss="chunked")
    traced = trace_step(spec, chunked)
    estimate = estimate_memory(spec, chunked)
    assert estimate.allocated_gib == pytest.approx(traced.allocated_gib, rel=0.03)
    assert estimate.phases_gib["loss backward"] == pytest.approx(traced.phases_gib["loss backward"], rel=0.03)
    full = trace_step(spec, chunked.model_copy(update={"loss": "full"}))
    assert traced.phases_gib["loss backward"] < 0.7 * full.phases_gib["loss backward"]


def test_features_the_trace_does_not_emulate_are_refused_with_their_name():
    for changes, label in (
        ({"liger": True, "precision": "amp-bf16"}, "Liger kernels under autocast"),
        ({"compile": True, "checkpointing": "full"}, "torch.compile with activation checkpointing"),
        ({"optimizer_in_backward": True, "precision": "bf16-mixed"}, "fp32 master copy"),
        ({"optimizer": "paged-adamw"}, "paged AdamW"),
    ):
        with pytest.raises(TraceError, match=label):
            run_trace(TINY_LLAMA, tiny_settings(**changes), timeout_s=60)


def test_optimizer_in_backward_is_traced_and_the_engine_follows_it():
    """torchtune's optimizer_in_bwd emulated (one optimizer per parameter, stepped in its
    post-accumulate-grad hook, gradient freed): no gradients pile up, and the engine's peak is
    within 3% of the trace's with the chunked loss (end of forward) and without it."""
    from calculators.memory.engine import estimate_memory

    spec = TINY_LLAMA.model_copy(update={"vocab_size": 4096, "max_position_embeddings": 256})
    for loss in ("full", "chunked"):
        settings = TrainingSettings(micro_batch=2, seq_len=128, precision="bf16", optimizer_in_backward=True, loss=loss)
        traced = trace_step(spec, settings)
        assert estimate_memory(spec, settings).allocated_gib == pytest.approx(traced.allocated_gib, rel=0.03)
        plain = trace_step(spec, settings.model_copy(update={"optimizer_in_backward": False}))
        first = "backward, first layer"
        held = traced.phase_components_gib[first].get("gradients", 0.0)
        assert held < 0.5 * plain.phase_components_gib[first]["gradients"]


def test_liger_norms_and_swiglu_are_traced_and_the_engine_follows_them():
    """Liger's RMSNorm (input + fp32 rstd) and SwiGLU (gate + up) emulated as autograd Functions:
    the engine's end of forward is within 1% of the trace's, and both save less than HF's."""
    from calculators.memory.engine import estimate_memory

    spec = TINY_LLAMA.model_copy(update={"vocab_size": 4096, "max_position_embeddings": 256})
    liger = TrainingSettings(micro_batch=2, seq_len=128, precision="bf16", liger=True, loss="full")
    traced, plain = trace_step(spec, liger), trace_step(spec, liger.model_copy(update={"liger": False}))
    end = "end of forward"
    assert estimate_memory(spec, liger).phases_gib[end] == pytest.approx(traced.phases_gib[end], rel=0.01)
    assert traced.phases_gib[end] < plain.phases_gib[end]


@pytest.mark.parametrize("precision", ["bf16", "fp32", "bf16-mixed"])
def test_op_selective_checkpointing_is_traced_and_the_engine_follows_it(precision):
    """torchtitan's per-op policy applied with torch.utils.checkpoint's selective contexts: the
    engine's peak is within 3% of the trace's."""
    from calculators.memory.engine import estimate_memory

    spec = TINY_LLAMA.model_copy(update={"vocab_size": 4096, "max_position_embeddings": 256})
    settings = TrainingSettings(micro_batch=2, seq_len=128, precision=precision, checkpointing="op-selective")
    traced = trace_step(spec, settings)
    assert estimate_memory(spec, settings).allocated_gib == pytest.approx(traced.allocated_gib, rel=0.03)


def test_activation_offload_is_traced_and_the_engine_is_an_upper_bound_by_at_most_two_layers():
    """Offloading emulated with saved-tensor hooks but no prefetch: nothing of the layers stays on
    the device after forward. The engine keeps two layers' tensors resident (torchtune's streams
    bring the next layer back while one runs), so it is above the trace by at most two layers."""
    from calculators.memory.activations.layer import layer_activation_terms
    from calculators.memory.engine import estimate_memory

    spec = TINY_LLAMA.model_copy(update={"n_layers": 6, "vocab_size": 4096, "max_position_embeddings": 256})
    settings = TrainingSettings(micro_batch=2, seq_len=128, precision="bf16", activation_offload=True, loss="chunked")
    traced = trace_step(spec, settings)
    plain = trace_step(spec, settings.model_copy(update={"activation_offload": False}))
    engine = estimate_memory(spec, settings).allocated_gib
    two_layers = 2 * sum(layer_activation_terms(spec, settings).values()) / 2**30
    assert traced.allocated_gib < plain.allocated_gib
    assert traced.allocated_gib <= engine <= (traced.allocated_gib + two_layers) * 1.01
