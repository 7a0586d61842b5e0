"""The image encoder of a vision-language model in memory and time (issue 16): its weights,
what its layers keep for backward, Llama 3.2 Vision's cross-attention layers, and its FLOPs.
Every figure is worked by hand from the formulas cited in calculators/workload/vision.py and
calculators/memory/ (vision.py, mllama.py)."""

import pytest
from test_architectures import LLAMA_32_11B_VISION, LLAVA_15_7B, QWEN25_VL_7B

from calculators.hardware.catalogue import find_gpu
from calculators.memory.engine import estimate_memory
from calculators.memory.mllama import (
    cross_attention_activation_bytes,
    cross_attention_shared_bytes,
    cross_layer_gate_bytes,
    cross_mask_bytes,
    vision_gate_bytes,
    vision_lse_padding_bytes,
    vision_mask_bytes,
)
from calculators.memory.vision import vision_outside_layers_bytes, vision_tower_activation_bytes
from calculators.models.hf_config import spec_from_config_dict
from calculators.timing.estimate import estimate_time
from calculators.timing.flops import vision_flops_per_token
from calculators.timing.settings import TimeSettings
from calculators.units import GIB
from calculators.workload.training import TrainingSettings
from calculators.workload.vision import tower_forward_flops_per_image, tower_tokens_per_image

LLAVA = spec_from_config_dict(LLAVA_15_7B)
MLLAMA = spec_from_config_dict(LLAMA_32_11B_VISION)
QWEN_VL = spec_from_config_dict(QWEN25_VL_7B)


def bf16(**changes) -> TrainingSettings:
    """Pure bf16, fused attention, no checkpointing, full training: one micro-batch of one sample."""
    return TrainingSettings(**({"precision": "bf16", "attention": "fused", "checkpointing": "none"} | changes))


def test_llava_clip_tower_keeps_its_layers_activations():
    """CLIP ViT-L/14 at 336 px: 24^2 + 1 = 577 patches per image, 2 images = 1154 rows; h 1024,
    f 4096, 16 heads, LayerNorm, GELU. Per layer in pure bf16 with fused attention (bytes per row):
    two LayerNorms 2 x (2h + 8), q/k/v input h x 2 (one shared copy), q, k, v 3 x 2h, the
    attention output 2h + fp32 log-sum-exp 4 x 16, fc1 input 2h, GELU input and fc2 input 2 x 2f:
    16h + 4f + 16 + 64 = 32,848 bytes. 1154 x 32,848 x 24 layers = 909,758,208 bytes. The
    projector's input, the 576 image tokens of each image copied out of the slice that drops CLS:
    2 x 576 x 1024 x 2 = 2,359,296 bytes. 912,117,504 in all."""
    assert tower_tokens_per_image(LLAVA, bf16(images_per_sample=2)) == 577
    assert vision_tower_activation_bytes(LLAVA, bf16(images_per_sample=2)) == 909_758_208 + 2_359_296


def test_a_frozen_or_adapter_tuned_tower_keeps_nothing():
    """Frozen, the encoder keeps nothing; the projector, which still trains, keeps its input
    (2 x 576 x 1024 x 2 bytes). LoRA freezes both."""
    assert vision_tower_activation_bytes(LLAVA, bf16(images_per_sample=2, freeze_vision_tower=True)) == 2_359_296
    assert vision_tower_activation_bytes(LLAVA, bf16(images_per_sample=2, method="lora")) == 0
    assert vision_tower_activation_bytes(LLAVA, bf16()) == 0  # no images, no encoder run


def test_full_checkpointing_keeps_each_encoder_layer_input_only():
    """Full checkpointing keeps each layer's input, 2 bytes x 1154 rows x 1024 in pure bf16, x 24,
    and the projector its input, 2 x 576 x 1024 x 2 bytes."""
    settings = bf16(images_per_sample=2, checkpointing="full")
    assert vision_tower_activation_bytes(LLAVA, settings) == 24 * 2 * 1154 * 1024 + 2_359_296


