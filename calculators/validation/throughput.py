"""Training throughput: the time model against published tokens per second per GPU.

The rows (data/measured_throughput.csv, copied from shared/validation with each row's source,
quote and how the figure was obtained) are runs of llm-foundry, llm.c, torchtitan, Megatron-Core
and Megatron-Bridge. Each row's stack settings are mapped to this app's settings here, and
every assumption is listed with the row.
"""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

from pydantic import BaseModel

from calculators import DATA_DIR
from calculators.hardware.catalogue import GpuSpec, find_gpu
from calculators.models.hf_config import spec_from_hf_config
from calculators.models.presets import get_preset
from calculators.models.spec import ModelSpec
from calculators.timing.estimate import estimate_time
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

DATA = DATA_DIR
THROUGHPUT_PATH = DATA / "measured_throughput.csv"
CONFIGS = DATA / "throughput_configs"
# Stated network per GPU where the source gives one: llm-foundry's A100 tables say 1600 Gb/s
# per 8-GPU node; torchtitan's hosts have 400 Gb/s per GPU; others: the default (400 Gb/s).
FOUNDRY_A100_GBPS = 200.0


class ThroughputRow(BaseModel):
    id: str
    model: str
    gpu: str
    setup: str
    measured_tokens_s_gpu: float
    estimate_tokens_s_gpu: float
    ratio: float
    estimate_mfu: float
    step_s: float
    assumptions: list[str]
    source: str
    command: str = ""


# torchtitan's Grand Teton H100s: 96 GB HBM2e at 2.4 TB/s under a 500 W limit, a variant of
# data/gpu_variants.csv (the midpoint of the SXM and NVL rates, torchtitan benchmarks/
# llama3_h100_202412_torchtitan.md, Hardware and footnote 2).
GRAND_TETON_H100 = "H100-96GB-HBM2e-500W"


def row_gpu_name(row: dict) -> str:
    """The GPU (or variant) a row ran on: the catalogue's, except torchtitan's 96 GB H100s."""
    return GRAND_TETON_H100 if "96GB HBM2e" in row["notes"] else row["gpu"]


def row_gpu(row: dict) -> tuple[GpuSpec, list[str]]:
    """The catalogue GPU or variant of a row, and what it assumes."""
    gpu = find_gpu(row_gpu_name(row))
    if gpu.name != GRAND_TETON_H100:
        return gpu, []
    return gpu, [f"{gpu.name}: {gpu.bf16_tflops:g} TFLOPS bf16 (SXM/NVL midpoint), {gpu.memory_bandwidth_tbps:g} TB/s"]


def config_path(architecture: str, seq_len: int) -> Path:
    """The config.json of a row's architecture: an MPT as llm-foundry builds it for the run's
    max_seq_len (`<name>-seq<seq_len>.json`: learned positions of that length, bias-free
    LayerNorm, no biases; its pretrain yamls set no alibi, so llmfoundry/models/mpt/
    configuration_mpt.py's defaults hold, and the benchmark table's NumParams grows with SeqLen
    by exactly d_model per position) where that file exists, else the shared config."""
    path = CONFIGS / Path(architecture).name
    as_built = path.with_name(f"{path.stem}-seq{seq_len}.json")
    return as_built if as_built.exists() else path


def _spec(architecture: str, seq_len: int) -> ModelSpec:
    if architecture.startswith("preset "):
        return get_preset(architecture.removeprefix("preset "))
    path = config_path(architecture, seq_len)
    config = json.loads(path.read_bytes())
    if config.get("model_type") == "mpt" and "max_seq_len" not in config:
        # a run of bench/llm_foundry_table.py with no as-built file: the same reading in memory
        config |= {"max_seq_len": seq_len, "max_position_embeddings": seq_len}
    return spec_from_hf_config(json.dumps(config).encode(), path.name)


