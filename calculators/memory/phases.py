"""The phases of a step on one pipeline stage (end of forward, loss gradient, backward through
the layers, optimizer step) and the bytes live in each; loading peaks before the step starts.
"""

from __future__ import annotations

from typing import NamedTuple

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


class KeptAndBackward(NamedTuple):
    """Bytes of one layer: what it keeps from its forward until its backward, and what its
    backward adds on top of that."""

    kept: float
    in_backward: float


def layer_kept_and_backward(
    spec: ModelSpec, settings: TrainingSettings, terms: dict[str, float], dense: bool = False
) -> KeptAndBackward:
    """What a layer whose saved tensors are `terms` keeps, and what its backward adds; `settings`
    are those it runs with (an encoder-decoder's decoder layer: decoder_settings)."""
    kept = kept_per_layer_bytes(terms, spec, settings)
    # The layer in backward holds its peak (layer_backward_peak_bytes); under full
    # checkpointing its kept input stays alive on top, otherwise the peak includes it.
    in_backward = layer_backward_peak_bytes(terms, spec, settings, dense=dense)
    if settings.checkpointing == "op-selective":
        # the rebuilt layer replaces what was kept of it; its checkpointed input stays on top
        in_backward -= per_rank(op_selective_saved_bytes(spec, settings, settings.tokens), settings)
    elif settings.checkpointing != "full":
        in_backward -= kept
    return KeptAndBackward(kept, in_backward)


class StageLayers(NamedTuple):
    """What one micro-batch leaves in a stage's layers, and what their backward adds."""

    saved: float  # what all of them keep until their backward
    largest_kept: float  # the most one layer keeps (activation offloading leaves a few such on the GPU)
    last_in_backward: float  # what the stage's last layer, the first to run backward, adds
    first: KeptAndBackward  # the stage's first layer, the last to run backward


def decoder_layers_in_backward(spec: ModelSpec, settings: TrainingSettings, layout: StageLayout) -> int:
    """An encoder-decoder's decoder layers on this stage that run backward (0 for other models)."""
    if not extension(spec, "cross_attention_layers"):
        return 0
    return stage_cross_attention_layers(spec, settings, layout.stage)[1]


def stage_layer_activations(
    spec: ModelSpec, settings: TrainingSettings, layout: StageLayout, terms: dict[str, float]
) -> StageLayers:
    """The stage's layers for one micro-batch, each layer saving `terms`. A mixture of experts
    with dense first layers (DeepSeek-V3) saves each kind of layer's own activations; the last
    layer in backward is a sparse one, the first a dense one when the stage trains one. An
    encoder-decoder's decoder layers run on the target's tokens (decoder_settings)."""
    sparse = layer_kept_and_backward(spec, settings, terms)
    _, dense_active = stage_dense_layer_counts(spec, settings, layout.stage)
    sparse_active = layout.active_layers - dense_active
    dense = sparse
    if dense_active:
        dense_terms = layer_activation_terms(spec, settings, dense=True)
        dense = layer_kept_and_backward(spec, settings, dense_terms, dense=True)
    if layout.active_layers == 0:
        sparse = dense = KeptAndBackward(0.0, 0.0)
    saved = sparse_active * sparse.kept + dense_active * dense.kept
    # the last layer to run backward first is sparse unless the stage trains dense layers only
    last_in_backward = sparse.in_backward if sparse_active else dense.in_backward
    decoder_active = decoder_layers_in_backward(spec, settings, layout)
    if decoder_active:
        # the decoder layers keep what a layer keeps on the target's tokens; the last layer in
        # backward is one of them, which under full checkpointing rebuilds its cross-attention block too
        target_settings = decoder_settings(spec, settings)
        decoder = layer_kept_and_backward(spec, target_settings, layer_activation_terms(spec, target_settings))
        saved += decoder_active * (decoder.kept - sparse.kept)
        last_in_backward = decoder.in_backward
        if settings.checkpointing == "full":
            last_in_backward += cross_attention_block_bytes(spec, settings)
    first = dense if dense_active else sparse
    saved -= layout.skipped_layers * sparse.kept
    first_kept = first.kept
    if layout.has_embedding and layout.active_layers:
        # nothing trained before it: the first layer's input norm may record nothing
        unrecorded = first_norm_unrecorded_bytes(spec, settings)
        saved -= unrecorded
        first_kept -= unrecorded
    largest_kept = max(sparse.kept, dense.kept)
    return StageLayers(saved, largest_kept, last_in_backward, KeptAndBackward(first_kept, first.in_backward))


