"""Per-parameter state (ZeRO paper, Rajbhandari et al. 2019, arXiv 1910.02054, Sec. 3 and 5):
weights, fp32 master copies, gradients and optimizer states, sharded by ZeRO/FSDP or offloaded
to the host (ZeRO-Offload, Ren et al. 2021, arXiv 2101.06840), and the optimizer step's
temporaries.
"""

from __future__ import annotations

from typing import NamedTuple

from calculators.memory.layout import StageLayout
from calculators.workload.training import (
    PAGED_OPTIMIZERS,
    TrainingSettings,
)


def shard_divisor(zero: int, stage_that_shards: int, gpus: int) -> int:
    """ZeRO stage 1 shards optimizer states, 2 also gradients, 3 also parameters
    across the data-parallel GPUs (ZeRO paper Sec. 5.1, Fig. 1)."""
    return gpus if zero >= stage_that_shards else 1


def optimizer_state_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """Optimizer state bytes for the trainable parameters on one GPU, before sharding.

    AdamW: exp_avg and exp_avg_sq (Loshchilov & Hutter 2019), 2 states.
    SGD with momentum: 1 state. Adafactor: factored second moment (layout.adafactor_layer_elements).
    8-bit AdamW: 2 states of 1 byte plus one fp32 absmax per 2048-element block
    (Dettmers et al. 2021, arXiv 2110.02861; bitsandbytes blockwise quantisation).
    Paged AdamW (QLoRA paper Sec. 3; bitsandbytes bitsandbytes/optim/optimizer.py
    Optimizer2State: 32-bit states are fp32 whatever the parameter dtype) allocates the same
    states in CUDA unified memory with cudaMallocManaged, outside torch's caching allocator:
    estimate_memory reports them as outside_allocator_gib, not as allocated or reserved.
    """
    n = layout.trainable
    element = settings.precision_facts.optimizer_state_element_bytes
    if settings.optimizer == "adamw":
        return 2 * element * n
    if settings.optimizer == "paged-adamw":
        return 2 * 4 * n
    if settings.optimizer == "none":  # forward and backward only (benchmarks)
        return 0.0
    if settings.optimizer == "sgd":
        return element * n
    if settings.optimizer == "adafactor":
        return element * layout.adafactor_elements
    return 2 * (1 + 4 / 2048) * n  # adamw-8bit, paged-adamw-8bit


def optimizer_step_temporary_bytes(layout: StageLayout, settings: TrainingSettings, divisor: int) -> float:
    """Transient memory of optimizer.step().

    Mixed precision (DeepSpeed ZeRO, Megatron) first converts this GPU's gradient
    partition to fp32 for the master update: 4 bytes per trainable parameter.
    On top of that, the AdamW implementation decides what the update allocates
    (torch/optim/adam.py):
    - foreach=True (torch's default on CUDA) computes `_foreach_sqrt(exp_avg_sqs)`
      over every parameter at once: one state-sized tensor per parameter
      (_multi_tensor_adam);
    - the for-loop computes `exp_avg_sq.sqrt() / bias_correction2_sqrt`, two
      temporaries the size of the parameter, one parameter at a time
      (_single_tensor_adam), so twice the largest parameter;
    - fused=True, DeepSpeed's FusedAdam and bitsandbytes' 8-bit kernels update in place.
    Adafactor (HF) builds about two full-size fp32 temporaries per parameter.
    """
    dtypes = settings.precision_facts
    fp32_gradient_copy = 4 * layout.trainable / divisor if dtypes.master_weight_bytes else 0.0
    element = dtypes.optimizer_state_element_bytes
    update = 0.0
    if settings.optimizer == "adamw":
        if settings.optimizer_impl == "foreach":
            update = element * layout.trainable / divisor
        elif settings.optimizer_impl == "for-loop":
            update = 2 * element * layout.largest_trainable
    elif settings.optimizer == "adafactor":
        update = 2 * 4 * layout.largest_trainable
    return fp32_gradient_copy + update


# DeepSpeed's zero_optimization.reduce_bucket_size default: 5e8 elements.
REDUCE_BUCKET_ELEMENTS = 500_000_000


