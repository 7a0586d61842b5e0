"""MLPerf Training time-to-train: every published result, and this app's prediction beside it.

The results (data/mlperf_training.csv) are MLCommons Training rounds v3.1-v5.1, each scored from
its run logs with MLCommons' own method (copied from shared/validation, whose README says how);
the benchmark definitions (data/mlperf_benchmark_definitions.csv) give each benchmark's model,
sequence, evaluation schedule and reference convergence points (RCPs). A prediction is

    minutes = samples to converge at the submission's global batch / global batch x step time
              + evaluations x evaluation samples x forward time per sample

with the step time from calculators.timing.estimate.estimate_time on the submitted GPUs in the
layout the submission's own NeMo config sets where data/mlperf_layouts.csv has it (TP, PP, context
parallel, virtual stages, micro-batch; context parallel as the time model's ring), else the layout
NVIDIA's NeMo/Megatron submissions use (`layout_for`; the 8-GPU B200 Llama 2 70B LoRA runs in
their own published configs, `NEMO_LORA_B200_CONFIGS`), or, for the submissions built on the
reference's HF Trainer + DeepSpeed code, the layout their own published config sets
(`HF_DEEPSPEED_RECIPES`), every assumption listed per row. A CPU-only system (Intel's Xeon
ResNet-50) trains on its sockets as data/cpus.csv devices, DDP over the nodes' network
(`CPU_SYSTEM_SOCKETS_PER_NODE`, from the systems' published descriptions).
No coefficient here is fitted to a result: each comes from the benchmark's rules, a submission's
published config or the time model's own sources.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import statistics
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from calculators import DATA_DIR
from calculators.cost.prices import load_prices
from calculators.cost.pricing import instances_needed, run_cost_usd
from calculators.hardware.catalogue import GpuSpec, find_gpu
from calculators.hardware.cpus import find_cpu, is_cpu
from calculators.hardware.csv_rows import check_public_source
from calculators.models.presets import get_preset
from calculators.models.spec import ModelSpec
from calculators.models.vision_library import vision_model
from calculators.timing.data_loading import input_ceiling
from calculators.timing.estimate import estimate_time
from calculators.timing.flops import matmul_flops_factor
from calculators.timing.settings import (
    DEFAULT_HOST_CORES_PER_GPU,
    NCCL_SM_SHARE,
    AttentionKernel,
    Launch,
    TimeSettings,
)
from calculators.timing.vision_step import VisionStepInput, estimate_vision_step
from calculators.workload.training import TrainingSettings

RESULTS_PATH = DATA_DIR / "mlperf_training.csv"
DEFINITIONS_PATH = DATA_DIR / "mlperf_benchmark_definitions.csv"
LAYOUTS_PATH = DATA_DIR / "mlperf_layouts.csv"
RESULTS_SITE = "https://mlcommons.org/benchmarks/training/"

# Benchmarks whose model is a language model this app's time model covers.
LANGUAGE_BENCHMARKS = ("llama2_70b_lora", "llama31_8b", "llama31_405b", "gpt3")
BENCHMARK_LABEL = {
    "llama2_70b_lora": "Llama 2 70B LoRA",
    "llama31_8b": "Llama 3.1 8B",
    "llama31_405b": "Llama 3.1 405B",
    "gpt3": "GPT-3 175B",
    "bert": "BERT-large",
    "resnet": "ResNet-50",
}

# --- the data --------------------------------------------------------------------------------


class MlperfResult(BaseModel):
    """One published MLPerf Training result (a row of data/mlperf_training.csv)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    round: str
    benchmark: str
    division: str
    submitter: str
    system_name: str
    accelerator: str
    accelerators_total: int = Field(ge=0, description="0 for a CPU-only system")
    nodes: int = Field(ge=1)
    accelerators_per_node: int = Field(ge=0)
    host_cpu: str = ""
    framework: str
    global_batch_size: int | None = Field(default=None, ge=1)
    time_to_train_min: float | None = Field(
        default=None, gt=0, description="None: no score (the run logs were not in the snapshot read; see notes)"
    )
    source: str = Field(min_length=1)
    confidence: str
    notes: str
    as_of: dt.date


class ConvergencePoint(BaseModel):
    """One reference convergence point: samples to converge at one global batch size."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    benchmark: str
    seq_len_or_image: str
    eval_frequency: str
    rcp_global_batch_size: int = Field(ge=1)
    mean_to_converge: float = Field(gt=0)
    unit: str
    quote: str = Field(description="the reference runs' convergence points, as the RCP file lists them")
    source: str = Field(min_length=1)
    as_of: dt.date

    @property
    def runs(self) -> list[float]:
        """Each reference run's samples (or tokens) to converge, from the quoted RCP list."""
        return [float(value) for value in self.quote.split("[", 1)[1].split("]", 1)[0].split(",")]

    @property
    def olympic_mean(self) -> float:
        """The RCP mean as MLCommons' checker computes it: the mean of the runs without the fastest
        and the slowest (mlcommons/logging mlperf_logging/rcp_checker/rcp_checker.py,
        compute_rcp_stats: "Use olympic mean"). The file's mean_to_converge keeps them: GPT-3's
        batch-3072 point has one run of 13.8B tokens among six of 1.2B."""
        runs = sorted(self.runs)
        return statistics.mean(runs[1:-1])


def _number(text: str) -> float | None:
    """A CSV cell as a number; None for an empty cell."""
    return float(text) if text.strip() else None


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@lru_cache(maxsize=1)
def load_results() -> tuple[MlperfResult, ...]:
    """Every result of data/mlperf_training.csv, validated, read once per process."""
    results = []
    for row in _read(RESULTS_PATH):
        nodes = _number(row["nodes"])
        batch = _number(row["global_batch_size"])
        results.append(
            MlperfResult.model_validate(
                row
                | {
                    "accelerators_total": int(float(row["accelerators_total"])),
                    "nodes": 1 if nodes is None else int(nodes),
                    "accelerators_per_node": int(float(row["accelerators_per_node"] or row["accelerators_total"])),
                    "global_batch_size": None if batch is None else int(batch),
                    "time_to_train_min": _number(row["time_to_train_min"]),
                }
            )
        )
    return tuple(results)


@lru_cache(maxsize=1)
def load_convergence_points() -> tuple[ConvergencePoint, ...]:
    """Every reference convergence point of data/mlperf_benchmark_definitions.csv."""
    return tuple(ConvergencePoint.model_validate(row) for row in _read(DEFINITIONS_PATH))


class PublishedLayout(BaseModel):
    """The parallel layout one NeMo/Megatron submission's own launch config sets (a row of
    data/mlperf_layouts.csv): TENSOR_MODEL_PARALLEL (TP), PIPELINE_MODEL_PARALLEL (PP),
    CONTEXT_PARALLEL (CP), INTERLEAVED_PIPELINE (virtual stages, with PP > 1) and MICRO_BATCH_SIZE of
    the config_*.sh whose node count, GPUs per node and MINIBS x data-parallel replicas are the
    result's (the configs' MINIBS is the sequences per replica a step, global batch / (GPUs / (TP x
    PP x CP)))."""

    model_config = ConfigDict(frozen=True)

    result_id: str
    tensor_parallel: int = Field(ge=1, le=64)
    pipeline_parallel: int = Field(ge=1, le=128)
    context_parallel: int = Field(ge=1, le=64)
    virtual_stages: int = Field(ge=1, le=128)
    micro_batch: int = Field(ge=1, le=64)
    source: str
    as_of: dt.date

    @field_validator("source")
    @classmethod
    def _public(cls, source: str) -> str:
        return check_public_source(source)

    @property
    def config_name(self) -> str:
        """The config file's name, for the assumption lines."""
        return self.source.rsplit("/", 1)[-1]


@lru_cache(maxsize=1)
def load_published_layouts() -> dict[str, PublishedLayout]:
    """Every published layout of data/mlperf_layouts.csv by result id, read once per process."""
    return {row["result_id"]: PublishedLayout.model_validate(row) for row in _read(LAYOUTS_PATH)}


# --- which catalogue GPU a result ran on ------------------------------------------------------

