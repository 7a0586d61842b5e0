"""Communication of one training step, per parallel dimension, with sizes from the geometry.

A job of `total_gpus` = data x tensor x pipeline parallel GPUs sends, per GPU and step:

- data parallel (DP): the gradients of the TRAINABLE parameters one rank holds (its tensor
  and pipeline share; LoRA adapters only; frozen layers left out): one ring all-reduce per
  step (ZeRO 0/1, DDP), a reduce-scatter per micro-batch plus one all-gather per step
  (ZeRO 2), or weight all-gathers in forward and backward plus a gradient reduce-scatter per
  micro-batch (ZeRO 3 / FSDP FULL_SHARD) (Rajbhandari et al. 2020, arXiv 1910.02054, Sec. 7).
- tensor parallel (TP): two all-reduces of the b x s x h activations per layer in forward and
  two in backward (Shoeybi et al. 2019, arXiv 1909.08053, Sec. 3, Fig. 4); with sequence
  parallelism the same bytes as all-gathers and reduce-scatters (Korthikanti et al. 2022,
  arXiv 2205.05198, Sec. 4.2.2); a recomputed forward repeats its two.
- pipeline parallel (PP): each stage sends its b x s x h output forward and receives the
  gradient back per micro-batch (Narayanan et al. 2021, arXiv 2104.04473, Sec. 2.2); the
  1F1B bubble is (p - 1) / (v x m) of the ideal time with v virtual stages (ibid. Sec. 2.2.2).

Collective volumes follow nccl-tests doc/PERFORMANCE.md: an all-reduce moves 2(n-1)/n of the
buffer through each GPU's link (busbw = algbw x 2(n-1)/n), an all-gather or a reduce-scatter
(n-1)/n.

Placement follows Megatron-LM's default rank order (tensor innermost, then data, then
pipeline: megatron/core/parallel_state.py, order "tp-cp-ep-dp-pp"): a dimension stays inside a
node while the product of it and the dimensions inside it fits `gpus_per_node`.
"""

from __future__ import annotations

from pydantic import BaseModel

from calculators.models.geometry import (
    layer_linears,
    lm_head_params,
    norm_parameters,
    parameter_count,
    router_elements,
    split,
    vocab_matrix_elements,
)
from calculators.models.spec import ModelSpec
from calculators.workload.finetune import model_lora_parameters
from calculators.workload.precision import compute_bytes, gradient_bytes, weight_bytes
from calculators.workload.training import TrainingSettings
from calculators.workload.vision import trained_vision_parameters

# Gradient buckets a data-parallel step reduces at once: PyTorch DDP's bucket_cap_mb=25
# (pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html); Megatron-Core's
# bucket of max(40M, 1M x dp) elements (NVIDIA/Megatron-LM megatron/core/distributed/
# distributed_data_parallel.py @core_v0.8.0); DeepSpeed ZeRO-2's reduce_bucket_size of 5e8 elements
# (deepspeed.readthedocs.io zero config).
DDP_BUCKET_BYTES = 25 * 2**20
MEGATRON_BUCKET_ELEMENTS = 40_000_000
DEEPSPEED_BUCKET_ELEMENTS = 500_000_000

# Achieved / spec NVLink bandwidth: about 88% (github.com/stas00/ml-engineering network/README.md
# @7bc7c305).
NVLINK_EFFICIENCY = 0.88


# --- collective volumes -------------------------------------------------------------


def ring_factor(gpus: int) -> float:
    """Bytes each GPU sends in a ring all-reduce per byte reduced: 2(n-1)/n (nccl-tests
    doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n). A reduce-scatter or all-gather sends half."""
    return 2.0 * (gpus - 1) / gpus


def allreduce_bytes(buffer_bytes: float, gpus: int) -> float:
    """Bytes each GPU sends to all-reduce `buffer_bytes` over `gpus` in a ring: 2(n-1)/n x size."""
    return ring_factor(gpus) * buffer_bytes


