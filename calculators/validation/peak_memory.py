"""Estimate vs published peak-memory measurements.

Two files of measured rows: data/measured_peak_memory.csv (HF Trainer on a V100, torchtune on
an A100) and data/measured_peak_memory_frameworks.csv (litgpt, torchtitan, DeepSpeed with
Liger, torchtune, NeMo Automodel, an HF eager benchmark, vLLM). Every row is reproduced by
one `python -m calculators memory ...` command line (`cli_args`): the page and the CLI build
the workload from the same arguments, so they give the same number (the table that parses them
is calculators.interface.validation's). Each row is compared
like with like: NVML "used" with the full device peak, torch's peak reserved with reserved,
torch's peak allocated/active with allocated, vLLM's activation peak with the serving
activations; MiB, GiB, GB (1e9) and MB (1e6) converted to GiB. Settings a source states
loosely are written down per row as assumptions. No coefficient is tuned to these rows.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from calculators import DATA_DIR
from calculators.memory.engine import estimate_memory
from calculators.memory.serving import estimate_serving
from calculators.units import GIB
from calculators.workload.build import Workload

DATA = DATA_DIR
MEASUREMENTS_PATH = DATA / "measured_peak_memory.csv"
FRAMEWORK_MEASUREMENTS_PATH = DATA / "measured_peak_memory_frameworks.csv"
CONFIGS = DATA / "validation_configs"
MIB_PER_GIB = 1024

CompareTo = Literal["used", "reserved", "allocated", "serving-activations"]
COMPARED_WITH = {
    "used": "device peak: allocated + reserve + CUDA context (NVML used)",
    "reserved": "reserved peak (torch max_memory_reserved)",
    "allocated": "allocated peak (torch max_memory_allocated / active)",
    "serving-activations": "serving activation workspace (vLLM profile peak minus weights)",
}


class RowModel(BaseModel):
    """How the app reproduces one measured row: the CLI arguments and what to compare."""

    stack: str
    cli_args: list[str]
    compare_to: CompareTo
    assumptions: list[str]


class ValidationRow(BaseModel):
    id: str
    stack: str
    model: str
    gpu: str
    setup: str
    measured_gib: float
    unit: str
    what_was_measured: str
    estimate_gib: float
    error_fraction: float
    compared_with: str
    command: str
    assumptions: list[str]
    source: str


# --- The HF Trainer and torchtune rows (measured_peak_memory.csv) ------------------------

# HF docs (2022): transformers Trainer with torch 1.x, where zero_grad() kept gradients
# (set_to_none=False), eager attention, transformers' own per-parameter AdamW loop; the
# source measured the CUDA context alone at 1343 MiB.
_HF_CONTEXT_GIB = 1343 / MIB_PER_GIB

_HF_OPTIMIZER_NOTE = {
    "adamw": "transformers AdamW (per-parameter loop), as the 2022 Trainer used",
    "adafactor": "transformers Adafactor (factored second moment, no first moment)",
    "adamw-8bit": "bitsandbytes 8-bit Adam: 2 bytes of state per parameter, updated in place",
}


def _hf_row(row: dict) -> RowModel:
    args = [
        "--model", "bert-large-uncased", "--framework", "hf-trainer",
        "--micro-batch", row["micro_batch"], "--seq-len", row["seq_len"], "--grad-accum", row["grad_accum"],
        "--precision", row["precision"], "--optimizer", row["optimizer"], "--optimizer-impl", "for-loop",
        "--checkpointing", row["checkpointing"], "--attention", "eager", "--keep-gradients",
        "--cuda-context-gib", f"{_HF_CONTEXT_GIB:.6f}", "--cublas-workspace-gib", "0",
    ]  # fmt: skip
    return RowModel(
        stack="HF Trainer (BERT-large, V100)",
        cli_args=args,
        compare_to="used",
        assumptions=[
            "BertForSequenceClassification, 2 labels, dropout 0.1, eager attention",
            "CUDA context 1343 MiB as the source measured it (--cuda-context-gib)",
            "torch 1.x zero_grad() keeps gradients allocated (--keep-gradients)",
            _HF_OPTIMIZER_NOTE[row["optimizer"]],
        ],
    )


# The longest Alpaca sample, which sets an unpacked batch's padded length: 1304 tokens with
# the Llama-2 tokenizer (Lightning-AI/litgpt tutorials/resource-tables.md @0cc02afa); Llama
# 3's larger vocabulary gives fewer tokens, so this is an upper bound.
# A typical unpacked batch of two Alpaca samples pads to far less. The dataset holds 52,002
# rows of about 920 bytes across instruction, input, output and the templated text
# (47,764,738 bytes in the disham993/alpaca-train-validation-test-split card of tatsu-lab/
# alpaca), so a templated sample is about 460 bytes, 115 tokens at OpenAI's rule of thumb of
# 4 characters per English token. 512 tokens bounds the longer of two such samples with room.
_ALPACA_TYPICAL_BATCH_TOKENS = 512


def _torchtune_row(row: dict) -> RowModel:
    """torchtune's Llama 3.2 3B single-device recipes on an A100: pure bf16, fused AdamW, SDPA."""
    extras = row["extras"].lower()
    method = row["optimizer"] if row["optimizer"] in ("lora", "qlora") else "full"
    notes = ["torchtune single-device recipe: pure bf16, fused AdamW, SDPA attention, peak active = allocated"]
    seq_len = row["seq_len"]
    if "unpacked" in extras:
        # torchtune logs the peak of each step and resets it (recipes/full_finetune_single_device.py
        # @1814feb1: training.get_memory_stats(reset_stats=True) every log_every_n_steps=1), so the
        # README's figure is one step's peak, set by a typical batch, not the longest sample.
        seq_len = str(_ALPACA_TYPICAL_BATCH_TOKENS)
        notes.append(
            "unpacked Alpaca: torchtune resets the peak counters every step, so the logged peak is a typical "
            f"batch's, padded to its longer sample: at most {_ALPACA_TYPICAL_BATCH_TOKENS} tokens (the mean "
            "templated sample is about 115); the estimate is the same for any padded length up to about 600, "
            "where the embedding gradient during backward, not the activations, sets the peak"
        )
    else:
        notes.append(f"packed: every sample is {seq_len} tokens")
    args = [
        "--model", "llama-3.2-3b", "--framework", "torchtune", "--precision", "bf16",
        "--micro-batch", row["micro_batch"], "--seq-len", seq_len, "--grad-accum", row["grad_accum"],
        "--checkpointing", row["checkpointing"], "--attention", "fused",
    ]  # fmt: skip
    if method == "full" and "chunked" not in extras:
        args += ["--loss", "full"]
        notes.append("plain cross-entropy: this row comes before the table's '+ chunked cross-entropy' row")
    else:
        notes.append("CEWithChunkedOutputLoss, 8 chunks (torchtune's default)")
    if method != "full":
        mode = "finetune-lora" if method == "lora" else "finetune-qlora"
        args += ["--mode", mode, "--lora-rank", "64", "--lora-targets", "qvo-mlp", "--activation-offload"]
        notes.append("LoRA rank 64 on q, v, output and the MLP (torchtune llama3_2 3B LoRA configs)")
        notes.append("activation offloading on, as the README's command for this row")
    if "compile" in extras or method != "full":
        args.append("--compile")
        notes.append("torch.compile on the layers and the chunked loss (torchtune compile: True)")
    stack = "torchtune (Llama 3.2 3B, A100)"
    return RowModel(stack=stack, cli_args=args, compare_to="allocated", assumptions=notes)