# The accelerator names of the results that are a catalogue GPU. GB200 and B300 are the same
# dies as the catalogue rows (NVIDIA's Blackwell and Blackwell Ultra datasheets); Trillium is
# TPU v6e (https://cloud.google.com/tpu/docs/v6e).
CATALOGUE_NAME = {
    "NVIDIA H100-SXM5-80GB": "H100-SXM5-80GB",
    "NVIDIA H100-SXM-80GB": "H100-SXM5-80GB",
    "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB",
    "NVIDIA H100-PCIe-80GB": "H100-PCIe-80GB",
    "NVIDIA H200-SXM5-141GB": "H200-SXM-141GB",
    "NVIDIA H200-NVL-141GB": "H200-NVL-141GB",
    "NVIDIA Blackwell GPU (B200-SXM-180GB)": "B200-SXM-180GB",
    "NVIDIA Blackwell GPU (GB200)": "GB200 (per B200 GPU)",
    "NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)": "B300-SXM-288GB",
    "AMD Instinct MI300X 192GB HBM3": "MI300X-192GB",
    "AMD Instinct MI325X 256GB HBM3E": "MI325X-256GB",
    "AMD Instinct MI325X 256GB HBM3e": "MI325X-256GB",
    "AMD Instinct MI325X 256GB HBM3E DLC": "MI325X-256GB",
    "AMD Instinct MI355X": "MI355X-288GB",
    "Intel Gaudi2": "Gaudi2-96GB",
    "Intel(R) Gaudi(R) 2 AI Accelerator": "Gaudi2-96GB",
    "TPU-v5e": "TPU-v5e",
    "TPU-v5p": "TPU-v5p",
    "TPU-trillium": "TPU-v6e",
    "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB",
    "NVIDIA A100-SXM-40GB": "A100-SXM4-40GB",
    "NVIDIA A100-PCIe-80GB": "A100-PCIe-80GB",
    "NVIDIA A100 - PCIe - 80 GB": "A100-PCIe-80GB",
    "NVIDIA L40S": "L40S-48GB",
    "NVIDIA L40": "L40-48GB",
    "NVIDIA L4": "L4-24GB",
    "NVIDIA A30": "A30-24GB",
    "NVIDIA A10G": "A10G-24GB",
    "NVIDIA GeForce RTX 4090": "RTX-4090-24GB",
}
# The ones that are not, and why.
NOT_IN_CATALOGUE = {
    "NVIDIA Blackwell Ultra GPU (GB300)": "GB300 is not in the GPU catalogue (no sourced row yet)",
    "AMD Instinct MI350X": "MI350X is not in the GPU catalogue (no sourced row yet)",
    "NVIDIA H100-SXM5-96GB": "the 96 GB H100 SXM is not in the GPU catalogue",
    "NVIDIA RTX A5000": "RTX A5000 is not in the GPU catalogue",
    "AMD Radeon RX 7900 XTX": "Radeon RX 7900 XTX is not in the GPU catalogue",
    "N/A": "a CPU-only system whose CPU or sockets per node this app does not have",
}
# CPU-only systems: the host CPU's name in the results (data/cpus.csv row), and each system's
# sockets per node and network per node, from its system description
# (training_results_v3.1 Intel/systems/<system>.json @ f33f9444205023cf49bf19ec960992b39663f6fd:
# "host_processors_per_node": "2", "host_networking": "Intel(R) Corporation Ethernet Controller
# E810-C for QSFP"). The E810-C is a 100 GbE controller (Intel's E810-CQDA2 product brief:
# 2 x 100GbE); one 100 Gb/s port per node is assumed, shared by the node's two sockets.
CPU_CATALOGUE_NAME = {"Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz": "Xeon-Platinum-8480+"}
CPU_SYSTEM_SOCKETS_PER_NODE = {"16-nodes-SPR-pytorch": 2, "16-nodes-SPR-pytorch-open": 2, "8-nodes-SPR-pytorch": 2}
CPU_NODE_NETWORK_GBPS = 100.0


def catalogue_gpu(result: MlperfResult) -> GpuSpec | None:
    """The catalogue GPU the result ran on, or for a CPU-only system its CPU (data/cpus.csv) where
    its sockets per node are known; None otherwise."""
    if result.accelerators_total == 0:
        known = result.system_name in CPU_SYSTEM_SOCKETS_PER_NODE and result.host_cpu in CPU_CATALOGUE_NAME
        return find_cpu(CPU_CATALOGUE_NAME[result.host_cpu]) if known else None
    name = CATALOGUE_NAME.get(result.accelerator)
    return None if name is None else find_gpu(name)


def devices_of(result: MlperfResult) -> tuple[int, int]:
    """(devices, devices per node) the prediction trains on: the accelerators, or for a CPU-only
    system its sockets (nodes x CPU_SYSTEM_SOCKETS_PER_NODE)."""
    if result.accelerators_total == 0 and result.system_name in CPU_SYSTEM_SOCKETS_PER_NODE:
        per_node = CPU_SYSTEM_SOCKETS_PER_NODE[result.system_name]
        return result.nodes * per_node, per_node
    return result.accelerators_total, result.accelerators_per_node


def not_in_catalogue_reason(accelerator: str) -> str:
    return NOT_IN_CATALOGUE.get(accelerator, f"{accelerator} is not in the GPU catalogue")


# --- samples to converge and evaluations ------------------------------------------------------

SEQ_LEN = {"llama2_70b_lora": 8192, "llama31_8b": 8192, "llama31_405b": 8192, "gpt3": 2048}


def samples_to_converge(benchmark: str, global_batch: int) -> float:
    """Sequences to converge at `global_batch`: the RCP (olympic) mean, linearly interpolated
    between the two reference batch sizes around it as MLCommons' RCP checker does on its full
    RCP set (mlcommons/logging mlperf_logging/rcp_checker/rcp_checker.py, `_create_interp_rcp`,
    check_directory's default rcp_pass 'full_rcp'); the nearest reference point outside their
    range. GPT-3's RCPs count tokens: / 2048."""
    points = sorted(
        {p.rcp_global_batch_size: p.olympic_mean for p in load_convergence_points() if p.benchmark == benchmark}.items()
    )
    if not points:
        raise KeyError(f"no reference convergence points for {benchmark}")
    per_sample = SEQ_LEN["gpt3"] if benchmark == "gpt3" else 1
    if global_batch <= points[0][0]:
        return points[0][1] / per_sample
    for (low_batch, low), (high_batch, high) in zip(points, points[1:], strict=False):
        if global_batch <= high_batch:
            share = (global_batch - low_batch) / (high_batch - low_batch)
            return (low + share * (high - low)) / per_sample
    return points[-1][1] / per_sample


class EvalSchedule(BaseModel):
    """How often a benchmark evaluates and on how many sequences (the definitions' eval_frequency
    and dataset columns, from the MLPerf training rules at training_policies d4c2f58)."""

    every_samples: float
    eval_samples: int
    evals_skipped: int


def eval_schedule(benchmark: str, round_name: str, global_batch: int) -> EvalSchedule:
    """Llama 2 70B LoRA: every 384 sequences on the 173 validation samples, the first
    FLOOR(0.125 GBS + 2) skipped; Llama 3.1 405B: every 18,432 sequences (46,080 in v5.0) on 5,760,
    the first FLOOR(0.0026 GBS + 12) skipped; Llama 3.1 8B: every 12,288 on 1,024; GPT-3: every
    24,576 sequences on GPT3_EVAL_SAMPLES."""
    if benchmark == "llama2_70b_lora":
        return EvalSchedule(every_samples=384, eval_samples=173, evals_skipped=math.floor(0.125 * global_batch + 2))
    if benchmark == "llama31_405b":
        every = 46_080 if round_name == "v5.0" else 18_432
        return EvalSchedule(
            every_samples=every, eval_samples=5760, evals_skipped=math.floor(0.0026 * global_batch + 12)
        )
    if benchmark == "llama31_8b":
        return EvalSchedule(every_samples=12_288, eval_samples=1024, evals_skipped=0)
    return EvalSchedule(every_samples=24_576, eval_samples=GPT3_EVAL_SAMPLES, evals_skipped=0)


# GPT-3's validation split: 24,567 C4 sequences (mlcommons/training large_language_model/paxml/
# README.md, "validation_24567exp"); taken as evaluated whole at each evaluation.
GPT3_EVAL_SAMPLES = 24_567


