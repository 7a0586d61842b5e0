"""The assumption lines shown with a memory estimate: what the engine assumes of the stack, the precision,
the method, offloading and parallelism, each with its source."""

from __future__ import annotations

import math

from calculators.memory.activations.attention import softcap_tanh_bytes
from calculators.memory.activations.head import logit_softcap_tanh_bytes
from calculators.memory.activations.mlp import mlp_activation_saved_bytes, runs_written_out_gelu
from calculators.memory.mllama import layers_skipped_without_images
from calculators.memory.phases import OFFLOAD_RESIDENT_LAYERS
from calculators.memory.states import REDUCE_BUCKET_ELEMENTS
from calculators.models.spec import ModelSpec, extension
from calculators.workload.finetune import NF4_BITS_PER_WEIGHT
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import (
    LORA_TARGET_LABEL,
    PAGED_OPTIMIZERS,
    TrainingSettings,
    decoder_settings,
    image_tokens_per_image,
)
from calculators.workload.vision import frozen_tower_parameters, tower_settings, tower_trains, vision_tower

ADAMW_STEP_NOTE = {
    "foreach": "torch's default on CUDA: _foreach_sqrt adds one state-sized tensor per parameter at the step.",
    "fused": "Updates in place, no step temporaries.",
    "for-loop": "One parameter at a time: two temporaries the size of the largest parameter.",
}


def memory_assumptions(spec: ModelSpec, settings: TrainingSettings, grads_persist: bool) -> list[str]:
    o = settings.overheads
    notes = [
        "Weights, gradients and optimizer states per ZeRO paper (arXiv 1910.02054): "
        f"ZeRO stage {settings.zero} over {settings.gpus} data-parallel GPU(s).",
        "Activations per Korthikanti et al. 2022 (arXiv 2205.05198), counted as PyTorch saves "
        "them: fp32 upcasts in norms/softmax, per-linear autocast casts, 1-byte dropout masks.",
        "Grouped k/v heads are repeated to all heads before attention (HF repeat_kv).",
        f"CUDA context {o.cuda_context_gib} GiB and cuBLAS workspace {o.cublas_workspace_gib} GiB "
        "(not seen by torch); replace with a calibrated figure for your host.",
        f"Caching allocator reserve: {o.allocator_reserve_fraction:.0%} of the allocated peak (reported range 5-15%).",
    ]
    if settings.loss == "full":
        notes.append("Cross-entropy in fp32: log-probabilities b*s*V*4 bytes plus two gradients of that size.")
    if settings.attention == "fused":
        notes.append("Fused attention (flash/SDPA) saves q, k, v, output and log-sum-exp, no score matrix.")
    if settings.total_gpus > 1:
        notes.append(f"NCCL buffers {o.nccl_gib} GiB per GPU.")
        if settings.zero == 0 and settings.gpus > 1:
            notes.append("DDP keeps gradient buckets equal to the gradients (gradient_as_bucket_view=False).")
    if grads_persist:
        notes.append("Gradients stay allocated through the forward pass (accumulation or set_to_none=False).")
    else:
        notes.append("Gradients are freed after each step (zero_grad(set_to_none=True), torch >= 2.0).")
    if settings.optimizer == "adamw":
        notes.append(f"AdamW implementation: {settings.optimizer_impl}. {ADAMW_STEP_NOTE[settings.optimizer_impl]}")
    if settings.precision_facts.master_weight_bytes:
        notes.append(
            "The step converts the gradients to fp32 for the master update (+4 bytes per trainable parameter); "
            "DeepSpeed's FusedAdam and Megatron's fused Adam correspond to 'fused'."
        )
    if settings.precision == "fp8":
        notes.append(
            "FP8 (torchao Float8Linear, tensorwise dynamic scaling, as torchtitan converts every linear but the "
            "LM head): each linear saves its own e4m3 cast of its input (1 byte per element) and of its weight "
            "(1 byte per weight, shown as weight copies), the bf16 input itself is not kept."
        )
    if settings.checkpointing == "full" and settings.checkpoint_unit == "submodule":
        notes.append(
            "Full checkpointing per submodule (NeMo Automodel): each norm, the attention and the MLP keep their "
            "own input, and backward rebuilds one submodule at a time."
        )
    if settings.logits_in_backward == "kept" and settings.loss == "full":
        notes.append("The training loop keeps the model's output: the bf16 logits stay alive through backward.")
    if settings.sharding_impl == "fsdp2" and settings.zero == 3 and settings.gpus > 1:
        notes.append(
            "FSDP2: the root unit (embeddings, final norm, LM head) stays gathered from forward to the end of "
            "backward; the last unit's reduce-scatter input is alive while the next one runs backward."
        )
    notes.append(
        "Backward: the layer in backward holds the larger of its MLP-backward moment (all its saved tensors "
        "plus the hidden gradient) and, with eager attention, its attention-backward moment (score-sized "
        "gradients); gradients appear as backward reaches their layer (traced, bench/accuracy.py)."
    )
    return (
        notes
        + _softcap_notes(spec, settings)
        + _gelu_notes(spec, settings)
        + _t5_notes(spec, settings)
        + _method_notes(spec, settings)
        + _offload_notes(settings)
        + _parallel_notes(spec, settings)
    )


