"""The memory engine against litgpt's published single-GPU LoRA/QLoRA table.

litgpt's resource table (data/litgpt_lora_resource_table.csv: 17 runs of finetune/lora.py at
lit-gpt 8641822, PyTorch 2.1.0, bitsandbytes 0.41.1, on an A100-SXM4-40GB, LoRA r=8 on q and v,
bf16-true, the longest Alpaca sample in the first batch) prints torch.cuda.max_memory_allocated()
/ 1e9. Each row runs with the flags the Validation page's litgpt rows use
(calculators.validation.peak_memory.litgpt_lora_args):

    python -m calculators memory --framework litgpt --precision bf16 --lora-rank 8 --lora-targets qv
        --micro-batch MB --seq-len LONGEST --loss chunked --loss-chunks ceil(LONGEST / 128)
        [--mode finetune-qlora --optimizer paged-adamw --nf4-scales fp32|double-quant] --json

Four of the rows are on the Validation page; the other thirteen are a check on rows the engine
was not developed against.

    python bench/litgpt_table.py
"""

from __future__ import annotations

import csv
import statistics
import sys
from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calculators.hardware.csv_rows import check_public_source  # noqa: E402
from calculators.interface.cli import build_parser, workload_from_args  # noqa: E402
from calculators.memory.engine import estimate_memory  # noqa: E402
from calculators.units import GIB  # noqa: E402
from calculators.validation.peak_memory import litgpt_lora_args  # noqa: E402

TABLE = ROOT / "data" / "litgpt_lora_resource_table.csv"
CONFIGS = ROOT / "data" / "validation_configs"
MODEL_ARGS = {
    "phi-1.5": ["--config-json", str(CONFIGS / "phi-1_5.json")],
    "stablelm-base-alpha-3b": ["--config-json", str(CONFIGS / "stablelm-base-alpha-3b.json")],
    "llama-2-7b": ["--model", "llama-2-7b"],
    "llama-2-13b": ["--model", "llama-2-13b"],
}


class PublishedRun(BaseModel):
    """One row of the table, checked at load."""

    model: Literal["phi-1.5", "stablelm-base-alpha-3b", "llama-2-7b", "llama-2-13b"]
    quantize: Literal["none", "bnb.nf4", "bnb.nf4-dq"]
    micro_batch: int = Field(gt=0)
    longest_sample_tokens: int = Field(gt=0)
    max_memory_allocated_gb: float = Field(gt=0)
    source: str
    as_of: date

    @field_validator("source")
    @classmethod
    def _public(cls, source: str) -> str:
        return check_public_source(source)


def main() -> None:
    with TABLE.open(newline="", encoding="utf-8") as handle:
        rows = [PublishedRun(**row) for row in csv.DictReader(handle)]
    errors = []
    print("| model | quantize | micro-batch | published GB | estimate GB | error |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        args = litgpt_lora_args(MODEL_ARGS[row.model], row.micro_batch, row.longest_sample_tokens, row.quantize)
        workload = workload_from_args(build_parser().parse_args(["memory", *args]))
        estimate_gb = estimate_memory(workload.model, workload.training).allocated_gib * GIB / 1e9
        published_gb = row.max_memory_allocated_gb
        errors.append(estimate_gb / published_gb - 1)
        print(f"| {row.model} | {row.quantize} | {row.micro_batch} | {published_gb:.2f} | "
              f"{estimate_gb:.2f} | {100 * errors[-1]:+.1f}% |")  # fmt: skip
    print(f"\n{len(rows)} runs: median |error| {100 * statistics.median(abs(e) for e in errors):.1f}%, "
          f"max |error| {100 * max(abs(e) for e in errors):.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