def evaluations(samples: float, schedule: EvalSchedule) -> int:
    """Evaluations run until convergence: one every `every_samples`, the last at or after
    convergence, the first `evals_skipped` not run."""
    return max(0, math.ceil(samples / schedule.every_samples) - schedule.evals_skipped)


# --- the workload on the submitted system ------------------------------------------------------


def gpt3_175b() -> ModelSpec:
    """GPT-3 175B (Brown et al. 2020, arXiv 2005.14165, Table 2.1: 96 layers, d_model 12,288, 96
    heads, context 2,048), GPT-2's architecture otherwise (same paper, Sec. 2.1)."""
    return get_preset("gpt2-xl").model_copy(
        update={
            "name": "gpt3-175b",
            "n_layers": 96,
            "hidden_size": 12288,
            "n_heads": 96,
            "n_kv_heads": 96,
            "ffn_hidden_size": 4 * 12288,
            "max_position_embeddings": 2048,
            "reported_params": None,
            "source": "arXiv 2005.14165 Table 2.1",
        }
    )


def benchmark_model(benchmark: str) -> ModelSpec:
    if benchmark == "gpt3":
        return gpt3_175b()
    preset = {"llama2_70b_lora": "llama-2-70b", "llama31_8b": "llama-3.1-8b", "llama31_405b": "llama-3.1-405b"}
    return get_preset(preset[benchmark])


# GPUs sharing one NVLink domain: GB200 NVL72 joins 72 GPUs (NVIDIA GB200 NVL72 datasheet);
# the others as the result's accelerators per node.
NVLINK_DOMAIN = {"GB200 (per B200 GPU)": 72}


class Layout(BaseModel):
    """The parallel layout of one submission, as its framework typically runs it."""

    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    virtual_stages: int
    micro_batch: int
    why: str


def weights_tp(gpu: GpuSpec, params: float) -> int:
    """Smallest tensor-parallel degree whose bf16 weights take at most half the GPU's memory, the
    rest left for activations of 8,192-token sequences. It gives the degrees of NVIDIA's
    Llama 2 70B LoRA configs: TP4 on H100 80 GB (training_results_v4.0 NVIDIA/benchmarks/
    llama2_70b_lora/implementations/nemo/config_DGXH100_1x8x4xtp4pp1cp1.sh), TP2 on H200
    (config_DGXH200_1x8x2xtp2pp1cp1.sh), TP1 on GB300 288 GB (training_results_v5.1
    config_GB300_128x4x1xtp1pp1cp8.sh)."""
    for tp in (1, 2, 4, 8):
        if 2 * params / tp <= gpu.memory_gb * 1e9 / 2:
            return tp
    return 8


def layout_for(benchmark: str, gpu: GpuSpec, spec: ModelSpec) -> Layout:
    """The layout NVIDIA's NeMo/Megatron submissions use for the benchmark (configs cited):
    GPT-3 175B TP4 PP8 (training_results_v3.1 NVIDIA gpt3 config_DGXH100_*x4x8_mbs1.sh), 6 virtual
    stages (v4.1 B200 config: INTERLEAVED_PIPELINE=6); Llama 3.1 405B TP8 PP8 CP2 on 8-GPU
    HGX nodes of 80-141 GB, TP4 PP8 CP2 with 8 virtual stages on GB200 (training_results_v5.1
    config_GB200_640x4x24xtp4pp8cp2_cg_fp4.sh); Llama 3.1 8B TP1 PP1 (v5.1 B200 configs
    TENSOR_MODEL_PARALLEL=1); Llama 2 70B LoRA: weights_tp, PP1."""
    if benchmark == "gpt3":
        return Layout(
            tensor_parallel=4, pipeline_parallel=8, context_parallel=1, virtual_stages=6, micro_batch=1,
            why="NVIDIA NeMo GPT-3 layout TP4 PP8, 6 virtual stages",
        )  # fmt: skip
    if benchmark == "llama31_405b":
        tp = 8 if gpu.memory_gb < 170 else 4
        virtual = 8 if tp == 4 else 1
        return Layout(
            tensor_parallel=tp, pipeline_parallel=8, context_parallel=2, virtual_stages=virtual, micro_batch=1,
            why=f"NVIDIA NeMo Llama 3.1 405B layout TP{tp} PP8 CP2"
            + (f", {virtual} virtual stages" if virtual > 1 else ""),
        )  # fmt: skip
    if benchmark == "llama31_8b":
        return Layout(
            tensor_parallel=1, pipeline_parallel=1, context_parallel=1, virtual_stages=1, micro_batch=1,
            why="NVIDIA NeMo Llama 3.1 8B layout TP1 PP1",
        )  # fmt: skip
    if gpu.name == "L40S-48GB":  # training_results_v4.0 NVIDIA config_L40S_16x4x2xtp4pp1cp2.sh
        return Layout(
            tensor_parallel=4, pipeline_parallel=1, context_parallel=2, virtual_stages=1, micro_batch=1,
            why="NVIDIA's L40S Llama 2 70B LoRA layout TP4 PP1 CP2",
        )  # fmt: skip
    tp = weights_tp(gpu, spec.reported_params or 7e10)
    return Layout(
        tensor_parallel=tp, pipeline_parallel=1, context_parallel=1, virtual_stages=1, micro_batch=1,
        why=f"TP{tp} PP1: the smallest TP whose bf16 weights take at most half of {gpu.memory_gb:g} GB "
        "(NVIDIA's Llama 2 70B LoRA configs: TP4 on H100, TP2 on H200, TP1 on GB300)",
    )  # fmt: skip


def precision_for(gpu: GpuSpec) -> str:
    """FP8 where the GPU has an FP8 rate (every NVIDIA and AMD submission of these benchmarks sets
    FP8=True: e.g. config_DGXH100_1x8x4xtp4pp1cp1.sh), bf16 with fp32 master weights otherwise."""
    return "fp8" if gpu.fp8_tflops else "bf16-mixed"


FP8_RECIPE_WORDS = {
    "delayed": "Transformer Engine's delayed scaling, fp8 weights cached per step",
    "dynamic": "the app's default dynamic scaling, the stack's FP8 recipe not found in its sources",
}


def fp8_recipe_for(gpu: GpuSpec) -> str:
    """Transformer Engine's delayed scaling on NVIDIA GPUs: NVIDIA's NeMo configs set its recipe
    (FP8_AMAX_ALGO=max, FP8_AMAX_HISTORY=32 in config_DGXH100_1x8x4xtp4pp1cp1.sh); the app's
    default elsewhere (no FP8 recipe stated in the other stacks' sources read)."""
    return "delayed" if gpu.vendor == "NVIDIA" else "dynamic"


class NemoLoraConfig(BaseModel):
    """What one published NeMo Llama 2 70B LoRA config sets that the time model reads (its
    config_*.sh and the config_common.sh it sources)."""

    model_config = ConfigDict(frozen=True)

    tensor_parallel: int = Field(description="TP")
    context_parallel: int = Field(description="CP")
    launch: Launch = Field(description="LAYER_CUDA_GRAPH or MCORE_CUDA_GRAPH on: cuda-graphs; both off: auto")
    nccl_min_ctas: int = Field(description="NCCL_MIN_CTAS: the blocks, one SM each, NCCL's kernels hold")
    fp4: bool = Field(description="the config sources config_common_fp4.sh (FP4=True, NVFP4 matmuls)")
    source: str


