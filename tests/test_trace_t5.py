"""T5 in the trace (measure.trace.t5, after transformers' modeling_t5.py @6b8b757d) and in the
engine: eager attention with an fp32 softmax, T5LayerNorm keeping its half input, a ReLU or
written-out gated-GELU feed-forward, and each decoder layer's cross-attention block."""

from __future__ import annotations

import pytest

from calculators.memory.activations.attention import attention_score_bytes
from calculators.memory.activations.norms import t5_norm_input_bytes
from calculators.memory.encoder_decoder import t5_attention_settings
from calculators.memory.engine import estimate_memory
from calculators.models.geometry import parameter_count
from calculators.models.hf_config import spec_from_config_dict
from calculators.models.library import library_spec
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

torch = pytest.importorskip("torch")

from measure.trace.models import build_model  # noqa: E402
from measure.trace.tracer import trace_step  # noqa: E402

TINY_T5 = {
    "model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 256, "num_layers": 2, "num_decoder_layers": 2,
    "num_heads": 4, "vocab_size": 512, "relative_attention_num_buckets": 32, "dropout_rate": 0.0,
}  # fmt: skip


PUBLISHED = [("google-t5/t5-small", 60_506_624), ("google/flan-t5-base", 247_577_856)]


@pytest.mark.parametrize(("model", "published"), PUBLISHED)
def test_t5_builds_with_its_published_parameter_count(model, published):
    """keras-hub t5_presets.py @71453d08: t5_small_multi 60,506,624 and flan_base_multi 247,577,856."""
    spec = library_spec(model)
    with torch.device("meta"):
        built = build_model(spec)
    assert sum(p.numel() for p in built.parameters()) == parameter_count(spec).total == published


def test_t5_attention_is_eager_with_an_fp32_softmax_and_its_norm_keeps_its_input():
    """T5Attention has no fused path, so fused is counted as eager; softmax(scores.float()) keeps
    4 bytes per score and the matmul with v its bf16 cast, 2 (6 in all without dropout); T5LayerNorm
    keeps its bf16 input (2 bytes per element) besides the fp32 copy, and nothing more in fp32."""
    t5 = spec_from_config_dict(TINY_T5)
    fused = TrainingSettings(seq_len=128, micro_batch=2, precision="bf16", attention="fused")
    run = t5_attention_settings(t5, fused)
    assert run.attention == "eager" and attention_score_bytes(t5, run) == 6
    assert t5_norm_input_bytes(t5, 2) == 2 and t5_norm_input_bytes(t5, 4) == 0
    assert any("T5:" in note for note in estimate_memory(t5, fused).assumptions)


def test_each_decoder_layer_keeps_what_the_engine_counts():
    """Two more decoder layers, 2 x 128 tokens in bf16: traced, a decoder layer keeps 2,855,092 B
    (activations, weights and AdamW states; an encoder layer, measured the same way, 1,674,016 B);
    the engine counts the same to 64 B. A decoder layer's cross-attention block keeps 1,082,368 B: its norm
    132,096 (fp32 copy 65,536, input 32,768, rsqrt 1,024, normalised 32,768), q's input 32,768,
    the q, k and v copies 98,304, the fp32 softmax and its bf16 cast 6 x 131,072 = 786,432 and
    o's input 32,768."""
    run = TrainingSettings(seq_len=128, micro_batch=2, precision="bf16", attention="eager")

    def per_layer(source) -> float:
        two, four = (spec_from_config_dict(TINY_T5 | {"num_decoder_layers": n}) for n in (2, 4))
        return (source(four, run).phases_gib["end of forward"] - source(two, run).phases_gib["end of forward"]) / 2

    traced = per_layer(trace_step) * GIB
    assert traced == 2_855_092
    assert per_layer(estimate_memory) * GIB == pytest.approx(traced, abs=64)


@pytest.mark.parametrize("targets", ["qv", "all-linear"])
def test_lora_weights_and_adapter_states_match_the_trace(targets):
    """Under LoRA the decoder's cross-attention blocks hold frozen weights and adapters too, and
    the position biases and the encoder's final norm stay in the frozen base: weights equal
    the trace's to the byte, optimizer states to AdamW's step counts."""
    spec = spec_from_config_dict(TINY_T5)
    settings = TrainingSettings(seq_len=64, micro_batch=2, precision="bf16", method="lora", lora_targets=targets)
    traced = trace_step(spec, settings).phase_components_gib["end of forward"]
    estimated = estimate_memory(spec, settings).phase_components_gib["end of forward"]
    assert estimated["weights"] * 2**30 == pytest.approx(traced["weights"] * 2**30, abs=1)
    # AdamW keeps a 4-byte step count per trained tensor, which the engine leaves out (under 100 here)
    assert estimated["optimizer_states"] * 2**30 == pytest.approx(traced["optimizer_states"] * 2**30, abs=400)