def unsharded_gradient_elements(layout: StageLayout) -> float:
    """Under ZeRO-2/3 a unit's gradients exist whole until their reduce-scatter: one trained
    layer's, or, when every layer is frozen, the largest trainable unit left (the head's),
    never more than everything trainable (ZeRO paper Sec. 5.2: gradients reduced bucket by
    bucket as backward produces them)."""
    unit = layout.trainable_per_layer if layout.active_layers > 0 else layout.head_gradient_elements
    return min(unit, layout.trainable)


def offload_gradient_bucket_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """GPU gradient memory under ZeRO-Offload: gradients leave for the CPU bucket by
    bucket as backward produces them (Ren et al. 2021, Sec. 4.1), so one reduce bucket of
    5e8 elements (DeepSpeed's default reduce_bucket_size) is in flight, capped at the
    size of all the gradients."""
    element = settings.precision_facts.gradient_bytes
    return min(REDUCE_BUCKET_ELEMENTS * element, element * layout.trainable)


def offloaded_optimizer_host_bytes(settings: TrainingSettings, layout: StageLayout, state_div: int) -> float:
    """Host RAM per GPU under ZeRO-Offload (Ren et al. 2021, Sec. 4.1; DeepSpeed
    stage_1_and_2.py with cpu_offload): for this GPU's partition, the fp32 master copy
    (a copy in the weights' dtype without mixed precision), its fp32 gradient, the
    optimizer states, a pinned half-precision copy of the partition for the copy back to
    the GPU (mixed precision only), a pinned staging buffer the size of the largest
    parameter, and, when accumulating, the gradients accumulated on the CPU."""
    dtypes = settings.precision_facts
    partition = layout.trainable / state_div
    mixed = dtypes.master_weight_bytes > 0
    parameter_copy = dtypes.master_weight_bytes if mixed else dtypes.weight_bytes
    gradient = 4 if mixed else dtypes.gradient_bytes
    half_copy = dtypes.weight_bytes if mixed else 0
    staging = dtypes.gradient_bytes * layout.largest_trainable
    accumulated = dtypes.gradient_bytes * partition if settings.grad_accum > 1 else 0.0
    states = optimizer_state_bytes(settings, layout) / state_div
    return (parameter_copy + gradient + half_copy) * partition + states + staging + accumulated


class ModelStates(NamedTuple):
    """Bytes of the model states on one GPU, and on the host for offload."""

    weights: float
    master: float
    states: float
    gradients: float  # when all of them are alive (end of backward, optimizer step)
    autocast_copies: float
    autocast_first_layer: float
    step_temporaries: float
    host: float
    outside_allocator: float = 0.0  # paged optimizer states (CUDA unified memory)
    gathered_root: float = 0.0  # FSDP2's root unit, gathered through forward and backward (in `weights`)
    reduce_scatter_input: float = 0.0  # FSDP2's last reduce-scatter input, alive in backward


def fsdp2_active(settings: TrainingSettings) -> bool:
    """FSDP2 (fully_shard) shards the parameters: ZeRO-3 over more than one GPU, on the GPU."""
    fsdp2 = settings.sharding_impl == "fsdp2" and settings.zero == 3
    return fsdp2 and settings.gpus > 1 and not settings.offload_parameters


def fsdp2_root_gathered_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """FSDP2's root unit (what fully_shard(model) holds once every layer is its own unit: the
    embeddings, the final norm and the LM head, a tied matrix once) gathered in the compute
    dtype (param_dtype) from its forward to the end of backward: the root is not resharded
    after forward (pytorch/pytorch torch/distributed/_composable/fsdp/_fsdp_state.py,
    FSDPState._lazy_init: `post_forward_mesh_info = None` for the root; from torch 2.8,
    torch/distributed/fsdp/_fully_shard/_fsdp_state.py @1fd469d0, when reshard_after_forward is
    left to auto; NeMo Automodel passes False) and reshards in its post-backward."""
    if not fsdp2_active(settings):
        return 0.0
    return settings.precision_facts.compute_bytes * layout.outside_layer_elements