def test_the_encoders_activations_reach_the_peak_phases():
    """The encoder's bytes are alive from the end of forward to the embedding's backward."""
    with_images = estimate_memory(LLAVA, bf16(images_per_sample=2, seq_len=256))
    without = estimate_memory(LLAVA, bf16(seq_len=256 + 2 * 576))
    for phase in ("end of forward", "backward, embeddings"):
        added = with_images.phase_components_gib[phase]["activations"]
        added -= without.phase_components_gib[phase]["activations"]
        assert added * GIB == pytest.approx(909_758_208 + 2_359_296)


def test_llama32_vision_cross_attention_layers_read_the_image_tiles():
    """Llama-3.2-11B-Vision, 512 text tokens, one image of 4 tiles x 1601 = 6404 keys and values,
    pure bf16, fused attention (modeling_mllama.py; traced on a small model in
    tests/test_trace_mllama.py). The projected image states, one shared tensor: 2 x 6404 x 4096 =
    52,461,568. Per cross-attention layer: k and v over the image instead of the text, repeated to
    32 heads x 128 = 4096: 2 x 2 x (6404 - 512) x 4096 = 96,534,528; the q RMSNorm per head over
    512 x 32 rows of 128 (fp32 upcast 4, normalised copy 2 per element, rstd 4 per row):
    8,388,608 + 4,194,304 + 65,536 = 12,648,448; the k RMSNorm over 6404 x 8 rows of 128:
    26,230,784 + 13,115,392 + 204,928 = 39,551,104; 148,734,080 per layer, 1,189,872,640 for 8.
    SDPA pads the mask's 6404 columns to 6408 for its memory-efficient kernel, a copy per layer:
    8 x 2 x 512 x 6408 = 52,494,336, and the full-text-row mask 2 x 512 = 1,024; each layer's
    two gates keep the attention and masked MLP outputs, 8 x 512 x (2 + 2) x 4096 = 67,108,864.
    1,361,938,432 bytes."""
    settings = bf16(images_per_sample=1, seq_len=512)
    assert cross_attention_activation_bytes(MLLAMA, settings) == (
        52_461_568 + 1_189_872_640 + 52_494_336 + 1_024 + 67_108_864
    )
    # full checkpointing keeps the states and the masks themselves, checkpointed layers' arguments:
    # the cross-attention mask unpadded, 2 x 512 x 6404 = 6,557,696
    assert cross_attention_activation_bytes(MLLAMA, settings.model_copy(update={"checkpointing": "full"})) == (
        52_461_568 + 6_557_696 + 1_024
    )
    assert cross_attention_activation_bytes(LLAVA, bf16(images_per_sample=1)) == 0


def test_the_vision_weights_train_or_freeze():
    """Qwen2.5-VL-7B: 8,292,166,656 parameters, of which the vision transformer 676,550,144 with its
    merger (the projector) 44,574,464, so the encoder alone 631,975,680. Frozen, 7,660,190,976
    train; in pure bf16 every weight is 2 bytes: 16,584,333,312 bytes either way."""
    trained = estimate_memory(QWEN_VL, bf16())
    frozen = estimate_memory(QWEN_VL, bf16(freeze_vision_tower=True))
    assert trained.trainable_parameters == 8_292_166_656
    assert frozen.trainable_parameters == 8_292_166_656 - 631_975_680 == 7_660_190_976
    for estimate in (trained, frozen):
        assert estimate.phases_gib and estimate.phase_components_gib["optimizer step"]["weights"] * GIB == (
            pytest.approx(2 * 8_292_166_656)
        )
    # pure bf16 keeps AdamW's two states in bf16: 4 bytes per trained parameter
    assert trained.components_gib["optimizer_states"] * GIB == pytest.approx(4 * 8_292_166_656)
    assert frozen.components_gib["optimizer_states"] * GIB == pytest.approx(4 * 7_660_190_976)
    assert any("the encoder's 632M frozen" in line for line in frozen.assumptions)