def allgather_bytes(buffer_bytes: float, gpus: int) -> float:
    """Bytes each GPU sends in an all-gather (or reduce-scatter) of a `buffer_bytes` result:
    (n-1)/n x size (nccl-tests doc/PERFORMANCE.md)."""
    return ring_factor(gpus) / 2 * buffer_bytes


# --- what one rank holds and trains ----------------------------------------------------


def layer_parameters_per_rank(spec: ModelSpec, tensor_parallel: int, expert_parallel: int = 1) -> float:
    """Parameters of one layer on one tensor-parallel rank: its split linears (geometry; an
    expert-parallel rank holds n_experts / ep of the experts), the router and the norms
    (replicated on every rank, Megatron-LM)."""
    linears = sum(
        linear.weight_elements / (expert_parallel if linear.copies > 1 else 1)
        for linear in layer_linears(spec, tensor_parallel)
    )
    return linears + router_elements(spec) + spec.norms_per_layer * norm_parameters(spec)


# The last call's (spec, settings, expert parallel, result): one estimate asks for the same rank's
# parameters several times (optimizer, traffic, message sizes), with the same objects.
_LAST_TRAINABLE: list[tuple[ModelSpec, TrainingSettings, int, float]] = []


def trainable_parameters_per_rank(spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1) -> float:
    """trainable_parameters_of_rank, remembered for the last (spec, settings) objects asked."""
    if _LAST_TRAINABLE:
        last_spec, last_settings, last_ep, result = _LAST_TRAINABLE[0]
        if last_spec is spec and last_settings is settings and last_ep == expert_parallel:
            return result
    result = trainable_parameters_of_rank(spec, settings, expert_parallel)
    _LAST_TRAINABLE[:] = [(spec, settings, expert_parallel, result)]
    return result


def trainable_parameters_of_rank(spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1) -> float:
    """Trainable parameters one tensor x pipeline rank holds, whose gradients data parallelism
    reduces.

    - full training: the stage's layers (n_layers / p, frozen ones left out) on this tensor
      rank, plus the embedding (first stage; frozen with the first layers) and the final norm
      and head (last stage), the larger of the two ends where the pipeline puts them apart; the
      vocab x h matrices are split over t (Megatron-LM VocabParallelEmbedding), the rest
      replicated; layer biases are left out (they are under 0.1% of a layer); a
      vision-language model's encoder and projector sit with the embedding, replicated, the
      encoder left out when frozen (calculators.workload.vision.trained_vision_parameters);
    - LoRA/QLoRA: only the adapters, r x (in + out) per adapted linear (Hu et al. 2021,
      arXiv 2106.09685, Sec. 4.1), on the stage's layers.
    """
    t, p = settings.tensor_parallel, settings.pipeline_parallel
    trained_layers = max(0, spec.n_layers - settings.frozen_layers)
    layers_on_stage = trained_layers / p
    if settings.method in ("lora", "qlora"):
        adapters = model_lora_parameters(spec, settings.lora_rank, settings.lora_targets, t, settings.frozen_layers)
        return adapters / p
    counts = parameter_count(spec)
    vocab = vocab_matrix_elements(spec)
    # vocabulary-parallel: the vocab x h matrix split over t; positions, norms and the rest replicated
    embedding = 0.0 if settings.frozen_layers else counts.embedding - vocab + split(vocab, t)
    embedding += trained_vision_parameters(spec, settings)
    untied_head = lm_head_params(spec)
    head = counts.head - untied_head + split(untied_head, t)
    ends = embedding + head if p == 1 else max(embedding, head)
    return layers_on_stage * layer_parameters_per_rank(spec, t, expert_parallel) + ends


# --- bytes per dimension ------------------------------------------------------------------


