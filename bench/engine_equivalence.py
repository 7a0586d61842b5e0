"""Checks that this checkout's memory engine and 'What to change' search give exactly the results
of another checkout (the commit before a speed-up, say) over a broad grid of models and settings.

Each checkout runs the same grid in its own Python process and writes every result as JSON
(`estimate_memory(...).model_dump()` or the error's text; `ranked_changes(...)` as the list of
each option's model_dump); the two files are then compared: equal keys in the same order, equal
strings, floats equal within 1e-12 relative (to the bit with --exact). Run from the repository root:

    git worktree add --detach /tmp/base 671386e
    python bench/engine_equivalence.py --base /tmp/base

The grid: every preset of data/models.csv and one library model of each kind the engine treats
apart (mixture of experts, latent attention, sliding windows, a vision-language model with tokens
or with cross-attention, T5, ModernBERT, Phi-3.5-MoE, BERT), each under about fifty settings
(micro-batch, sequence, checkpointing, precision, LoRA/QLoRA, ZeRO 0-3, offloads, tensor and
pipeline parallel, optimizers, losses, frameworks, overheads, images); ranked_changes for a subset
of those on an RTX 4090, an H100 and with no GPU (16 GiB, no time model).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

LIBRARY_MODELS = (
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen1.5-MoE-A2.7B",
    "openai/gpt-oss-20b",
    "google/gemma-2b",
    "google/gemma-3-270m",
    "mistralai/Mistral-7B-v0.1",
    "deepseek-ai/DeepSeek-V2",
    "google/medgemma-4b-it",
    "google-bert/bert-base-uncased",
    "EleutherAI/pythia-70m",
    "google-t5/t5-small",
    "answerdotai/ModernBERT-base",
    "microsoft/Phi-3.5-MoE-instruct",
    "Qwen/Qwen2.5-VL-3B-Instruct",
    "meta-llama/Llama-3.2-11B-Vision",
)

FRAMEWORKS = ("hf-trainer", "torchtune", "torchtitan", "deepspeed", "megatron", "litgpt", "axolotl", "automodel")

MEMORY_VARIANTS: tuple[dict, ...] = (
    {},
    {"micro_batch": 4, "seq_len": 4096},
    {"micro_batch": 3, "seq_len": 512, "grad_accum": 4},
    {"checkpointing": "full"},
    {"checkpointing": "selective", "micro_batch": 2},
    {"checkpointing": "op-selective"},
    {"checkpointing": "full", "checkpoint_unit": "submodule"},
    {"precision": "fp32", "attention": "eager"},
    {"precision": "amp-bf16"},
    {"precision": "amp-fp16", "micro_batch": 2},
    {"precision": "fp16-mixed"},
    {"precision": "bf16"},
    {"precision": "fp8", "checkpointing": "selective"},
    {"method": "lora"},
    {"method": "lora", "lora_targets": "qv", "lora_rank": 64, "lora_dropout": 0.05},
    {"method": "lora", "precision": "amp-bf16", "checkpointing": "full", "frozen_layers": 2},
    {"method": "qlora"},
    {"method": "qlora", "quantised_linears": "all", "nf4_scales": "fp32", "quant_backend": "torchao"},
    {"method": "qlora", "optimizer": "paged-adamw-8bit", "micro_batch": 4},
    {"zero": 1, "gpus": 8},
    {"zero": 2, "gpus": 8, "micro_batch": 2},
    {"zero": 3, "gpus": 8},
    {"zero": 3, "gpus": 8, "sharding_impl": "fsdp2"},
    {"zero": 3, "gpus": 4, "sharding_impl": "fsdp1", "method": "lora"},
    {"zero": 3, "gpus": 16, "offload_optimizer": True, "offload_parameters": True},
    {"zero": 2, "gpus": 2, "offload_optimizer": True},
    {"zero": 3, "gpus": 8, "load_whole_model": True},
    {"tensor_parallel": 2, "gpus": 4},
    {"tensor_parallel": 4, "gpus": 2, "zero": 1},
    {"pipeline_parallel": 4, "grad_accum": 8},
    {"pipeline_parallel": 2, "tensor_parallel": 2, "grad_accum": 2, "micro_batch": 2},
    {"optimizer": "sgd"},
    {"optimizer": "adafactor"},
    {"optimizer": "adamw-8bit", "optimizer_impl": "fused"},
    {"optimizer": "paged-adamw"},
    {"optimizer": "none", "checkpointing": "full"},
    {"optimizer_impl": "for-loop"},
    {"loss": "chunked", "loss_chunks": 16},
    {"loss": "fused-linear"},
    {"liger": True},
    {"activation_offload": True, "checkpointing": "full"},
    {"optimizer_in_backward": True},
    {"compile": True, "loss": "chunked"},
    {"keep_gradients": True},
    {"grads_freed_after_step": False, "grad_accum": 1},
    {"frozen_layers": 3},
    {"logits_in_backward": "kept"},
    {"qkv_projection": "fused", "method": "lora"},
    {"cuda_context_gib": 1.0, "allocator_reserve_fraction": 0.2, "nccl_gib": 2.0, "gpus": 2},
    {"images_per_sample": 1, "image_tokens": 256},
    {"images_per_sample": 2, "freeze_vision_tower": True},
    {"target_len": 128, "seq_len": 512},
    *({"framework": framework} for framework in FRAMEWORKS),
    {"framework": "torchtune", "method": "lora", "checkpointing": "full"},
    {"framework": "automodel", "checkpointing": "full", "zero": 3, "gpus": 8},
)

# ranked_changes is about 30-150 ms a call: a subset of the settings, each on three capacities
CHANGE_VARIANTS: tuple[dict, ...] = (
    {},
    {"micro_batch": 4},
    {"micro_batch": 8, "seq_len": 4096},
    {"zero": 3, "gpus": 8},
    {"zero": 1, "gpus": 2, "micro_batch": 2},
    {"method": "lora", "micro_batch": 16},
    {"method": "qlora", "micro_batch": 8, "seq_len": 4096},
    {"precision": "fp32", "attention": "eager", "micro_batch": 2},
    {"tensor_parallel": 2, "gpus": 2},
    {"pipeline_parallel": 2, "grad_accum": 4},
    {"framework": "torchtune", "micro_batch": 4},
    {"offload_optimizer": True, "zero": 2, "gpus": 2},
    {"images_per_sample": 1, "image_tokens": 256, "micro_batch": 2},
)
CHANGE_GPUS = ("RTX-4090-24GB", "H100-SXM5-80GB", None)
NO_GPU_CAPACITY_GIB = 16.0


def _models():
    from calculators.models.library import library_spec
    from calculators.models.presets import get_preset, load_presets

    for name in load_presets():
        yield name, get_preset(name)
    for name in LIBRARY_MODELS:
        yield name, library_spec(name)


def _outcome(function):
    """What a call gives, as JSON: its result, or the error's type and text."""
    try:
        return function()
    except (ValueError, KeyError) as error:
        return {"error": f"{type(error).__name__}: {error}"}


