"""What to change when a model does not fit to serve: each change that can make it fit, with the
memory it then needs and what it costs the user in words, gentlest first.

The changes are the ones a vLLM deployment has (docs.vllm.ai, "Quantized KV cache", "Quantization",
"Distributed inference and serving"): an fp8 KV cache (--kv-cache-dtype fp8, half the bf16 bytes);
quantised weights (fp8, or int4 with AWQ/GPTQ, group 128); tensor parallel over more GPUs
(--tensor-parallel-size); and, asking less of the deployment, fewer concurrent sequences or a
shorter context (--max-num-seqs, --max-model-len). Each is tried alone, then the KV-cache and
weight changes together, since those keep the users' requests as they are.
"""

from __future__ import annotations

from pydantic import BaseModel

from calculators.memory.serving import (
    KV_BYTES,
    WEIGHT_BITS,
    budget_gib,
    max_concurrency,
    max_context_len,
    min_tensor_parallel,
    total_gib,
)
from calculators.models.spec import ModelSpec
from calculators.workload.serving import ServingSettings


class ServingChange(BaseModel):
    """One way to make the deployment fit, and what it needs then."""

    change: str
    total_gib: float
    cost: str  # what the change gives up, in words
    keeps_requests: bool  # True: the users' sequences and context stay as asked


def _tried(spec: ModelSpec, settings: ServingSettings, update: dict) -> float:
    return total_gib(spec, settings.model_copy(update=update))


def _storage_changes(settings: ServingSettings) -> list[tuple[str, dict, str]]:
    """(label, settings update, cost) for the KV-cache and weight precisions that store fewer bytes,
    the least lossy first."""
    changes = []
    if KV_BYTES[settings.kv_cache_precision] > 1:
        changes.append(("KV cache in fp8", {"kv_cache_precision": "fp8"}, "small accuracy loss (scaled fp8 KV)"))
    weight_bits = WEIGHT_BITS[settings.weight_precision]
    if weight_bits > 8:
        changes.append(("weights in fp8", {"weight_precision": "fp8"}, "an fp8 checkpoint, near-lossless"))
    if weight_bits > 4:
        int4_cost = "a quantised checkpoint, some accuracy loss"
        changes.append(("weights in int4 (AWQ/GPTQ)", {"weight_precision": "int4"}, int4_cost))
    return changes


def _change(spec: ModelSpec, settings: ServingSettings, label: str, update: dict, cost: str, keeps: bool):
    needed = total_gib(spec, settings.model_copy(update=update))
    return ServingChange(change=label, total_gib=needed, cost=cost, keeps_requests=keeps)


def _request_changes(spec: ModelSpec, settings: ServingSettings, gpu_memory_gib: float) -> list[ServingChange]:
    """Asking less of the deployment: fewer sequences at once, or a shorter context."""
    found = []
    sequences = max_concurrency(spec, settings, gpu_memory_gib)
    if 0 < sequences < settings.concurrent_sequences:
        fewer = f"{settings.concurrent_sequences - sequences} fewer users at once"
        found.append(_change(spec, settings, f"{sequences} concurrent sequences",
                             {"concurrent_sequences": sequences}, fewer, keeps=False))  # fmt: skip
    context = max_context_len(spec, settings, gpu_memory_gib)
    if 0 < context < settings.context_len:
        shorter = f"prompts and answers up to {context:,} tokens, not {settings.context_len:,}"
        found.append(_change(spec, settings, f"context of {context:,} tokens", {"context_len": context},
                             shorter, keeps=False))  # fmt: skip
    return found


def serving_changes(spec: ModelSpec, settings: ServingSettings, gpu_memory_gib: float) -> list[ServingChange]:
    """Every change (and KV + weight pair) that makes the deployment fit `gpu_memory_gib`, gentlest
    first: fp8 KV cache, fp8 weights, more GPUs, int4 weights, pairs of those, then fewer users or a
    shorter context."""
    budget = budget_gib(gpu_memory_gib, settings)
    storage = _storage_changes(settings)
    singles = [_change(spec, settings, label, update, cost, keeps=True) for label, update, cost in storage]
    tp = min_tensor_parallel(spec, settings, gpu_memory_gib)
    if tp is not None and tp > settings.tensor_parallel:
        more_gpus = f"{tp} GPUs instead of {settings.tensor_parallel}"
        singles.insert(2, _change(spec, settings, f"tensor parallel over {tp} GPUs", {"tensor_parallel": tp},
                                  more_gpus, keeps=True))  # fmt: skip
    kv = [change for change in storage if "kv_cache_precision" in change[1]]
    weights = [change for change in storage if "weight_precision" in change[1]]
    pairs = [
        _change(spec, settings, f"{k[0]} + {w[0]}", k[1] | w[1], f"{k[2]}; {w[2]}", keeps=True)
        for k in kv
        for w in weights
    ]
    fitting = [change for change in [*singles, *pairs] if change.total_gib <= budget]
    return fitting + _request_changes(spec, settings, gpu_memory_gib)
