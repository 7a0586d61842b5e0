"""The training-stack settings (loss, Liger, per-op checkpointing, optimizer in backward,
activation offload, paged AdamW, compile, framework defaults), checked against numbers
worked by hand from the stacks' source code."""

import json

import pytest

from calculators.interface.cli import build_parser, main
from calculators.memory.activations.attention import attention_score_bytes
from calculators.memory.activations.head import (
    chunked_loss_bytes,
    fused_linear_chunk_rows,
    fused_linear_loss_bytes,
    liger_weight_update_temporary_bytes,
    logits_bytes,
)
from calculators.memory.activations.layer import kept_per_layer_bytes, layer_activation_terms, layer_matmul_outputs
from calculators.memory.activations.norms import norm_saved_bytes
from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.models.spec import ModelSpec
from calculators.units import GIB
from calculators.workload.frameworks import FRAMEWORK_DEFAULTS, framework_defaults
from calculators.workload.training import FRAMEWORKS, Overheads, TrainingSettings

# A small Llama-style model: T = 2 x 128 = 256 tokens, h = 256, f = 512, V = 4096.
SMALL = ModelSpec(n_layers=4, hidden_size=256, n_heads=4, n_kv_heads=4, ffn_hidden_size=512, vocab_size=4096)
NO_OVERHEAD = Overheads(cuda_context_gib=0, cublas_workspace_gib=0, allocator_reserve_fraction=0, nccl_gib=0)
E = 256 * 4096  # logits elements b*s*V = 1,048,576


def small(**changes) -> TrainingSettings:
    return TrainingSettings(micro_batch=2, seq_len=128, precision="bf16", overheads=NO_OVERHEAD, **changes)


# --- Loss -----------------------------------------------------------------------------


def test_full_loss_is_unchanged():
    """(c + 4) E = 6 x 1,048,576 at the end of forward, 12 E at the loss gradient."""
    assert logits_bytes(SMALL, small()) == (6 * E, 12 * E)


def test_chunked_loss_holds_one_chunk_of_gradients():
    """torchtune CEWithChunkedOutputLoss, 8 chunks: forward (2 + 4) E = 6,291,456 plus the last
    chunk's fp32 upcast 4 E / 8 = 524,288: 6,815,744; backward the fp32 log-probabilities
    4 E = 4,194,304 plus one chunk's gradients (8 + 2) E / 8 = 1,310,720: 5,505,024 (the full
    loss: 12 E = 12,582,912)."""
    assert chunked_loss_bytes(SMALL, small(loss="chunked")) == (6_815_744, 5_505_024)
    assert logits_bytes(SMALL, small(loss="chunked", loss_chunks=8)) == (6_815_744, 5_505_024)


def test_compiled_chunked_loss_saves_the_logits_and_the_log_sum_exp():
    """Compiled: forward 2 E + 4 x 256 = 2,098,176; backward that plus one chunk's bf16 gradient
    2 E / 8 = 262,144 (inductor fuses the recomputed softmax into the gradient kernel): 2,360,320."""
    assert chunked_loss_bytes(SMALL, small(loss="chunked", compile=True)) == (2_098_176, 2_360_320)


def test_fused_linear_chunk_is_about_bt_by_h():
    """Liger's own example: BT = 16384, V = 32000, H = 4096: inc_factor 8, chunk 2048 rows.
    SMALL: inc_factor ceil(4096 / 256) = 16, ceil(256 / 16) = 16 rows (a power of two)."""
    llama2 = ModelSpec(n_layers=1, hidden_size=4096, n_heads=32, n_kv_heads=32, ffn_hidden_size=11008, vocab_size=32000)
    assert fused_linear_chunk_rows(16384, llama2) == 2048
    assert fused_linear_chunk_rows(256, SMALL) == 16


def test_fused_linear_loss_keeps_no_logits():
    """One chunk of bf16 logits 2 x 16 x 4096 = 131,072, the head's weight gradient in bf16
    2 x 4096 x 256 = 2,097,152, the fp32 loss per token 4 x 256 = 1,024, and while a chunk
    updates the weight gradient its bf16 product and fp32 copy (2 + 4) x 4096 x 256 =
    6,291,456 (Liger's `grad_weight += mm(...).float()`): 8,520,704 in forward; 2,098,176 in
    backward (no logits)."""
    expected = (8_520_704, 2_098_176)
    assert fused_linear_loss_bytes(SMALL, small(loss="fused-linear")) == expected
    assert logits_bytes(SMALL, small(liger=True)) == expected  # Liger's loss is the fused one


