"""Times finding and resolving a model by its name.

Goals: a name search under 50 ms, resolving a bundled model under 10 ms (a first, uncached
resolve: the library's config fields read into a ModelSpec). Loading the library file is paid
once per process and printed apart. Run from the repository root:

    python bench/bench_models.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_ms  # noqa: E402

from calculators import model_library  # noqa: E402


def first_call_ms(function) -> float:
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000


def uncached_resolve_ms(model_id: str) -> float:
    """Resolving with the per-model cache cleared, as the first request for that model pays."""
    timings = []
    for _ in range(30):
        model_library._library_spec.cache_clear()
        timings.append(first_call_ms(lambda: model_library.resolve_model(model_id)))
    return sorted(timings)[len(timings) // 2]


if __name__ == "__main__":
    load = first_call_ms(model_library.load_library)
    print(f"load library file ({len(model_library.load_library())} models, once) {load:8.3f} ms")
    for query in ("qwen", "llama 8b", "deepseek-ai/DeepSeek-V3", "zzz no match"):
        timing = median_ms(lambda query=query: model_library.search_models(query), 200)
        print(f"search {query!r:<28}{timing:8.3f} ms (goal < 50 ms)")
    for model_id in ("Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-120b", "llama-3.1-8b"):
        print(f"resolve {model_id:<27}{uncached_resolve_ms(model_id):8.3f} ms (goal < 10 ms, uncached)")