def dp_bytes(spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1) -> tuple[float, float]:
    """(bytes per micro-batch, bytes once per step) each GPU sends for data parallelism.

    With P trainable parameters per rank, g gradient and w weight bytes per element and n DP
    ranks: ZeRO 0/1 all-reduce 2(n-1)/n x P x g once per step (DDP skips it while
    accumulating); ZeRO 2 reduce-scatters (n-1)/n x P x g per micro-batch and all-gathers
    (n-1)/n x P x w once; ZeRO 3 all-gathers the weights in forward and again in backward and
    reduce-scatters the gradients per micro-batch: (n-1)/n x P x (2w + g), 1.5x the all-reduce
    (ZeRO paper Sec. 7.2). Below ZeRO-3 a frozen base keeps its weights unsharded: LoRA adapters
    only. ZeRO-3 shards the frozen base too (as the memory engine does: memory.states
    model_state_bytes divides every weight), so it gathers it in forward and backward as well.
    """
    n = settings.gpus
    if n == 1:
        return 0.0, 0.0
    params = trainable_parameters_per_rank(spec, settings, expert_parallel)
    grad_b, weight_b = gradient_bytes(settings.precision), weight_bytes(settings.precision)
    if settings.zero <= 1:
        return 0.0, allreduce_bytes(params * grad_b, n)
    if settings.zero == 2:
        return allgather_bytes(params * grad_b, n), allgather_bytes(params * weight_b, n)
    frozen_b = lora_frozen_base_bytes(spec, settings, expert_parallel)
    return allgather_bytes(params * (2 * weight_b + grad_b) + 2 * frozen_b, n), 0.0


def lora_frozen_base_bytes(spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1) -> float:
    """Bytes of the frozen base one tensor x pipeline rank holds under LoRA: every parameter
    full training would train on it, in the half dtype the base is loaded in
    (precision.frozen_weight_bytes); 0 for other methods (QLoRA's NF4 base under ZeRO-3 is left
    out: its packed bytes are not counted here)."""
    if settings.method != "lora":
        return 0.0
    whole = settings.model_copy(update={"method": "full", "frozen_layers": 0})
    return trainable_parameters_per_rank(spec, whole, expert_parallel) * settings.precision_facts.frozen_weight_bytes


def activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The b x s x h activations of one micro-batch in the compute dtype, which a tensor-parallel
    all-reduce and a pipeline send carry."""
    return settings.micro_batch * settings.seq_len * spec.hidden_size * compute_bytes(settings.precision)


def tp_allreduces_per_layer(checkpointing: str) -> int:
    """All-reduces per layer and micro-batch: 2 forward + 2 backward (Megatron-LM, Shoeybi et
    al. 2019, Fig. 4: f and g operators around attention and MLP), + 2 when full checkpointing
    reruns the forward (Korthikanti et al. 2022, Sec. 5)."""
    return 6 if checkpointing == "full" else 4


def tp_bytes_per_micro(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes each GPU sends for tensor parallelism per micro-batch: the stage's layers x
    all-reduces per layer x 2(t-1)/t x b x s x h activations (compute dtype); sequence
    parallelism sends the same as all-gather + reduce-scatter (Korthikanti et al. Sec. 4.2.2)."""
    t = settings.tensor_parallel
    if t == 1:
        return 0.0
    activation = activation_bytes(spec, settings)
    layers_on_stage = spec.n_layers / settings.pipeline_parallel
    return layers_on_stage * tp_allreduces_per_layer(settings.checkpointing) * allreduce_bytes(activation, t)


def pp_bytes_per_micro(spec: ModelSpec, settings: TrainingSettings, virtual_stages: int = 1) -> float:
    """Bytes a pipeline stage sends per micro-batch: its b x s x h output forward and the
    gradient of its input backward, b x s x h / t each with sequence parallelism's split or
    Megatron's scatter-gather optimisation (Narayanan et al. 2021, Sec. 4.1), x v virtual
    stages (an interleaved schedule crosses v times as many stage boundaries, ibid. 2.2.2)."""
    if settings.pipeline_parallel == 1:
        return 0.0
    activation = activation_bytes(spec, settings)
    return 2 * activation / settings.tensor_parallel * virtual_stages