# The 8-GPU B200 configs, at training_results_v4.1 @b87b9e3, v5.0 @0fdc28f, v5.1 @441d65f4, keyed by
# (round, system: '' for every system of the round without its own). Each sets TP=1 (the 140 GB
# of bf16 weights fit in 180 GB) and FP8_DPA=1; none sets TP_COMM_OVERLAP for TP1 traffic.
NEMO_LORA_B200_CONFIGS = {
    # NVIDIA/benchmarks/llama2_70b_lora/implementations/b200_preview_nemo/config_DGXB200_1x8x2xtp1pp1cp2.sh:
    # TP=1 CP=2 MINIBS=2, NVTE_FUSED_ATTN=1, FP8_DPA=1, LAYER_CUDA_GRAPH=1, NCCL_MIN_CTAS=32
    ("v4.1", ""): NemoLoraConfig(
        tensor_parallel=1, context_parallel=2, launch="cuda-graphs", nccl_min_ctas=32,
        fp4=False, source="training_results_v4.1 NVIDIA b200_preview_nemo/config_DGXB200_1x8x2xtp1pp1cp2.sh",
    ),
    # NVIDIA/benchmarks/llama2_70b_lora/implementations/nyx_n1_ngc25.04_nemo/config_DGXB200_1x8x1xtp1pp1cp1.sh:
    # TP=1 CP=1 MINIBS=1, LAYER_CUDA_GRAPH=0 MCORE_CUDA_GRAPH=0; its config_common.sh FP8_DPA=1, NCCL_MIN_CTAS=32
    # (the same in the round's 8-GPU B200 configs of Dell, GigaComputing, Lambda, Lenovo, Oracle, Supermicro)
    ("v5.0", ""): NemoLoraConfig(
        tensor_parallel=1, context_parallel=1, launch="auto", nccl_min_ctas=32,
        fp4=False, source="training_results_v5.0 NVIDIA nyx_n1_ngc25.04_nemo/config_DGXB200_1x8x1xtp1pp1cp1.sh",
    ),
    # Dell/benchmarks/llama2_70b_lora/implementations/nemo/config_DGXB200_1x8x1xtp1pp1cp1.sh (the same
    # in Dell's XE9685L and XE9780, Lenovo's, GigaComputing's, Supermicro's and University-of-Florida's
    # 8-GPU B200 configs): TP=1 CP=1 MINIBS=1, no CUDA graph variable (conf/megatron_gpt_peft_tuning_config.yaml:
    # enable_cuda_graph False); its config_common.sh FP8_DPA=1, NCCL_MIN_CTAS=32
    ("v5.1", ""): NemoLoraConfig(
        tensor_parallel=1, context_parallel=1, launch="auto", nccl_min_ctas=32,
        fp4=False, source="training_results_v5.1 Dell nemo/config_DGXB200_1x8x1xtp1pp1cp1.sh",
    ),
    # Dell/.../nemo/config_1xXE9680Lx8B200-SXM-180GB.sh: sources config_common_fp4.sh, MINIBS=2 CP=2,
    # MCORE_CUDA_GRAPH=1
    ("v5.1", "1xXE9680Lx8B200-SXM-180GB"): NemoLoraConfig(
        tensor_parallel=1, context_parallel=2, launch="cuda-graphs", nccl_min_ctas=32,
        fp4=True, source="training_results_v5.1 Dell nemo/config_1xXE9680Lx8B200-SXM-180GB.sh",
    ),
    # Nebius/benchmarks/llama2_70b_lora/configs/nebius_b200_n1/config_DGXB200_1x8x1xtp1pp1cp1_fp4.sh:
    # sources config_common_fp4.sh, CP=1, MCORE_CUDA_GRAPH=0
    ("v5.1", "Nebius B200 n1 (8x B200-SXM-180GB)"): NemoLoraConfig(
        tensor_parallel=1, context_parallel=1, launch="auto", nccl_min_ctas=32,
        fp4=True, source="training_results_v5.1 Nebius configs/nebius_b200_n1/config_DGXB200_1x8x1xtp1pp1cp1_fp4.sh",
    ),
}  # fmt: skip

# SMs per GPU, to turn NCCL_MIN_CTAS into the share of SMs NCCL holds: B200 enables 74 SMs on each
# of its two dies, 148 (Chips and Cheese, "Nvidia's B200: Keeping the CUDA Juggernaut Rolling", 2025,
# https://chipsandcheese.com/p/nvidias-b200-keeping-the-cuda-juggernaut).
STREAMING_MULTIPROCESSORS = {"B200-SXM-180GB": 148}


def nemo_lora_config(result: Submission, gpu: GpuSpec) -> NemoLoraConfig | None:
    """The published config of an 8-GPU NeMo Llama 2 70B LoRA run on B200 (NEMO_LORA_B200_CONFIGS):
    the system's own where it has one, its round's otherwise; None for other runs."""
    if (result.benchmark, result.stack, gpu.name, result.accelerators_total) != (
        "llama2_70b_lora", "nemo", "B200-SXM-180GB", 8,
    ):  # fmt: skip
        return None
    return NEMO_LORA_B200_CONFIGS.get((result.round, result.system)) or NEMO_LORA_B200_CONFIGS.get((result.round, ""))


def nccl_sm_share(config: NemoLoraConfig | None, gpu: GpuSpec) -> float:
    """The SMs NCCL holds while its collectives run hidden: NCCL_MIN_CTAS blocks, one SM each
    (NCCL's environment documentation: "the minimum number of CTAs NCCL should use for each
    kernel"), of the GPU's SMs, where a config states it; the time model's default otherwise."""
    if config is None or gpu.name not in STREAMING_MULTIPROCESSORS:
        return NCCL_SM_SHARE
    return config.nccl_min_ctas / STREAMING_MULTIPROCESSORS[gpu.name]


class Submission(BaseModel):
    """What a prediction reads of a result: results on the same system share one (and its cached
    prediction), whoever submitted them."""

    model_config = ConfigDict(frozen=True)

    benchmark: str
    round: str
    accelerators_total: int
    accelerators_per_node: int
    global_batch_size: int
    stack: str = Field(
        description="nemo (the NVIDIA and AMD stacks), deepspeed (Juniper's HF Trainer + DeepSpeed), "
        "optimum-habana (Intel's Gaudi2 LoRA), maxtext (Google's TPU runs) or tinygrad (tinycorp's ResNet)"
    )
    system: str = Field(default="", description="the system, only where it published a config of its own")
    inter_node_gbps: float | None = Field(
        default=None, description="network Gb/s per device where the system states it (CPU-only systems)"
    )
    published: PublishedLayout | None = Field(
        default=None, description="the layout the submission's own launch config sets (data/mlperf_layouts.csv)"
    )


def stack_of(framework: str, submitter: str = "", benchmark: str = "") -> str:
    """DeepSpeed where the framework names it (Juniper's v4.0 LoRA rows), Optimum Habana for
    Intel's Gaudi2 Llama 2 70B LoRA (its framework column says only PyTorch; its README runs
    Optimum Habana's GaudiTrainer with DeepSpeed), MaxText for Google's JAX stacks (maxtext, PAX),
    tinygrad by name, NeMo/Megatron-style otherwise."""
    lowered = framework.lower()
    if "deepspeed" in lowered:
        return "deepspeed"
    if submitter == "Intel-HabanaLabs" and benchmark == "llama2_70b_lora":
        return "optimum-habana"
    if "maxtext" in lowered or lowered == "pax":
        return "maxtext"
    if "tinygrad" in lowered:
        return "tinygrad"
    return "nemo"


def submission_of(result: MlperfResult) -> Submission:
    """What the prediction reads of `result`; the round only where the prediction reads it (the
    language benchmarks' evaluation schedules and configs), so that ResNet results of one system in
    two rounds share one prediction."""
    devices, per_node = devices_of(result)
    cpu_only = result.accelerators_total == 0
    return Submission(
        benchmark=result.benchmark,
        round=result.round if result.benchmark in LANGUAGE_BENCHMARKS else "",
        accelerators_total=devices,
        accelerators_per_node=per_node,
        global_batch_size=result.global_batch_size,
        stack=stack_of(result.framework, result.submitter, result.benchmark),
        system=result.system_name if (result.round, result.system_name) in NEMO_LORA_B200_CONFIGS else "",
        published=load_published_layouts().get(result.id),
        inter_node_gbps=CPU_NODE_NETWORK_GBPS / per_node if cpu_only and per_node else None,
    )