def _settings(update: dict):
    from calculators.workload.training import TrainingSettings

    return TrainingSettings(**update)


def memory_results() -> dict[str, object]:
    from calculators.memory.engine import estimate_memory

    results: dict[str, object] = {}
    for name, spec in _models():
        for update in MEMORY_VARIANTS:
            key = f"memory {name} {json.dumps(update, sort_keys=True)}"
            results[key] = _outcome(
                lambda spec=spec, update=update: estimate_memory(spec, _settings(update)).model_dump()
            )
    return results


def change_results() -> dict[str, object]:
    from calculators.hardware.catalogue import find_gpu
    from calculators.memory.fit_matrix import gpu_memory_gib
    from calculators.plan.changes import ranked_changes

    results: dict[str, object] = {}
    requests = [
        (name, spec, update, gpu) for name, spec in _models() for update in CHANGE_VARIANTS for gpu in CHANGE_GPUS
    ]
    # the page's case of issue 36: llama-2-7b, micro-batch 3 to 18, on an H100
    requests += [
        ("llama-2-7b", spec, {"micro_batch": mb}, "H100-SXM5-80GB")
        for name, spec in _models()
        if name == "llama-2-7b"
        for mb in range(3, 19)
    ]
    for name, spec, update, gpu_name in requests:
        gpu = find_gpu(gpu_name) if gpu_name else None
        capacity_gib = gpu_memory_gib(gpu) if gpu else NO_GPU_CAPACITY_GIB
        key = f"changes {name} {gpu_name} {json.dumps(update, sort_keys=True)}"

        def ranked(spec=spec, update=update, capacity_gib=capacity_gib, gpu=gpu):
            return [option.model_dump() for option in ranked_changes(spec, _settings(update), capacity_gib, gpu)]

        results[key] = _outcome(ranked)
    return results


