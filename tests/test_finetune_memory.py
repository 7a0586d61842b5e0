"""Fine-tuning, CPU offload and model parallelism, checked against numbers worked by hand.

Llama-2-7B (tests/test_memory.py): h = 4096, f = 11008, 32 layers, 32 heads, vocab 32000,
P = 6,738,415,616 parameters; one layer has 202,383,360 parameters of which
4 * 4096^2 + 3 * 4096 * 11008 = 202,375,168 are linear weights (and 2 * 4096 norm weights).
"""

import pytest
from pydantic import ValidationError

from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.models.spec import ModelSpec
from calculators.units import GIB
from calculators.validation.peak_memory import load_measurements
from calculators.workload.finetune import NF4_BITS_PER_WEIGHT, lora_parameters_per_layer
from calculators.workload.training import Overheads, TrainingSettings

LLAMA2_7B = ModelSpec(
    name="llama-2-7b", n_layers=32, hidden_size=4096, n_heads=32, n_kv_heads=32, ffn_hidden_size=11008, vocab_size=32000
)
P_7B = 6_738_415_616
NO_OVERHEAD = Overheads(cuda_context_gib=0, cublas_workspace_gib=0, allocator_reserve_fraction=0, nccl_gib=0)
LINEAR_PER_LAYER = 202_375_168
PER_LAYER = 202_383_360
VOCAB_MATRIX = 32000 * 4096  # the embedding, and the untied LM head
LORA_R16_ALL_LINEAR = 39_976_960


def settings(**changes) -> TrainingSettings:
    return TrainingSettings(overheads=NO_OVERHEAD, **changes)


def at(estimate, phase: str, component: str) -> float:
    """A component of one phase, in bytes."""
    return estimate.phase_components_gib[phase][component] * GIB


# --- LoRA and QLoRA --------------------------------------------------------------------


def test_lora_rank_16_on_all_linears_of_llama2_7b():
    """Hu et al. 2021: r * (in + out) per adapted linear. q, k, v, o are 4096 -> 4096; gate and
    up 4096 -> 11008, down 11008 -> 4096: 32 layers x 16 x [4 x (4096 + 4096) + 3 x (4096 + 11008)]
    = 32 x 16 x 78,080 = 39,976,960."""
    assert lora_parameters_per_layer(LLAMA2_7B, 16, "all-linear") == 16 * 78_080
    estimate = estimate_memory(LLAMA2_7B, settings(method="lora"))
    assert estimate.trainable_parameters == LORA_R16_ALL_LINEAR
    assert estimate.parameters == P_7B


def test_lora_on_attention_only_adapts_q_k_v_o():
    """32 x 16 x 4 x (4096 + 4096) = 16,777,216."""
    estimate = estimate_memory(LLAMA2_7B, settings(method="lora", lora_targets="attention"))
    assert estimate.trainable_parameters == 16_777_216


def test_lora_states_are_for_the_adapters_only_under_amp_bf16():
    """amp-bf16, AdamW: the frozen base in bf16 (2 bytes x P), the adapters in fp32 as PEFT keeps
    them (4 bytes), fp32 gradients (4), m and v (8 bytes), no master copy, and one bf16 autocast
    cast per adapter (2 bytes)."""
    n = LORA_R16_ALL_LINEAR
    estimate = estimate_memory(LLAMA2_7B, settings(method="lora", precision="amp-bf16", optimizer_impl="fused"))
    step = "optimizer step"
    assert at(estimate, step, "optimizer_states") == pytest.approx(8 * n)
    assert at(estimate, step, "gradients") == pytest.approx(4 * n)
    assert at(estimate, step, "master_weights") == 0
    assert at(estimate, step, "weights") == pytest.approx(2 * P_7B + 4 * n)
    assert at(estimate, "end of forward", "autocast_weight_copies") == pytest.approx(2 * n)