@pytest.mark.parametrize(
    ("targets", "dropout", "per_pair"),
    [("qv", 0.0, 1_190_400), ("all-linear", 0.0, 1_313_280), ("qv", 0.1, 1_288_704), ("all-linear", 0.1, 1_722_880)],
)
def test_lora_activations_per_layer_pair_match_the_trace(targets, dropout, per_pair):
    """One more encoder and decoder layer under LoRA keeps the same bytes in engine and trace: the
    decoder's cross-attention block keeps its adapters' r-wide intermediates too (r 16 x 2 B x 128
    tokens = 4,096 B per adapted linear; the engine left them out before: -8,192 B for q and v,
    -16,384 for all four). With LoRA dropout each adapter of the cross block drops out its own
    input (a mask and an output), and wo's adapter reads the ReLU's output, which the ReLU keeps
    for itself (the engine counted it freed: 512 B per token and layer short)."""
    settings = TrainingSettings(
        seq_len=64, micro_batch=2, precision="bf16", method="lora", lora_targets=targets, lora_dropout=dropout
    )

    def per_layer_pair(measure) -> float:
        two, four = (
            measure(spec_from_config_dict(TINY_T5 | {"num_layers": n, "num_decoder_layers": n}), settings)
            for n in (2, 4)
        )
        added = four.phase_components_gib["end of forward"]["activations"]
        return (added - two.phase_components_gib["end of forward"]["activations"]) / 2 * 2**30

    assert per_layer_pair(trace_step) == per_pair
    assert per_layer_pair(estimate_memory) == per_pair


TARGET_CASES = [
    {},
    {"precision": "amp-bf16"},
    {"checkpointing": "full"},
    {"method": "lora"},
    {"method": "lora", "lora_dropout": 0.1, "lora_targets": "all-linear"},
]


@pytest.mark.parametrize("changes", TARGET_CASES, ids=[str(case) for case in TARGET_CASES])
@pytest.mark.parametrize("target", [8, 48])
def test_a_target_length_runs_the_decoder_and_head_on_the_target(changes, target):
    """The encoder on 32 input tokens, the decoder and LM head on `target` target tokens (T5's
    labels; transformers shifts them right into new int64 decoder_input_ids), with T5's dropout
    0.1 (the masks of the encoder's output, the decoder's embedding and its final output): at the
    end of forward engine and trace keep the same activations but for the loss's two fp32 scalars
    (8 B), shorter or longer than the input, trained or under LoRA (whose frozen embeddings leave
    the bucket indices unkept and the decoder's first norm unrecorded, as the encoder's), and under
    full checkpointing (the position biases and masks each block is given, the buckets rebuilt
    inside the first blocks)."""
    spec = spec_from_config_dict(TINY_T5 | {"feed_forward_proj": "gated-gelu", "dropout_rate": 0.1})
    settings = TrainingSettings(**{"seq_len": 32, "precision": "bf16", "target_len": target} | changes)
    traced = trace_step(spec, settings).phase_components_gib["end of forward"]["activations"]
    estimated = estimate_memory(spec, settings).phase_components_gib["end of forward"]["activations"]
    assert (traced - estimated) * GIB == 8


def test_a_shorter_target_cuts_the_decoders_flops():
    """flan-t5-base (12 + 12 layers, h 768, gated MLP 2048, vocab 32,128), 512 input and 128
    target tokens. Per decoder layer the matmul weights are 4 x 768^2 + 3 x 768 x 2048 = 7,077,888
    and its cross-attention block's q and o 2 x 768^2 = 1,179,648 (k and v read the encoder's 512);
    with the head's 32,128 x 768 = 24,674,304 that is 123,764,736 weights that run on a quarter of
    the tokens: 6 x 123,764,736 x 3/4 = 556,941,312 FLOPs per input token fewer; the decoder's
    self-attention over 128 instead of 512 tokens, 12 x 12 x 768 x (512 - 128^2 / 512) =
    53,084,160 fewer; its cross-attention cores from 128 target tokens instead of 512, 12 x 12 x
    768 x (512 - 128) = 42,467,328 fewer. At 512 target tokens those cores add 12 x 12 x 768 x 512
    = 56,623,104 to PaLM's count."""
    from calculators.hardware.catalogue import find_gpu
    from calculators.timing.estimate import estimate_time
    from calculators.timing.flops import model_flops_per_token
    from calculators.timing.settings import TimeSettings

    t5, gpu = library_spec("google/flan-t5-base"), find_gpu("A100-SXM4-80GB")
    time_settings = TimeSettings(dataset_tokens=1e9)
    settings = TrainingSettings(seq_len=512, micro_batch=8, precision="bf16-mixed")
    same = estimate_time(t5, settings, gpu, time_settings)
    shorter = estimate_time(t5, settings.model_copy(update={"target_len": 128}), gpu, time_settings)
    assert same.model_flops_per_token - shorter.model_flops_per_token == 556_941_312 + 53_084_160 + 42_467_328
    palm = model_flops_per_token(t5, settings)  # 6N + PaLM's self-attention term
    assert same.model_flops_per_token - palm == 56_623_104
    as_long = estimate_time(t5, settings.model_copy(update={"target_len": 512}), gpu, time_settings)
    assert as_long.step_s == same.step_s
    assert shorter.step_s < same.step_s


def test_selective_checkpointing_rebuilds_the_cross_attention_core():
    """T5's eager cross-attention core, 8 target tokens x 32 input tokens x 4 heads, keeps its fp32
    softmax and the bf16 cast of it, 6 B per score without dropout: 6,144 B per block that
    selective checkpointing rebuilds in backward instead of keeping."""
    from calculators.memory.encoder_decoder import cross_attention_block_bytes

    spec = spec_from_config_dict(TINY_T5)
    none = TrainingSettings(seq_len=32, target_len=8, precision="bf16", attention="eager")
    selective = none.model_copy(update={"checkpointing": "selective"})
    assert cross_attention_block_bytes(spec, none) - cross_attention_block_bytes(spec, selective) == 4 * 8 * 32 * 6