def differences(base: object, new: object, where: str = "", rel_tol: float = 1e-12) -> list[str]:
    """Where `new` differs from `base`: keys and their order, strings, floats beyond `rel_tol` relative."""
    if isinstance(base, dict) and isinstance(new, dict):
        if list(base) != list(new):
            return [f"{where}: keys {list(base)} != {list(new)}"]
        return [line for key in base for line in differences(base[key], new[key], f"{where}.{key}", rel_tol)]
    if isinstance(base, list) and isinstance(new, list):
        if len(base) != len(new):
            return [f"{where}: {len(base)} items != {len(new)}"]
        pairs = enumerate(zip(base, new, strict=True))
        return [line for i, (b, n) in pairs for line in differences(b, n, f"{where}[{i}]", rel_tol)]
    if isinstance(base, float) and isinstance(new, float):
        return [] if math.isclose(base, new, rel_tol=rel_tol, abs_tol=0.0) else [f"{where}: {base!r} != {new!r}"]
    if type(base) is not type(new) or base != new:
        return [f"{where}: {base!r} != {new!r}"]
    return []


def dump(path: Path) -> None:
    started = time.perf_counter()
    results = memory_results() | change_results()
    path.write_text(json.dumps(results), encoding="utf-8")
    origin = Path(sys.modules["calculators"].__file__).parent.parent
    print(f"{len(results)} results from {origin} in {time.perf_counter() - started:.0f} s")


def run_in(repo: Path, out: Path) -> dict:
    """The grid's results computed by the checkout at `repo`, in its own process."""
    subprocess.run([sys.executable, __file__, "--dump", str(out), "--repo", str(repo)], check=True, cwd=repo)
    return json.loads(out.read_text(encoding="utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the checkout to compare with (a git worktree)")
    parser.add_argument("--dump", type=Path, help="write this checkout's results to the file and stop")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="the checkout whose code --dump runs")
    parser.add_argument("--reuse-base", action="store_true", help="read the base's results of an earlier run")
    parser.add_argument("--exact", action="store_true", help="floats equal to the bit, not within 1e-12")
    parser.add_argument("--work", type=Path, default=Path("/tmp") / "engine_equivalence", help="where the results go")
    args = parser.parse_args()
    if args.dump:
        sys.path.insert(0, str(args.repo.resolve()))
        dump(args.dump)
        return 0
    if args.base is None:
        parser.error("give --base (a checkout to compare with) or --dump")
    work = args.work
    work.mkdir(exist_ok=True)
    base_file = work / "base.json"
    if args.reuse_base and base_file.exists():
        base = json.loads(base_file.read_text(encoding="utf-8"))
    else:
        base = run_in(args.base.resolve(), base_file)
    new = run_in(REPO_ROOT, work / "new.json")
    found = differences(base, new, "results", rel_tol=0.0 if args.exact else 1e-12)
    memory = sum(key.startswith("memory ") for key in base)
    errors = sum(isinstance(value, dict) and "error" in value for value in base.values())
    options = sum(len(value) for value in base.values() if isinstance(value, list))
    print(
        f"compared {len(base)} configurations: {memory} memory estimates, {len(base) - memory} change searches "
        f"({options} ranked options), {errors} refused with the same error text"
    )
    for line in found[:20]:
        print("  DIFFERS", line)
    print("identical" if not found else f"{len(found)} differences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
