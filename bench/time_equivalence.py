"""Checks that the time model and the priced options give the same results as another checkout.

Speed work on calculators/timing and calculators/cost must not move a number: this script runs
`estimate_time` and `cost_options` over a broad grid (presets and library models, MoE,
encoder-decoder and vision-language ones among them; every catalogue GPU; precisions,
checkpointing, tensor, pipeline, context and expert parallel; 1, 8 and 64 GPUs; the Time and
cost page's settings variants) in this checkout and in another one (a subprocess run from that
checkout's root), and compares every field: strings, integers and flags exactly, floats to
1e-12 relative. Run from the repository root, against a checkout of the base commit:

    git worktree add /tmp/base-tc 671386e
    python bench/time_equivalence.py /tmp/base-tc

It prints how many results it compared and exits 1 on the first difference it reports.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

MODELS = (
    ("llama-2-7b", {}),
    ("gpt2", {}),
    ("bert-base-uncased", {}),
    ("gemma-2-2b", {}),
    ("mixtral-8x7b", {}),
    ("Qwen/Qwen3-30B-A3B", {}),
    ("deepseek-ai/DeepSeek-V3", {}),
    ("google-t5/t5-small", {"target_len": 512}),
    ("Qwen/Qwen2.5-VL-3B-Instruct", {"images_per_sample": 2, "image_tokens": 1024}),
    ("meta-llama/Llama-3.2-11B-Vision", {"images_per_sample": 1}),
)
SETTINGS = (
    {},
    {"micro_batch": 3, "seq_len": 4096},
    {"precision": "fp8", "checkpointing": "full", "gpus": 8, "zero": 3},
    {"precision": "fp16-mixed", "checkpointing": "selective", "tensor_parallel": 2, "gpus": 8},
    {"checkpointing": "op-selective", "pipeline_parallel": 4, "grad_accum": 8, "gpus": 64, "zero": 1},
    {"precision": "fp32", "tensor_parallel": 8, "pipeline_parallel": 2, "gpus": 64, "grad_accum": 4},
    {"method": "lora", "gpus": 8, "zero": 2},
    {"precision": "bf16", "offload_optimizer": True, "zero": 3, "gpus": 8, "framework": "megatron"},
    {"seq_len": 256, "grad_accum": 2},  # small steps, where the host's kernel launches can bind
)
TIME_SETTINGS = (
    {},
    {"utilisation": 0.4},
    {"compile": True, "gpus_per_node": 4, "virtual_stages": 2, "attention_kernel": "flash3"},
    {"matmul_fraction": 0.7, "launch": "cuda-graphs", "kernels": "eager", "loss_kernel": "vocab-parallel"},
    {"context_parallel": 2, "expert_parallel": 2, "tp_overlap_fraction": 0.5, "fp32_uses_tf32": True},
    {"inter_node_gbps": 100.0, "overlap_fraction": 0.5, "host_link_gbytes_per_s": 50.0, "epochs": 2.0},
    {"launch": "compiled"},  # each setting alone too, so that a cache key that left one out would show
    {"launch": "cuda-graphs", "gpus_per_node": 2},
    {"kernels": "fused", "sustained_clock_factor": 0.9},
    {"attention_kernel": "cudnn", "fp8_recipe": "delayed", "nccl_sm_share": 0.1},
)


def _spec(name: str):
    from calculators.models.library import library_spec
    from calculators.models.presets import get_preset

    try:
        return get_preset(name)
    except (KeyError, ValueError):
        return library_spec(name)


def _settings(model_overrides: dict, overrides: dict):
    from calculators.workload.training import TrainingSettings

    try:
        return TrainingSettings(**model_overrides, **overrides)
    except ValueError:
        return None


def _time_settings(overrides: dict):
    from calculators.timing.settings import TimeSettings

    return TimeSettings(**{"dataset_tokens": 1e9, **overrides})


def _outcome(function, *args, **kwargs) -> object:
    """The result of function(*args, **kwargs) field by field, or the refusal's message: both must match."""
    try:
        result = function(*args, **kwargs)
    except ValueError as error:
        return {"error": str(error)}
    if isinstance(result, list):
        return [item.model_dump(mode="json") for item in result]
    return result.model_dump(mode="json")


def estimates() -> dict[str, object]:
    """estimate_time over the whole grid, every catalogue GPU."""
    from calculators.hardware.catalogue import load_gpu_catalogue
    from calculators.timing.estimate import estimate_time

    results = {}
    catalogue = list(load_gpu_catalogue())
    for name, model_overrides in MODELS:
        spec = _spec(name)
        for s_index, overrides in enumerate(SETTINGS):
            settings = _settings(model_overrides, overrides)
            if settings is None:
                continue
            for t_index, time_overrides in enumerate(TIME_SETTINGS):
                time_settings = _time_settings(time_overrides)
                for gpu in catalogue:
                    key = f"estimate {name} s{s_index} t{t_index} {gpu.name}"
                    results[key] = _outcome(estimate_time, spec, settings, gpu, time_settings)
    return results


