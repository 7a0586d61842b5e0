"""Peak GPU memory of one training step, phase by phase.

The peak is the maximum over the phases of a step (end of forward, the loss
gradient, the backward through the layers, the optimizer step), not a plain sum
of everything that ever exists. All sizes are bytes on one data-parallel GPU.

Sources:
- ZeRO: Rajbhandari et al. 2019, arXiv 1910.02054 (bytes per parameter, sharding).
- Activations: Korthikanti et al. 2022, arXiv 2205.05198 (Sec. 4, per-layer
  activations), adjusted to what PyTorch/Hugging Face code really saves for backward:
  separate autocast casts per linear, fp32 upcasts in RMSNorm and softmax, dropout
  masks as 1-byte bool tensors, fused (flash/SDPA) attention saving only its output
  and the log-sum-exp (Dao et al. 2022, arXiv 2205.14135).
- Logits and cross-entropy in fp32: b*s*V*4 bytes for the log-probabilities and
  the same again for each of their gradients.
- Fine-tuning: LoRA (Hu et al. 2021, arXiv 2106.09685) and QLoRA (Dettmers et al. 2023,
  arXiv 2305.14314), see calculators/finetune.py; frozen layers save no activations
  (autograd records nothing before the first tensor that requires grad).
- CPU offload: ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840) and ZeRO-Infinity
  (Rajbhandari et al. 2021, arXiv 2104.07857), as DeepSpeed implements them.
- Model parallelism: Megatron-LM tensor parallelism (Shoeybi et al. 2019, arXiv 1909.08053)
  with sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2), and the 1F1B pipeline
  schedule (Narayanan et al. 2021, arXiv 2104.04473, Sec. 2.2).
- Training stacks, read from their source (each function cites its file and revision):
  torchtune's chunked cross-entropy, compiled loss, activation offloading and optimizer in
  backward; Liger-Kernel's RMSNorm, SwiGLU and fused linear cross-entropy; torchtitan's per-op
  selective checkpointing; bitsandbytes' paged optimizers and 4-bit matmul; DeepSpeed's
  whole-model move to the GPU before ZeRO-3 partitions it.
"""

from __future__ import annotations

from calculators.memory.assumptions import check_supported, images_note, memory_assumptions
from calculators.memory.encoder_decoder import encoder_decoder_activation_bytes, t5_attention_settings
from calculators.memory.layout import decoder_layer_share, pipeline_stages, stage_layout, trainable_parameter_count
from calculators.memory.mllama import (
    cross_attention_activation_bytes,
    cross_attention_shared_bytes,
    skipped_cross_attention_layers,
)
from calculators.memory.phases import quantised_load_bytes, stage_phases, whole_model_load_bytes
from calculators.memory.result import COMPONENTS, GIB, MemoryEstimate, PhaseMemory
from calculators.memory.states import model_state_bytes
from calculators.memory.vision import vision_tower_activation_bytes
from calculators.models.geometry import parameter_count
from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings, language_model_settings
from calculators.workload.vision import vision_cast_elements


def estimate_memory(spec: ModelSpec, settings: TrainingSettings) -> MemoryEstimate:
    """Peak memory of one training step on each GPU, phase by phase; with pipeline
    parallelism, on the most loaded of the first and the last stage."""
    check_supported(spec, settings)
    image_note = images_note(spec, settings)
    image_settings = settings
    tower_bytes = vision_tower_activation_bytes(spec, settings)
    vision_cast = vision_cast_elements(spec, settings)
    settings = t5_attention_settings(spec, settings)
    cross_bytes = cross_attention_activation_bytes(spec, settings)
    # every pipeline stage with a cross-attention layer holds the tensors they share whole
    cross_shared = cross_attention_shared_bytes(spec, settings)
    # an encoder-decoder's decoder blocks (and what they read) sit on the stages of its decoder layers
    decoder_bytes = encoder_decoder_activation_bytes(spec, settings)
    settings = language_model_settings(spec, settings)
    params = parameter_count(spec)
    grads_persist = settings.grad_accum > 1 or not settings.grads_freed_after_step
    phases: list[PhaseMemory] = []
    stage_of_phase: dict[str, str] = {}
    host_bytes = outside_bytes = 0.0
    layouts = [stage_layout(spec, params, settings, stage) for stage in pipeline_stages(settings)]
    # the image encoder runs on the embedding's stage, with the settings before its images became tokens
    layouts = [
        layout._replace(vision_cast_elements=vision_cast) if layout.has_embedding else layout for layout in layouts
    ]
    layouts = [
        layout._replace(skipped_layers=skipped_cross_attention_layers(spec, image_settings, layout))
        for layout in layouts
    ]
    for layout in layouts:
        states = model_state_bytes(settings, layout)
        # the encoder runs on the embedding's stage; the cross-attention layers spread with the layers
        stage_phase_list, terms, offloaded_bytes = stage_phases(
            spec,
            settings,
            layout,
            states,
            grads_persist,
            tower_bytes if layout.has_embedding else 0.0,
            cross_shared
            + (cross_bytes - cross_shared) * layout.layers / spec.n_layers
            + decoder_bytes * decoder_layer_share(spec, settings, layout.stage),
        )
        phases += stage_phase_list
        stage_of_phase |= {phase.name: layout.stage for phase in stage_phase_list}
        host_bytes = max(host_bytes, states.host + offloaded_bytes)
        outside_bytes = max(outside_bytes, states.outside_allocator)

    load_bytes = max(whole_model_load_bytes(spec, params, settings), quantised_load_bytes(spec, settings, layouts[0]))
    if load_bytes:
        phases.insert(0, PhaseMemory(name="loading", components={"weights": load_bytes}))
        stage_of_phase["loading"] = layouts[0].stage
    peak = max(phases, key=lambda phase: phase.total)
    allocated = peak.total
    o = settings.overheads
    reserve = allocated * o.allocator_reserve_fraction
    framework = (o.cuda_context_gib + o.cublas_workspace_gib + (o.nccl_gib if settings.total_gpus > 1 else 0.0)) * GIB

    def device_view(phase: PhaseMemory) -> dict[str, float]:
        """A phase's components as the device sees them, reserve and context included."""
        view = {name: phase.components.get(name, 0.0) / GIB for name in COMPONENTS}
        view["allocator_reserve"] = phase.total * o.allocator_reserve_fraction / GIB
        view["framework_overhead"] = framework / GIB
        return view

    components = device_view(peak)
    return MemoryEstimate(
        peak_gib=(allocated + reserve + framework + outside_bytes) / GIB,
        allocated_gib=allocated / GIB,
        reserved_gib=(allocated + reserve) / GIB,
        peak_phase=peak.name,
        components_gib=components,
        phases_gib={phase.name: phase.total / GIB for phase in phases},
        phase_components_gib={phase.name: device_view(phase) for phase in phases},
        activations_per_layer_gib={k: v / GIB for k, v in terms.items()},
        parameters=params.total,
        trainable_parameters=trainable_parameter_count(spec, params, settings),
        tokens_per_micro_batch=settings.tokens,
        assumptions=image_note + memory_assumptions(spec, settings, grads_persist),
        host_memory_gib=host_bytes / GIB,
        load_peak_gib=load_bytes / GIB,
        outside_allocator_gib=outside_bytes / GIB,
        pipeline_stage=stage_of_phase[peak.name],
    )
