"""Can the accelerator's software stack run the workload at all? Contradictions, in words.

Memory is not the only reason a GPU is out of the question: some workloads need a library
that a vendor's stack lacks, and some chips only serve models. Each rule cites its source:

- QLoRA stores the frozen base in 4-bit NormalFloat (NF4) through bitsandbytes
  (Dettmers et al. 2023, arXiv 2305.14314); the 8-bit optimizers "adamw-8bit" and
  "paged-adamw-8bit" are bitsandbytes.optim. bitsandbytes runs on NVIDIA CUDA and on AMD ROCm
  (https://huggingface.co/docs/bitsandbytes/main/en/installation: CUDA fully supported, ROCm
  supported, listed as experimental; treated here as supported). It has no backend for Google
  TPUs (XLA) or for AWS Trainium and Inferentia (Neuron). On Intel Gaudi, bitsandbytes 0.48.0
  added LLM.int8() and QLoRA's NF4 but no optimizers
  (https://github.com/bitsandbytes-foundation/bitsandbytes/releases/tag/0.48.0).
- AWS Inferentia2 is "purpose-built" for inference
  (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/inferentia2.html);
  AWS Neuron documents training on Trainium (Trn1, Trn2) and Inf2 instances "for high-performance
  deep learning inference" (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/). Its
  NeuronCore-v2 is Trainium's, but no training path on Inf2 is documented. The catalogue marks
  such chips `inference_only`.

- CPU offload (DeepSpeed ZeRO-Offload / ZeRO-Infinity, FSDP's CPUOffload, torchtune's
  fsdp_cpu_offload) moves states between a CUDA or ROCm device and pinned host memory. Google TPUs
  train through XLA (PyTorch/XLA FSDP and SPMD: https://pytorch.org/xla/release/r2.6/perf/fsdp.html
  and https://pytorch.org/xla/release/r2.6/perf/spmd_basic.html; JAX) and AWS Trainium through
  AWS Neuron's NeuronX Distributed (ZeRO-1 optimizer sharding, tensor and pipeline parallel:
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/libraries/neuronx-distributed/index.html);
  neither stack offers DeepSpeed's CPU offload, so no TPU or Trainium layout offloads. Intel Gaudi
  runs Habana's DeepSpeed fork, whose validated configurations are ZeRO-1, ZeRO-2 and ZeRO-3
  (https://docs.habana.ai/en/latest/PyTorch/DeepSpeed/DeepSpeed_User_Guide.html, "DeepSpeed Validated
  Configurations"); no source known here rules CPU offload out on Gaudi, so it stays allowed
  (an assumption: the host side, DeepSpeed's CPU Adam, is the same code).

Only known contradictions are reported: any other accelerator (NVIDIA, AMD, an Intel GPU
that is not Gaudi, one you added) is assumed to run the workload.
"""

from __future__ import annotations

from calculators.hardware.catalogue import GpuSpec
from calculators.workload.modes import MODE_OF_METHOD, MODES
from calculators.workload.training import TrainingSettings

BITSANDBYTES_OPTIMIZERS: tuple[str, ...] = ("adamw-8bit", "paged-adamw-8bit")
TPU = "Google TPU (XLA)"
NEURON = "AWS Neuron (Trainium, Inferentia)"
GAUDI = "Intel Gaudi"
NO_BITSANDBYTES_4BIT = (TPU, NEURON)
NO_BITSANDBYTES_OPTIMIZERS = (TPU, NEURON, GAUDI)
NO_CPU_OFFLOAD = (TPU, NEURON)
# The training stack each non-CUDA platform runs, in words, for launch notes.
PLATFORM_STACKS: dict[str, str] = {
    TPU: "XLA: PyTorch/XLA FSDP or SPMD sharding (torch_xla), or JAX",
    NEURON: "AWS Neuron: NeuronX Distributed (neuronx-distributed) on torch-neuronx",
    GAUDI: "Habana's DeepSpeed fork (ZeRO-1/2/3) on the Intel Gaudi PyTorch bridge",
}


def software_platform(gpu: GpuSpec) -> str | None:
    """The non-CUDA, non-ROCm stack a GPU runs (TPU, NEURON, GAUDI), or None for any other."""
    vendor = gpu.vendor.casefold()
    if vendor == "google":
        return TPU
    if vendor == "aws":
        return NEURON
    if vendor == "intel" and "gaudi" in gpu.name.casefold():
        return GAUDI
    return None


def stack_problem(gpu: GpuSpec, mode: str, optimizer: str | None = None) -> str | None:
    """Why `gpu`'s software stack cannot run the workload, in words, or None when nothing is known against it.

    `mode` is one of calculators.workload.modes.MODES; `optimizer` (a training optimizer) matters for the
    training modes only. Raises ValueError for an unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "inference":
        return None
    platform = software_platform(gpu)
    if gpu.inference_only:
        documented = ": AWS documents training on Trainium, not on Inferentia" if platform == NEURON else ""
        return f"{gpu.name} is built for serving only{documented}"
    if mode == "finetune-qlora" and platform in NO_BITSANDBYTES_4BIT:
        return f"{gpu.name} cannot run QLoRA: its 4-bit NF4 base needs bitsandbytes, which has no {platform} backend"
    if optimizer in BITSANDBYTES_OPTIMIZERS and platform in NO_BITSANDBYTES_OPTIMIZERS:
        return (
            f"{gpu.name} cannot run the {optimizer} optimizer: it comes from bitsandbytes, "
            f"which has no optimizers for {platform}"
        )
    return None


def training_stack_problem(gpu: GpuSpec, settings: TrainingSettings) -> str | None:
    """stack_problem for a training workload: its mode follows its method (full, LoRA, QLoRA)."""
    return stack_problem(gpu, MODE_OF_METHOD[settings.method], settings.optimizer)


def cpu_offload_problem(gpu: GpuSpec) -> str | None:
    """Why `gpu`'s training stack cannot offload states or activations to the CPU, in words, or
    None when it can (CUDA, ROCm and Gaudi's DeepSpeed)."""
    platform = software_platform(gpu)
    if platform in NO_CPU_OFFLOAD:
        return f"{gpu.name} trains through {PLATFORM_STACKS[platform]}, which has no CPU offload of this kind"
    return None


def settings_offload(settings: TrainingSettings) -> bool:
    """Whether the settings put optimizer states, parameters or activations on the host."""
    return settings.offload_optimizer or settings.offload_parameters or settings.activation_offload