def moe_alltoall_bytes_per_micro(spec: ModelSpec, settings: TrainingSettings, expert_parallel: int) -> float:
    """Bytes each GPU sends for expert parallelism per micro-batch: every MoE layer dispatches its
    tokens' k copies of h to the experts and combines them back, in forward and again in
    backward: 4 all-to-alls of b x s x k x h elements, of which (ep-1)/ep leave the GPU
    (Lepikhin et al. 2020, GShard, arXiv 2006.16668, Sec. 2.2; nccl-tests all-to-all)."""
    if expert_parallel == 1 or spec.n_experts == 1:
        return 0.0
    tokens = settings.micro_batch * settings.seq_len
    buffer = tokens * spec.experts_per_token * spec.hidden_size * compute_bytes(settings.precision)
    layers_on_stage = spec.n_layers / settings.pipeline_parallel
    return layers_on_stage * 4 * buffer * (expert_parallel - 1) / expert_parallel


def bubble_fraction(pipeline_parallel: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Idle time of the 1F1B schedule as a fraction of the ideal step: (p - 1) / (v x m) for m
    micro-batches per step and v virtual stages per rank (Narayanan et al. 2021, Sec. 2.2.1
    and 2.2.2)."""
    return (pipeline_parallel - 1) / (virtual_stages * micro_batches)


# --- placement: which link each dimension uses ---------------------------------------------


def crosses_nodes(inner_gpus: int, degree: int, gpus_per_node: int) -> bool:
    """A group of `degree` ranks spaced `inner_gpus` apart (the product of the dimensions placed
    inside it) leaves the node when inner_gpus x degree exceeds gpus_per_node."""
    return degree > 1 and inner_gpus * degree > gpus_per_node


def ring_nics_in_flight(settings: TrainingSettings, gpus_per_node: int) -> dict[str, int]:
    """NICs per node that carry each dimension's traffic across nodes: a ring group's ranks per
    node for tensor and data parallel (link_gbytes_per_s), one for pipeline sends and the
    expert all-to-all."""
    t, d = settings.tensor_parallel, settings.gpus
    return {
        "tp": ranks_per_node(1, t, gpus_per_node),
        "dp": ranks_per_node(t, d, gpus_per_node),
        "pp": 1,
        "ep": 1,
    }


def dimension_crossings(settings: TrainingSettings, gpus_per_node: int, expert_parallel: int = 1) -> dict[str, bool]:
    """Whether each dimension's group spans nodes, in Megatron-LM's order (tensor innermost,
    then expert inside data, then pipeline). A pipeline's neighbour stages are tp x dp ranks
    apart; an expert-parallel group is ep ranks tp apart."""
    t, d, p = settings.tensor_parallel, settings.gpus, settings.pipeline_parallel
    return {
        "tp": crosses_nodes(1, t, gpus_per_node),
        "dp": crosses_nodes(t, d, gpus_per_node),
        "pp": crosses_nodes(t * d, p, gpus_per_node),
        "ep": crosses_nodes(t, expert_parallel, gpus_per_node),
    }


def ranks_per_node(inner_gpus: int, degree: int, gpus_per_node: int) -> int:
    """How many ranks of one group (`degree` ranks spaced `inner_gpus` apart) share a node."""
    return max(1, min(degree, gpus_per_node // inner_gpus))


def link_gbytes_per_s(
    interconnect_gbps: float | None,
    crosses: bool,
    inter_node_gbps: float,
    intra_node_efficiency: float,
    nics_in_flight: int = 1,
) -> float:
    """GB/s per GPU per direction a group's collectives run at (nccl-tests doc/PERFORMANCE.md bus
    bandwidth): inside a node the GPU's bidirectional interconnect / 2 x efficiency (0.88 for
    NVLink, NVLINK_EFFICIENCY); across nodes the network's Gb/s per GPU / 8 times `nics_in_flight`,
    never above the intra-node rate; without an interconnect figure the network's Gb/s per GPU / 8.

    A ring collective spanning nodes sends the same bytes over every edge of the ring, but NCCL
    opens one ring per channel, each crossing the node boundary at a different GPU, so all the
    group's NICs in a node carry the crossing traffic at once: a 4-node all-reduce of 8 x B200
    with 8 x 50 GB/s NICs measures 377 GB/s bus bandwidth, not 50 (github.com/stas00/
    ml-engineering network/README.md @744d01e, "Inter-node speed depends on intra-node
    speed", model 2 within 6%). `nics_in_flight` is the group's ranks per node for ring
    collectives (tensor and data parallel) and 1 for point-to-point sends and all-to-all."""
    intra = interconnect_gbps / 2 * intra_node_efficiency if interconnect_gbps else None
    if not crosses and intra:
        return intra
    network = inter_node_gbps / 8 * (nics_in_flight if crosses else 1)
    return min(network, intra) if intra else network


# --- message sizes: what one collective of each dimension carries ----------------------------


class DimensionCollective(BaseModel):
    """One dimension's collective: its kind, the bytes of one call (the full buffer) and the
    ranks and nodes of its group."""

    collective: str
    size_bytes: float
    ranks: int
    nodes: int


def dp_message(spec: ModelSpec, settings: TrainingSettings, expert_parallel: int = 1) -> tuple[str, float]:
    """(collective, bytes of one call) of data parallelism: ZeRO-3 / FSDP gathers one layer's
    weights at a time (FSDP2 wraps each transformer block, torchtitan parallelize_llama.py;
    ZeRO-3 prefetches per module) and reduce-scatters its gradients; DDP (ZeRO-0) all-reduces
    DDP_BUCKET_BYTES buckets, ZeRO-1 and ZeRO-2 reduce DeepSpeed's DEEPSPEED_BUCKET_ELEMENTS,
    Megatron its MEGATRON_BUCKET_ELEMENTS (ZeRO-2 as reduce-scatters); never more than the whole
    gradient."""
    params = trainable_parameters_per_rank(spec, settings, expert_parallel)
    grad_b = gradient_bytes(settings.precision)
    if settings.zero >= 3:
        layers = max(1.0, spec.n_layers / settings.pipeline_parallel)
        return "all_gather", params / layers * weight_bytes(settings.precision)
    collective = "reduce_scatter" if settings.zero == 2 else "all_reduce"
    if settings.framework == "megatron":
        bucket = max(MEGATRON_BUCKET_ELEMENTS, 1_000_000 * settings.gpus) * grad_b
    elif settings.zero == 0:
        bucket = DDP_BUCKET_BYTES
    else:
        bucket = DEEPSPEED_BUCKET_ELEMENTS * grad_b
    return collective, min(params * grad_b, bucket)


def group_nodes(inner_gpus: int, degree: int, gpus_per_node: int) -> int:
    """Nodes a group of `degree` ranks spaced `inner_gpus` apart spans."""
    return -(-degree // ranks_per_node(inner_gpus, degree, gpus_per_node))


def dimension_collectives(
    spec: ModelSpec, settings: TrainingSettings, gpus_per_node: int, expert_parallel: int = 1
) -> dict[str, DimensionCollective]:
    """Each dimension's collective, message size and group: tensor parallel all-reduces the
    b x s x h activations (Shoeybi et al. 2019), pipeline stages send b x s x h / t (Narayanan
    et al. 2021), experts all-to-all b x s x k x h (GShard), data parallel as dp_message."""
    t, d, p = settings.tensor_parallel, settings.gpus, settings.pipeline_parallel
    activation = activation_bytes(spec, settings)
    dp_collective, dp_size = dp_message(spec, settings, expert_parallel) if d > 1 else ("all_reduce", 0.0)
    experts = activation * spec.experts_per_token
    return {
        "tp": DimensionCollective(
            collective="all_reduce", size_bytes=activation, ranks=t, nodes=group_nodes(1, t, gpus_per_node)
        ),
        "dp": DimensionCollective(
            collective=dp_collective, size_bytes=dp_size, ranks=d, nodes=group_nodes(t, d, gpus_per_node)
        ),
        "pp": DimensionCollective(
            collective="send_recv",
            size_bytes=activation / t,
            ranks=2,
            nodes=2 if crosses_nodes(t * d, p, gpus_per_node) else 1,
        ),
        "ep": DimensionCollective(
            collective="all_to_all",
            size_bytes=experts,
            ranks=expert_parallel,
            nodes=group_nodes(t, expert_parallel, gpus_per_node),
        ),
    }