def _precision(text: str) -> str:
    """The row's precision in this app's terms: fp8 runs as fp8; llm-foundry's amp_bf16 as
    autocast over fp32 weights; FSDP PURE as pure bf16; the rest as bf16 weights + fp32 master."""
    lowered = text.lower()
    if "fp8" in lowered:
        return "fp8"
    if "amp_bf16" in lowered:
        return "amp-bf16"
    if "pure" in lowered or lowered.startswith("bf16 (llm.c") or lowered == "bf16":
        return "bf16"
    return "bf16-mixed"


def _checkpointing(text: str) -> str:
    lowered = text.lower()
    if "per-op" in lowered:
        return "op-selective"
    if lowered.startswith("selective"):
        return "selective"
    if lowered.startswith("full"):
        return "full"
    return "none"


def _kernels(source: str) -> str:
    """Stacks whose norms, activations and loss are fused kernels whatever the settings: llm.c
    writes each as one CUDA kernel (karpathy/llm.c train_gpt2.cu: layernorm_forward,
    gelu_forward, fused_classifier); Megatron-Core and Megatron-Bridge run Transformer Engine's
    fused norms and Megatron's fused RoPE and bias-activation (NVIDIA/Megatron-LM
    megatron/core/fusions/), their loss as _loss_kernel says. The others: as their settings say."""
    if "karpathy/llm.c" in source or "Megatron" in source:
        return "fused"
    return "auto"


def _loss_kernel(source: str) -> str:
    """Megatron-LM's own scripts run its unfused vocab-parallel cross-entropy unless
    --cross-entropy-loss-fusion is passed (a store_true flag: NVIDIA/Megatron-LM
    megatron/training/arguments.py @core_v0.8.0, the release of the weak-scaling table, whose
    runs state no such flag). Megatron-Bridge's model providers fuse it
    (cross_entropy_loss_fusion = True); the others follow their kernels."""
    return "vocab-parallel" if "NVIDIA/Megatron-LM" in source else "auto"


def _attention_kernel(source: str) -> str:
    """llm-foundry's benchmark tables ran MPT with its Triton FlashAttention: sweep.sh passes no
    --attn_impl and submit_benchmarks.py defaults to 'triton' (mosaicml/llm-foundry
    scripts/train/benchmarking/ @b2a43a147, the commit that added the H100 tables). The others
    run FlashAttention-2 or newer (PyTorch SDPA, cuDNN, Transformer Engine)."""
    return "flash1" if "llm-foundry" in source else "flash2"


def _zero(parallelism: str) -> int:
    """FSDP / FULL_SHARD = ZeRO-3; llm.c -z 1 and Megatron's distributed optimizer = ZeRO-1."""
    if "FSDP" in parallelism or "FULL_SHARD" in parallelism:
        return 3
    return 1


def row_inputs(row: dict) -> tuple[ModelSpec, TrainingSettings, TimeSettings, list[str]]:
    """The app's inputs for one published run, and the assumptions made."""
    spec = _spec(row["architecture"], int(row["seq_len"]))
    precision = _precision(row["precision"])
    settings = TrainingSettings(
        micro_batch=int(row["micro_batch"]),
        seq_len=int(row["seq_len"]),
        grad_accum=int(row["grad_accum"]),
        gpus=int(row["dp"]),
        tensor_parallel=int(row["tp"]),
        pipeline_parallel=int(row["pp"]),
        precision=precision,
        zero=_zero(row["parallelism"]),
        checkpointing=_checkpointing(row["checkpointing"]),
    )
    gbps = FOUNDRY_A100_GBPS if "1600 Gbps" in row["source_note"] else 400.0
    compiled = "compile" in row["precision"]
    kernels = _kernels(row["source"])
    attention_kernel = _attention_kernel(row["source"])
    loss_kernel = _loss_kernel(row["source"])
    time_settings = TimeSettings(
        dataset_tokens=1e9,
        inter_node_gbps=gbps,
        compile=compiled,
        kernels=kernels,
        attention_kernel=attention_kernel,
        loss_kernel=loss_kernel,
    )
    assumptions = [
        f"precision {precision}, ZeRO-{settings.zero}, checkpointing {settings.checkpointing}, network {gbps:g} Gb/s"
        + (", torch.compile" if compiled else "")
        + (f", {kernels} kernels" if kernels != "auto" else "")
        + (", Triton FlashAttention (attn_impl: triton)" if attention_kernel == "flash1" else "")
        + (", Megatron-LM's unfused vocab-parallel cross-entropy" if loss_kernel == "vocab-parallel" else "")
    ]
    if row["notes"]:
        assumptions.append(row["notes"])
    return spec, settings, time_settings, assumptions