def fsdp2_reduce_scatter_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """The reduce-scatter input of the unit whose gradients were reduced last, alive while the
    next unit runs its backward: foreach_reduce copies a unit's unsharded gradients into a new
    buffer in reduce_dtype, frees the gradients, and the buffer is held in reduce_scatter_state
    until the next unit's reduce-scatter (pytorch/pytorch
    torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py @010ae4a8, foreach_reduce). The
    reduce dtype is fp32 where the sharded parameters are fp32 (torchtitan's default
    mixed_precision_reduce = "float32", pytorch/torchtitan torchtitan/config_manager.py @9dec370),
    the gradients' own dtype otherwise (NeMo Automodel: reduce_dtype bf16)."""
    if not fsdp2_active(settings):
        return 0.0
    dtypes = settings.precision_facts
    reduce_bytes = 4 if dtypes.master_weight_bytes else dtypes.gradient_bytes
    return reduce_bytes * unsharded_gradient_elements(layout)


def fsdp2_root_gradient_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """The root unit's unsharded gradients from the head's backward to the end of backward: the
    root reduce-scatters in its own post-backward, which runs last since its embedding runs
    first (pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
    FSDPParamGroup.post_backward; the gradients accumulate on the unsharded parameters until
    then). In the parameters' dtype: the head's (a tied matrix's) and the final norm's."""
    if not fsdp2_active(settings):
        return 0.0
    return settings.precision_facts.gradient_bytes * layout.head_gradient_elements


def fsdp1_frozen_gradient_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """FSDP1 flattens each wrapped layer into one FlatParameter. A layer that mixes a frozen base
    with LoRA adapters (allowed with use_orig_params=True) gets a gradient for the whole flat
    parameter, so its frozen weights take gradient memory as if they trained (PyTorch docs,
    torch.distributed.fsdp.FullyShardedDataParallel: mixing frozen and non-frozen parameters is
    supported with use_orig_params=True, but 'recommended to avoid doing so to prevent higher than
    expected gradient memory usage'). PEFT's fsdp_auto_wrap_policy, which the HF Trainer applies
    to a PEFT model, avoids it by wrapping the adapters in their own units: then choose "zero".
    Before sharding; the caller divides. The root unit
    (embeddings, final norm, head) holds no adapter and gets none. LoRA only: QLoRA's NF4 storage
    under FSDP1 is not modelled."""
    if settings.sharding_impl != "fsdp1" or settings.method != "lora":
        return 0.0
    return settings.precision_facts.gradient_bytes * layout.frozen_active_elements