class Workload(BaseModel):
    """One result as this app's workload: the model, the step's settings and the run's."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    spec: ModelSpec
    settings: TrainingSettings
    time_settings: TimeSettings
    assumptions: list[str]
    gpu: GpuSpec | None = Field(default=None, description="the GPU as the run uses it, where not the catalogue's")
    evaluates_at_delay: bool = Field(
        default=False,
        description="the stack runs the evaluation at the end of the skipped ones too (the HF Trainer's "
        "eval_delay): one evaluation more than the rules' schedule",
    )


def submission_layout(result: Submission, gpu: GpuSpec, spec: ModelSpec) -> Layout:
    """The layout the result ran in: the 8-GPU B200 LoRA configs (NEMO_LORA_B200_CONFIGS), the
    submission's own config where data/mlperf_layouts.csv has it, NeMo's typical layout otherwise."""
    config = nemo_lora_config(result, gpu)
    if config is not None:
        return config_layout(config)
    if result.published is not None:
        return published_layout(result.published)
    return layout_for(result.benchmark, gpu, spec)


def published_layout(published: PublishedLayout) -> Layout:
    """A row of data/mlperf_layouts.csv as a Layout, its config named in the words."""
    return Layout(
        tensor_parallel=published.tensor_parallel, pipeline_parallel=published.pipeline_parallel,
        context_parallel=published.context_parallel, virtual_stages=published.virtual_stages,
        micro_batch=published.micro_batch,
        why=f"TP{published.tensor_parallel} PP{published.pipeline_parallel} CP{published.context_parallel}"
        + (f", {published.virtual_stages} virtual stages" if published.virtual_stages > 1 else "")
        + f", micro-batch {published.micro_batch} as the submission's {published.config_name} sets",
    )  # fmt: skip


def context_parallel_degree(layout: Layout, batch: int, replicas: int, published: bool) -> int:
    """The layout's context-parallel degree; without a published config, NeMo's way with fewer
    sequences than replicas: each sequence cut over replicas / batch GPUs (CP), and none where the
    batch splits evenly otherwise."""
    cp = layout.context_parallel
    if published:
        return cp
    if batch < replicas:
        cp = max(cp, replicas // batch)
    if replicas % cp or (batch * cp) % replicas:
        cp = 1 if batch % replicas == 0 else cp
    return cp


def workload_for(result: Submission, gpu: GpuSpec) -> Workload:
    """The result's benchmark on its GPUs. Context parallelism runs as the time model's
    (calculators.timing.context_parallel): each sequence split over CP of the data-parallel GPUs,
    attention as Transformer Engine's ring of K, V sends."""
    benchmark = result.benchmark
    spec = benchmark_model(benchmark)
    config = nemo_lora_config(result, gpu)
    layout = submission_layout(result, gpu, spec)
    gpus = result.accelerators_total
    model_gpus = layout.tensor_parallel * layout.pipeline_parallel
    if gpus % model_gpus:
        raise ValueError(f"{gpus} GPUs do not divide into TP{layout.tensor_parallel} x PP{layout.pipeline_parallel}")
    batch = result.global_batch_size
    replicas = gpus // model_gpus  # data-parallel GPUs, the context-parallel ranks among them
    cp = context_parallel_degree(layout, batch, replicas, result.published is not None)
    if (batch * cp) % (replicas * layout.micro_batch):
        raise ValueError(f"global batch {batch} does not split over {replicas // cp} data-parallel replicas")
    seq_len = SEQ_LEN[benchmark]
    grad_accum = batch * cp // replicas // layout.micro_batch or 1
    lora = benchmark == "llama2_70b_lora"
    if result.stack in HF_DEEPSPEED_RECIPES:
        return hf_deepspeed_workload(result, gpu, spec)
    if result.stack == "maxtext":
        return maxtext_workload(result, gpu, spec)
    settings = TrainingSettings(
        micro_batch=layout.micro_batch,
        seq_len=seq_len,
        grad_accum=grad_accum,
        gpus=replicas,
        tensor_parallel=layout.tensor_parallel,
        pipeline_parallel=layout.pipeline_parallel,
        precision=precision_for(gpu),
        zero=1,
        checkpointing="none",
        framework="megatron",
        method="lora" if lora else "full",
        lora_rank=16,
        lora_targets="attention",
    )
    per_node = NVLINK_DOMAIN.get(gpu.name, result.accelerators_per_node)
    recipe = fp8_recipe_for(gpu)
    time_settings = TimeSettings(
        dataset_samples=1,
        gpus_per_node=per_node,
        virtual_stages=layout.virtual_stages,
        kernels="fused",
        fp8_recipe=recipe,
        attention_kernel=nemo_attention_kernel(result, gpu),
        context_parallel=cp,
        **config_time_settings(config, gpu),
    )
    fp8_why = "the FP4 run taken as" if config and config.fp4 else "FP8=True in the submission configs;"
    assumptions = [
        layout.why
        + (
            f"; CP{cp}: each {seq_len:,}-token sequence split over {cp} GPUs, attention as a ring of K, V sends"
            if cp > 1
            else ""
        ),
        f"{settings.precision} matmuls"
        + (
            f" ({fp8_why} {FP8_RECIPE_WORDS[recipe]})"
            if settings.precision == "fp8"
            else " (no FP8 rate in the catalogue)"
        ),
        f"micro-batch {layout.micro_batch}, {grad_accum} micro-batches per step on {replicas // cp} replicas; "
        f"{per_node} GPUs per NVLink domain; distributed optimizer (ZeRO-1); no recomputation",
    ]
    if time_settings.attention_kernel == "cudnn":
        assumptions.append(
            "Transformer Engine's cuDNN fused attention (NVTE_FUSED_ATTN=1, FP8_DPA=1 in the configs; its FP8 "
            "arithmetic not modelled)"
        )
    if layout.tensor_parallel > 1:
        assumptions.append("tensor-parallel traffic not hidden (TP_COMM_OVERLAP's share unmeasured)")
    assumptions += config_assumptions(config, time_settings)
    if lora:
        assumptions.append("LoRA r=16 on q, k, v and o (the reference's target modules), frozen bf16 base")
    if benchmark == "llama31_405b" and result.round == "v5.1" and gpu.name == "GB200 (per B200 GPU)":
        # training_results_v5.1 NVIDIA llama31_405b config_GB200_*_cg_fp4.sh source config_common_fp4.sh
        assumptions.append("the submission ran FP4 matmuls (its configs source config_common_fp4.sh): timed in FP8")
    return Workload(spec=spec, settings=settings, time_settings=time_settings, assumptions=assumptions)


def nemo_attention_kernel(result: Submission, gpu: GpuSpec) -> AttentionKernel:
    """cuDNN fused attention for NeMo's Llama 2 70B LoRA on NVIDIA GPUs: every such config read sets
    FP8_DPA=1, and the v4.0-v4.1 ones NVTE_FLASH_ATTN=0 NVTE_FUSED_ATTN=1, Transformer Engine's
    cuDNN backend (training_results_v4.0 configs/config_common.sh of NVIDIA, Dell, Fujitsu,
    GigaComputing, HPE, Oracle, Red_Hat and Supermicro; v4.1 NVIDIA eos_ngc24.09_nemo and
    b200_preview_nemo; v5.0 NVIDIA nyx_n1_ngc25.04_nemo and v5.1 Dell nemo config_common.sh);
    FP8 attention is a kernel of that backend (NVIDIA/TransformerEngine
    transformer_engine/common/fused_attn/fused_attn_fp8.cu @fecb10b, cuDNN's sdpa_fp8 graphs).
    FlashAttention-2 (the time model's default) for the other stacks."""
    nemo_lora = result.benchmark == "llama2_70b_lora" and result.stack == "nemo"
    return "cudnn" if nemo_lora and gpu.vendor == "NVIDIA" else "flash2"


def config_layout(config: NemoLoraConfig) -> Layout:
    """The layout a published NeMo config sets: TP and CP as it names them, PP1, micro-batch 1 (MBS=1)."""
    return Layout(
        tensor_parallel=config.tensor_parallel, pipeline_parallel=1, context_parallel=config.context_parallel,
        virtual_stages=1, micro_batch=1,
        why=f"TP{config.tensor_parallel} PP1 CP{config.context_parallel} as the submission's config sets "
        f"({config.source})",
    )  # fmt: skip


def config_time_settings(config: NemoLoraConfig | None, gpu: GpuSpec) -> dict:
    """The time model's settings a published config states: how it launches kernels and the SMs
    NCCL holds; none without a config (the TimeSettings defaults)."""
    if config is None:
        return {}
    return {
        "launch": config.launch,
        "nccl_sm_share": nccl_sm_share(config, gpu),
    }


