"""The time model on published runs that are not in shared/validation: torchtitan's Llama 3.1 runs
on Grand Teton H100s (96 GB HBM2e, 500 W; data/gpu_variants.csv) at 8, 128, 256 and 512 GPUs, with
context parallel up to 262,144-token sequences (Tables 2 and 6).

    python bench/published_runs.py

Prints measured and estimated tokens/s per GPU and their ratio. The settings are the tables'
(github.com/pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @31a17bfd); where a
table leaves one open the row says what was assumed. Nothing here is tuned to these figures.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calculators.hardware.catalogue import find_gpu  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.timing.estimate import estimate_time  # noqa: E402
from calculators.timing.settings import TimeSettings  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402

SOURCE = "github.com/pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @31a17bfd"
GPU = find_gpu("H100-96GB-HBM2e-500W")
EIGHT_B = {"model": "llama-3.1-8b", "micro_batch": 2, "checkpointing": "op-selective", "precision": "bf16-mixed"}
SEVENTY_B = {"model": "llama-3.1-70b", "micro_batch": 16, "checkpointing": "full", "precision": "fp8", "tp": 8}
# 405B: local batch 32 in 8 micro-batches of 4 (torchtitan's default: as many micro-batches as stages)
FOUR_OH_FIVE_B = {
    "model": "llama-3.1-405b", "micro_batch": 4, "grad_accum": 8, "checkpointing": "full", "precision": "fp8",
    "tp": 8, "pp": 8,
}  # fmt: skip
# Tables 2 and 6: FSDP x CP over 8 ranks of each sequence's group, local batch 1 (8B) or 8 (405B, in 8
# micro-batches of 1: torchtitan's default of as many micro-batches as stages), full checkpointing,
# torch.compile and Float8; the data-parallel degree here counts the context-parallel ranks
EIGHT_B_CP = {"model": "llama-3.1-8b", "micro_batch": 1, "checkpointing": "full", "precision": "fp8", "dp": 8}
FOUR_OH_FIVE_B_CP = FOUR_OH_FIVE_B | {"micro_batch": 1, "grad_accum": 8, "dp": 8}
RUNS = [
    ("Table 1: 8B FSDP 8", EIGHT_B | {"dp": 8}, {}, 5762),
    ("Table 1: 8B FSDP 8 + compile", EIGHT_B | {"dp": 8}, {"compile": True}, 6667),
    ("Table 3: 8B FSDP 128", EIGHT_B | {"dp": 128}, {}, 5605),
    ("Table 3: 8B FSDP 128 + compile", EIGHT_B | {"dp": 128}, {"compile": True}, 6514),
    ("Table 4: 70B FSDP 32 x TP 8, compile, float8", SEVENTY_B | {"dp": 32}, {"compile": True}, 829),
    ("Table 5: 405B FSDP 8 x TP 8 x PP 8, 1F1B", FOUR_OH_FIVE_B | {"dp": 8}, {"compile": True}, 100),
    (
        "Table 5: 405B, interleaved 1F1B (2 stages per rank, assumed)",
        FOUR_OH_FIVE_B | {"dp": 8},
        {"compile": True, "virtual_stages": 2},
        128,
    ),
    *(
        (f"Table 2: 8B FSDP {8 // cp} x CP {cp}, {32768 * cp:,} tokens", EIGHT_B_CP | {"seq_len": 32768 * cp},
         {"compile": True, "context_parallel": cp}, measured)
        for cp, measured in ((1, 3890), (2, 2540), (4, 1071), (8, 548))
    ),
    *(
        (f"Table 6: 405B FSDP {8 // cp} x CP {cp} x TP 8 x PP 8, {32768 * cp:,} tokens",
         FOUR_OH_FIVE_B_CP | {"seq_len": 32768 * cp}, {"compile": True, "context_parallel": cp}, measured)
        for cp, measured in ((1, 76), (2, 47), (4, 31), (8, 16))
    ),
]  # fmt: skip


def estimate(run: dict, time: dict) -> float:
    """Tokens/s per GPU of one run (sequences of 8192 tokens unless the run says, FSDP = ZeRO-3, 400 Gb/s
    per GPU)."""
    settings = TrainingSettings(
        micro_batch=run["micro_batch"], seq_len=run.get("seq_len", 8192), grad_accum=run.get("grad_accum", 1),
        gpus=run["dp"],
        tensor_parallel=run.get("tp", 1), pipeline_parallel=run.get("pp", 1), precision=run["precision"], zero=3,
        checkpointing=run["checkpointing"],
    )  # fmt: skip
    time_settings = TimeSettings(dataset_tokens=1e9, inter_node_gbps=400, **time)
    return estimate_time(get_preset(run["model"]), settings, GPU, time_settings).tokens_per_s_per_gpu


if __name__ == "__main__":
    print(f"source: {SOURCE}")
    print(f"{'run':<62}{'measured':>10}{'estimate':>10}{'ratio':>7}")
    ratios = []
    for name, run, time, measured in RUNS:
        tokens = estimate(run, time)
        ratios.append(tokens / measured)
        print(f"{name:<62}{measured:>10,}{tokens:>10,.0f}{tokens / measured:>7.2f}")
    within = sum(0.8 <= ratio <= 1.2 for ratio in ratios)
    print(f"median ratio {statistics.median(ratios):.3f}, {within} of {len(ratios)} within +-20%")