# --- Liger and compile -------------------------------------------------------------------


def test_liger_rmsnorm_saves_its_input_and_rstd_only():
    """HF RMSNorm: fp32 upcast 4 x 256 x 256 + bf16 normalised 2 x 256 x 256 + rstd 4 x 256 =
    394,240; Liger: bf16 input 131,072 + rstd 1,024 = 132,096."""
    assert norm_saved_bytes(SMALL, small(), 256) == 394_240
    assert norm_saved_bytes(SMALL, small(liger=True), 256) == 132_096
    assert norm_saved_bytes(SMALL, small(compile=True), 256) == 132_096


def test_liger_swiglu_saves_gate_and_up_only():
    """HF MLP: the shared input 2 x 256 x 256 = 131,072 plus gate, silu(gate), up and their
    product 4 x 2 x 256 x 512 = 1,048,576: 1,179,648. Liger drops silu(gate): 917,504."""
    assert layer_activation_terms(SMALL, small())["mlp"] == 1_179_648
    assert layer_activation_terms(SMALL, small(liger=True, loss="full"))["mlp"] == 917_504


def test_bitsandbytes_qlora_saves_the_input_of_every_quantised_linear():
    """bitsandbytes' MatMul4Bit keeps its input A whenever A requires grad; torchao's linear_nf4
    does not. With adapters on q and v only, bitsandbytes adds per layer the MLP's input
    2 x 256 x 256 = 131,072 and down's input 2 x 256 x 512 = 262,144: 393,216 (k shares q's input,
    o's input is the SDPA output already saved)."""
    common = {"method": "qlora", "lora_rank": 8, "lora_targets": "qv"}
    bnb = sum(layer_activation_terms(SMALL, small(quant_backend="bitsandbytes", **common)).values())
    torchao = sum(layer_activation_terms(SMALL, small(quant_backend="torchao", **common)).values())
    assert bnb - torchao == 393_216
    assert small(method="qlora").quant_backend == "bitsandbytes"
    assert small(method="qlora", framework="torchtune").quant_backend == "torchao"


# --- Per-op selective checkpointing ----------------------------------------------------------


def test_op_selective_keeps_every_other_matmul_and_the_attention_output():
    """torchtitan 'op' policy on Llama 3.1 8B: the matmuls run q, k, v, o, w1, w3, w2 and the
    1st, 3rd, 5th and 7th are saved: q (4096), v (1024), w1 (14336), w2 (4096).
    SMALL, per layer: input 2 x 256 x 256 = 131,072; q, v, gate, down 2 x 256 x (256 + 256 +
    512 + 256) = 655,360; SDPA output 131,072 and log-sum-exp 4 x 256 x 4 = 4,096: 921,600."""
    widths = layer_matmul_outputs(get_preset("llama-3.1-8b"))
    assert widths == [4096, 1024, 1024, 4096, 14336, 14336, 4096]
    assert widths[::2] == [4096, 1024, 14336, 4096]
    settings = small(checkpointing="op-selective")
    assert kept_per_layer_bytes(layer_activation_terms(SMALL, settings), SMALL, settings) == 921_600


# --- Optimizer and gradients ---------------------------------------------------------------


def test_optimizer_in_backward_keeps_one_gradient_and_has_no_step_phase():
    """The largest trainable tensor is the 4096 x 256 head (1,048,576 elements): at most its bf16
    gradient, 2,097,152 bytes, is alive; fused AdamW leaves no temporaries."""
    estimate = estimate_memory(SMALL, small(optimizer_in_backward=True, optimizer_impl="fused"))
    assert "optimizer step" not in estimate.phases_gib
    for phase in ("backward, last layer", "backward, first layer"):
        assert estimate.phase_components_gib[phase]["gradients"] * GIB == 2_097_152


def test_optimizer_in_backward_cannot_accumulate():
    with pytest.raises(ValueError, match="cannot accumulate"):
        small(optimizer_in_backward=True, grad_accum=4)