def _t5_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """How the encoder-decoder is counted (encoder_decoder_activation_bytes)."""
    if not extension(spec, "cross_attention_layers"):
        if settings.target_len:
            return [f"Target length ({settings.target_len}) ignored: {spec.name} has no separate decoder."]
        return []
    target = decoder_settings(spec, settings).seq_len
    lengths = (
        f"the encoder runs {settings.seq_len} input tokens, the decoder and LM head {target} target tokens"
        if settings.target_len
        else f"encoder and decoder each run {settings.seq_len} tokens (no target length given)"
    )
    return [
        f"T5: {lengths}; attention is eager (transformers' T5Attention adds the relative position bias to the "
        "scores and has no fused path), with its softmax in fp32; each decoder layer's cross-attention keeps a "
        "block like self-attention's, its k and v reading the encoder's output."
    ]


def _gelu_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """What transformers' written-out "gelu_new" keeps (mlp_activation_saved_bytes)."""
    if not runs_written_out_gelu(spec, settings):
        return []
    per_element = mlp_activation_saved_bytes(spec, settings)
    return [
        f"GELU as transformers' gelu_new, written out op by op: its ops keep {per_element:g} bytes per MLP hidden "
        "element (pow's input, tanh's output, 0.5x and 1 + tanh), where one GELU kernel keeps its input; "
        "torch.compile or a one-kernel GELU (gelu_pytorch_tanh) keeps one tensor."
    ]


def _softcap_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """What Gemma 2's soft-capping keeps, and transformers' advice to train it with eager attention
    (Gemma2ForCausalLM.forward warns otherwise, models/gemma2/modeling_gemma2.py @006e8693)."""
    notes = []
    if spec.attention_softcap is not None:
        if softcap_tanh_bytes(spec, settings):
            notes.append(
                f"Attention soft-capping ({spec.attention_softcap:g} x tanh(scores / {spec.attention_softcap:g})): "
                "tanh keeps its output, one more score matrix per layer in the compute dtype."
            )
        elif settings.attention == "fused":
            notes.append(
                "Attention soft-capping inside flash-attention (2.6+): nothing more kept. transformers "
                "recommends eager attention for training Gemma 2; choose eager to count its score matrices."
            )
    if spec.logit_softcap is not None and logit_softcap_tanh_bytes(spec, settings):
        notes.append(
            f"Logit soft-capping ({spec.logit_softcap:g} x tanh(logits / {spec.logit_softcap:g})): tanh keeps "
            "its output, b*s*V in the compute dtype, until backward reaches it."
        )
    return notes


def _method_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    notes = []
    if is_adapter_method(settings.method):
        notes += [
            f"LoRA (arXiv 2106.09685) rank {settings.lora_rank} on {LORA_TARGET_LABEL[settings.lora_targets]}: "
            "r x (in + out) trainable parameters per adapted linear; gradients, master copy and optimizer "
            "states for the adapters only.",
            "Frozen base weights in the half compute dtype (fp32 under fp32); adapters in the weights' dtype "
            "(fp32 under fp32/AMP as PEFT keeps them, half + fp32 master under *-mixed, bf16 under pure bf16). "
            "With the base half, the hidden states are half under autocast too: autocast casts none of them "
            "(after a LayerNorm, which CUDA autocast runs in fp32, each adapter keeps its own half cast).",
            "A linear without an adapter, the frozen norms and the frozen LM head save no input for backward; "
            "each adapter saves its r-wide intermediate; nothing before the first adapter is recorded.",
        ]
    if settings.method == "qlora":
        notes.append(
            f"QLoRA (arXiv 2305.14314): the layers' linear weights in NF4 with double quantisation, "
            f"{NF4_BITS_PER_WEIGHT:.3f} bits each; embeddings, norms and the LM head stay in the half dtype; "
            "one linear weight at a time is dequantised to bf16 during forward and backward."
        )
    if settings.frozen_layers:
        notes.append(
            f"The first {settings.frozen_layers} layers and the embeddings are frozen: no gradients or optimizer "
            "states, and no saved activations (nothing before them requires grad)."
        )
    if settings.optimizer in PAGED_OPTIMIZERS:
        notes.append(
            "Paged AdamW (bitsandbytes, QLoRA paper Sec. 3): states in CUDA unified memory, outside torch's "
            "caching allocator: reported as outside_allocator_gib (in the device peak, not in allocated or "
            "reserved); an upper bound, since pages move to the host under memory pressure."
        )
    return notes + _stack_notes(spec, settings)


