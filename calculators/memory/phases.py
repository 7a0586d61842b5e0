"""The phases of a step on one pipeline stage (end of forward, loss gradient, backward through
the layers, optimizer step) and the bytes live in each; loading peaks before the step starts.
"""

from __future__ import annotations

from calculators.memory.activations.attention import rotary_table_bytes
from calculators.memory.activations.head import (
    embedding_activation_bytes,
    head_activation_bytes,
    kept_logits_bytes,
    logits_bytes,
)
from calculators.memory.activations.layer import (
    kept_per_layer_bytes,
    layer_activation_terms,
    layer_backward_peak_bytes,
    op_selective_saved_bytes,
)
from calculators.memory.activations.linears import per_rank
from calculators.memory.activations.norms import first_norm_unrecorded_bytes
from calculators.memory.encoder_decoder import cross_attention_block_bytes
from calculators.memory.layout import StageLayout, stage_cross_attention_layers, stage_dense_layer_counts
from calculators.memory.result import PhaseMemory
from calculators.memory.states import ModelStates, fsdp2_root_gradient_bytes
from calculators.models.geometry import ParameterCount
from calculators.models.spec import ModelSpec, extension
from calculators.workload.finetune import nf4_quantisation_staging_bytes
from calculators.workload.training import (
    TrainingSettings,
    decoder_settings,
)

# torchtune's OffloadActivations (torchtune/training/_activation_offloading.py @e511d5a2,
# use_streams=True) moves each saved tensor to pinned host memory as forward goes on and,
# in backward, brings back the next layer's tensors while the current layer runs: two
# layers' saved tensors are on the GPU at once; the LM head is kept (NoOpManager).
OFFLOAD_RESIDENT_LAYERS = 2