def test_paged_adamw_states_are_outside_the_allocator():
    """SMALL has 4,720,896 parameters: embedding and head 2 x 4096 x 256, four layers of
    4 x 256^2 + 3 x 256 x 512 + 2 x 256, a final norm of 256. Paged 32-bit AdamW keeps two fp32
    states: 8 x 4,720,896 = 37,767,168 bytes, outside allocated and reserved."""
    estimate = estimate_memory(SMALL, small(optimizer="paged-adamw"))
    assert estimate.parameters == 4_720_896
    assert estimate.outside_allocator_gib * GIB == 37_767_168
    assert estimate.components_gib["optimizer_states"] == 0
    assert estimate.peak_gib == pytest.approx(estimate.reserved_gib + 37_767_168 / GIB)


def test_activation_offload_keeps_two_layers_on_the_gpu():
    """Four layers; torchtune's offloading keeps the layer in backward and the prefetched one:
    the other two layers' saved tensors go to pinned host memory."""
    plain = estimate_memory(SMALL, small())
    offloaded = estimate_memory(SMALL, small(activation_offload=True))
    per_layer = sum(layer_activation_terms(SMALL, small()).values())
    assert offloaded.host_memory_gib * GIB == pytest.approx(2 * per_layer)
    end = "end of forward"
    assert (plain.phases_gib[end] - offloaded.phases_gib[end]) * GIB == pytest.approx(2 * per_layer)


# --- Framework defaults and conflicts -------------------------------------------------------


def test_framework_fills_unset_settings_and_explicit_ones_win():
    """torchtune ships CEWithChunkedOutputLoss and fused AdamW; torchtitan plain CE and foreach."""
    assert framework_defaults("torchtune") == {"loss": "chunked", "optimizer_impl": "fused", "quant_backend": "torchao"}
    tuned = TrainingSettings(framework="torchtune")
    assert (tuned.loss, tuned.optimizer_impl) == ("chunked", "fused")
    explicit = TrainingSettings(framework="torchtune", loss="full", optimizer_impl="foreach")
    assert (explicit.loss, explicit.optimizer_impl) == ("full", "foreach")
    assert (TrainingSettings().loss, TrainingSettings().optimizer_impl) == ("full", "foreach")
    assert TrainingSettings(framework="deepspeed", liger=True).loss == "fused-linear"


def test_every_framework_states_its_defaults_with_a_source():
    for framework in FRAMEWORKS:
        rows = [row for row in FRAMEWORK_DEFAULTS if row.framework == framework]
        assert {"loss", "optimizer_impl"} <= {row.setting for row in rows if row.applied}, framework
        assert all(row.source for row in rows)


def test_liger_with_chunked_loss_is_one_clear_error(capsys):
    code = main(["memory", "--model", "llama-3.2-1b", "--liger", "--loss", "chunked"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert err.startswith("error:") and "--liger" in err and "--loss chunked" in err


@pytest.mark.parametrize("command", ["memory", "fit", "cost", "trace"])
def test_stack_flags_are_on_every_training_command(command):
    args = build_parser().parse_args(
        [command, "--model", "llama-3.2-1b", "--framework", "torchtitan", "--loss", "fused-linear"]
        + ["--loss-chunks", "4", "--liger", "--checkpointing", "op-selective", "--optimizer-in-backward"]
        + ["--activation-offload", "--compile", "--optimizer", "paged-adamw", "--cuda-context-gib", "1.2"]
    )
    assert (args.framework, args.loss, args.loss_chunks, args.liger) == ("torchtitan", "fused-linear", 4, True)
    assert (args.checkpointing, args.optimizer_in_backward, args.activation_offload) == ("op-selective", True, True)
    assert (args.compile, args.optimizer, args.cuda_context_gib) == (True, "paged-adamw", 1.2)


def test_overhead_flags_replace_the_default_overheads():
    settings = TrainingSettings(cuda_context_gib=1.3, allocator_reserve_fraction=0.0)
    assert settings.overheads.cuda_context_gib == 1.3 and settings.overheads.allocator_reserve_fraction == 0
    assert settings.overheads.nccl_gib == Overheads().nccl_gib


def test_serving_nf4_weights_use_qlora_double_quantisation(capsys):
    """Llama-2-7B served in bitsandbytes NF4: 32 layers x (4 x 4096^2 + 3 x 4096 x 11008) =
    6,476,005,376 linear weights at (4 + 8/64 + 32/16384) / 8 = 0.515869140625 B = 3,340,771,328 B,
    plus 262,410,240 embedding, head and norm weights in bf16 = 524,820,480 B: 3.60011 GiB."""
    assert main(["memory", "--model", "llama-2-7b", "--mode", "inference", "--weight-precision", "nf4", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["weights_gib"] * GIB == pytest.approx(3_340_771_328 + 524_820_480)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"optimizer_in_backward": True, "offload_optimizer": True}, "optimizer runs on the CPU"),
        ({"optimizer_in_backward": True, "optimizer": "none"}, "no optimizer"),
    ],
)
def test_optimizer_in_backward_needs_an_optimizer_on_the_gpu(changes, message):
    with pytest.raises(ValueError, match=message):
        small(**changes)


