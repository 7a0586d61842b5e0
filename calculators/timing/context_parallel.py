"""Context parallelism: each sequence split over N ranks, attention as a ring passing K and V.

Transformer Engine's ring attention (NVIDIA/TransformerEngine transformer_engine/pytorch/attention/
dot_product_attention/context_parallel.py @9c61cd7, as Megatron-LM and NeMo run it with
`context_parallel_size`; torchtitan's `context_parallel_degree` runs PyTorch's ring attention the
same way):

- each rank holds seq_len / N tokens of every sequence, as two chunks, i and 2N-1-i of 2N
  (get_seq_chunk_ids_for_reordering_before_attn), so every rank does the same share of causal
  attention: 1/N of the whole (load balancing);
- attention runs in N steps per layer: each step computes the local queries against one rank's
  K, V chunk while the next chunk arrives from the ring neighbour (flash_attn_p2p_communicate,
  on a side stream `cp_stream`): N - 1 sends of the local K and V forward; backward passes K, V
  and the accumulated dK, dV, twice the bytes, over N - 1 steps again;
- a step's send hides under that step's attention compute; what is longer than it is exposed.

Everything else of the layer (GEMMs, norms, the loss) runs on the rank's seq_len / N tokens, and
gradients are reduced over data x context ranks together (Megatron's data-parallel group with
context parallel; torchtitan shards FSDP over dp_shard x cp), so the data-parallel degree here
counts the context-parallel ranks: N ranks of `settings.gpus` share one sequence.
"""

from __future__ import annotations

from pydantic import BaseModel

from calculators.hardware.catalogue import GpuSpec
from calculators.models.geometry import split
from calculators.models.spec import ModelSpec, extension
from calculators.timing import collectives
from calculators.timing.communication import crosses_nodes
from calculators.workload.precision import compute_bytes
from calculators.workload.training import TrainingSettings


def check_context_parallel(spec: ModelSpec, settings: TrainingSettings, degree: int) -> None:
    """Raise ValueError, in words, for a context-parallel degree the settings cannot take: the
    data-parallel GPUs (which include the context-parallel ranks) a multiple of it and the
    sequence into 2 x degree equal chunks (Transformer Engine's load balancing requires
    seq_len divisible by 2 x cp_size); text decoders only (images and encoder-decoders are not
    modelled with context parallel)."""
    if degree == 1:
        return
    if settings.gpus % degree:
        raise ValueError(
            f"context parallel {degree} needs the data-parallel GPUs ({settings.gpus}) to be a multiple of it: "
            "each sequence is split over that many of them"
        )
    if settings.seq_len % (2 * degree):
        raise ValueError(
            f"context parallel {degree} splits each sequence into {2 * degree} equal chunks; "
            f"seq_len {settings.seq_len} is not a multiple of {2 * degree}"
        )
    if settings.images_per_sample or extension(spec, "cross_attention_layers"):
        raise ValueError("context parallel is modelled for text decoder models only (no images, no encoder-decoder)")


def rank_settings(settings: TrainingSettings, degree: int) -> TrainingSettings:
    """The settings as one context-parallel rank runs them: seq_len / degree tokens of each
    sequence (every token-proportional op: GEMMs, norms, the loss, tensor and pipeline traffic)."""
    if degree == 1:
        return settings
    return settings.model_copy(update={"seq_len": settings.seq_len // degree})


def kv_chunk_bytes(spec: ModelSpec, rank: TrainingSettings) -> float:
    """Bytes of one ring send in forward: the rank's K and V, b x (s / N) x 2 x kv_heads / t x
    head_dim elements, in the compute dtype (bf16 also under fp8 recipes, whose attention runs in
    bf16)."""
    kv_dim = split(spec.kv_dim, rank.tensor_parallel)
    return rank.micro_batch * rank.seq_len * 2 * kv_dim * compute_bytes(rank.precision)


class RingSeconds(BaseModel):
    """One micro-batch's ring traffic on one rank: all its sends, and the part longer than the
    attention step it runs beside."""

    total_s: float
    exposed_s: float


def ring_seconds(
    send_s: float,
    attention_forward_s: float,
    degree: int,
    forward_layers: float,
    backward_layers: float,
    attention_backward_s: float | None = None,
) -> RingSeconds:
    """Ring traffic of one micro-batch: per layer N - 1 sends of `send_s` in forward, each beside
    one of the N attention steps (attention_forward_s / N, the layer's forward attention on this
    rank), and N - 1 sends of twice the bytes (K, V and dK, dV) in backward beside the backward's
    steps (attention_backward_s / N; without it 2.5x the forward's FLOPs at the forward's rate, Dao
    2023); each send exposed by what it exceeds its step's compute."""
    if degree == 1:
        return RingSeconds(total_s=0.0, exposed_s=0.0)
    steps = degree - 1
    step_fwd_s = attention_forward_s / degree
    step_bwd_s = (2.5 * attention_forward_s if attention_backward_s is None else attention_backward_s) / degree
    forward = steps * send_s
    backward = steps * 2 * send_s
    exposed_forward = steps * max(0.0, send_s - step_fwd_s)
    exposed_backward = steps * max(0.0, 2 * send_s - step_bwd_s)
    return RingSeconds(
        total_s=forward_layers * forward + backward_layers * backward,
        exposed_s=forward_layers * exposed_forward + backward_layers * exposed_backward,
    )


def ring_send_seconds(
    gpu: GpuSpec,
    size_bytes: float,
    ring_crosses_nodes: bool,
    inter_node_gbps: float,
    intra_node_efficiency: float,
    measured: dict[str, collectives.Curve] | None = None,
) -> float:
    """Seconds of one ring send of `size_bytes` on the measured send/recv curves
    (calculators.timing.collectives): inside a node, or across nodes when the ring spans them (a
    ring step waits for its slowest hop, the one leaving the node)."""
    nodes = 2 if ring_crosses_nodes else 1
    bus = collectives.bus_gbytes_per_s(
        gpu, "send_recv", size_bytes, 2, nodes, inter_node_gbps, intra_node_efficiency, measured
    )
    return collectives.collective_seconds("send_recv", size_bytes, 2, bus, collectives.curve_ranks(gpu, nodes))


def ring_crosses_nodes(settings: TrainingSettings, degree: int, gpus_per_node: int) -> bool:
    """Whether a context-parallel ring leaves the node: its ranks sit next to each other after the
    tensor-parallel ones (Megatron-LM's order tp, cp, dp, pp: parallel_state), t apart."""
    return crosses_nodes(settings.tensor_parallel, degree, gpus_per_node)