def _stack_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """What the training stack's features change, one sentence each."""
    notes = []
    if settings.framework:
        notes.append(
            f"Framework {settings.framework}: unset settings take its defaults (loss {settings.loss}, "
            f"AdamW implementation {settings.optimizer_impl}); see calculators/workload/frameworks.py."
        )
    if settings.loss == "chunked":
        notes.append(
            f"Chunked cross-entropy in {settings.loss_chunks} chunks (torchtune CEWithChunkedOutputLoss): fp32 "
            "log-probabilities of every chunk saved, but only one chunk's gradients at a time."
        )
    if settings.loss == "fused-linear" and spec.head == "lm":
        notes.append(
            "Fused linear cross-entropy (Liger / Cut Cross-Entropy): logits computed chunk by chunk "
            "(about b*s*h elements at a time), never whole; the head's input and weight gradients made in forward."
        )
    if settings.liger:
        notes.append(
            "Liger kernels: RMSNorm saves its input and fp32 rstd only; SwiGLU saves gate and up only; RoPE "
            "rotates in place (HF's rotation saves no q/k either)."
        )
    if settings.checkpointing == "op-selective":
        notes.append(
            "Per-op selective checkpointing (torchtitan 'op'): each layer keeps its input, every other matmul "
            "output (1st, 3rd, ...) and the fused attention output; the rest is recomputed in backward."
        )
    if settings.optimizer_in_backward:
        notes.append(
            "Optimizer in backward: each parameter steps in its post-accumulate-grad hook and its gradient is "
            "freed at once; no separate optimizer-step phase."
        )
    if settings.compile:
        notes.append(
            "torch.compile: norms save their input and rstd, SwiGLU its gate and up, eager attention its scores "
            "and row statistics, a chunked loss its logits and log-sum-exp (AOT autograd's min-cut partitioner "
            "recomputes pointwise ops); the layers are traced through the partitioner (measure/trace/"
            "compile_partition.py), the chunked loss is not."
        )
    if settings.load_whole_model:
        notes.append(
            "Loading: the whole model is moved to each GPU in its weight dtype before ZeRO-3 partitions it "
            "(DeepSpeed without zero.Init); where that exceeds the step, it is the peak."
        )
    if settings.method == "qlora":
        notes.append(
            "Loading (load_peak_gib): the base is quantised to NF4 tensor by tensor on the GPU; the peak is the "
            "finished weights plus the largest linear's staging copies (bitsandbytes 2, litgpt 4, torchao 5 bytes "
            "per element); where that exceeds the step, it is the peak."
        )
    if settings.qkv_projection == "fused" and not spec.fused_qkv:
        notes.append(
            "One fused q/k/v linear (litgpt's model code): v stays a view of its output, which keeps all of it; "
            "adapters on some of q, k, v are zero-padded to its width (index_copy keeps their output)."
        )
    if settings.sharding_impl == "fsdp1" and settings.method == "lora":
        notes.append(
            "FSDP1: each layer is one flat parameter, and with adapters in it the frozen base gets gradients too "
            "(PyTorch FSDP docs); FSDP2 and DeepSpeed ZeRO-3 keep per-parameter gradients."
        )
    if settings.lora_dropout and is_adapter_method(settings.method):
        notes.append(
            f"LoRA dropout {settings.lora_dropout:g}: each adapter's dropout saves a 1-byte mask and its own "
            "output, which the adapter keeps instead of the shared input."
        )
    if settings.method == "qlora" and settings.quantised_linears == "all":
        notes.append("Every nn.Linear in NF4, the LM head included (Lightning's BitsandbytesPrecision, litgpt).")
    if settings.activation_offload:
        notes.append(
            f"Activation offloading: saved tensors of all but {OFFLOAD_RESIDENT_LAYERS} layers in pinned host "
            "memory (host_memory_gib); the LM head's stay on the GPU."
        )
    return notes