def stage_phases(
    spec: ModelSpec,
    settings: TrainingSettings,
    layout: StageLayout,
    states: ModelStates,
    grads_persist: bool,
    tower_bytes: float = 0.0,
    cross_bytes: float = 0.0,
) -> tuple[list[PhaseMemory], dict[str, float], float]:
    """The phases of one step on one pipeline stage, the per-layer activation terms and the
    activation bytes offloaded to the host. What one micro-batch's images keep on this stage:
    `tower_bytes` in the image encoder (vision_tower_activation_bytes), alive until the backward
    is past the embeddings, like the embedding's own; `cross_bytes` in its cross-attention layers
    (cross_attention_activation_bytes), alive with the layers' own until their backward. A mixture
    of experts with dense first layers (DeepSeek-V3) saves each kind of layer's own activations;
    the last layer in backward is a sparse one, the first a dense one when the stage trains one."""
    terms = layer_activation_terms(spec, settings)

    def kept_and_backward(
        layer_terms: dict[str, float], dense: bool, run: TrainingSettings = settings
    ) -> tuple[float, float]:
        """(bytes a layer keeps until its backward, bytes its backward adds on top); `run`: the
        settings the layer runs with (an encoder-decoder's decoder: decoder_settings)."""
        kept = kept_per_layer_bytes(layer_terms, spec, run)
        # The layer in backward holds its peak (layer_backward_peak_bytes); under full
        # checkpointing its kept input stays alive on top, otherwise the peak includes it.
        in_backward = layer_backward_peak_bytes(layer_terms, spec, run, dense=dense)
        if run.checkpointing == "op-selective":
            # the rebuilt layer replaces what was kept of it; its checkpointed input stays on top
            tokens = run.micro_batch * run.seq_len
            in_backward -= per_rank(op_selective_saved_bytes(spec, run, tokens), run)
        elif run.checkpointing != "full":
            in_backward -= kept
        return kept, in_backward

    saved_per_layer, layer_in_backward = kept_and_backward(terms, dense=False)
    _, dense_active = stage_dense_layer_counts(spec, settings, layout.stage)
    sparse_active = layout.active_layers - dense_active
    saved_dense, dense_in_backward = saved_per_layer, layer_in_backward
    if dense_active:
        saved_dense, dense_in_backward = kept_and_backward(layer_activation_terms(spec, settings, dense=True), True)
    if layout.active_layers == 0:
        saved_per_layer = layer_in_backward = saved_dense = dense_in_backward = 0.0
    saved_layers = sparse_active * saved_per_layer + dense_active * saved_dense
    # the last layer to run backward first is sparse unless the stage trains dense layers only
    last_in_backward = layer_in_backward if sparse_active else dense_in_backward
    # an encoder-decoder's decoder layers and head run on the target's tokens: its decoder layers
    # keep what a layer keeps on them, its last layer in backward is a decoder layer, which under
    # full checkpointing rebuilds its cross-attention block too
    decoder = decoder_settings(spec, settings)
    decoder_active = (
        stage_cross_attention_layers(spec, settings, layout.stage)[1]
        if extension(spec, "cross_attention_layers")
        else 0
    )
    if decoder_active:
        saved_decoder, last_in_backward = kept_and_backward(layer_activation_terms(spec, decoder), False, decoder)
        saved_layers += decoder_active * (saved_decoder - saved_per_layer)
        if settings.checkpointing == "full":
            last_in_backward += cross_attention_block_bytes(spec, settings)
    first_saved, first_in_backward = saved_per_layer, layer_in_backward
    if dense_active:
        first_saved, first_in_backward = saved_dense, dense_in_backward
    saved_layers -= layout.skipped_layers * saved_per_layer
    if layout.has_embedding and layout.active_layers:
        unrecorded = first_norm_unrecorded_bytes(spec, settings)
        saved_layers -= unrecorded
        first_saved -= unrecorded
    embedding_act = embedding_activation_bytes(spec, settings) if layout.has_embedding else 0.0
    if layout.has_embedding and layout.active_layers:
        embedding_act += rotary_table_bytes(spec, settings)
    embedding_act += tower_bytes
    head_act = head_activation_bytes(spec, decoder) if layout.has_head else 0.0
    layers_on_gpu_bytes = saved_layers
    if settings.activation_offload:
        resident = min(layout.active_layers, OFFLOAD_RESIDENT_LAYERS)
        layers_on_gpu_bytes = min(saved_layers, resident * max(saved_per_layer, saved_dense))
    layers_on_gpu_bytes += cross_bytes
    one_micro_batch = embedding_act + layers_on_gpu_bytes + head_act
    earlier_micro_batches = (layout.in_flight - 1) * one_micro_batch
    all_activations = one_micro_batch + earlier_micro_batches
    offloaded_bytes = (saved_layers - layers_on_gpu_bytes) * layout.in_flight
    logits_forward, logits_backward = logits_bytes(spec, decoder) if layout.has_head else (0.0, 0.0)
    held_logits = kept_logits_bytes(spec, decoder) if layout.has_head else 0.0

    base = {
        "weights": states.weights,
        "master_weights": states.master,
        "autocast_weight_copies": states.autocast_copies,
        "gradients": states.gradients if grads_persist else 0.0,
        "optimizer_states": states.states,
    }

    # autograd holds the head's gradient of a tied matrix until the embedding's arrives, then
    # adds the two out of place (torch's InputBuffer, traced): two more matrix-sized gradients.
    tied_gradient_sum = 2 * settings.precision_facts.gradient_bytes * layout.tied_matrix_elements
    # FSDP2: the root's unsharded gradients wait for its post-backward; a unit's reduce-scatter
    # input waits for the next unit's, so none is pending while the last layer runs backward
    root_gradients = fsdp2_root_gradient_bytes(settings, layout)

    in_backward_step = {"optimizer_step_temporaries": states.step_temporaries} if settings.optimizer_in_backward else {}

    def gradients_made(parameters: float) -> float:
        """Gradient bytes alive once backward has made the gradients of `parameters`."""
        if grads_persist or layout.trainable == 0 or settings.optimizer_in_backward:
            return states.gradients
        return states.gradients * parameters / layout.trainable

    phases = [
        PhaseMemory(
            name="end of forward",
            components=base | {"activations": all_activations, "logits_and_loss": logits_forward},
        ),
        PhaseMemory(
            name="loss backward",
            components=base | {"activations": all_activations, "logits_and_loss": logits_backward + held_logits},
        ),
        PhaseMemory(
            name="backward, last layer",
            components=base
            | in_backward_step
            | {
                "gradients": gradients_made(layout.head_gradient_elements) + root_gradients,
                "activations": all_activations + last_in_backward,
                "logits_and_loss": held_logits,
            },
        ),
        PhaseMemory(
            name="backward, first layer",
            components=base
            | in_backward_step
            | {
                "gradients": gradients_made(layout.trainable - layout.embedding_gradient_elements)
                + root_gradients
                + states.reduce_scatter_input,
                "autocast_weight_copies": states.autocast_first_layer,
                "activations": embedding_act + first_saved + first_in_backward + earlier_micro_batches,
                "logits_and_loss": held_logits,
            },
        ),
        PhaseMemory(
            name="backward, embeddings",
            components=base
            | in_backward_step
            | {
                "gradients": states.gradients + tied_gradient_sum + states.reduce_scatter_input,
                "autocast_weight_copies": 0.0,
                "activations": embedding_act + earlier_micro_batches,
                "logits_and_loss": held_logits,
            },
        ),
        PhaseMemory(
            name="optimizer step",
            components=base
            | {
                "weights": states.weights - states.gathered_root,  # the root resharded after its backward
                "autocast_weight_copies": 0.0,
                "gradients": states.gradients,
                "optimizer_step_temporaries": states.step_temporaries,
            },
        ),
    ]
    if settings.optimizer_in_backward:  # the step ran inside backward
        phases = [phase for phase in phases if phase.name != "optimizer step"]
    if not layout.has_head:
        phases = [phase for phase in phases if phase.name != "loss backward"]
    if not layout.has_embedding:
        phases = [phase for phase in phases if phase.name != "backward, embeddings"]
    if layout.stage != "only":
        phases = [PhaseMemory(name=f"{p.name}, {layout.stage} stage", components=p.components) for p in phases]
    return phases, terms, offloaded_bytes