def model_state_bytes(settings: TrainingSettings, layout: StageLayout) -> ModelStates:
    """Weights, master copy, gradients and optimizer states per GPU after ZeRO sharding
    over the data-parallel GPUs (ZeRO paper Sec. 5), with CPU offload applied."""
    gpus, zero, dtypes = settings.gpus, settings.zero, settings.precision_facts
    state_div = shard_divisor(zero, 1, gpus)
    grad_div = shard_divisor(zero, 2, gpus)
    weight_div = shard_divisor(zero, 3, gpus)

    weights = layout.weight_bytes / weight_div
    if settings.offload_parameters:
        # ZeRO-Infinity: parameters live on the host; the layer in use and the prefetched one are on the GPU.
        weights = 2 * layout.layer_weight_bytes
    elif zero == 3 and gpus > 1:
        # FSDP/ZeRO-3 gathers the layer in use and prefetches the next one.
        weights += 2 * layout.layer_weight_bytes
    gathered_root = fsdp2_root_gathered_bytes(settings, layout)
    weights += gathered_root
    master = dtypes.master_weight_bytes * layout.trainable / state_div
    states = optimizer_state_bytes(settings, layout) / state_div
    gradients = dtypes.gradient_bytes * layout.trainable / grad_div
    gradients += fsdp1_frozen_gradient_bytes(settings, layout) / grad_div
    if gpus > 1 and zero == 0:
        gradients *= 2  # DDP gradient buckets
    if zero >= 2 and gpus > 1:
        gradients += dtypes.gradient_bytes * unsharded_gradient_elements(layout)
    # a layer that does not run (Mllama's cross-attention without images) casts nothing
    cast_elements = layout.cast_elements - layout.skipped_layers * layout.cast_elements_per_layer
    if settings.checkpointing == "full":
        # Checkpointed layers run their forward without saving anything, so their weight casts
        # die with autocast's cache; only the head's casts and the layer being recomputed remain
        # (measured in the trace: bench/accuracy.py).
        cast_elements -= (layout.active_layers - layout.skipped_layers - 1) * layout.cast_elements_per_layer
        cast_elements = max(cast_elements, layout.cast_elements_per_layer)
    autocast_copies = 2.0 * (cast_elements + layout.vision_cast_elements) if dtypes.autocast else 0.0
    # only the first layer's autocast casts (and the vision encoder's, whose backward comes
    # last) are still saved when backward reaches it
    autocast_first_layer = 2.0 * (layout.cast_elements_per_layer + layout.vision_cast_elements)
    autocast_first_layer = autocast_first_layer if autocast_copies else 0.0
    if settings.precision == "fp8":
        autocast_copies = fp8_weight_cast_bytes(cast_elements - layout.head_cast_elements)
        autocast_first_layer = fp8_weight_cast_bytes(layout.cast_elements_per_layer)
    step_temporaries = optimizer_step_temporary_bytes(layout, settings, state_div)

    if settings.optimizer_in_backward:
        gradients, step_temporaries = optimizer_in_backward_bytes(settings, layout, weight_div)

    host = outside_allocator = 0.0
    if settings.offload_optimizer:
        host += offloaded_optimizer_host_bytes(settings, layout, state_div)
        master = states = step_temporaries = 0.0
        gradients = offload_gradient_bucket_bytes(settings, layout)
    elif settings.optimizer in PAGED_OPTIMIZERS:
        outside_allocator, states = states, 0.0
    if settings.offload_parameters:
        host += layout.weight_bytes / weight_div
    return ModelStates(
        weights,
        master,
        states,
        gradients,
        autocast_copies,
        autocast_first_layer,
        step_temporaries,
        host,
        outside_allocator,
        gathered_root,
        fsdp2_reduce_scatter_bytes(settings, layout),
    )


# torchao float8: e4m3 casts, one byte per element; each cast's scale is one fp32 scalar.
FP8_BYTES = 1


def fp8_weight_cast_bytes(elements: float) -> float:
    """The float8 casts of the linear weights that the forward keeps for backward: torchao's
    Float8Linear casts its weight with a dynamic tensorwise scale and
    manual_float8_matmul_with_args_in_float8 saves it (`ctx.save_for_backward(input_fp8,
    weight_fp8_t)`, pytorch/ao torchao/float8/float8_linear.py @eab345c;
    force_recompute_fp8_weight_in_bwd is False by default, torchao/float8/config.py), one byte
    per element. torchtitan converts every nn.Linear but the LM head (`fqn != "output"`,
    pytorch/torchtitan torchtitan/float8.py @9dec370). Like autocast's casts, a checkpointed
    layer's die with its forward (model_state_bytes)."""
    return FP8_BYTES * elements


def optimizer_in_backward_bytes(
    settings: TrainingSettings, layout: StageLayout, weight_div: int
) -> tuple[float, float]:
    """(gradients, step temporaries) when the optimizer steps each parameter in a
    post-accumulate-grad hook and frees its gradient at once (torchtune
    recipes/full_finetune_single_device.py @ce5433b0 with optimizer_in_bwd: True, after
    torch's register_post_accumulate_grad_hook tutorial). At most one parameter's gradient
    is alive (the largest: its shard under FSDP/ZeRO-3), and the step's temporaries are
    that one parameter's (ZeRO-sharded gradients become the one reduced shard)."""
    largest = layout.largest_trainable / weight_div
    dtypes = settings.precision_facts
    gradient = dtypes.gradient_bytes * largest
    fp32_copy = 4 * largest if dtypes.master_weight_bytes else 0.0
    element = dtypes.optimizer_state_element_bytes
    update = element * largest if settings.optimizer == "adamw" and settings.optimizer_impl != "fused" else 0.0
    return gradient, fp32_copy + update