def _offload_notes(settings: TrainingSettings) -> list[str]:
    notes = []
    if settings.offload_optimizer:
        notes.append(
            "ZeRO-Offload (arXiv 2101.06840): fp32 master, optimizer states and the step on the CPU; the GPU "
            f"keeps the weights and one gradient bucket of {REDUCE_BUCKET_ELEMENTS:.0e} elements "
            "(DeepSpeed reduce_bucket_size), capped at the gradients' size."
        )
    if settings.offload_parameters:
        notes.append(
            "ZeRO-Infinity parameter offload (arXiv 2104.07857): the parameter shards on the CPU; the GPU holds "
            "the layer in use and the prefetched one."
        )
    if settings.offload_optimizer or settings.offload_parameters:
        notes.append(
            "Host RAM per GPU: master copy, fp32 gradients, optimizer states, a pinned half-precision copy of "
            "the partition and a staging buffer (DeepSpeed cpu_offload), plus offloaded parameters."
        )
    return notes


def _parallel_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    notes = []
    t, p = settings.tensor_parallel, settings.pipeline_parallel
    if t > 1:
        notes.append(
            f"Tensor parallel {t} (Megatron-LM, arXiv 1909.08053) with sequence parallelism (arXiv 2205.05198): "
            "matmul weights, vocab-parallel embedding and LM head, per-layer activations and the logits "
            f"divided by {t}; norms and biases replicated."
        )
    if p > 1:
        notes.append(
            f"Pipeline parallel {p}, 1F1B schedule (arXiv 2104.04473): {math.ceil(spec.n_layers / p)} layers per "
            f"stage; the first stage keeps {min(p, settings.grad_accum)} micro-batch(es) of activations in flight, "
            "the last holds the LM head, logits and loss; the larger of the two is reported."
        )
    if t > 1 or p > 1:
        notes.append(f"Total GPUs: {settings.gpus} data x {t} tensor x {p} pipeline = {settings.total_gpus}.")
    return notes


def vision_weights_note(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """The assumption line for a vision-language model's encoder and projector weights."""
    if not spec.extra_params:
        return []
    frozen = frozen_tower_parameters(spec, settings)
    if is_adapter_method(settings.method):
        how = "frozen with the base, in the half compute dtype (not quantised)"
    elif frozen:
        how = f"the encoder's {frozen / 1e6:,.0f}M frozen (no gradient or optimizer state), the projector trained"
    else:
        how = "trained like the language model"
    return [f"Vision encoder and projector: {spec.extra_params / 1e6:,.0f}M parameters, {how}."]


def images_note(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """The assumption lines for a vision-language model's weights and its images."""
    if not settings.images_per_sample:
        skipped = layers_skipped_without_images(spec, settings)
        skipped_note = [
            f"Without images the {skipped} cross-attention layers do not run (MllamaTextModel skips them): no "
            "activations, casts or compute; their weights keep gradients and optimizer states, as in a run whose "
            "other batches carry images (a text-only run under DDP would have neither)."
        ]
        return vision_weights_note(spec, settings) + (skipped_note if skipped else [])
    tower = vision_tower(spec)
    if tower is not None and tower.cross_attention_layers:
        reads = (
            f"Images: {settings.images_per_sample} per sample, each read by the {tower.cross_attention_layers} "
            f"cross-attention layers as {tower.cross_attention_tokens_per_image} keys and values (all tiles used)"
        )
    else:
        per_image = image_tokens_per_image(spec, settings)
        reads = (
            f"Images: {settings.images_per_sample} per sample x {per_image} tokens each = "
            f"{settings.images_per_sample * per_image} tokens added to the {settings.seq_len} text tokens of each "
            "sequence"
        )
    if tower is None:  # tokens per image given by hand, or an encoder whose shapes are not read
        counted = "its weights are counted, its activations are not" if spec.extra_params else "it is not counted"
        return [f"{reads}; the vision tower's shapes are not known: {counted}."]
    notes = vision_weights_note(spec, settings)
    patches = tower_settings(spec, settings).seq_len
    if tower_trains(settings):
        encoder = f"the encoder trains and keeps its activations over {patches} patches per image"
    else:
        encoder = f"the encoder is frozen: it runs on {patches} patches per image and keeps nothing for backward"
    if tower.cross_attention_layers:
        # Mllama's projector is one linear, whose input is counted (projector_input_bytes)
        extras = "its gates, attention masks and the projector's input are counted (calculators.memory.mllama)"
        frozen = []
        if settings.frozen_layers and settings.method == "full":
            frozen = [
                "Frozen first layers with images: the trained projector's image states reach the frozen "
                "cross-attention layers among them, so backward runs through the frozen layers from the first of "
                "those; the estimate counts the frozen layers as keeping nothing and running no backward (low)."
            ]
        return notes + [f"{reads}; {encoder}; {extras}."] + frozen
    return notes + [f"{reads}; {encoder}; the projector's own activations are not counted."]