def whole_model_load_bytes(spec: ModelSpec, params: ParameterCount, settings: TrainingSettings) -> float:
    """The whole model on one GPU while it is set up, when the stack moves it there before
    sharding: DeepSpeed casts the module to bf16/fp16 and calls module.to(device) unless
    zero.Init() created it (microsoft/DeepSpeed deepspeed/runtime/engine.py,
    _configure_distributed_model: `if not (self.dont_change_device or is_zero_init_model):
    self.module.to(self.device)`); ZeRO-3 partitions it afterwards. Every parameter in the
    weight dtype (the half compute dtype for a LoRA/QLoRA base). 0 when not set."""
    if not settings.load_whole_model:
        return 0.0
    per_parameter = (
        settings.precision_facts.weight_bytes if settings.method == "full" else settings.precision_facts.compute_bytes
    )
    return per_parameter * params.total


def quantised_load_bytes(spec: ModelSpec, settings: TrainingSettings, first: StageLayout) -> float:
    """QLoRA's peak while the base is loaded and quantised tensor by tensor: the finished
    weights (NF4 linears, half-precision rest, the adapters) of the first stage's `first` layout
    plus the staging of the largest linear's quantisation (nf4_quantisation_staging_bytes). 0 for
    other methods."""
    if settings.method != "qlora":
        return 0.0
    staging = nf4_quantisation_staging_bytes(
        spec,
        settings.quant_backend or "bitsandbytes",
        settings.framework,
        settings.tensor_parallel,
        settings.quantised_linears or "layers",
    )
    return first.weight_bytes + staging