def test_lora_keeps_the_encoder_in_the_half_dtype():
    """Under LoRA the encoder and projector are frozen base weights, 2 bytes each: the VLM's
    weights exceed its language model's by 2 x 676,550,144 bytes."""
    text_only = QWEN_VL.model_copy(update={"extra_params": 0, "vision": None})
    lora = TrainingSettings(method="lora", precision="bf16-mixed")
    vlm, lm = estimate_memory(QWEN_VL, lora), estimate_memory(text_only, lora)
    extra = vlm.phase_components_gib["optimizer step"]["weights"] - lm.phase_components_gib["optimizer step"]["weights"]
    assert extra * GIB == pytest.approx(2 * 676_550_144)


def test_encoder_forward_flops():
    """CLIP ViT-L/14-336 on one image: per layer 2 x 577 x (4 x 1024^2 + 2 x 1024 x 4096) =
    14,520,680,448 matmul FLOPs and 4 x 577^2 x 1024 = 1,363,677,184 attention FLOPs; x 24 layers
    = 381,224,583,168."""
    assert tower_forward_flops_per_image(LLAVA, bf16(images_per_sample=1)) == 381_224_583_168


def test_qwen_window_attention_shrinks_the_attention_term():
    """Qwen2.5-VL at 1296 image tokens: 4 x 1296 = 5184 patches; 4 of 32 blocks attend over the
    whole image, 28 within 64-patch windows: share (4 + 28 x 64 / 5184) / 32 = 0.13580...
    Per block 2 x 5184 x (4 x 1280^2 + 3 x 1280 x 3420) + 4 x 5184^2 x 1280 x share."""
    settings = bf16(images_per_sample=1, image_tokens=1296)
    share = (4 + 28 * 64 / 5184) / 32
    per_block = 2 * 5184 * (4 * 1280**2 + 3 * 1280 * 3420) + 4 * 5184**2 * 1280 * share
    assert tower_forward_flops_per_image(QWEN_VL, settings) == pytest.approx(32 * per_block, rel=1e-12)


def test_vision_flops_join_the_model_flops_per_token():
    """LLaVA, 2 images trained: 3 passes x 2 x 381,224,583,168 over 512 + 2 x 576 = 1664 tokens;
    frozen: the forward only."""
    trained = bf16(images_per_sample=2, seq_len=512)
    assert vision_flops_per_token(LLAVA, trained) == pytest.approx(3 * 2 * 381_224_583_168 / 1664)
    frozen = trained.model_copy(update={"freeze_vision_tower": True})
    assert vision_flops_per_token(LLAVA, frozen) == pytest.approx(2 * 381_224_583_168 / 1664)


def test_the_step_times_the_encoder_as_its_own_op_class():
    """A trained encoder costs its forward and backward; a frozen one its forward only, so it is
    between a third and a half of the trained one (backward is 2x the GEMMs, 2.5x attention)."""
    gpu, time_settings = find_gpu("H100-SXM5-80GB"), TimeSettings(dataset_tokens=1e9)
    trained = estimate_time(LLAVA, bf16(images_per_sample=2, seq_len=512), gpu, time_settings)
    frozen = estimate_time(LLAVA, bf16(images_per_sample=2, seq_len=512, freeze_vision_tower=True), gpu, time_settings)
    assert "vision" not in estimate_time(LLAVA, bf16(seq_len=512), gpu, time_settings).compute_by_class_s
    ratio = frozen.compute_by_class_s["vision"] / trained.compute_by_class_s["vision"]
    assert 1 / 3.5 <= ratio <= 1 / 2.5
    assert frozen.step_s < trained.step_s


def test_llama32_vision_serving_caches_image_keys_in_its_cross_attention_layers():
    """Llama-3.2-11B-Vision in bf16: its 32 self-attention layers cache 2 x 8 kv-heads x 128 x 2 B
    = 4,096 B each per token, 131,072 B per token; the 8 cross-attention layers cache nothing per
    token but 4 x 1601 = 6404 keys and values per image: 8 x 6404 x 4096 = 209,846,272 B."""
    from calculators.memory.serving import estimate_serving, kv_cache_bytes_per_sequence
    from calculators.workload.serving import ServingSettings

    assert kv_cache_bytes_per_sequence(MLLAMA, "bf16", 1, 8192) == 131_072 * 8192
    assert kv_cache_bytes_per_sequence(MLLAMA, "bf16", 1, 8192, images=2) == 131_072 * 8192 + 2 * 209_846_272
    estimate = estimate_serving(MLLAMA, ServingSettings(context_len=8192, images_per_sequence=1))
    assert estimate.kv_cache_bytes_per_token == 131_072
    assert estimate.kv_cache_gib * GIB == 131_072 * 8192 + 209_846_272