# --- The framework rows (measured_peak_memory_frameworks.csv) ----------------------------


def _config(name: str) -> list[str]:
    return ["--config-json", str(CONFIGS / name)]


def litgpt_lora_args(model_args: list[str], micro_batch: int, seq_len: int, quantize: str) -> list[str]:
    """The `memory` flags of one lit-gpt finetune/lora.py @8641822 run: bf16-true, LoRA r=8 on q and
    v, SDPA, chunked CE per 128 tokens (lm_head_chunk_size=128), AdamW (torch default: foreach);
    `quantize` is litgpt's --quantize ("none", "bnb.nf4" or "bnb.nf4-dq"), whose runs use
    bitsandbytes' PagedAdamW."""
    args = model_args + [
        "--mode", "finetune-lora" if quantize == "none" else "finetune-qlora", "--framework", "litgpt",
        "--precision", "bf16", "--micro-batch", str(micro_batch), "--seq-len", str(seq_len), "--lora-rank", "8",
        "--lora-targets", "qv", "--attention", "fused", "--loss", "chunked", "--loss-chunks", str(-(-seq_len // 128)),
    ]  # fmt: skip
    if quantize == "none":
        return args
    scales = "double-quant" if quantize.endswith("-dq") else "fp32"
    return args + ["--optimizer", "paged-adamw", "--nf4-scales", scales]


def _litgpt_row(row: dict) -> RowModel:
    model = {
        "microsoft/phi-1_5 (1.3B)": _config("phi-1_5.json"),
        "stabilityai/stablelm-base-alpha-3b": _config("stablelm-base-alpha-3b.json"),
        "Llama-2-7b": ["--model", "llama-2-7b"],
    }[row["model"]]
    seq_len = int(row["seq_len"].split()[0])
    chunks = -(-seq_len // 128)
    qlora = row["quant"].startswith("bnb.nf4") or "nf4" in row["framework"]
    args = litgpt_lora_args(model, int(row["micro_batch"]), seq_len, "bnb.nf4" if qlora else "none")
    notes = [
        f"the first batch holds the longest Alpaca sample: {seq_len} tokens, the run's peak",
        f"chunked cross-entropy in chunks of 128 tokens: {chunks} chunks",
        "LoRA r=8 on q and v (fused qkv in lit-gpt), bf16-true: weights, adapters and AdamW states in bf16",
        "--framework litgpt: one q/k/v linear, LoRA dropout 0.05 (mask and output saved), zero_pad's index_copy "
        "saving the q/v adapters' output; NF4 on every nn.Linear, lm_head included (litgpt's defaults table)",
        "RMSNorm as litgpt has it since PR #606 (2023-10-24): fp32 upcast, 4 bytes per element saved. The table "
        "names 8641822, four days older, whose RMSNorm saved its bf16 input: counted that way the Llama-2 rows "
        "would read 0.68 GB lower (LoRA -3.8%, QLoRA -8.3%)",
    ]
    if qlora:
        notes.append("bitsandbytes PagedAdamW (32-bit): states in unified memory, not in max_memory_allocated")
        notes.append("bnb.nf4 without double quantisation: one fp32 absmax per 64 weights (--nf4-scales fp32)")
    return RowModel(stack="litgpt (A100 40GB)", cli_args=args, compare_to="allocated", assumptions=notes)


def _torchtitan_row(row: dict) -> RowModel:
    args = [
        "--model", "llama-3.1-8b", "--framework", "torchtitan", "--precision", "bf16-mixed", "--zero", "3",
        "--gpus", row["gpus"], "--micro-batch", row["micro_batch"], "--seq-len", row["seq_len"].split()[0],
        "--checkpointing", "op-selective", "--attention", "fused",
    ]  # fmt: skip
    return RowModel(
        stack="torchtitan (Llama 3.1 8B, FSDP2, H100 96GB)",
        cli_args=args,
        compare_to="reserved",
        assumptions=[
            "FSDP2 full shard over 8 GPUs (ZeRO-3): fp32 sharded parameters, bf16 compute copies",
            "per-op selective activation checkpointing ('op'), SDPA",
            "sequence 8192 as the source's llama3_8b.toml default (the table does not restate it)",
        ],
    )


def _deepspeed_liger_row(row: dict) -> RowModel:
    args = [
        "--model", "llama-3.1-8b", "--framework", "deepspeed", "--precision", "bf16-mixed", "--zero", "3",
        "--gpus", row["gpus"], "--offload-optimizer", "--liger", "--checkpointing", "full", "--load-whole-model",
        "--micro-batch", row["micro_batch"], "--seq-len", row["seq_len"], "--attention", "fused",
    ]  # fmt: skip
    return RowModel(
        stack="DeepSpeed ZeRO-3 + Liger (Llama 3.1 8B, H200)",
        cli_args=args,
        compare_to="reserved",
        assumptions=[
            "ZeRO-3 over 8 GPUs with the fp32 master and AdamW states on the CPU (ZeRO-Offload)",
            "Liger fused RMSNorm, RoPE, SwiGLU and fused linear cross-entropy; flash attention",
            "HF gradient checkpointing on every decoder layer",
            "the model comes from from_pretrained without zero.Init, so deepspeed.initialize moves it whole to "
            "each GPU in bf16 before partitioning (--load-whole-model); the source's reserved peak is cumulative "
            "since start",
        ],
    )


def _automodel_row(row: dict) -> RowModel:
    fused = "FusedLinearCrossEntropy" in row["other_settings"]
    args = [
        "--model", "llama-3.2-1b", "--framework", "automodel", "--precision", "bf16", "--zero", "3",
        "--gpus", row["gpus"], "--checkpointing", "full", "--micro-batch", row["micro_batch"],
        "--seq-len", row["seq_len"],
        "--attention", "fused", "--loss", "fused-linear" if fused else "full",
    ]  # fmt: skip
    return RowModel(
        stack="NeMo Automodel (Llama 3.2 1B, FSDP2, H100)",
        cli_args=args,
        compare_to="allocated",
        assumptions=[
            "bf16 parameters as the checkpoint stores them (the source does not state the precision); "
            "torch AdamW, states in the parameters' dtype",
            "FSDP2 over 8 GPUs (ZeRO-3), full activation checkpointing, SDPA",
            "--framework automodel (Automodel @a6f64cb2): checkpoint_wrapper on each layer's norms, attention and "
            "MLP separately (4 inputs kept per layer); FSDP2 root (tied embedding/head, final norm) gathered from "
            "forward to the end of backward, reduce in bf16; the recipe's `out` keeps the logits during backward",
            "the doc's figures are GiB (its log line reads 'mem ... GiB')",
            "Linear-Cut cross-entropy: no logits materialised" if fused else "plain cross-entropy on fp32 logits",
        ],
    )


def _hf_eager_row(row: dict) -> RowModel:
    args = _config("pythia-410m-deduped.json") + [
        "--precision", "bf16", "--optimizer", "none", "--attention", "eager",
        "--micro-batch", row["micro_batch"], "--seq-len", row["seq_len"], "--framework", "hf-trainer",
    ]  # fmt: skip
    return RowModel(
        stack="HF eager attention benchmark (Pythia-410M, RTX 3080 Ti)",
        cli_args=args,
        compare_to="allocated",
        assumptions=[
            "pure fp16 weights: bytes as pure bf16",
            "forward and backward only, no optimizer (--optimizer none)",
            "eager attention: fp32 softmax and the score-sized tensors saved per layer",
        ],
    )


def _vllm_row(row: dict) -> RowModel:
    args = [
        "--model", "llama-3.1-8b", "--mode", "inference", "--context-len", "8192",
        "--concurrency", "256", "--max-batched-tokens", "8192",
    ]  # fmt: skip
    return RowModel(
        stack="vLLM serving (Llama 3 8B)",
        cli_args=args,
        compare_to="serving-activations",
        assumptions=[
            "Meta-Llama-3-8B has the same shapes as the llama-3.1-8b preset",
            "profile run: max_num_batched_tokens = max_model_len = 8192 tokens and max_num_seqs 256 "
            "(vLLM V0 defaults without chunked prefill)",
            "the peak is the sampler's top-k/top-p sort of 256 rows of logits (the profile run sets top_k and "
            "top_p), as the TP=2 run of the same comment measuring the same 1.26 GiB suggests",
        ],
    )


def row_model(row: dict) -> RowModel:
    """The command line that reproduces one measured row."""
    row_id = row["id"]
    if row_id.startswith("hf-") and "sdpa" not in row_id:
        return _hf_row(row)
    if row_id.startswith("tt-"):
        return _torchtune_row(row)
    if row_id.startswith("litgpt-"):
        return _litgpt_row(row)
    if row_id.startswith("torchtitan-"):
        return _torchtitan_row(row)
    if row_id.startswith("mleng-"):
        return _deepspeed_liger_row(row)
    if row_id.startswith("torchtune-readme-"):
        return _torchtune_qlora_4090_row(row)
    if row_id.startswith("automodel-"):
        return _automodel_row(row)
    if row_id.startswith("hf-sdpa-"):
        return _hf_eager_row(row)
    if row_id.startswith("vllm-"):
        return _vllm_row(row)
    raise ValueError(f"no model of measured row {row_id!r}")


def _torchtune_qlora_4090_row(row: dict) -> RowModel:
    args = [
        "--model", "llama-3.1-8b", "--mode", "finetune-qlora", "--framework", "torchtune", "--precision", "bf16",
        "--lora-rank", "8", "--lora-targets", "all-linear", "--checkpointing", "full", "--attention", "fused",
        "--micro-batch", row["micro_batch"], "--seq-len", row["seq_len"].split()[0], "--compile",
    ]  # fmt: skip
    return RowModel(
        stack="torchtune QLoRA (Llama 3.1 8B, RTX 4090)",
        cli_args=args,
        compare_to="allocated",
        assumptions=[
            "llama3_1/8B_qlora_single_device.yaml: rank 8 on q, k, v, output and the MLP; NF4 base; fused AdamW",
            "chunked cross-entropy (8 chunks), full activation checkpointing, packed 2048-token samples",
            "the README's metric is not stated: compared with the allocated peak (torchtune logs peak active)",
            "torch.compile on the layers and the chunked loss (compile: True in the README's runs)",
        ],
    )


# --- Loading, converting and estimating --------------------------------------------------


def measured_gib(row: dict) -> float:
    """The measurement in GiB: MiB / 1024, GB x 1e9 / 2^30, MB x 1e6 / 2^30; a unit labelled GB
    whose log line prints GiB is taken as GiB."""
    value, unit = float(row["measured"]), row["unit"]
    if unit.startswith("MiB"):
        return value / MIB_PER_GIB
    if unit.startswith("GiB") or "GiB" in unit:
        return value
    if unit.startswith("GB"):
        return value * 1e9 / GIB
    if unit.startswith("MB"):
        return value * 1e6 / GIB
    raise ValueError(f"unknown unit {unit!r}")


def load_measurements(path: Path = MEASUREMENTS_PATH) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def all_measurements() -> list[dict]:
    return load_measurements(MEASUREMENTS_PATH) + load_measurements(FRAMEWORK_MEASUREMENTS_PATH)


def estimated_gib(workload: Workload, compare_to: CompareTo) -> float:
    """What `python -m calculators memory ARGS --json` reports for the compared quantity, given the
    workload ARGS make."""
    if compare_to == "serving-activations":
        return estimate_serving(workload.model, workload.serving).activations_gib
    estimate = estimate_memory(workload.model, workload.training)
    return {"used": estimate.peak_gib, "reserved": estimate.reserved_gib, "allocated": estimate.allocated_gib}[
        compare_to
    ]


JSON_FIELD = {
    "used": "peak_gib",
    "reserved": "reserved_gib",
    "allocated": "allocated_gib",
    "serving-activations": "activations_gib",
}


def _setup(row: dict) -> str:
    if "extras" in row:
        return (
            f"{row['precision']}, {row['optimizer']}, batch {row['micro_batch']}x{row['seq_len']}, "
            f"accum {row['grad_accum']}, checkpointing {row['checkpointing']}; {row['extras']}"
        )
    return (
        f"{row['gpus']} GPU(s), {row['precision']}; optimizer {row['optimizer_impl']}; sharding "
        f"{row['zero_or_fsdp']}; checkpointing {row['checkpointing']}; LoRA {row['lora']}; quant {row['quant']}; "
        f"batch {row['micro_batch']} x {row['seq_len']}"
    )


def validation_row(row: dict, model: RowModel, estimate_gib: float) -> ValidationRow:
    """One measured row next to the estimate of its command line (`model.cli_args`) and the
    relative error. The table of every row is calculators.interface.validation's, which parses
    each command line as the CLI does."""
    measured = measured_gib(row)
    return ValidationRow(
        id=row["id"],
        stack=model.stack,
        model=row["model"],
        gpu=row["gpu"],
        setup=_setup(row),
        measured_gib=measured,
        unit=row["unit"],
        what_was_measured=row.get("what_was_measured") or row.get("what_measured", ""),
        estimate_gib=estimate_gib,
        error_fraction=(estimate_gib - measured) / measured,
        compared_with=COMPARED_WITH[model.compare_to],
        command=f"python -m calculators memory {' '.join(model.cli_args)} --json  # {JSON_FIELD[model.compare_to]}",
        assumptions=model.assumptions,
        source=row["source"] + (f" ({row['source_detail']})" if row.get("source_detail") else ""),
    )


def error_summary(table: list[ValidationRow]) -> tuple[float, float]:
    """(median, largest) absolute relative error over the rows."""
    errors = [abs(row.error_fraction) for row in table]
    return statistics.median(errors), max(errors)