def test_liger_weight_update_temporaries_follow_the_weight_dtype():
    """V x H = 4096 x 256 = 1,048,576: pure bf16 makes the bf16 product and its fp32 copy (6 bytes
    each); fp32 the fp32 product only (4); autocast over fp32 weights takes addmm's out_dtype path
    in place (0); a frozen head (LoRA) updates nothing."""
    vh = 4096 * 256
    assert liger_weight_update_temporary_bytes(SMALL, small(loss="fused-linear")) == 6 * vh
    fp32 = small(loss="fused-linear").model_copy(update={"precision": "fp32"})
    assert liger_weight_update_temporary_bytes(SMALL, fp32) == 4 * vh
    amp = small(loss="fused-linear").model_copy(update={"precision": "amp-bf16"})
    assert liger_weight_update_temporary_bytes(SMALL, amp) == 0
    assert liger_weight_update_temporary_bytes(SMALL, small(loss="fused-linear", method="lora")) == 0


def test_compiled_eager_attention_keeps_the_scores_and_row_statistics():
    """Llama-style bf16 eager attention saves the fp32 softmax and its bf16 copy for the value
    matmul: 4 + 2 = 6 bytes per score; compiled, the half scores, the bf16 probabilities and
    8 bytes of fp32 row max and sum per row of s = 128 scores: 2 + 2 + 8/128 = 4.0625."""
    assert attention_score_bytes(SMALL, small(attention="eager")) == 6
    assert attention_score_bytes(SMALL, small(attention="eager", compile=True)) == 2 + 2 + 8 / 128


# --- litgpt's model code: fused q/k/v, LoRA dropout, zero_pad --------------------------------


def litgpt_llama2_7b(method: str) -> TrainingSettings:
    return TrainingSettings(
        method=method, framework="litgpt", precision="bf16", lora_rank=8, lora_targets="qv",
        micro_batch=1, seq_len=1304, loss_chunks=11, optimizer="paged-adamw" if method == "qlora" else "adamw",
    )  # fmt: skip


def test_litgpt_lora_layer_saves_what_lit_gpt_code_saves():
    """Llama-2-7B under litgpt's LoRA (r=8 on q and v, dropout 0.05, bf16), per token of one layer
    (h = 4096, f = 11008), from lit_gpt/model.py and lora.py @8641822 run under
    saved_tensors_hooks on CPU, with the RMSNorm upcast litgpt has had since PR #606:
    - two RMSNorms: fp32 input 4h + fp32 rstd 4 each: 2 x 16,388 = 32,776
    - the adapters' input: dropout output 2h and its bool mask h: 12,288
    - zero_pad's index_copy source, the q and v adapters' output: 2 x (4096 + 4096) = 16,384
    - q and k after RoPE 2 x 2h = 16,384; v, a view of the fused qkv output, keeps all of it:
      2 x 3h = 24,576
    - SDPA's output 2h and fp32 log-sum-exp 4 x 32 heads: 8,320
    - SwiGLU: gate, silu(gate), up: 3 x 2f = 66,048
    - the adapters' r-wide intermediates: 2 adapters x 2 x 8 = 32
    Total 176,808 bytes. The trace of 8641822's own RMSNorm (bf16 input 2h and bf16 rstd 2 each)
    gives the same tensors less 2 x (4h + 4 - 2h - 2) = 16,388: 160,420."""
    terms = layer_activation_terms(get_preset("llama-2-7b"), litgpt_llama2_7b("lora"))
    assert sum(terms.values()) == pytest.approx(176_808 * 1304)