def test_lora_under_bf16_mixed_keeps_half_adapters_and_an_fp32_master():
    """*-mixed: adapters and their gradients in bf16 (2 + 2), fp32 master (4), fp32 m, v (8)."""
    n = LORA_R16_ALL_LINEAR
    estimate = estimate_memory(LLAMA2_7B, settings(method="lora", precision="bf16-mixed"))
    step = "optimizer step"
    assert at(estimate, step, "weights") == pytest.approx(2 * P_7B + 2 * n)
    assert at(estimate, step, "master_weights") == pytest.approx(4 * n)
    assert at(estimate, step, "gradients") == pytest.approx(2 * n)
    assert at(estimate, step, "optimizer_states") == pytest.approx(8 * n)


def test_qlora_stores_the_linear_weights_in_nf4_with_double_quantisation():
    """QLoRA Sec. 3: 4 + 8/64 + 32/(64 x 256) = 4.127 bits per linear weight.
    Linear weights: 32 x 202,375,168 = 6,476,005,376 -> x 4.126953125 / 8 = 3,340,771,328 bytes.
    Embedding, LM head and norms stay bf16: (6,738,415,616 - 6,476,005,376) x 2 = 524,820,480.
    bf16-mixed adapters: 2 x 39,976,960 = 79,953,920. Total 3,945,545,728 bytes."""
    assert NF4_BITS_PER_WEIGHT == pytest.approx(4.127, abs=1e-3)
    estimate = estimate_memory(LLAMA2_7B, settings(method="qlora", precision="bf16-mixed"))
    assert at(estimate, "optimizer step", "weights") == pytest.approx(3_945_545_728)
    assert estimate.trainable_parameters == LORA_R16_ALL_LINEAR


def test_lora_saves_fewer_activations_where_linears_are_frozen():
    """Llama-2-7B, bf16-mixed, 1 x 2048 tokens (T), r = 16, targets q, k, v, o.
    Norms: the frozen weight needs no bf16 copy of the normalised input: 2 x (4 T h + 4 T).
    MLP: gate, up and down are frozen, so their inputs are not saved; silu's input, its output and
    up's output are (3 x 2 T f). Adapters: 4 x T x r x 2 bytes. Attention is unchanged."""
    tokens, h, f, r = 2048, 4096, 11008, 16
    full = layer_activation_terms(LLAMA2_7B, settings())
    lora = layer_activation_terms(LLAMA2_7B, settings(method="lora", lora_targets="attention"))
    assert lora["norms"] == 2 * (4 * tokens * h + 4 * tokens)
    assert lora["mlp"] == 3 * 2 * tokens * f
    assert full["mlp"] == 2 * tokens * h + 4 * 2 * tokens * f
    assert lora["attention_projections"] == full["attention_projections"]
    assert lora["lora_adapters"] == 4 * tokens * r * 2


def test_lora_saves_nothing_for_the_frozen_embedding_and_lm_head():
    """The LM head is frozen: its input is not saved; only the final RMSNorm's fp32 input and rstd
    are (4 T h + 4 T). Full training also keeps the bf16 normalised copy and the head's input.
    Both keep the rotary cos and sin tables the layers rotate q and k with, 2 x T x 128 x 2 B."""
    tokens, h = 2048, 4096
    full = estimate_memory(LLAMA2_7B, settings(checkpointing="full"))
    lora = estimate_memory(LLAMA2_7B, settings(checkpointing="full", method="lora"))
    layer_inputs = 32 * 2 * tokens * h
    full_head = 4 * tokens * h + 2 * tokens * h + 4 * tokens + 2 * tokens * h
    lora_head = 4 * tokens * h + 4 * tokens
    rotary_tables = 2 * tokens * 128 * 2
    assert at(full, "end of forward", "activations") == pytest.approx(layer_inputs + full_head + rotary_tables)
    assert at(lora, "end of forward", "activations") == pytest.approx(layer_inputs + lora_head + rotary_tables)


def test_qlora_adds_a_dequantised_weight_to_the_backward_workspace():
    """The largest linear (gate/up, 4096 x 11008) dequantised to bf16: 2 x 4096 x 11008 bytes, plus
    its bf16 output 2 x T x 11008 with T = 2048 tokens."""
    lora = estimate_memory(LLAMA2_7B, settings(method="lora"))
    qlora = estimate_memory(LLAMA2_7B, settings(method="qlora"))
    phase = "backward, last layer"
    extra = at(qlora, phase, "activations") - at(lora, phase, "activations")
    assert extra == pytest.approx(2 * 4096 * 11008 + 2 * 2048 * 11008)