def options() -> dict[str, object]:
    """cost_options as the Time and cost page calls it, over models, settings and page variants."""
    from calculators.cost.energy import EnergySettings
    from calculators.cost.options import adjusted_prices, cost_options
    from calculators.cost.prices import load_prices
    from calculators.hardware.catalogue import load_gpu_catalogue
    from calculators.memory.engine import estimate_memory
    from calculators.validation.error_band import time_band_for

    catalogue = list(load_gpu_catalogue())
    page_variants = (
        ({}, list(load_prices()), {}, EnergySettings()),
        ({"utilisation": 0.35}, adjusted_prices(load_prices(), 0.2, 0.05), {}, EnergySettings(grid_gco2e_per_kwh=300)),
        ({"gpus_per_node": 4}, list(load_prices()), {"H100-SXM5-80GB": 0.71}, EnergySettings(pue=1.2)),
    )
    results = {}
    for name, model_overrides in MODELS:
        spec = _spec(name)
        for s_index, overrides in enumerate(SETTINGS[:5]):
            settings = _settings(model_overrides, overrides)
            if settings is None:
                continue
            try:
                peak_gib = estimate_memory(spec, settings).peak_gib
            except ValueError:
                peak_gib = None
            for v_index, (time_overrides, prices, measured, energy) in enumerate(page_variants):
                time_settings = _time_settings(time_overrides)
                key = f"options {name} s{s_index} v{v_index}"
                results[key] = _outcome(
                    cost_options, spec, settings, time_settings, prices, catalogue, checkpoint_write_h=0.1,
                    restart_h=0.2, measured_matmul_fraction=measured, peak_gib=peak_gib, energy=energy,
                    time_band=time_band_for,
                )  # fmt: skip
    return results


def differences(mine: object, theirs: object, where: str = "") -> list[str]:
    """Where two results differ: floats beyond 1e-12 relative, anything else at all."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        if mine.keys() != theirs.keys():
            return [f"{where}: keys {sorted(mine.keys() ^ theirs.keys())}"]
        return [line for key in mine for line in differences(mine[key], theirs[key], f"{where}.{key}")]
    if isinstance(mine, list) and isinstance(theirs, list):
        if len(mine) != len(theirs):
            return [f"{where}: {len(mine)} items against {len(theirs)}"]
        pairs = enumerate(zip(mine, theirs, strict=True))
        return [line for i, (a, b) in pairs for line in differences(a, b, f"{where}[{i}]")]
    if isinstance(mine, float) and isinstance(theirs, float):
        if mine == theirs or math.isclose(mine, theirs, rel_tol=1e-12, abs_tol=0.0):
            return []
        return [f"{where}: {mine!r} against {theirs!r}"]
    if type(mine) is not type(theirs) or mine != theirs:
        return [f"{where}: {mine!r} against {theirs!r}"]
    return []


def dump(path: str) -> None:
    """Write this checkout's results as JSON (run from the root of the checkout under test)."""
    import calculators

    assert Path(calculators.__file__).resolve().is_relative_to(Path.cwd().resolve()), calculators.__file__
    Path(path).write_text(json.dumps({**estimates(), **options()}), encoding="utf-8")


def main(base_root: str) -> int:
    with tempfile.TemporaryDirectory() as folder:
        theirs_path = Path(folder) / "base.json"
        script = f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
        script += "import time_equivalence; time_equivalence.dump(sys.argv[1])"
        subprocess.run([sys.executable, "-c", script, str(theirs_path)], cwd=base_root, check=True, env=_env(base_root))
        theirs = json.loads(theirs_path.read_text(encoding="utf-8"))
    mine = json.loads(json.dumps({**estimates(), **options()}))
    found = differences(mine, theirs)
    refused = sum(1 for value in mine.values() if isinstance(value, dict) and "error" in value)
    priced = sum(len(value) for key, value in mine.items() if key.startswith("options") and isinstance(value, list))
    print(
        f"compared {len(mine)} results ({sum(key.startswith('estimate') for key in mine)} estimate_time, "
        f"{sum(key.startswith('options') for key in mine)} cost_options with {priced} options; {refused} refusals "
        f"compared by message) against {base_root}: {len(found)} differences"
    )
    for line in found[:20]:
        print(" ", line)
    return 1 if found else 0


def _env(root: str) -> dict[str, str]:
    """The environment with the other checkout first on the import path."""
    import os

    return {**os.environ, "PYTHONPATH": root}


if __name__ == "__main__":
    sys.path.insert(0, str(REPO_ROOT))
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/base-tc"))
