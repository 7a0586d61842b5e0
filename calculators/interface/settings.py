"""Every setting a user can give, declared once.

A `Setting` names one field of a pydantic settings model (TrainingSettings, ServingSettings,
TimeSettings, ...) and adds what the interfaces need: the URL key, the CLI flag, the label
and the unit. Its default, bounds, choices and help are read from the pydantic field, so
the sidebar widgets, the link codec and the command line are all generated from the same
declaration and cannot drift apart. Settings that exist only in the app (the model source,
the Compare page's filters) declare their default and bounds here instead.
"""

from __future__ import annotations

import functools
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel

from calculators.cost.energy import EnergySettings
from calculators.cost.options import OwnershipSettings
from calculators.cost.run_inputs import RunInputs
from calculators.cost.spot import DEFAULT_INTERRUPTIONS_PER_HOUR
from calculators.memory.vision_training import VisionTrainingInput
from calculators.models.spec import ModelSpec, extension
from calculators.plan.serving import ServingPlanRequest
from calculators.timing.serving import LatencyLimits, ServingRequest
from calculators.timing.settings import TimeSettings
from calculators.workload.build import WORKLOAD_OF_MODE, GpuTarget, ServeWorkload, Workload, workload_from_fields
from calculators.workload.modes import MODES
from calculators.workload.serving import ServingSettings
from calculators.workload.training import TrainingSettings
from calculators.workload.vision import vision_tower


class SettingError(ValueError):
    """A value a user gave is not valid for its setting; the message is one line."""