def config_assumptions(config: NemoLoraConfig | None, time_settings: TimeSettings) -> list[str]:
    """The lines that say what a published config set and how the time model takes it."""
    if config is None:
        return []
    launch = "CUDA graphs" if config.launch == "cuda-graphs" else "no CUDA graphs"
    lines = [
        f"{launch}; NCCL_MIN_CTAS={config.nccl_min_ctas}: NCCL holds {time_settings.nccl_sm_share:.0%} of the SMs "
        "while it runs hidden"
    ]
    if config.fp4:
        lines.append("the submission ran NVFP4 matmuls (its config sources config_common_fp4.sh): timed in FP8, "
                     "the catalogue has no FP4 rate")  # fmt: skip
    return lines


class HfDeepSpeedRecipe(BaseModel):
    """A Llama 2 70B LoRA submission built on the MLCommons reference's Hugging Face Trainer +
    PEFT + DeepSpeed ZeRO-3 code rather than NeMo, as its own launch script and DeepSpeed JSON set
    it. What both published recipes share (their launch scripts): micro-batch 1
    (--per_device_train_batch_size 1), no accumulation, ZeRO-3 over every GPU, HF gradient
    checkpointing of every layer (--use_gradient_checkpointing True), LoRA r=16 with dropout 0.1
    on qkv_proj and o_proj of the fused-QKV Llama 2 70B checkpoint, a flash attention kernel, and
    train.py's eval_delay = int(0.125 GBS + 2) x eval_steps, which the HF Trainer meets with an
    evaluation (it evaluates at every multiple of eval_steps from eval_delay on)."""

    model_config = ConfigDict(frozen=True)

    precision: str = Field(description="the matmuls' precision")
    kernels: str = Field(description="norms, rotary embeddings, SwiGLU and loss: HF's eager ops or fused kernels")
    overlap_comm: bool = Field(description="DeepSpeed zero_optimization.overlap_comm")
    words: str
    source: str


# The published configs, at mlcommons/training_results_v4.0 @62f111b7690f163b269f32e4f93dcaaa13717c9c.
HF_DEEPSPEED_RECIPES = {
    # JuniperNetworks/benchmarks/llama2_70b_lora/implementations/pytorch/: configs/ds_lora_config.json
    # (bf16, stage 3, overlap_comm true), run/run.sub and scripts/train.py (HF Trainer via
    # accelerate), scripts/utils.py (attn_implementation="flash_attention_2", eager HF Llama otherwise).
    "deepspeed": HfDeepSpeedRecipe(
        precision="bf16-mixed",
        kernels="eager",
        overlap_comm=True,
        words="HF Trainer + DeepSpeed ZeRO-3 (overlap_comm on), bf16 with fp32 adapter masters, "
        "FlashAttention-2, HF's eager norms, rotary and SwiGLU",
        source="training_results_v4.0 JuniperNetworks/benchmarks/llama2_70b_lora/implementations/pytorch "
        "configs/ds_lora_config.json, run/run.sub",
    ),
    # Intel-HabanaLabs/benchmarks/llm_finetune/: README.md runs run_llama_70B_fp8_submission.sh (--fp8,
    # --deepspeed configs/ds_zero3.json, Optimum Habana's GaudiTrainer); ds_zero3.json: bf16, stage 3,
    # overlap_comm false; Optimum Habana's Llama runs Habana's fused RMSNorm, RoPE and FusedSDPA.
    "optimum-habana": HfDeepSpeedRecipe(
        precision="fp8",
        kernels="fused",
        overlap_comm=False,
        words="Optimum Habana GaudiTrainer + DeepSpeed ZeRO-3 (overlap_comm off), fp8 matmuls, fused "
        "SDPA, norms and rotary",
        source="training_results_v4.0 Intel-HabanaLabs/benchmarks/llm_finetune run_llama_70B_fp8_submission.sh, "
        "configs/ds_zero3.json",
    ),
}


def zero3_overlap_fraction(overlap_comm: bool) -> float:
    """Share of ZeRO-3's traffic hidden under compute: all of it with overlap_comm (the gathers
    and reduce-scatters run on their own stream), none without: DeepSpeed then issues the
    parameter all-gathers on the default stream, behind the compute (microsoft/DeepSpeed
    deepspeed/runtime/zero/partitioned_param_coordinator.py @196e63ac, `__allgather_stream =
    Stream() if overlap_comm else default_stream()`)."""
    return 1.0 if overlap_comm else 0.0


def hf_deepspeed_workload(result: Submission, gpu: GpuSpec, spec: ModelSpec) -> Workload:
    """A submission of HF_DEEPSPEED_RECIPES on its GPUs, every setting from its published config.
    DeepSpeed's bf16 holds the base in bf16 and the adapters' fp32 masters: this app's bf16-mixed
    for LoRA (the frozen base in the half dtype either way)."""
    recipe = HF_DEEPSPEED_RECIPES[result.stack]
    gpus = result.accelerators_total
    batch = result.global_batch_size
    if batch % gpus:
        raise ValueError(f"global batch {batch} does not split over {gpus} GPUs")
    settings = TrainingSettings(
        micro_batch=1, seq_len=SEQ_LEN[result.benchmark], grad_accum=batch // gpus, gpus=gpus,
        precision=recipe.precision, zero=3, checkpointing="full", framework="deepspeed", method="lora",
        lora_rank=16, lora_targets="attention", lora_dropout=0.1, qkv_projection="fused",
    )  # fmt: skip
    time_settings = TimeSettings(
        dataset_samples=1,
        gpus_per_node=result.accelerators_per_node,
        kernels=recipe.kernels,
        attention_kernel="flash2",
        overlap_fraction=zero3_overlap_fraction(recipe.overlap_comm),
    )
    overlap = "hidden under compute" if recipe.overlap_comm else "not hidden (overlap_comm false)"
    assumptions = [
        f"{recipe.words} ({recipe.source})",
        f"ZeRO-3 over {gpus} GPUs: the frozen bf16 base gathered in forward and backward, {overlap}; "
        f"micro-batch 1, {settings.grad_accum} per step; every layer recomputed (gradient checkpointing)",
        "LoRA r=16, dropout 0.1, on qkv_proj and o_proj of the fused-QKV checkpoint, frozen bf16 base",
    ]
    if recipe.precision == "fp8":
        assumptions.append(f"fp8 matmuls (--fp8; {FP8_RECIPE_WORDS['dynamic']})")
    return Workload(
        spec=spec, settings=settings, time_settings=time_settings, assumptions=assumptions, evaluates_at_delay=True
    )


# Chips joined by the inter-chip interconnect (ICI) in one TPU pod; beyond it slices talk over
# the data-centre network: v5e and v6e 256, v5p 8,960 (https://cloud.google.com/tpu/docs/v5e,
# /v6e, /v5p "System architecture").
TPU_POD_CHIPS = {"TPU-v5e": 256, "TPU-v6e": 256, "TPU-v5p": 8960}