def test_serving_images_on_a_token_model_is_one_clear_problem(capsys):
    from calculators.interface.cli import main
    from calculators.workload.serving import ServingSettings, serving_problem

    assert "count each image's tokens in the context" in serving_problem(LLAVA, ServingSettings(images_per_sequence=1))
    assert serving_problem(MLLAMA, ServingSettings(images_per_sequence=1)) is None
    args = ["memory", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--mode", "inference", "--images-per-sequence", "1"]
    assert main([*args, "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err


def test_memory_page_shows_the_encoder_with_images_and_freezes_it():
    """The sidebar's Images expander and 'Freeze the vision tower' drive the Memory page's answer."""
    from apptest_helpers import open_app

    app = open_app(model="meta-llama/Llama-3.2-11B-Vision", imgs="1")
    text = " ".join(element.value for element in app.markdown) + " ".join(c.value for c in app.caption)
    assert "4 tiles" in text or "6404 keys and values" in text
    freeze = next(box for box in app.sidebar.checkbox if box.label == "Freeze the vision tower")
    freeze.check().run()
    assert not app.exception
    text = " ".join(element.value for element in app.markdown) + " ".join(c.value for c in app.caption)
    assert "the encoder is frozen" in text
    assert next(box for box in app.sidebar.checkbox if box.label == "Freeze the vision tower").value


def test_data_parallel_reduces_the_trained_vision_parameters():
    """Qwen2.5-VL-7B: data parallelism reduces the gradients of the 676,550,144 encoder and
    projector parameters beside the language model's, 44,574,464 (the projector) when frozen."""
    from calculators.timing.communication import trainable_parameters_per_rank

    text_only = QWEN_VL.model_copy(update={"extra_params": 0, "vision": None})
    settings = bf16(gpus=8)
    base = trainable_parameters_per_rank(text_only, settings)
    assert trainable_parameters_per_rank(QWEN_VL, settings) - base == 676_550_144
    frozen = settings.model_copy(update={"freeze_vision_tower": True})
    assert trainable_parameters_per_rank(QWEN_VL, frozen) - base == 44_574_464


def test_mllama_gates_and_masks_follow_the_models_dtype():
    """calculators.memory.mllama on Llama-3.2-11B-Vision, 512 text tokens and one image (6404 image
    tokens), cross-attention side. amp-bf16 full training keeps fp32 parameters, so both masks are
    built fp32; SDPA gets autocast's bf16 cast of the cross mask, padded to 6408 columns, one per
    layer: 8 x 2 x 512 x 6408 = 52,494,336, and the full-text-row mask stays fp32, 4 x 512; that
    mask (fp32) promotes the masked MLP output to fp32, so the gates keep 8 x 512 x (2 + 4) x 4096
    = 100,663,296. LoRA loads the base in bf16 and freezes the gates: the padded copies and the row
    mask, 2 x 512. Eager attention without checkpointing adds the cross mask to the scores and
    keeps only the row mask."""
    amp = TrainingSettings(precision="amp-bf16", images_per_sample=1, seq_len=512)
    assert cross_mask_bytes(MLLAMA, amp) == 52_494_336 + 2_048
    assert cross_layer_gate_bytes(MLLAMA, amp) == 100_663_296
    lora = bf16(images_per_sample=1, seq_len=512, method="lora")
    assert cross_mask_bytes(MLLAMA, lora) == 52_494_336 + 1_024
    assert cross_layer_gate_bytes(MLLAMA, lora) == 0
    assert cross_mask_bytes(MLLAMA, bf16(images_per_sample=1, seq_len=512, attention="eager")) == 1_024
    assert cross_mask_bytes(LLAVA, bf16(images_per_sample=1)) == 0


def test_mllama_encoder_keeps_its_mask_gates_norms_and_wide_projector_input():
    """Llama-3.2-11B-Vision's encoder on one image, pure bf16, fused attention, full training:
    4 tiles of 1601 patches, padded to 1608 (T = 6432), width 1280, 8 gated global layers.
    - the aspect-ratio mask (1, 1, T, T) in bf16: 2 x 6432^2 = 82,741,248;
    - the gates keep the attention and MLP outputs of each global layer: 8 x 2 x 2 x 6432 x 1280
      = 263,454,720;
    - ln_pre's input (6404 rows) and ln_post's (6432), 2 x 1280 + 8 bytes each: 12,836 x 2,568 =
      32,962,848, and the gathered tile positions 2 x 6404 x 1280 = 16,394,240;
    - the projector's input, the final and 5 intermediate outputs concatenated (vision_output_dim
      7680) over the unpadded patches: 2 x 6404 x 7680 = 98,365,440.
    493,918,496 bytes on top of the 40 layers as plain ViT layers. Frozen (--freeze-vision-tower)
    the projector still trains and keeps its input only; under LoRA nothing."""
    settings = bf16(images_per_sample=1, seq_len=512)
    assert vision_mask_bytes(MLLAMA, settings) == 82_741_248
    assert vision_gate_bytes(MLLAMA, settings) == 263_454_720
    assert vision_outside_layers_bytes(MLLAMA, settings) == 32_962_848 + 16_394_240
    frozen = bf16(images_per_sample=1, seq_len=512, freeze_vision_tower=True)
    assert vision_tower_activation_bytes(MLLAMA, frozen) == 98_365_440
    assert vision_tower_activation_bytes(MLLAMA, bf16(images_per_sample=1, seq_len=512, method="lora")) == 0
    # the 40 layers as plain ViT layers, per patch row in bf16 with fused attention (the LLaVA
    # test's count): 16 x 1280 + 4 x 5120 + 16 + 4 x 16 heads = 41,040 B, x 6432 x 40
    assert vision_tower_activation_bytes(MLLAMA, settings) == 493_918_496 + 41_040 * 6432 * 40
    # 6432 patches are a multiple of 32: the kernel's log-sum-exp needs no padding rows; one tile
    # (1608 patches) would pad 24 rows per head: 4 x 16 x 24 x 40 layers
    assert vision_lse_padding_bytes(MLLAMA, settings) == 0
    one_tile = MLLAMA.model_copy(update={"vision": MLLAMA.vision.model_copy(update={"tokens_per_image": 1608})})
    assert vision_lse_padding_bytes(one_tile, settings) == 4 * 16 * 24 * 40
    # full checkpointing: the gates' outputs are inside the checkpointed layers
    assert vision_gate_bytes(MLLAMA, settings.model_copy(update={"checkpointing": "full"})) == 0


def test_without_images_llama32_vision_skips_its_cross_attention_layers_in_time():
    """MllamaTextModel skips its 8 cross-attention layers without images, so they cost no time or
    FLOPs. Per layer of Llama-3.2-11B-Vision (h 4096, 32 heads, 8 key-value heads of 128, MLP
    14,336): matmul weights q 4096^2 + k, v 2 x 4096 x 1024 + o 4096^2 + 3 x 4096 x 14,336 =
    218,103,808, so 6 x that = 1,308,622,848 FLOPs per token, plus PaLM's attention term at 4096
    tokens, 12 x 4096 x 4096 = 201,326,592: 1,509,949,440 per layer, 12,079,595,520 for the 8. The
    step's GEMMs and attention are those of the same model with 32 layers."""
    gpu, time_settings = find_gpu("H100-SXM5-80GB"), TimeSettings(dataset_tokens=1e9)
    settings = TrainingSettings(seq_len=4096, precision="bf16-mixed")
    with_images = estimate_time(MLLAMA, settings.model_copy(update={"images_per_sample": 1}), gpu, time_settings)
    text_only = estimate_time(MLLAMA, settings, gpu, time_settings)
    language_model_32 = MLLAMA.model_copy(update={"n_layers": 32, "vision": None, "extra_params": 0})
    plain = estimate_time(language_model_32, settings, gpu, time_settings)
    assert text_only.model_flops_per_token == pytest.approx(
        with_images.model_flops_per_token
        - vision_flops_per_token(MLLAMA, settings.model_copy(update={"images_per_sample": 1}))
        - 12_079_595_520
    )
    for op_class in ("gemm", "attention", "elementwise"):
        assert text_only.compute_by_class_s[op_class] == pytest.approx(plain.compute_by_class_s[op_class])


def test_mllama_cross_attention_layers_share_the_states_and_masks():
    """What the 8 cross-attention layers of Llama-3.2-11B-Vision share (512 text tokens, one image):
    the projected states 2 x 6404 x 4096 = 52,461,568 and the full-text-row mask 2 x 512 = 1,024,
    the cross mask being copied per layer under fused attention; under full checkpointing the
    unpadded mask itself, 2 x 512 x 6404 = 6,557,696, too. With LoRA dropout the k and v adapters
    keep their dropouts' outputs, not the states: the row mask alone. A pipeline stage holds these
    whole and its share of the rest: with 2 stages of 20 layers, half of the layers' own bytes."""
    settings = bf16(images_per_sample=1, seq_len=512)
    assert cross_attention_shared_bytes(MLLAMA, settings) == 52_461_568 + 1_024
    full = settings.model_copy(update={"checkpointing": "full"})
    assert cross_attention_shared_bytes(MLLAMA, full) == 52_461_568 + 6_557_696 + 1_024
    dropout = settings.model_copy(update={"method": "lora", "lora_dropout": 0.1})
    assert cross_attention_shared_bytes(MLLAMA, dropout) == 1_024
    # tensor parallelism splits the gates' rows (sequence parallel), not the shared states
    split = settings.model_copy(update={"tensor_parallel": 2})
    assert cross_layer_gate_bytes(MLLAMA, split) == 67_108_864 / 2
    assert cross_attention_shared_bytes(MLLAMA, split) == 52_461_568 + 1_024


def test_without_images_the_flat_utilisation_and_tensor_parallel_traffic_skip_them_too():
    """The same 8 skipped layers under a flat utilisation (executed FLOPs) and under tensor
    parallelism (4 all-reduces per running layer): as the 32-layer language model."""
    gpu = find_gpu("H100-SXM5-80GB")
    language_model_32 = MLLAMA.model_copy(update={"n_layers": 32, "vision": None, "extra_params": 0})
    for time_settings, settings in [
        (TimeSettings(dataset_tokens=1e9, utilisation=0.4), TrainingSettings(seq_len=4096, precision="bf16-mixed")),
        (TimeSettings(dataset_tokens=1e9), TrainingSettings(seq_len=4096, precision="bf16-mixed", tensor_parallel=2)),
    ]:
        text_only = estimate_time(MLLAMA, settings, gpu, time_settings)
        plain = estimate_time(language_model_32, settings, gpu, time_settings)
        assert text_only.compute_by_class_s.get("flat utilisation") == plain.compute_by_class_s.get("flat utilisation")
        assert text_only.comm_by_dimension_s["tp"] == pytest.approx(plain.comm_by_dimension_s["tp"])


def test_frozen_first_layers_with_llama32_vision_images_are_flagged_as_low():
    """The image states need gradients (the projector trains), so they make the frozen
    cross-attention layers record; the estimate says it counts the frozen layers as keeping nothing."""
    frozen = estimate_memory(MLLAMA, bf16(images_per_sample=1, seq_len=512, frozen_layers=10))
    trained = estimate_memory(MLLAMA, bf16(images_per_sample=1, seq_len=512))
    assert any(line.startswith("Frozen first layers with images") for line in frozen.assumptions)
    assert not any(line.startswith("Frozen first layers with images") for line in trained.assumptions)