@dataclass(frozen=True)
class Setting:
    """One user setting: a pydantic field (model + name), or an app-only value with its own
    default and bounds. `query` is its URL key, `flag` its CLI flag ('' = none), `state` its
    key in the app's session (defaults to `name`)."""

    name: str
    query: str
    label: str
    model: type[BaseModel] | None = None
    flag: str = ""
    state: str = ""
    unit: str = ""
    ui_scale: float = 1.0  # the widget shows value / ui_scale (billions of tokens, per cent)
    kind: type | None = None
    default: Any = None
    low: float | None = None
    high: float | None = None
    options: tuple = ()
    help: str = ""
    is_list: bool = False
    modes: tuple[str, ...] = MODES
    app_default: Any = None  # the app's starting value where the model's default is "not given"
    zero_means_unset: bool = False  # the widget's 0 stands for None (the model's own default)
    old_queries: tuple[str, ...] = ()  # URL keys older links used for this setting, still read
    needs: str = ""  # the model feature the setting applies to (MODEL_FEATURES), '' = every model
    flag_shown: bool = False  # the CLI flag reads the shown units (--ttft-ms in ms), as links do

    # --- what the declaration says ---------------------------------------------------

    @property
    def key(self) -> str:
        return self.state or self.name

    @property
    def _field(self):
        return self.model.model_fields[self.name] if self.model is not None else None

    @property
    def value_type(self) -> type:
        if self.kind is not None:
            return self.kind
        annotation = self._field.annotation
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
        if typing.get_origin(annotation) is Literal:
            return type(typing.get_args(annotation)[0])
        return annotation

    @property
    def optional(self) -> bool:
        """None is a valid value (the model's own default applies)."""
        if self._field is None:
            return False
        return type(None) in typing.get_args(self._field.annotation)

    @property
    def choices(self) -> tuple:
        if self.options:
            return self.options
        if self._field is None:
            return ()
        annotation = self._field.annotation
        literal = [arg for arg in (annotation, *typing.get_args(annotation)) if typing.get_origin(arg) is Literal]
        return typing.get_args(literal[0]) if literal else ()

    @property
    def default_value(self) -> Any:
        """The model field's default; None where the model has none (a custom architecture's
        numbers start from the chosen preset instead)."""
        if self._field is None or self._field.is_required():
            return self.default
        return self._field.default

    def _bound(self, kinds: tuple[type, ...]) -> tuple[float | None, bool]:
        for item in self._field.metadata if self._field is not None else ():
            if isinstance(item, kinds):
                return next(v for v in (getattr(item, a, None) for a in ("gt", "ge", "lt", "le")) if v is not None), (
                    isinstance(item, (annotated_types.Gt, annotated_types.Lt))
                )
        return None, False

    @property
    def lower(self) -> tuple[float | None, bool]:
        """(lower bound, exclusive?)"""
        if self._field is None:
            return self.low, False
        return self._bound((annotated_types.Gt, annotated_types.Ge))

    @property
    def upper(self) -> tuple[float | None, bool]:
        if self._field is None:
            return self.high, False
        return self._bound((annotated_types.Lt, annotated_types.Le))

    @property
    def help_text(self) -> str:
        return self.help or (self._field.description if self._field is not None else "") or ""

    @property
    def cli_flag(self) -> str:
        return self.flag

    @property
    def start_value(self) -> Any:
        """What the app starts from: `app_default` where declared, else the default."""
        return self.app_default if self.app_default is not None else self.default_value

    def applies_to(self, spec: ModelSpec | None) -> bool:
        """Whether the setting means anything for `spec` (images for a model that reads them, a
        target length for an encoder-decoder); every setting applies while no model is known."""
        return not self.needs or spec is None or MODEL_FEATURES[self.needs](spec)

    # --- checking a value -------------------------------------------------------------

    def describe_range(self, scale: float = 1.0) -> str:
        """The bounds in words, divided by `scale` to read in the shown units (ms for a target in s)."""
        (low, low_open), (high, high_open) = self.lower, self.upper
        parts = []
        if low is not None:
            parts.append(f"{'greater than' if low_open else 'at least'} {readable(low / scale)}")
        if high is not None:
            parts.append(f"{'less than' if high_open else 'at most'} {readable(high / scale)}")
        return " and ".join(parts)

    def check(self, value: Any, name: str = "") -> Any:
        """`value` if it is valid for this setting, else SettingError naming the setting (or
        `name`, a CLI flag say)."""
        try:
            return self._checked(value)
        except SettingError as error:
            raise SettingError(f"{name or self.label}: {error}") from None

    def _checked(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if self.is_list:
            items = list(value)
            bad = [item for item in items if self.choices and item not in self.choices]
            if bad:
                raise SettingError(f"{bad[0]!r} is not one of the choices")
            return items
        kind = self.value_type
        if kind is bool:
            if not isinstance(value, bool):
                raise SettingError(f"expected true or false, got {value!r}")
            return value
        if kind in (int, float):
            return self._check_number(value, kind)
        if self.choices and value not in self.choices:
            raise SettingError(f"{value!r} is not one of {', '.join(map(str, self.choices))}")
        return value

    def _check_number(self, value: Any, kind: type) -> int | float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingError(f"expected a number, got {value!r}")
        if not math.isfinite(value):
            raise SettingError(f"must be a finite number, not {value!r}")
        if kind is int:
            if value != int(value):
                raise SettingError(f"must be a whole number, not {value!r}")
            value = int(value)
        (low, low_open), (high, high_open) = self.lower, self.upper
        too_low = low is not None and (value <= low if low_open else value < low)
        too_high = high is not None and (value >= high if high_open else value > high)
        if too_low or too_high:
            raise SettingError(f"must be {self.describe_range()}, not {readable(value)}")
        if self.choices and value not in self.choices:
            raise SettingError(f"must be one of {', '.join(map(str, self.choices))}")
        return float(value) if kind is float else value

    def parse(self, raw: str, name: str = "") -> Any:
        """A value from text (a URL parameter or a CLI argument), checked."""
        raw = raw.strip()
        if self.is_list:
            return self.check([item for item in raw.split(",") if item], name)
        if self.optional and raw.lower() in ("", "none"):
            return None
        kind = self.value_type
        if kind is bool:
            if raw.lower() not in ("1", "0", "true", "false"):
                raise SettingError(f"{name or self.label}: expected true or false, got {raw[:40]!r}")
            return raw.lower() in ("1", "true")
        if kind in (int, float):
            return self._parse_number(raw, name)
        return self.check(raw, name)

    def _parse_number(self, raw: str, name: str = "", scale: float = 1.0) -> Any:
        """A number from text, times `scale` (the shown units' factor), checked; 0 is None for a
        setting whose widget's 0 stands for the model's own default."""
        number = _number_from_text(raw, name or self.label)
        if self.zero_means_unset and number == 0:
            return None
        if scale == 1 or not math.isfinite(number):
            return self.check(number, name)
        try:
            return self.check(number * scale, name)
        except SettingError:  # say the bounds in the units the value was written in
            raise SettingError(
                f"{name or self.label}: must be {self.describe_range(scale)}, not {readable(number)}"
            ) from None

    def parse_flag(self, raw: str, flag: str) -> Any:
        """A CLI argument, checked, in the units the flag reads (`flag_shown`: the shown ones)."""
        if self.flag_shown and self.ui_scale != 1:
            return self._parse_number(raw.strip(), flag, scale=self.ui_scale)
        return self.parse(raw, flag)

    def parse_shown(self, raw: str) -> Any:
        """A value written in the units the app shows (billions of tokens, per cent), as links
        carry it, checked in the model's units."""
        if self.ui_scale == 1 or self.optional and raw.strip().lower() in ("", "none"):
            return self.parse(raw)
        return self._parse_number(raw.strip(), scale=self.ui_scale)

    def format_shown(self, value: Any) -> str:
        """The text parse_shown reads back to `value`."""
        if self.ui_scale == 1 or value is None:
            return self.format(value)
        return _exact_text(value / self.ui_scale)

    def format(self, value: Any) -> str:
        """The text `parse` reads back to `value`."""
        if self.is_list:
            return ",".join(map(str, value))
        if isinstance(value, bool):
            return "1" if value else "0"
        if value is None:
            return "none"
        return _exact_text(value) if isinstance(value, float) else str(value)


def _exact_text(number: float) -> str:
    """The shortest text that reads back to exactly `number` (2 rather than 2.0, but never a
    rounded 0.123457 for 0.123456789): a link must reproduce the value the user set."""
    short = f"{number:g}"
    return short if float(short) == number else repr(number)


def readable(number: float) -> str:
    """A bound or value as people write it: 10,000,000 rather than 1e+07."""
    if float(number).is_integer() and abs(number) < 1e15:
        return f"{int(number):,}"
    return f"{number:g}"


_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: str.isdigit() also takes '²', which int() refuses
_DECIMAL_NUMBER = re.compile(
    r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE
)


def _number_from_text(raw: str, name: str) -> float | int:
    """An int when the text is a whole number (exactly, even past float precision), else a float.
    Only ASCII digits are numbers: float() would also read '١٢' or '1_000'."""
    if _WHOLE_NUMBER.fullmatch(raw):
        if len(raw) > 400:  # past any bound, and int() refuses more than 4,300 digits
            raise SettingError(f"{name}: {raw[:20]}... is far too large")
        return int(raw)
    if _DECIMAL_NUMBER.fullmatch(raw):
        return float(raw)
    raise SettingError(f"{name}: expected a number, got {raw[:40]!r}")


def _reads_images(spec: ModelSpec) -> bool:
    return vision_tower(spec) is not None


def _cross_attends_to_images(spec: ModelSpec) -> bool:
    """Llama 3.2 Vision: images reach the language model as cross-attention keys and values."""
    tower = vision_tower(spec)
    return tower is not None and tower.cross_attention_layers > 0


def _has_decoder(spec: ModelSpec) -> bool:
    """T5: decoder layers with cross-attention to the encoder, run on the target's tokens."""
    return extension(spec, "cross_attention_layers") > 0


# what a setting's `needs` names: the model feature without which the setting changes nothing
MODEL_FEATURES = {
    "images": _reads_images,
    "image_cross_attention": _cross_attends_to_images,
    "decoder": _has_decoder,
}


def training(name: str, query: str, label: str, **extra) -> Setting:
    return Setting(name, query, label, model=TrainingSettings, flag=extra.pop("flag", _flag(name)), **extra)


def serving(name: str, query: str, label: str, **extra) -> Setting:
    return Setting(name, query, label, model=ServingSettings, modes=("inference",), **extra)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


TRAINING_MODES = tuple(mode for mode in MODES if mode != "inference")
ADAPTER_MODES = ("finetune-lora", "finetune-qlora")


def _declare() -> list[Setting]:
    def model(name: str, query: str, label: str, state: str) -> Setting:
        return Setting(name, query, label, model=ModelSpec, state=state)

    def time(name: str, query: str, label: str, **extra) -> Setting:
        return Setting(name, query, label, model=TimeSettings, **extra)

    def run(name: str, query: str, label: str, **extra) -> Setting:
        return Setting(name, query, label, model=RunInputs, flag=extra.pop("flag", _flag(name)), **extra)

    train_only = {"modes": TRAINING_MODES}
    return [
        Setting("mode", "mode", "Mode", kind=str, default="train", options=MODES, flag="--mode"),
        # the model
        model("n_layers", "layers", "Layers", "c_layers"),
        model("hidden_size", "hidden", "Hidden", "c_hidden"),
        model("n_heads", "heads", "Heads", "c_heads"),
        model("n_kv_heads", "kv_heads", "KV heads", "c_kv_heads"),
        model("ffn_hidden_size", "ffn", "FFN size", "c_ffn"),
        model("vocab_size", "vocab", "Vocab", "c_vocab"),
        model("activation", "act", "Activation", "c_activation"),
        model("norm", "norm", "Norm", "c_norm"),
        model("tied_embeddings", "tied", "Tied embeddings", "c_tied"),
        # training
        training("micro_batch", "mb", "Micro-batch", **train_only),
        training("seq_len", "seq", "Sequence length", unit="tokens", **train_only),
        training(
            "target_len",
            "target",
            "Target length (encoder-decoder; 0 = as the input)",
            unit="tokens",
            zero_means_unset=True,
            needs="decoder",
            **train_only,
        ),
        training("grad_accum", "ga", "Grad. accumulation", **train_only),
        training("images_per_sample", "imgs", "Images per sample", needs="images", **train_only),
        training(
            "image_tokens",
            "img_tokens",
            "Tokens per image (0 = the model's)",
            zero_means_unset=True,
            needs="images",
            **train_only,
        ),
        training("freeze_vision_tower", "freeze_vt", "Freeze the vision tower", modes=("train",), needs="images"),
        # image models of the vision library (calculators.models.vision_library); a text model ignores it.
        # The image size and channels-last switch are declared once, with the image settings below.
        Setting(
            "data_loader",
            "loader",
            "Data loader",
            kind=str,
            default="cpu",
            options=("cpu", "dali-gpu"),
            flag="--data-loader",
            help="where JPEG decoding and augmentation run: the host's CPU cores or DALI on the GPU",
            modes=TRAINING_MODES,
        ),
        training("gpus", "gpus", "Data-parallel GPUs", **train_only),
        training("precision", "prec", "Precision", **train_only),
        training("optimizer", "opt", "Optimizer", **train_only),
        training("optimizer_impl", "impl", "Optimizer implementation", **train_only),
        training("zero", "zero", "ZeRO stage", options=(0, 1, 2, 3), **train_only),
        training("checkpointing", "ckpt", "Activation checkpointing", **train_only),
        training("attention", "attn", "Attention", **train_only),
        training("lora_rank", "rank", "LoRA rank", modes=ADAPTER_MODES),
        training("lora_targets", "targets", "LoRA on", modes=ADAPTER_MODES),
        training("frozen_layers", "frozen", "Frozen first layers", modes=("train",)),
        training("offload_optimizer", "off_opt", "Optimizer on the CPU (ZeRO-Offload)", **train_only),
        training("offload_parameters", "off_params", "Parameters on the CPU (ZeRO-Infinity, ZeRO-3)", **train_only),
        training("tensor_parallel", "tp", "Tensor parallel", **train_only),
        training("pipeline_parallel", "pp", "Pipeline stages", **train_only),
        # the training stack (framework defaults fill what is left unset)
        training("framework", "fw", "Framework", **train_only),
        training("loss", "loss", "Loss", **train_only),
        training("loss_chunks", "chunks", "Loss chunks", **train_only),
        training("checkpoint_unit", "ckpt_unit", "Checkpointing wraps", **train_only),
        training("logits_in_backward", "logits_bwd", "Logits during backward", **train_only),
        training("sharding_impl", "shard_impl", "ZeRO-3 implementation", **train_only),
        training("liger", "liger", "Liger kernels", **train_only),
        training("optimizer_in_backward", "opt_bwd", "Optimizer step in backward", **train_only),
        training("activation_offload", "act_off", "Activations on the CPU", **train_only),
        training("keep_gradients", "keep_grads", "Gradients kept between steps", **train_only),
        training("quant_backend", "qbackend", "NF4 kernels", modes=("finetune-qlora",)),
        training("nf4_scales", "nf4_scales", "NF4 block scales", modes=("finetune-qlora",)),
        training("quantised_linears", "nf4_linears", "Linears in NF4", modes=("finetune-qlora",)),
        training("lora_dropout", "lora_drop", "LoRA dropout", modes=ADAPTER_MODES),
        training("qkv_projection", "qkv_proj", "q/k/v projection", **train_only),
        # image models of the vision library (micro-batch, precision, optimizer, checkpointing, GPUs and ZeRO
        # are the training settings above, read for images)
        Setting(
            "image_size",
            "img_px",
            "Image size (pixels per side; 0 = the model's)",
            model=VisionTrainingInput,
            flag="--image-size",
            unit="pixels",
            zero_means_unset=True,
            modes=TRAINING_MODES,
        ),
        Setting(
            "channels_last",
            "nhwc",
            "Channels-last memory format (NHWC)",
            model=VisionTrainingInput,
            flag="--channels-last",
            modes=TRAINING_MODES,
        ),
        # the app keeps an image model's micro-batch, precision, optimizer and checkpointing apart from a
        # transformer's (their choices differ); the command line reads them from the shared training flags
        Setting(
            "micro_batch",
            "img_mb",
            "Micro-batch (images per GPU)",
            model=VisionTrainingInput,
            state="v_micro_batch",
            app_default=64,
            modes=TRAINING_MODES,
        ),
        Setting(
            "precision",
            "img_prec",
            "Precision",
            model=VisionTrainingInput,
            state="v_precision",
            app_default="amp-bf16",
            modes=TRAINING_MODES,
        ),
        Setting(
            "optimizer", "img_opt", "Optimizer", model=VisionTrainingInput, state="v_optimizer", modes=TRAINING_MODES
        ),
        Setting(
            "checkpointing",
            "img_ckpt",
            "Activation checkpointing",
            model=VisionTrainingInput,
            state="v_checkpointing",
            modes=TRAINING_MODES,
        ),
        Setting(
            "cudnn_workspace_gib",
            "cudnn_gib",
            "cuDNN workspace (GiB)",
            model=VisionTrainingInput,
            flag="--cudnn-workspace-gib",
            modes=TRAINING_MODES,
        ),
        # one torch.compile switch (--compile, declared with the run's time settings) feeds memory too
        training("compile", "t_compile", "torch.compile", flag="", state="cost_compile", **train_only),
        training("load_whole_model", "load_whole", "Whole model on the GPU while loading", **train_only),
        training("cuda_context_gib", "ctx_gib", "CUDA context (GiB)", **train_only),
        training("cublas_workspace_gib", "cublas_gib", "cuBLAS workspace (GiB)", **train_only),
        training("allocator_reserve_fraction", "reserve", "Allocator reserve (fraction)", **train_only),
        training("nccl_gib", "nccl_gib", "NCCL buffers (GiB)", **train_only),
        # serving
        serving("weight_precision", "wprec", "Weights", state="s_weight_precision", flag="--weight-precision"),
        serving("fp4_format", "fp4fmt", "FP4 format", state="s_fp4_format", flag="--fp4-format"),
        serving("kv_cache_precision", "kvprec", "KV cache", state="s_kv_precision", flag="--kv-cache-precision"),
        serving("context_len", "ctx", "Context (tokens)", state="s_context_len", flag="--context-len"),
        serving("concurrent_sequences", "conc", "Concurrent sequences", state="s_concurrency", flag="--concurrency"),
        serving(
            "images_per_sequence",
            "s_imgs",
            "Images per sequence (cross-attention)",
            state="s_images",
            flag="--images-per-sequence",
            needs="image_cross_attention",
        ),
        serving(
            "max_batched_tokens",
            "mbt",
            "Tokens per prefill chunk",
            state="s_max_batched_tokens",
            flag="--max-batched-tokens",
        ),
        serving(
            "tensor_parallel", "tp_serve", "Tensor-parallel GPUs", state="s_tensor_parallel", flag="--tensor-parallel"
        ),
        # the requests served and the latency targets (Time and cost, Plan a run; the CLI's time, cost and plan
        # with --mode inference, through cli.add_serving_request_arguments)
        Setting(
            "input_len",
            "in_len",
            "Input tokens per request",
            model=ServingRequest,
            flag="--input-len",
            state="serve_input_len",
            default=1024,
            modes=("inference",),
        ),
        Setting(
            "output_len",
            "out_len",
            "Output tokens per request",
            model=ServingRequest,
            flag="--output-len",
            state="serve_output_len",
            default=1024,
            modes=("inference",),
        ),
        # no rate unless given on the command line (cost then leaves the replicas and month out, plan asks for
        # one); the app starts from 1 request/s
        Setting(
            "requests_per_s",
            "rps",
            "Requests per second",
            model=ServingPlanRequest,
            flag="--requests-per-s",
            state="serve_requests_per_s",
            app_default=1.0,
            modes=("inference",),
            help="requests arriving per second: the replicas that carry them and the USD per month",
        ),
        # targets in ms, 0 = none; the app starts from MLPerf Inference's Llama-2-70B Server constraints,
        # TTFT 2,000 ms and TPOT 200 ms (github.com/mlcommons/inference, loadgen/mlperf.conf); the command
        # line has no target unless given
        Setting(
            "ttft_s",
            "ttft_ms",
            "Time to first token target (ms, 0 = none)",
            model=LatencyLimits,
            flag="--ttft-ms",
            flag_shown=True,
            state="serve_ttft_ms",
            ui_scale=1e-3,
            zero_means_unset=True,
            app_default=2.0,
            modes=("inference",),
            help="the longest wait for the first token, ms; 0 = no target. The app starts at MLPerf Inference's "
            "2,000 ms",
        ),
        Setting(
            "tpot_s",
            "tpot_ms",
            "Time per output token target (ms, 0 = none)",
            model=LatencyLimits,
            flag="--tpot-ms",
            flag_shown=True,
            state="serve_tpot_ms",
            ui_scale=1e-3,
            zero_means_unset=True,
            app_default=0.2,
            modes=("inference",),
            help="the longest time between output tokens, ms; 0 = no target. The app starts at MLPerf Inference's "
            "200 ms",
        ),
        # the run: dataset, throughput, prices
        time(
            "dataset_tokens",
            "tokens_b",
            "Tokens per epoch (billions)",
            state="cost_tokens_billion",
            ui_scale=1e9,
            flag="--dataset-tokens",
            help="tokens in one pass over the data",
            app_default=1e9,
            old_queries=("plan_tokens_b",),  # the Plan page's own token count, now this one setting
        ),
        time(
            "dataset_samples",
            "samples",
            "Samples per epoch (sequences)",
            state="cost_samples",
            flag="--dataset-samples",
            app_default=100_000,
        ),
        time("epochs", "epochs", "Epochs", state="cost_epochs", flag="--epochs"),
        time(
            "utilisation",
            "mfu",
            "Utilisation (% of dense peak; 0 = per-GPU default)",
            state="cost_utilisation_pct",
            ui_scale=0.01,
            flag="--utilisation",
            zero_means_unset=True,
        ),
        time(
            "inter_node_gbps",
            "net_gbps",
            "Network between nodes (Gb/s per GPU)",
            state="cost_inter_node_gbps",
            flag="--inter-node-gbps",
        ),
        time(
            "overlap_fraction",
            "overlap",
            "Data-parallel traffic hidden under compute (%)",
            state="cost_overlap_pct",
            ui_scale=0.01,
            flag="--overlap",
        ),
        time(
            "tp_overlap_fraction",
            "tp_overlap",
            "Tensor-parallel traffic hidden (%)",
            state="cost_tp_overlap_pct",
            ui_scale=0.01,
            flag="--overlap-tp",
        ),
        time(
            "pp_overlap_fraction",
            "pp_overlap",
            "Pipeline traffic hidden (%)",
            state="cost_pp_overlap_pct",
            ui_scale=0.01,
            flag="--overlap-pp",
        ),
        time(
            "nccl_sm_share",
            "nccl_sms",
            "SMs hidden collectives hold (%)",
            state="cost_nccl_sm_share_pct",
            ui_scale=0.01,
            flag="--nccl-sm-share",
        ),
        time("gpus_per_node", "gpn", "GPUs per node", state="cost_gpus_per_node", flag="--gpus-per-node"),
        time(
            "virtual_stages", "vstages", "Virtual pipeline stages", state="cost_virtual_stages", flag="--virtual-stages"
        ),
        time("expert_parallel", "ep", "Expert parallel", state="cost_expert_parallel", flag="--expert-parallel"),
        time(
            "context_parallel",
            "cp",
            "Context parallel (ranks per sequence)",
            state="cost_context_parallel",
            flag="--context-parallel",
        ),
        time("compile", "compile", "torch.compile", state="cost_compile", flag="--compile"),
        time("kernels", "kernels", "Norm, RoPE, activation and loss kernels", state="cost_kernels", flag="--kernels"),
        time("loss_kernel", "loss_kernel", "Cross-entropy kernel", state="cost_loss_kernel", flag="--loss-kernel"),
        time(
            "attention_kernel",
            "attn_kernel",
            "Attention kernel",
            state="cost_attention_kernel",
            flag="--attention-kernel",
        ),
        time("fp32_uses_tf32", "tf32", "fp32 matmuls on TF32", state="cost_tf32", flag="--tf32"),
        time("launch", "launch", "Kernel launch (host)", state="cost_launch", flag="--launch"),
        time(
            "sustained_clock_factor",
            "sustained_clock",
            "Sustained over burst matmul clock (assumed)",
            state="cost_sustained_clock",
            flag="--sustained-clock",
        ),
        time(
            "matmul_fraction",
            "mm_frac",
            "Measured matmul fraction of peak (0 = mamf-finder)",
            state="cost_matmul_fraction",
            flag="--matmul-fraction",
            zero_means_unset=True,
        ),
        time(
            "host_cores_per_gpu",
            "host_cores",
            "Host CPU cores per GPU (CPU offload's optimizer step)",
            state="cost_host_cores",
            flag="--host-cores-per-gpu",
        ),
        time(
            "host_link_gbytes_per_s",
            "host_gbs",
            "Host link GB/s each way (0 = the GPU's PCIe or NVLink-C2C)",
            state="cost_host_link_gbs",
            flag="--host-link-gbs",
            zero_means_unset=True,
        ),
        run("checkpoint_write_min", "ckpt_min", "Checkpoint write (minutes)", state="cost_checkpoint_min"),
        run("restart_min", "restart_min", "Restart after an interruption (minutes)", state="cost_restart_min"),
        run(
            "interruptions_per_hour",
            "rate",
            "Interruptions per instance-hour",
            state="cost_interruptions_per_hour",
            app_default=DEFAULT_INTERRUPTIONS_PER_HOUR,
        ),
        run("discount_pct", "discount", "Negotiated discount on every price (%)", state="cost_discount_pct"),
        Setting(
            "purchase_usd_per_gpu",
            "buy_usd",
            "Price per GPU (USD, 0 = catalogue)",
            model=OwnershipSettings,
            state="cost_buy_price",
            zero_means_unset=True,  # the widget's 0 is the catalogue's price, not a price of 0 (gt=0)
        ),
        Setting("years", "buy_years", "Years of use", model=OwnershipSettings, state="cost_buy_years"),
        Setting("pue", "buy_pue", "PUE", model=OwnershipSettings, state="cost_buy_pue"),
        Setting(
            "electricity_usd_per_kwh", "buy_kwh", "Electricity (USD/kWh)", model=OwnershipSettings, state="cost_buy_kwh"
        ),
        # Energy and carbon of the rented options (and the owned power's share of TDP and host watts)
        Setting(
            "gpu_share_of_tdp",
            "gpu_share",
            "GPU draw while training (% of TDP)",
            model=EnergySettings,
            state="cost_gpu_share_pct",
            ui_scale=0.01,
            flag="--gpu-share-of-tdp",
        ),
        Setting(
            "host_w_per_gpu",
            "host_w",
            "Host power per GPU (W)",
            model=EnergySettings,
            state="cost_host_w",
            flag="--host-w-per-gpu",
        ),
        Setting("pue", "pue", "PUE of the cloud data centre", model=EnergySettings, state="cost_pue", flag="--pue"),
        Setting(
            "grid_gco2e_per_kwh",
            "grid_g",
            "Grid intensity (gCO2e/kWh, 0 = each region's)",
            model=EnergySettings,
            state="cost_grid_g",
            flag="--grid-gco2-per-kwh",
            zero_means_unset=True,  # the widget's 0 is each region's figure from data/grid_intensity.csv
        ),
    ]


@functools.cache
def all_settings() -> tuple[Setting, ...]:
    """Every declared setting."""
    return tuple(_declare())


@functools.cache
def _settings_by_key() -> dict[str, Setting]:
    return {item.key: item for item in all_settings()}


def setting(key: str) -> Setting:
    """The setting kept under `key` in the app's session."""
    return _settings_by_key()[key]


def settings_of(model: type[BaseModel]) -> list[Setting]:
    return [item for item in all_settings() if item.model is model]


def values_for(model: type[BaseModel], values: dict[str, Any], mode: str | None = None) -> dict[str, Any]:
    """The fields of `model` among `values` (keyed by setting key), by field name; with `mode`,
    only the settings that mode uses (a hidden LoRA rank does not reach full training)."""
    return {
        item.name: values[item.key]
        for item in settings_of(model)
        if item.key in values and (mode is None or mode in item.modes)
    }


def applicable_values(values: dict[str, Any], spec: ModelSpec) -> dict[str, Any]:
    """`values` (keyed by setting key) without the settings that mean nothing for `spec`: the images a
    user set for a vision-language model stay kept, but do not reach a text-only model, whose own
    default applies (the app hides those controls; the command line refuses them or names them ignored)."""
    return {
        key: value for key, value in values.items() if key not in _settings_by_key() or setting(key).applies_to(spec)
    }


def build_workload(mode: str, model: ModelSpec, values: dict[str, Any], gpu: GpuTarget | None = None) -> Workload:
    """The mode's workload from setting values keyed as declared here (the pages' session keys,
    the CLI's setting_values): the settings the mode uses, by field name. Raises pydantic's
    ValidationError (or ValueError) naming what is wrong."""
    settings_model = ServingSettings if WORKLOAD_OF_MODE[mode] is ServeWorkload else TrainingSettings
    return workload_from_fields(mode, model, values_for(settings_model, values, mode), gpu)