def maxtext_workload(result: Submission, gpu: GpuSpec, spec: ModelSpec) -> Workload:
    """Google's MaxText GPT-3 runs, as its v4.1 configs set them (taken for v3.1 PAX and v4.0 too;
    training_results_v4.1 Google/benchmarks/gpt3/implementations/
    maxtext/cloud-tpu-v5p/v5p-4096.sh and cloud-tpu-trillium/trillium-512.sh): FSDP (ZeRO-3) over
    the slice, tensor parallel 8 on v5p (ici_tensor_parallelism=8) and none on Trillium,
    remat_policy=full on Trillium and save_dot_except_mlpwi on v5p (taken as op-selective: matmul
    outputs kept), the whole per-device batch in one micro-batch. Their matmuls run in int8
    (quantization=int8: AQT, forward and backward): timed as this app's 8-bit linears (fp8) at the
    catalogue's int8 rate."""
    chips = result.accelerators_total
    batch = result.global_batch_size
    # fewer sequences than chips (v5e's 4,096 chips at batch 2,048): the rest split each sequence's
    # layers by tensor parallelism, as a chip needs a whole sequence otherwise
    tp = 8 if gpu.name == "TPU-v5p" else max(1, chips // batch)
    replicas = chips // tp
    if (batch * tp) % chips:
        raise ValueError(f"global batch {batch} does not split over {replicas} data-parallel replicas")
    settings = TrainingSettings(
        micro_batch=batch // replicas, seq_len=SEQ_LEN[result.benchmark], gpus=replicas, tensor_parallel=tp,
        precision="fp8", zero=3, checkpointing="op-selective" if tp > 1 else "full",
    )  # fmt: skip
    # the time model takes at most 1,024 GPUs in one fast domain (TimeSettings.gpus_per_node)
    per_pod = min(TPU_POD_CHIPS.get(gpu.name, result.accelerators_per_node), chips, 1024)
    time_settings = TimeSettings(dataset_samples=1, gpus_per_node=per_pod, kernels="fused")
    assumptions = [
        f"MaxText: FSDP (ZeRO-3) over {replicas} replicas, TP{tp}, {settings.checkpointing} recomputation, "
        f"{settings.micro_batch} sequences per chip; ICI across {per_pod} chips, the data-centre network beyond",
        f"int8 matmuls (quantization=int8) as 8-bit linears at the catalogue's int8 rate, {gpu.int8_tops:g} TOPS",
    ]
    int8 = gpu.model_copy(update={"fp8_tflops": gpu.int8_tops}) if gpu.int8_tops else None
    return Workload(spec=spec, settings=settings, time_settings=time_settings, assumptions=assumptions, gpu=int8)


# --- the prediction ---------------------------------------------------------------------------


class MlperfRow(BaseModel):
    """One result with its prediction (the CLI's JSON object, in its contract's keys)."""

    id: str
    benchmark: str
    round: str
    submitter: str
    system: str
    accelerator: str | None = Field(description="the catalogue GPU; None where the accelerator is not one")
    accelerator_published: str
    accelerators: int
    nodes: int
    global_batch_size: int | None
    minutes_published: float | None
    minutes_predicted: float | None
    why_not: str | None = None
    ratio: float | None = Field(default=None, description="predicted / published")
    samples_to_converge: float | None = None
    step_s: float | None = None
    eval_minutes: float | None = None
    usd_to_reproduce: float | None = Field(default=None, description="cheapest on-demand rental of the published run")
    rented_on: str | None = None
    assumptions: list[str] = []
    source: str


class Prediction(BaseModel):
    minutes: float
    samples: float
    step_s: float
    eval_minutes: float
    assumptions: list[str]


def bert_prediction(result: Submission, gpu: GpuSpec) -> Prediction:
    """BERT-large is a masked-LM encoder: no time model for it in this app yet."""
    raise NotImplementedError(f"{BENCHMARK_LABEL[result.benchmark]}: no encoder time model for it in this app yet")


# ImageNet-1k: 1,281,167 training and 50,000 validation images (the definitions' dataset column;
# MLPerf's ResNet reference evaluates the whole validation set).
IMAGENET_TRAIN_IMAGES = 1_281_167
IMAGENET_EVAL_IMAGES = 50_000
# Evaluation every 4 epochs (the definitions' eval_frequency; NVIDIA's configs EVAL_PERIOD="4",
# training_results_v4.0 NVIDIA/benchmarks/resnet/implementations/l40s_n2_ngc24.04_mxnet/
# config_L40S_2x4x204.sh).
RESNET_EVAL_EVERY_EPOCHS = 4


def resnet_precision(gpu: GpuSpec) -> str:
    """fp16 AMP where the GPU has an fp16 rate (NVIDIA's MXNet ResNet runs float16 in NHWC), bf16
    AMP otherwise (Gaudi2: the catalogue gives no fp16 rate)."""
    return "amp-fp16" if gpu.fp16_tflops else "amp-bf16"


def resnet_loader(result: Submission, gpu: GpuSpec) -> str:
    """DALI decoding on the GPU (nvJPEG) for the NVIDIA-stack submissions (their configs set DALI_*:
    config_L40S_2x4x204.sh) and Gaudi's own media pipeline; tinygrad decodes on the CPU; a CPU-only
    system decodes on the sockets it trains on ("same-cpu")."""
    if is_cpu(gpu):
        return "same-cpu"
    return "cpu" if result.stack == "tinygrad" else "dali-gpu"


LOADER_NOTE = {
    "dali-gpu": "DALI decoding on the GPU (its time not counted)",
    "cpu": "CPU decoding",
    "same-cpu": "decoding on the training sockets' own cores (its time not counted)",
}


def loader_ceiling(images_per_s: float, loader: str, gpu: GpuSpec) -> float:
    """The input pipeline's images/s per device: the host decode ceiling for a GPU
    (data_loading.input_ceiling); none counted where the device is the CPU that decodes."""
    if loader == "same-cpu":
        return math.inf
    ceiling = input_ceiling(images_per_s, DEFAULT_HOST_CORES_PER_GPU, loader)
    return ceiling.ceiling_images_per_s_per_gpu or math.inf


def network_note(result: Submission) -> str:
    if result.inter_node_gbps is None:
        return ""
    return f" across nodes at {result.inter_node_gbps:g} Gb/s per socket (one 100 GbE port per node)"


@lru_cache(maxsize=1024)
def resnet_prediction(result: Submission, gpu: GpuSpec) -> Prediction:
    """ResNet-50 v1.5 as the vision time model has it (calculators.timing.vision_step): the
    submission's images per GPU, channels-last (NHWC) AMP, SGD-style momentum for LARS (one state
    per weight), DDP over every accelerator. Epochs to converge from the reference points at the
    submission's global batch (samples_to_converge), x 1,281,167 images; one evaluation of the
    50,000 validation images every 4 epochs, the last at or after convergence, each image a
    forward: a third of its step share (forward + backward at twice the forward)."""
    gpus, batch = result.accelerators_total, result.global_batch_size
    if batch % gpus:
        raise ValueError(f"global batch {batch} does not split over {gpus} accelerators")
    model = vision_model("resnet50")
    network = {} if result.inter_node_gbps is None else {"inter_node_gbps": result.inter_node_gbps}
    run = VisionStepInput(
        model=model, micro_batch=batch // gpus, precision=resnet_precision(gpu), channels_last=True,
        optimizer="sgd", gpus=gpus, gpus_per_node=result.accelerators_per_node, **network,
    )  # fmt: skip
    step = estimate_vision_step(run, gpu)
    loader = resnet_loader(result, gpu)
    image_s = 1 / min(step.samples_per_s_per_gpu, loader_ceiling(step.samples_per_s_per_gpu, loader, gpu))
    epochs = samples_to_converge("resnet", batch)
    train_s = epochs * IMAGENET_TRAIN_IMAGES / gpus * image_s
    evals = math.ceil(epochs / RESNET_EVAL_EVERY_EPOCHS)
    eval_s = evals * math.ceil(IMAGENET_EVAL_IMAGES / gpus) * image_s / 3
    notes = [
        f"{run.micro_batch} images per {'socket' if is_cpu(gpu) else 'accelerator'}, {run.precision} "
        f"channels-last, DDP over {gpus}" + network_note(result) + "; " + LOADER_NOTE[loader],
        f"{epochs:.1f} epochs to converge at global batch {batch} (RCP olympic mean, interpolated)",
        f"{evals} evaluations of {IMAGENET_EVAL_IMAGES:,} images, forward only",
    ]
    return Prediction(
        minutes=(train_s + eval_s) / 60,
        samples=epochs * IMAGENET_TRAIN_IMAGES,
        step_s=step.step_s,
        eval_minutes=eval_s / 60,
        assumptions=notes,
    )


@lru_cache(maxsize=1024)
def language_prediction(result: Submission, gpu: GpuSpec) -> Prediction:
    """(samples / global batch) x step time + evaluations x the forward passes of one replica.

    An evaluation splits its sequences over the data-parallel replicas (under context parallel a
    replica is CP GPUs sharing each sequence), each running ceil(sequences / replicas) of them, one
    sequence's share of the step each: a forward is 2 of the step's matmul_flops_factor FLOPs per
    weight (Kaplan et al. 2020 Sec. 2.1: 2N forward of 6N; 2N of 4N with a frozen base). With fewer
    sequences than replicas the evaluation takes one forward, not a fraction of one."""
    work = workload_for(result, gpu)
    estimate = estimate_time(work.spec, work.settings, work.gpu or gpu, work.time_settings)
    batch = result.global_batch_size
    samples = samples_to_converge(result.benchmark, batch)
    train_s = samples / batch * estimate.step_s
    schedule = eval_schedule(result.benchmark, result.round, batch)
    if work.evaluates_at_delay and schedule.evals_skipped:
        schedule = schedule.model_copy(update={"evals_skipped": schedule.evals_skipped - 1})
    settings = work.settings
    replicas = settings.gpus // work.time_settings.context_parallel
    sequence_s = estimate.step_s / (settings.grad_accum * settings.micro_batch)
    forward_share = 2 / matmul_flops_factor(settings)
    per_replica = math.ceil(schedule.eval_samples / replicas)
    eval_s = evaluations(samples, schedule) * per_replica * sequence_s * forward_share
    notes = work.assumptions + [
        f"{samples:,.0f} sequences to converge at global batch {batch} (RCP olympic mean, interpolated)",
        f"{evaluations(samples, schedule)} evaluations of {schedule.eval_samples:,} sequences, forward only",
    ]
    return Prediction(
        minutes=(train_s + eval_s) / 60,
        samples=samples,
        step_s=estimate.step_s,
        eval_minutes=eval_s / 60,
        assumptions=notes,
    )


PREDICTORS = {name: language_prediction for name in LANGUAGE_BENCHMARKS} | {
    "bert": bert_prediction,
    "resnet": resnet_prediction,
}


def why_not_predicted(result: MlperfResult, gpu: GpuSpec | None) -> str | None:
    if gpu is None:
        return not_in_catalogue_reason(result.accelerator)
    if result.global_batch_size is None:
        return "the result's global batch size is not in its logs"
    if result.benchmark not in PREDICTORS:
        return f"{result.benchmark} is not a benchmark this app models"
    return None


@lru_cache(maxsize=4096)
def _cheapest_rental(gpu_name: str, gpus: int, gpus_per_node: int) -> tuple[float, str] | None:
    """(USD per hour, instance) of the cheapest on-demand instances holding `gpus` of `gpu_name`,
    each with at least the submitted system's GPUs per node (the same links inside a node); where
    the price sheet has none that large (MI300X, MI325X: priced per GPU-hour), the cheapest of any
    size, said in the instance's words."""
    prices = [price for price in load_prices() if price.gpu == gpu_name]
    whole_nodes = [price for price in prices if price.gpu_count >= min(gpus_per_node, gpus)]
    options = [
        (
            instances_needed(gpus, price.gpu_count) * price.on_demand_usd_per_hour,
            f"{price.provider} {price.instance_type}" + ("" if whole_nodes else " (smaller than the system's nodes)"),
        )
        for price in whole_nodes or prices
    ]
    return min(options, default=None)


def usd_to_reproduce(
    gpu: GpuSpec | None, gpus: int, gpus_per_node: int, minutes: float
) -> tuple[float, str] | tuple[None, None]:
    """Hours x instances x price of the cheapest on-demand option (calculators.cost.pricing);
    (None, None) without a catalogue GPU or a price for it in nodes as large as the system's."""
    if gpu is None:
        return None, None
    rental = _cheapest_rental(gpu.name, gpus, gpus_per_node)
    if rental is None:
        return None, None
    usd_per_hour, where = rental
    return run_cost_usd(1, usd_per_hour, minutes / 60), where


@lru_cache(maxsize=1024)
def mlperf_row(result: MlperfResult) -> MlperfRow:
    """The result with its prediction, ratio and cost to reproduce."""
    gpu = catalogue_gpu(result)
    why_not = why_not_predicted(result, gpu)
    prediction = None
    if why_not is None:
        try:
            prediction = PREDICTORS[result.benchmark](submission_of(result), gpu)
        except ValidationError as error:  # a setting out of the time model's range: named in one line
            first = error.errors()[0]
            why_not = f"the time model cannot take this layout: {first['loc'][0]} {first['msg'].lower()}"
        except (NotImplementedError, ValueError, KeyError) as error:
            why_not = str(error).strip("'")
    published = result.time_to_train_min
    usd, where = (
        (None, None)
        if published is None
        else usd_to_reproduce(gpu, result.accelerators_total, result.accelerators_per_node, published)
    )
    minutes = None if prediction is None else prediction.minutes
    return MlperfRow(
        id=result.id,
        benchmark=result.benchmark,
        round=result.round,
        submitter=result.submitter,
        system=result.system_name,
        accelerator=None if gpu is None else gpu.name,
        accelerator_published=result.accelerator,
        accelerators=devices_of(result)[0],
        nodes=result.nodes,
        global_batch_size=result.global_batch_size,
        minutes_published=result.time_to_train_min,
        minutes_predicted=minutes,
        why_not=why_not,
        ratio=None if minutes is None or published is None else minutes / published,
        samples_to_converge=None if prediction is None else prediction.samples,
        step_s=None if prediction is None else prediction.step_s,
        eval_minutes=None if prediction is None else prediction.eval_minutes,
        usd_to_reproduce=usd,
        rented_on=where,
        assumptions=[] if prediction is None else prediction.assumptions,
        source=result.source,
    )


def benchmarks() -> list[str]:
    return sorted({result.benchmark for result in load_results()})


def mlperf_table(benchmark: str | None = None, accelerator: str | None = None) -> list[MlperfRow]:
    """Every result (of `benchmark`, on the catalogue GPU `accelerator`) with its prediction.
    Raises KeyError for an unknown benchmark or GPU."""
    if benchmark is not None and benchmark not in benchmarks():
        raise KeyError(f"unknown benchmark {benchmark!r}; choose one of {', '.join(benchmarks())}")
    gpu_name = None if accelerator is None else find_gpu(accelerator).name
    rows = []
    for result in load_results():
        if benchmark is not None and result.benchmark != benchmark:
            continue
        if gpu_name is not None and CATALOGUE_NAME.get(result.accelerator) != gpu_name:
            continue
        rows.append(mlperf_row(result))
    return rows


class RatioGroup(BaseModel):
    """The ratios of one benchmark on one accelerator."""

    benchmark: str
    accelerator: str
    results: int
    predicted: int
    median_ratio: float | None
    low_ratio: float | None
    high_ratio: float | None


def ratio_groups(rows: list[MlperfRow]) -> list[RatioGroup]:
    """Median, lowest and highest predicted / published ratio per benchmark and accelerator."""
    groups: dict[tuple[str, str], list[MlperfRow]] = {}
    for row in rows:
        groups.setdefault((row.benchmark, row.accelerator or row.accelerator_published), []).append(row)
    summary = []
    for (benchmark, accelerator), members in sorted(groups.items()):
        ratios = [row.ratio for row in members if row.ratio is not None]
        summary.append(
            RatioGroup(
                benchmark=benchmark,
                accelerator=accelerator,
                results=len(members),
                predicted=len(ratios),
                median_ratio=statistics.median(ratios) if ratios else None,
                low_ratio=min(ratios, default=None),
                high_ratio=max(ratios, default=None),
            )
        )
    return summary


class BestResult(BaseModel):
    """The fastest published result of one benchmark on one GPU at one scale."""

    benchmark: str
    accelerator: str
    scale: str = Field(description="'8 accelerators' or 'largest scale'")
    row: MlperfRow


def best_results(rows: list[MlperfRow], accelerator: str) -> list[BestResult]:
    """Per benchmark, the shortest published time-to-train on `accelerator` (a catalogue name) with
    8 accelerators, and the shortest at the largest accelerator count submitted."""
    best = []
    scored = [row for row in rows if row.accelerator == accelerator and row.minutes_published is not None]
    for benchmark in sorted({row.benchmark for row in scored}):
        runs = [row for row in scored if row.benchmark == benchmark]
        largest = max(row.accelerators for row in runs)
        at_eight = [row for row in runs if row.accelerators == 8]
        if at_eight:
            fastest = min(at_eight, key=lambda row: row.minutes_published)
            best.append(BestResult(benchmark=benchmark, accelerator=accelerator, scale="8 accelerators", row=fastest))
        if largest != 8:
            fastest = min((row for row in runs if row.accelerators == largest), key=lambda row: row.minutes_published)
            best.append(BestResult(benchmark=benchmark, accelerator=accelerator, scale="largest scale", row=fastest))
    return best