def test_litgpt_qlora_layer_adds_what_bitsandbytes_keeps():
    """Under QLoRA each bitsandbytes linear keeps its input as well: the norm output that the
    fused qkv reads (2h = 8,192, separate from the adapters' dropout output), the MLP's input
    (8,192) and down's input (2f = 22,016); o's input is SDPA's saved output. 176,808 + 38,400 =
    215,208 bytes per token and layer."""
    terms = layer_activation_terms(get_preset("llama-2-7b"), litgpt_llama2_7b("qlora"))
    assert sum(terms.values()) == pytest.approx(215_208 * 1304)


def test_lora_dropout_saves_a_mask_and_its_own_output_per_adapter():
    """PEFT's LoRA on separate q and v (SMALL: T = 256 tokens, h = 256, bf16) with dropout: each
    adapter has its own dropout, which saves a 1-byte mask, and A saves the dropout's output
    instead of the shared input: 2 x (1 + 2) x 256 x 256 - 2 x 256 x 256 = 262,144 bytes more
    than without dropout. Under autocast the same: LoRA's frozen base is bf16, so the RMSNorm's
    output the adapters read is bf16 too. After a LayerNorm, which CUDA autocast runs in fp32, A
    saves its own half cast of the fp32 dropout output (counted with the inputs), so only the
    masks are added: 2 x 256 x 256 = 131,072."""
    common = {"method": "lora", "lora_rank": 8, "lora_targets": "qv"}

    def dropout_adds(spec, precision: str) -> float:
        with_dropout = small(lora_dropout=0.1, **common).model_copy(update={"precision": precision})
        without = small(**common).model_copy(update={"precision": precision})
        return sum(layer_activation_terms(spec, with_dropout).values()) - sum(
            layer_activation_terms(spec, without).values()
        )

    assert dropout_adds(SMALL, "bf16") == dropout_adds(SMALL, "amp-bf16") == 262_144
    layernorm = SMALL.model_copy(update={"norm": "layernorm"})
    assert dropout_adds(layernorm, "amp-bf16") == 131_072


def test_litgpt_defaults_and_nf4_scales():
    """litgpt fills dropout 0.05, a fused q/k/v and NF4 on every linear; others keep PEFT's 0 and
    the model's layout. NF4 weights: 4.126953125 bits with double quantisation, 4.5 with one fp32
    absmax per 64 (Llama-2-7B layers: 6,476,005,376 weights, 0.373 bits apart = 301,818,381 bytes
    in the weights)."""
    litgpt = litgpt_llama2_7b("qlora")
    assert (litgpt.lora_dropout, litgpt.qkv_projection, litgpt.quantised_linears) == (0.05, "fused", "all")
    plain = TrainingSettings(method="lora")
    assert (plain.lora_dropout, plain.qkv_projection, plain.quantised_linears) == (0.0, "model", "layers")
    spec = get_preset("llama-2-7b")
    double = estimate_memory(spec, litgpt)
    fp32_scales = estimate_memory(spec, litgpt.model_copy(update={"nf4_scales": "fp32"}))
    layers_and_head = 6_476_005_376 + 32000 * 4096
    expected = layers_and_head * (4.5 - 4.126953125) / 8
    difference = fp32_scales.components_gib["weights"] - double.components_gib["weights"]
    assert difference * GIB == pytest.approx(expected)


def test_fsdp1_gives_the_frozen_base_of_an_adapted_layer_gradients():
    """FSDP1 flattens each layer into one FlatParameter; with LoRA adapters in it
    (use_orig_params=True) the whole flat parameter gets a gradient. Llama-2-7B, LoRA bf16, ZeRO-3
    over 8 GPUs: each layer's base is 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 = 202,383,360
    parameters, so 32 layers x 202,383,360 x 2 bytes / 8 = 1,619,066,880 bytes of gradients more
    than under DeepSpeed's ZeRO-3 or FSDP2 (which keep per-parameter gradients)."""
    spec = get_preset("llama-2-7b")
    common = dict(method="lora", precision="bf16", zero=3, gpus=8, lora_rank=8, lora_targets="qv", seq_len=512)
    gradients = {}
    for impl in ("zero", "fsdp1", "fsdp2"):
        estimate = estimate_memory(spec, TrainingSettings(sharding_impl=impl, **common))
        gradients[impl] = estimate.phase_components_gib["optimizer step"]["gradients"]
    assert (gradients["fsdp1"] - gradients["zero"]) * GIB == pytest.approx(1_619_066_880)
    assert gradients["fsdp2"] == pytest.approx(gradients["zero"])