def row_cli_args(row: dict) -> list[str]:
    """The `python -m calculators time` arguments that build row_inputs' settings through the public
    flags (the estimate of `time ... --json` is the row's)."""
    spec_args = (
        ["--model", row["architecture"].removeprefix("preset ")]
        if row["architecture"].startswith("preset ")
        else ["--config-json", str(config_path(row["architecture"], int(row["seq_len"])).relative_to(DATA.parent))]
    )
    _, settings, time_settings, _ = row_inputs(row)
    args = [
        *spec_args,
        *("--micro-batch", str(settings.micro_batch), "--seq-len", str(settings.seq_len)),
        *("--grad-accum", str(settings.grad_accum), "--gpus", str(settings.gpus)),
        *("--tensor-parallel", str(settings.tensor_parallel), "--pipeline-parallel", str(settings.pipeline_parallel)),
        *("--precision", settings.precision, "--zero", str(settings.zero), "--checkpointing", settings.checkpointing),
        *("--gpu", row_gpu_name(row), "--inter-node-gbps", f"{time_settings.inter_node_gbps:g}"),
        *("--kernels", time_settings.kernels, "--attention-kernel", time_settings.attention_kernel),
        *("--loss-kernel", time_settings.loss_kernel, "--dataset-tokens", f"{time_settings.dataset_tokens:.0f}"),
    ]
    return args + (["--compile"] if time_settings.compile else [])


def row_command(row: dict) -> str:
    """The command line that prints the row's estimate (tokens_per_s_per_gpu in its JSON)."""
    return f"python -m calculators time {' '.join(row_cli_args(row))} --json  # tokens_per_s_per_gpu"


def load_rows(path: Path = THROUGHPUT_PATH) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def throughput_table(path: Path = THROUGHPUT_PATH) -> list[ThroughputRow]:
    """Every published run with the estimate and estimate / measured."""
    table = []
    for row in load_rows(path):
        spec, settings, time_settings, assumptions = row_inputs(row)
        gpu, gpu_assumptions = row_gpu(row)
        assumptions += gpu_assumptions
        estimate = estimate_time(spec, settings, gpu, time_settings)
        measured = float(row["measured_tokens_s_gpu"])
        table.append(
            ThroughputRow(
                id=row["id"],
                model=row["model"],
                gpu=row["gpu"],
                setup=row["parallelism"],
                measured_tokens_s_gpu=measured,
                estimate_tokens_s_gpu=estimate.tokens_per_s_per_gpu,
                ratio=estimate.tokens_per_s_per_gpu / measured,
                estimate_mfu=estimate.mfu,
                step_s=estimate.step_s,
                assumptions=assumptions,
                source=row["source"],
                command=row_command(row) if path == THROUGHPUT_PATH else "",
            )
        )
    return table


def summary(table: list[ThroughputRow]) -> dict[str, float]:
    """Median ratio, the worst row's ratio (farthest from 1) and the share within +-20%."""
    ratios = [row.ratio for row in table]
    worst = max(ratios, key=lambda ratio: abs(ratio - 1))
    within = sum(1 for ratio in ratios if 0.8 <= ratio <= 1.2) / len(ratios)
    return {"median_ratio": statistics.median(ratios), "worst_ratio": worst, "share_within_20pct": within}