class StageActivations(NamedTuple):
    """The activation bytes of a stage."""

    embedding: float  # the embedding's, the rotary tables and the image encoder's, until backward passes them
    one_micro_batch: float  # what one micro-batch keeps on the GPU
    earlier_micro_batches: float  # what the micro-batches in flight before it keep (1F1B)
    offloaded: float  # what activation offloading moved to the host

    @property
    def all_micro_batches(self) -> float:
        return self.one_micro_batch + self.earlier_micro_batches


def stage_activations(
    spec: ModelSpec,
    settings: TrainingSettings,
    layout: StageLayout,
    layers: StageLayers,
    tower_bytes: float,
    cross_bytes: float,
) -> StageActivations:
    """Everything the stage's micro-batches keep for backward: the embedding's (and the image
    encoder's `tower_bytes`), the layers' (and the cross-attention layers' `cross_bytes`), the
    head's; with activation offloading, only OFFLOAD_RESIDENT_LAYERS layers' stay on the GPU."""
    embedding = embedding_activation_bytes(spec, settings) if layout.has_embedding else 0.0
    if layout.has_embedding and layout.active_layers:
        embedding += rotary_table_bytes(spec, settings)
    embedding += tower_bytes
    head = head_activation_bytes(spec, decoder_settings(spec, settings)) if layout.has_head else 0.0
    layers_on_gpu = layers.saved
    if settings.activation_offload:
        resident = min(layout.active_layers, OFFLOAD_RESIDENT_LAYERS)
        layers_on_gpu = min(layers.saved, resident * layers.largest_kept)
    layers_on_gpu += cross_bytes
    one_micro_batch = embedding + layers_on_gpu + head
    earlier_micro_batches = (layout.in_flight - 1) * one_micro_batch
    offloaded = (layers.saved - layers_on_gpu) * layout.in_flight
    return StageActivations(embedding, one_micro_batch, earlier_micro_batches, offloaded)


class StageLogits(NamedTuple):
    """The logits and loss of a stage with the LM head (0 on the others)."""

    forward: float  # at the end of forward
    loss_backward: float  # at the loss gradient
    held: float  # the logits the training loop keeps through backward (kept_logits_bytes)


def stage_logits(spec: ModelSpec, settings: TrainingSettings, layout: StageLayout) -> StageLogits:
    """The head's logits, on the target's tokens for an encoder-decoder (decoder_settings)."""
    if not layout.has_head:
        return StageLogits(0.0, 0.0, 0.0)
    target_settings = decoder_settings(spec, settings)
    forward, loss_backward = logits_bytes(spec, target_settings)
    return StageLogits(forward, loss_backward, kept_logits_bytes(spec, target_settings))


def model_state_components(states: ModelStates, grads_persist: bool) -> dict[str, float]:
    """The model states every phase holds; gradients only when they outlive the step."""
    return {
        "weights": states.weights,
        "master_weights": states.master,
        "autocast_weight_copies": states.autocast_copies,
        "gradients": states.gradients if grads_persist else 0.0,
        "optimizer_states": states.states,
    }


def gradients_made(
    settings: TrainingSettings, layout: StageLayout, states: ModelStates, grads_persist: bool, parameters: float
) -> float:
    """Gradient bytes alive once backward has made the gradients of `parameters`."""
    if grads_persist or layout.trainable == 0 or settings.optimizer_in_backward:
        return states.gradients
    return states.gradients * parameters / layout.trainable


def forward_phases(base: dict[str, float], activations: StageActivations, logits: StageLogits) -> list[PhaseMemory]:
    """The end of forward and the loss gradient, every micro-batch in flight holding its activations."""
    all_activations = activations.all_micro_batches
    return [
        PhaseMemory(
            name="end of forward",
            components=base | {"activations": all_activations, "logits_and_loss": logits.forward},
        ),
        PhaseMemory(
            name="loss backward",
            components=base | {"activations": all_activations, "logits_and_loss": logits.loss_backward + logits.held},
        ),
    ]