def test_lora_changes_match_the_tensors_torch_saves():
    """What LoRA changes (frozen linears and norms, adapter intermediates) equals what it changes in
    the bytes autograd really saves for one Llama layer on the CPU (tests/lora_reference.py), for
    every target choice and precision."""
    pytest.importorskip("torch")
    from tests.lora_reference import saved_bytes

    shape = {"n_layers": 1, "hidden_size": 256, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden_size": 704}
    spec = LLAMA2_7B.model_copy(update=shape | {"vocab_size": 100})
    b, s, r = 3, 128, 32

    def estimated(**changes) -> float:
        return sum(layer_activation_terms(spec, settings(micro_batch=b, seq_len=s, **changes)).values())

    for precision in ("bf16", "fp32", "amp-bf16"):
        full_measured = saved_bytes(spec, b, s, precision, None, r)
        full_estimated = estimated(precision=precision)
        for targets in ("qv", "attention", "qvo-mlp", "all-linear"):
            lora = {"precision": precision, "method": "lora", "lora_targets": targets, "lora_rank": r}
            change_estimated = full_estimated - estimated(**lora)
            change_measured = full_measured - saved_bytes(spec, b, s, precision, targets, r)
            assert change_estimated == change_measured, (precision, targets)


# --- Frozen layers ---------------------------------------------------------------------


def test_freezing_half_the_layers_halves_the_layer_activations():
    """k = 16 of 32: only layers 16..31 save activations (nothing before them requires grad), and
    layer 16's input norm saves nothing either, its input and weight needing no gradient: 2048
    tokens x (4 x 4096 + 4) = 33,562,624 bytes less than half; the final norm and LM head still
    save theirs. The rotary tables (2 x 2048 x 128 x 2 B), shared by the trained layers, stay whole.
    Trainable: P - 16 x 202,383,360 - 131,072,000 (embedding) = 3,369,209,856."""
    base = settings(micro_batch=1, seq_len=2048)
    full = estimate_memory(LLAMA2_7B, base)
    frozen = estimate_memory(LLAMA2_7B, base.model_copy(update={"frozen_layers": 16}))
    head = estimate_memory(LLAMA2_7B, base.model_copy(update={"frozen_layers": 32}))
    head_only = at(head, "end of forward", "activations")
    layers_full = at(full, "end of forward", "activations") - head_only
    layers_frozen = at(frozen, "end of forward", "activations") - head_only
    rotary_tables = 2 * 2048 * 128 * 2
    assert layers_frozen == pytest.approx((layers_full - rotary_tables) / 2 - 33_562_624 + rotary_tables)
    assert frozen.trainable_parameters == P_7B - 16 * PER_LAYER - VOCAB_MATRIX == 3_369_209_856


def test_frozen_layers_have_no_gradients_or_optimizer_states():
    """bf16-mixed: all weights stay in bf16 (2 x P); grads 2 bytes, master 4, m and v 8 bytes for the
    3,369,209,856 trainable parameters."""
    n = 3_369_209_856
    estimate = estimate_memory(LLAMA2_7B, settings(frozen_layers=16, optimizer_impl="fused"))
    step = "optimizer step"
    assert at(estimate, step, "weights") == pytest.approx(2 * P_7B)
    assert at(estimate, step, "gradients") == pytest.approx(2 * n)
    assert at(estimate, step, "master_weights") == pytest.approx(4 * n)
    assert at(estimate, step, "optimizer_states") == pytest.approx(8 * n)


# --- Optimizers and CPU offload -------------------------------------------------------


def test_paged_8bit_adamw_states_live_outside_the_allocator():
    """Paged 8-bit AdamW keeps 8-bit AdamW's states (2 x (1 + 4/2048) bytes per trainable
    parameter) in CUDA unified memory: the same bytes leave allocated and appear as
    outside_allocator_gib, and the device peak still counts them."""
    plain = estimate_memory(LLAMA2_7B, settings(method="qlora", optimizer="adamw-8bit"))
    paged = estimate_memory(LLAMA2_7B, settings(method="qlora", optimizer="paged-adamw-8bit"))
    states_gib = plain.components_gib["optimizer_states"]
    assert paged.outside_allocator_gib == pytest.approx(states_gib)
    assert paged.components_gib["optimizer_states"] == 0
    reserve_fraction = settings().overheads.allocator_reserve_fraction  # paged pages get no allocator reserve
    assert paged.peak_gib == pytest.approx(plain.peak_gib - states_gib * reserve_fraction, rel=1e-9)


def test_zero_offload_moves_master_and_states_to_the_host():
    """bf16-mixed AdamW on one GPU (ZeRO-Offload, DeepSpeed cpu_offload): the GPU keeps bf16 weights
    and one 5e8-element bf16 gradient bucket (1e9 bytes < 2 x P); the host holds the fp32 master (4),
    fp32 gradient (4), pinned bf16 copy (2) and m, v (8): 18 x P, plus a bf16 staging buffer of the
    largest parameter (2 x 32000 x 4096)."""
    offloaded = estimate_memory(LLAMA2_7B, settings(offload_optimizer=True))
    step = "optimizer step"
    assert at(offloaded, step, "master_weights") == 0
    assert at(offloaded, step, "optimizer_states") == 0
    assert at(offloaded, step, "optimizer_step_temporaries") == 0
    assert at(offloaded, step, "weights") == pytest.approx(2 * P_7B)
    assert at(offloaded, step, "gradients") == pytest.approx(500_000_000 * 2)
    assert offloaded.host_memory_gib * GIB == pytest.approx(18 * P_7B + 2 * VOCAB_MATRIX)
    assert estimate_memory(LLAMA2_7B, settings()).host_memory_gib == 0.0


def test_zero_infinity_keeps_only_two_layers_of_parameters_on_the_gpu():
    """ZeRO-3 over 8 GPUs with parameter offload: the layer in use and the prefetched one
    (2 x 2 bytes x 202,383,360); the bf16 shard (2 x P / 8) moves to the host."""
    both = settings(zero=3, gpus=8, offload_optimizer=True, offload_parameters=True)
    only_optimizer = both.model_copy(update={"offload_parameters": False})
    estimate = estimate_memory(LLAMA2_7B, both)
    assert at(estimate, "optimizer step", "weights") == pytest.approx(2 * 2 * PER_LAYER)
    host_difference = estimate.host_memory_gib - estimate_memory(LLAMA2_7B, only_optimizer).host_memory_gib
    assert host_difference * GIB == pytest.approx(2 * P_7B / 8)


# --- Tensor and pipeline parallelism ----------------------------------------------------


def test_tensor_parallel_2_halves_layer_weights_and_activations():
    """Megatron-LM: linear weights and the vocab-parallel embedding/LM head split in two, the
    norms (2 x 4096 per layer, 4096 final) replicated; with sequence parallelism every saved
    activation is halved. bf16 weights: 2 x [32 x (202,375,168 / 2 + 8192) + 131,072,000 + 4096]."""
    single = estimate_memory(LLAMA2_7B, settings(micro_batch=2, seq_len=4096))
    split = estimate_memory(LLAMA2_7B, settings(micro_batch=2, seq_len=4096, tensor_parallel=2))
    for term, value in single.activations_per_layer_gib.items():
        assert split.activations_per_layer_gib[term] == pytest.approx(value / 2)
    weights = 2 * (32 * (LINEAR_PER_LAYER / 2 + 8192) + VOCAB_MATRIX + 4096)
    assert at(split, "optimizer step", "weights") == pytest.approx(weights)
    assert split.trainable_parameters == P_7B


def test_pipeline_first_stage_holds_8_layers_and_4_micro_batches():
    """PP 4 on 32 layers: 8 layers per stage. 1F1B with 8 micro-batches keeps min(4, 8) = 4 in flight on
    the first stage (Narayanan et al. 2021): with full checkpointing 4 x (8 layer inputs of 2 x T x h
    bytes and the rotary tables, 2 x T x 128 x 2), T = 2048. Its weights: 2 bytes x (8 x 202,383,360
    + 131,072,000)."""
    estimate = estimate_memory(LLAMA2_7B, settings(pipeline_parallel=4, grad_accum=8, checkpointing="full"))
    phase = "end of forward, first stage"
    assert at(estimate, phase, "activations") == pytest.approx(4 * (8 * 2 * 2048 * 4096 + 2 * 2048 * 128 * 2))
    assert at(estimate, phase, "weights") == pytest.approx(2 * (8 * PER_LAYER + VOCAB_MATRIX))
    assert at(estimate, phase, "logits_and_loss") == 0
    assert "loss backward, last stage" in estimate.phases_gib
    assert estimate.pipeline_stage in ("first", "last")
    assert estimate.allocated_gib == pytest.approx(max(estimate.phases_gib.values()))


def test_pipeline_in_flight_micro_batches_never_exceed_the_step():
    """With 2 micro-batches per step the first stage of 4 holds 2."""
    estimate = estimate_memory(LLAMA2_7B, settings(pipeline_parallel=4, grad_accum=2, checkpointing="full"))
    in_flight = 8 * 2 * 2048 * 4096 + 2 * 2048 * 128 * 2
    assert at(estimate, "end of forward, first stage", "activations") == pytest.approx(2 * in_flight)


def test_total_gpus_is_data_times_tensor_times_pipeline():
    assert TrainingSettings(gpus=4, tensor_parallel=2, pipeline_parallel=4).total_gpus == 32


def test_defaults_are_plain_full_training():
    estimate = estimate_memory(LLAMA2_7B, settings())
    assert estimate.pipeline_stage == "only" and estimate.host_memory_gib == 0.0
    assert estimate.trainable_parameters == P_7B


# --- Validation -------------------------------------------------------------------------


def test_tensor_parallel_must_divide_the_heads():
    with pytest.raises(ValueError, match="does not divide the 32 attention heads"):
        estimate_memory(LLAMA2_7B, settings(tensor_parallel=3))


def test_parameter_offload_needs_zero_3():
    with pytest.raises(ValidationError, match="ZeRO stage 3"):
        TrainingSettings(zero=2, offload_parameters=True)


def test_frozen_layers_cannot_exceed_the_layers():
    with pytest.raises(ValueError, match="cannot exceed the model's 32 layers"):
        estimate_memory(LLAMA2_7B, settings(frozen_layers=33))


def test_pipeline_stages_cannot_exceed_the_layers():
    with pytest.raises(ValueError, match="exceeds the model's 32 layers"):
        estimate_memory(LLAMA2_7B, settings(pipeline_parallel=33))


def test_lora_rank_is_bounded():
    with pytest.raises(ValidationError):
        TrainingSettings(lora_rank=0)
    with pytest.raises(ValidationError):
        TrainingSettings(lora_rank=4097)


# --- Published measurements (data/measured_peak_memory.csv) ---------------------------


def torchtune_settings(method: str) -> TrainingSettings:
    """tt-4/tt-5: torchtune lora_finetune_single_device, Llama-3.2-3B, pure bf16, 2 x 4096 packed,
    activation checkpointing, AdamW fused=True, SDPA; llama3_2 3B (q)lora configs: lora_attn_modules
    q_proj, v_proj, output_proj and the MLP, rank 64."""
    return TrainingSettings(
        micro_batch=2, seq_len=4096, precision="bf16", optimizer="adamw", optimizer_impl="fused",
        checkpointing="full", attention="fused", method=method, lora_rank=64, lora_targets="qvo-mlp",
    )  # fmt: skip


def test_the_lora_to_qlora_saving_matches_torchtune():
    """tt-4 (LoRA, 8.5 GiB) and tt-5 (QLoRA, 4.6 GiB) differ only in how the frozen linears are
    stored, so their difference checks the NF4 accounting: 28 x 100,663,296 linear weights x
    (2 - 4.127/8) bytes = 3.89 GiB against the measured 3.9 GiB. (The rows themselves also used
    torch.compile, chunked cross-entropy and activation offloading, which are not modelled.)"""
    rows = {row["id"]: float(row["measured"]) for row in load_measurements()}
    spec = get_preset("llama-3.2-3b")
    lora = estimate_memory(spec, torchtune_settings("lora")).allocated_gib
    qlora = estimate_memory(spec, torchtune_settings("qlora")).allocated_gib
    measured = rows["tt-4"] - rows["tt-5"]
    assert lora - qlora == pytest.approx(measured, rel=0.10)


@pytest.mark.parametrize(
    ("framework", "quant_backend", "staging_bytes_per_element"),
    [(None, "bitsandbytes", 2), (None, "torchao", 5)],
)
def test_qlora_load_peak_is_the_nf4_weights_plus_the_largest_linear_being_quantised(
    framework, quant_backend, staging_bytes_per_element
):
    """Llama-2-7B QLoRA, rank 8 on q and v, bf16. At load, every weight is final but the last
    linear being quantised:
    - NF4 layers: 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376 weights x 4.127 bits / 8
      = 3,340,771,328 bytes;
    - bf16 rest: (2 x 32000 x 4096 embeddings and head + 65 x 4096 norms) x 2 = 524,820,480 bytes;
    - adapters: 32 x 2 x 8 x (4096 + 4096) x 2 bytes = 8,388,608 bytes;
    - staging of one 11008 x 4096 MLP weight: 2 bytes each for bitsandbytes (the half copy on the
      GPU), 5 for torchao (bf16 input, bf16 scaled blocks, a uint8 index each).
    litgpt quantises the LM head too: see the next test."""
    settings = TrainingSettings(
        method="qlora", precision="bf16", lora_rank=8, lora_targets="qv", micro_batch=1, seq_len=256,
        checkpointing="full", framework=framework, quant_backend=quant_backend,
    )  # fmt: skip
    estimate = estimate_memory(get_preset("llama-2-7b"), settings)
    weights = 3_340_771_328 + 524_820_480 + 8_388_608
    assert estimate.load_peak_gib * GIB == pytest.approx(weights + staging_bytes_per_element * 11008 * 4096)
    assert estimate.phases_gib["loading"] == estimate.load_peak_gib
    assert estimate.peak_phase != "loading"  # the step's activations and states exceed it here


def test_litgpt_qlora_load_peak_quantises_the_head_too_and_stages_it_from_fp16():
    """litgpt's QLoRA (Lightning's BitsandbytesPrecision replaces every nn.Linear, lm_head
    included; _quantize_weight copies each bf16 weight to fp16 before quantising): Llama-2-7B,
    rank 8 on q and v, bf16, NF4 with double quantisation (4.126953125 bits):
    - NF4 layers: 6,476,005,376 x 4.126953125 / 8 = 3,340,771,328 bytes;
    - NF4 head: 32000 x 4096 = 131,072,000 x 4.126953125 / 8 = 67,616,000 bytes;
    - bf16 embedding and norms: (131,072,000 + 65 x 4096) x 2 = 262,676,480 bytes;
    - adapters: 8,388,608 bytes;
    - staging of the largest quantised weight, now the head: 131,072,000 x (2 + 2) = 524,288,000.
    Sum 4,203,740,416 bytes."""
    settings = TrainingSettings(
        method="qlora", precision="bf16", lora_rank=8, lora_targets="qv", micro_batch=1, seq_len=256,
        checkpointing="full", framework="litgpt",
    )  # fmt: skip
    estimate = estimate_memory(get_preset("llama-2-7b"), settings)
    assert estimate.load_peak_gib * GIB == pytest.approx(4_203_740_416)


def test_lora_and_full_training_have_no_quantisation_load_phase():
    estimate = estimate_memory(get_preset("llama-2-7b"), TrainingSettings(method="lora", micro_batch=1, seq_len=256))
    assert estimate.load_peak_gib == 0.0 and "loading" not in estimate.phases_gib


def test_lora_counts_a_moe_dense_layer_at_its_own_size():
    """DeepSeek-V2-Lite (config: h 2048, 27 layers, first_k_dense_replace 1, 64 experts of 1408 and
    2 shared, dense MLP 10944, MLA without q_lora_rank, kv_lora_rank 512, rope 64, nope 128, v 128),
    LoRA r 8 on every linear but the router, r x (in + out) each:
    attention q 2048->3072, kv_a 2048->576, kv_b 512->4096, o 2048->2048: 8 x 16,448 = 131,584;
    dense MLP 3 x (2048 + 10944) x 8 = 311,808; sparse MLP (64 experts + the 2816-wide shared
    expert) 8 x (64 x 3 x (2048 + 1408) + 3 x (2048 + 2816)) = 5,425,152. One dense and 26
    sparse layers: 443,392 + 26 x 5,556,736 = 144,918,528 (27 sparse layers were counted before)."""
    from calculators.memory.layout import trainable_parameter_count
    from calculators.models.geometry import parameter_count
    from calculators.models.library import library_spec

    spec = library_spec("deepseek-ai/DeepSeek-V2-Lite")
    lora = TrainingSettings(method="lora", lora_rank=8, lora_targets="all-linear")
    assert trainable_parameter_count(spec, parameter_count(spec), lora) == 144_918_528


def test_lora_adapts_t5_cross_attention_too():
    """flan-t5-base (d_model 768, 12 heads of 64, 12 encoder and 12 decoder layers), LoRA r 8 on q
    and v (PEFT's T5 default, matched by name in self- and cross-attention): 8 x (768 + 768) x 2 =
    24,576 per attention block, 12 + 12 self-attention blocks and 12 cross-attention blocks:
    36 x 24,576 = 884,736."""
    from calculators.memory.layout import trainable_parameter_count
    from calculators.models.geometry import parameter_count
    from calculators.models.library import library_spec

    spec = library_spec("google/flan-t5-base")
    lora = TrainingSettings(method="lora", lora_rank=8, lora_targets="qv")
    assert trainable_parameter_count(spec, parameter_count(spec), lora) == 884_736


def test_fsdp1_frozen_gradients_and_the_gather_unit_follow_each_kind_of_layer():
    """DeepSeek-V2-Lite under LoRA: FSDP1 gives the frozen base of every adapted layer a gradient,
    1 dense layer of 81,007,104 parameters and 26 sparse ones of 584,847,872: 15,287,051,776
    elements, 2 bytes each in bf16. ZeRO-3's per-layer unit is the largest layer the stage holds;
    a stage of dense layers alone gathers a dense layer, not a sparse one."""
    from calculators.memory.layout import stage_layout
    from calculators.memory.states import fsdp1_frozen_gradient_bytes
    from calculators.models.geometry import parameter_count
    from calculators.models.library import library_spec

    spec = library_spec("deepseek-ai/DeepSeek-V2-Lite")
    lora = TrainingSettings(method="lora", precision="bf16-mixed", gpus=8, zero=3, sharding_impl="fsdp1")
    layout = stage_layout(spec, parameter_count(spec), lora, "only")
    assert layout.frozen_active_elements == 81_007_104 + 26 * 584_847_872 == 15_287_051_776
    assert fsdp1_frozen_gradient_bytes(lora, layout) == 2 * 15_287_051_776
    dense_only = spec.model_copy(update={"n_layers": 1})
    unit = stage_layout(dense_only, parameter_count(dense_only), lora, "only").layer_weight_bytes
    # a dense layer's bf16 base and its r-16 adapters (2 x 443,392 at r 8), not a sparse layer's
    assert unit == 2 * (81_007_104 + 886_784)


@pytest.mark.parametrize("model", ["deepseek-ai/DeepSeek-V2-Lite", "google/flan-t5-base"])
@pytest.mark.parametrize("frozen", [0, 1, 5])
def test_one_adapter_count_for_the_layout_and_the_trainable_total(model, frozen):
    """The stage layout's adapters (adapted_layer_kinds) and the model's (model_lora_parameters,
    used for the trainable count and the data-parallel traffic) agree, frozen layers or not."""
    from calculators.memory.layout import stage_layout
    from calculators.models.geometry import parameter_count
    from calculators.models.library import library_spec
    from calculators.workload.finetune import model_lora_parameters

    spec = library_spec(model)
    lora = TrainingSettings(method="lora", lora_targets="all-linear", frozen_layers=frozen)
    layout = stage_layout(spec, parameter_count(spec), lora, "only")
    assert layout.trainable == model_lora_parameters(spec, 16, "all-linear", 1, frozen) > 0