def backward_phases(
    settings: TrainingSettings,
    layout: StageLayout,
    states: ModelStates,
    grads_persist: bool,
    base: dict[str, float],
    activations: StageActivations,
    layers: StageLayers,
    held_logits: float,
) -> list[PhaseMemory]:
    """Backward through the stage's last layer, its first layer, and the embeddings; the
    gradients appear as backward reaches their parameters."""
    if settings.optimizer_in_backward:  # each parameter steps as its gradient arrives
        base = base | {"optimizer_step_temporaries": states.step_temporaries}
    # autograd holds the head's gradient of a tied matrix until the embedding's arrives, then
    # adds the two out of place (torch's InputBuffer, traced): two more matrix-sized gradients.
    tied_gradient_sum = 2 * settings.precision_facts.gradient_bytes * layout.tied_matrix_elements
    # FSDP2: the root's unsharded gradients wait for its post-backward; a unit's reduce-scatter
    # input waits for the next unit's, so none is pending while the last layer runs backward
    root_gradients = fsdp2_root_gradient_bytes(settings, layout)
    head_gradients = gradients_made(settings, layout, states, grads_persist, layout.head_gradient_elements)
    layer_gradients = gradients_made(
        settings, layout, states, grads_persist, layout.trainable - layout.embedding_gradient_elements
    )
    first = layers.first
    return [
        PhaseMemory(
            name="backward, last layer",
            components=base
            | {
                "gradients": head_gradients + root_gradients,
                "activations": activations.all_micro_batches + layers.last_in_backward,
                "logits_and_loss": held_logits,
            },
        ),
        PhaseMemory(
            name="backward, first layer",
            components=base
            | {
                "gradients": layer_gradients + root_gradients + states.reduce_scatter_input,
                "autocast_weight_copies": states.autocast_first_layer,
                "activations": activations.embedding
                + first.kept
                + first.in_backward
                + activations.earlier_micro_batches,
                "logits_and_loss": held_logits,
            },
        ),
        PhaseMemory(
            name="backward, embeddings",
            components=base
            | {
                "gradients": states.gradients + tied_gradient_sum + states.reduce_scatter_input,
                "autocast_weight_copies": 0.0,
                "activations": activations.embedding + activations.earlier_micro_batches,
                "logits_and_loss": held_logits,
            },
        ),
    ]


def optimizer_step_phase(base: dict[str, float], states: ModelStates) -> PhaseMemory:
    """The optimizer step: every gradient, and the step's temporaries."""
    return PhaseMemory(
        name="optimizer step",
        components=base
        | {
            "weights": states.weights - states.gathered_root,  # the root resharded after its backward
            "autocast_weight_copies": 0.0,
            "gradients": states.gradients,
            "optimizer_step_temporaries": states.step_temporaries,
        },
    )


def optimizer_step_phases(settings: TrainingSettings, base: dict[str, float], states: ModelStates) -> list[PhaseMemory]:
    """The optimizer step after backward (optimizer_step_phase); none when each parameter steps
    inside backward (optimizer_in_backward)."""
    return [] if settings.optimizer_in_backward else [optimizer_step_phase(base, states)]


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
    (cross_attention_activation_bytes), alive with the layers' own until their backward."""
    terms = layer_activation_terms(spec, settings)
    layers = stage_layer_activations(spec, settings, layout, terms)
    activations = stage_activations(spec, settings, layout, layers, tower_bytes, cross_bytes)
    logits = stage_logits(spec, settings, layout)
    base = model_state_components(states, grads_persist)
    phases = forward_phases(base, activations, logits)
    phases += backward_phases(settings, layout, states, grads_persist, base, activations, layers, logits.held)
    phases += optimizer_step_phases(settings, base, states)
    if not layout.has_head:
        phases = [phase for phase in phases if phase.name != "loss backward"]
    if not layout.has_embedding:
        phases = [phase for phase in phases if phase.name != "backward, embeddings"]
    if layout.stage != "only":
        phases = [PhaseMemory(name=f"{p.name}, {layout.stage} stage", components=p.components) for p in phases]
    return phases, terms, activations.offloaded


def whole_model_load_bytes(spec: ModelSpec, params: ParameterCount, settings: TrainingSettings) -> float:
    """The whole model on one GPU while it is set up, when the stack moves it there before
    sharding: DeepSpeed casts the module to bf16/fp16 and calls module.to(device) unless
    zero.Init() created it (microsoft/DeepSpeed deepspeed/runtime/engine.py,
    _configure_distributed_model: `if not (self.dont_change_device or is_zero_init_model):
    self.module.to(self.device)`); ZeRO-3 partitions it afterwards. Every parameter in the
    weight dtype (the half compute dtype for a LoRA/QLoRA base). 0 when not set."""
    if not settings.load_whole_model:
        return 0.0
    dtypes = settings.precision_facts
    per_parameter = dtypes.weight_bytes if settings.method == "full" else dtypes.compute_bytes
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
