"""Command line: `python -m calculators memory|fit|gpus|cost|trace|calibrate|presets ...`.

Pure functions compute; this module only parses arguments and prints. Bad input
prints one line starting with 'error:' and exits with code 2: user text echoed in it goes through
`echo` (control characters escaped), and warnings (a framework config's unknown keys) are printed
only when the command succeeds, after its output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from calculators.cost.energy import EnergySettings
from calculators.cost.options import CostOption, adjusted_prices, cost_options
from calculators.cost.prices import PriceCatalogueError, load_prices, parse_price_csv
from calculators.cost.run_inputs import RunInputs
from calculators.cost.serving import serving_cost_options
from calculators.hardware.catalogue import GpuSpec, find_gpu, load_gpu_catalogue
from calculators.hardware.csv_rows import echo, one_line
from calculators.interface import vision_cli
from calculators.interface.settings import Setting, SettingError, all_settings, build_workload, values_for
from calculators.interface.vision_args import VisionUsageError, named_vision_model
from calculators.interface.vision_commands import vision_fit_output, vision_memory_output
from calculators.memory.engine import estimate_memory
from calculators.memory.fit import check_fit, suggestions, verdict
from calculators.memory.fit_matrix import fit_matrix, gpu_memory_gib
from calculators.memory.result import COMPONENT_LABEL
from calculators.memory.serving import estimate_serving, max_concurrency, max_context_len, serving_table
from calculators.memory.vision_training import VisionTrainingInput
from calculators.models.geometry import active_parameters
from calculators.models.hf_config import (
    IMAGE_MODEL_HINT,
    IMAGE_MODEL_SIZED_PARAMETERS,
    ModelInputError,
    describe_validation_error,
    spec_from_hf_config,
    spec_from_parameter_count,
)
from calculators.models.hub import fetch_hub_config
from calculators.models.library import ModelNotFound
from calculators.models.names import resolve_any, search_any
from calculators.models.presets import load_presets
from calculators.models.spec import ModelSpec
from calculators.plan.changes import RANKING_TIME_SETTINGS, RankedChange, best_few, ranked_changes
from calculators.plan.figures import hours_range_text, hours_text, usd_range_text, usd_text
from calculators.plan.search import DEFAULT_MAX_GPUS, PlanRequest, PlanResult, plan_run
from calculators.plan.serving import ServingPlanRequest, ServingPlanResult, plan_serving, rented_words
from calculators.timing.context_parallel import rank_settings
from calculators.timing.estimate import estimate_time
from calculators.timing.serving import (
    LatencyLimits,
    ServingRequest,
    context_problem,
    estimate_serving_speed,
    serving_assumptions,
)
from calculators.timing.settings import STEP_SETTING_FIELDS, TimeSettings
from calculators.validation.error_band import time_band_for
from calculators.workload.build import (
    ServeWorkload,
    TrainingWorkload,
    Workload,
    describe_workload_error,
)
from calculators.workload.config_fields import FrameworkConfigError
from calculators.workload.contradictions import workload_problems
from calculators.workload.framework_files import (
    describe_unknown,
    merged_values,
    read_framework_config,
)
from calculators.workload.serving import ServingSettings
from calculators.workload.training import TrainingSettings


class UsageError(Exception):
    """Bad arguments: reported as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the whole usage first
        raise UsageError(message)


def _setting_type(item: Setting, flag: str):
    """argparse type for a declared setting: parse and check, message naming the flag."""

    def parse(raw: str):
        try:
            return item.parse_flag(raw, flag)
        except SettingError as error:
            raise UsageError(str(error)) from None

    return parse


def _argparse_help(text: str) -> str:
    """A declared help text as argparse takes it: argparse %-formats help, so a bare '%' ('discount
    (%)') would end `--help` in "ValueError: incomplete format"; every '%' is doubled."""
    return text.replace("%", "%%")


class _StoreGiven(argparse.Action):
    """Stores the flag's value and notes that it was given (args.given_settings), so that a path
    with a default of its own (an image model's micro-batch) tells "not given" from the default."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given_settings = {*getattr(namespace, "given_settings", ()), self.dest}


def add_setting_arguments(parser: argparse.ArgumentParser, items: Iterable[Setting]) -> None:
    """One flag per declared setting (a flag two settings share, --tensor-parallel, once):
    type, choices, default and help come from the declaration in calculators.interface.settings."""
    seen = {action.option_strings[0] for action in parser._actions if action.option_strings}
    for item in items:
        if not item.flag or item.flag in seen:
            continue
        seen.add(item.flag)
        help_text = _argparse_help(item.help_text or item.label)
        if item.value_type is bool:
            parser.add_argument(item.flag, action="store_true", help=help_text)
        elif item.choices and item.value_type is str:
            parser.add_argument(item.flag, choices=item.choices, default=item.default_value, help=help_text,
                                action=_StoreGiven)  # fmt: skip
        else:
            parser.add_argument(item.flag, type=_setting_type(item, item.flag), default=item.default_value,
                                help=help_text, action=_StoreGiven)  # fmt: skip


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The model flags, then the mode, training and serving flags of calculators.interface.settings."""
    model = parser.add_argument_group("model (one of)")
    model.add_argument(
        "--model",
        help="preset name or Hugging Face id (org/name[@revision]), e.g. llama-3.1-8b; or an image model of the "
        "vision library by its torchvision, timm or Hub name, e.g. resnet50, vit_base_patch16_224",
    )
    model.add_argument("--config-json", type=Path, help="a Hugging Face config.json file")
    model.add_argument("--params", type=float, help="a bare parameter count, e.g. 7e9 (shape assumed)")
    parser.add_argument(
        "--framework-config",
        type=Path,
        help="a torchtune or axolotl YAML, an accelerate config YAML, a DeepSpeed JSON or HF TrainingArguments JSON; "
        "fills the settings no flag gives",
    )
    workload = [
        item for item in all_settings() if item.model in (None, TrainingSettings, ServingSettings, VisionTrainingInput)
    ]
    add_setting_arguments(parser.add_argument_group("workload"), workload)
    step = [item for item in all_settings() if item.model is TimeSettings and item.name in STEP_SETTING_FIELDS]
    add_setting_arguments(parser.add_argument_group("step (placement, overlap, schedule)"), step)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _flag_dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def setting_values(args: argparse.Namespace) -> dict:
    """Every declared setting the command was given (or defaulted), keyed as declared."""
    return {item.key: getattr(args, _flag_dest(item.flag)) for item in all_settings() if item.flag and
            hasattr(args, _flag_dest(item.flag))}  # fmt: skip


def model_from_args(args: argparse.Namespace) -> ModelSpec:
    chosen = [flag for flag in ("model", "config_json", "params") if getattr(args, flag) is not None]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --model, --config-json or --params")
    try:
        if args.model is not None:
            return _transformer(resolve_any(args.model, fetch_hub_config))
        if args.config_json is not None:
            return spec_from_hf_config(args.config_json.read_bytes(), args.config_json.name)
        if args.params < IMAGE_MODEL_SIZED_PARAMETERS:
            _warn(args, f"--params {args.params:g}: {IMAGE_MODEL_HINT} with --model")
        return spec_from_parameter_count(args.params)
    except KeyError as error:
        raise UsageError(str(error).strip("'\"")) from None
    except ModelNotFound as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"cannot read {echo(args.config_json)}: {error.strerror}") from None
    except ModelInputError as error:
        raise UsageError(str(error)) from None


def _transformer(model):
    """A transformer's ModelSpec; an image model of the vision library is answered by `memory` and `fit`."""
    if isinstance(model, ModelSpec):
        return model
    raise UsageError(f"{model.key} is an image model of the vision library: `memory` and `fit` size it")


def _refuse_image_flags(args: argparse.Namespace) -> None:
    """--image-size and --channels-last describe an image model; a transformer would silently ignore them."""
    if getattr(args, "image_size", None) is not None or getattr(args, "channels_last", False):
        raise UsageError("--image-size and --channels-last apply to image models of the vision library only")


def _vision_answer(answer) -> str:
    """An image model's answer, its problems as one usage line."""
    try:
        return answer()
    except VisionUsageError as error:
        raise UsageError(str(error)) from None


def _with_framework_config(args: argparse.Namespace, values: dict) -> dict:
    """The settings of --framework-config FILE in place of those no flag gave; unknown keys
    are kept in `args.warnings` (printed by `main` only when the command succeeds) and the rest is kept."""
    path = getattr(args, "framework_config", None)
    if path is None:
        return values
    try:
        config = read_framework_config(path.read_bytes(), path.name)
    except OSError as error:
        raise UsageError(f"cannot read {echo(path)}: {error.strerror}") from None
    except FrameworkConfigError as error:
        raise UsageError(str(error)) from None
    warning = describe_unknown(config, path.name)
    if warning:
        _warn(args, warning)
    defaults = {item.name: (item.key, item.default_value) for item in all_settings() if item.model is TrainingSettings}
    defaults["mode"] = ("mode", "train")
    return merged_values(values, config, defaults)


def _warn(args: argparse.Namespace, warning: str) -> None:
    """Keep a warning for `main` to print after the command's output (not at all when it fails)."""
    if not hasattr(args, "warnings"):
        args.warnings = []
    if warning not in args.warnings:
        args.warnings.append(warning)


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The mode's workload from the flags; every problem is one usage line."""
    spec = model_from_args(args)
    _refuse_image_flags(args)
    try:
        values = _with_framework_config(args, setting_values(args))
        return build_workload(values.get("mode", args.mode), spec, values)
    except ValueError as error:  # pydantic's ValidationError is one
        raise UsageError(describe_workload_error(error)) from None


def training_workload(args: argparse.Namespace, command: str) -> TrainingWorkload:
    """A training workload, or one usage line saying the command does not serve."""
    workload = workload_from_args(args)
    if not workload.is_training:
        raise UsageError(
            f"`{command}` runs a training step; --mode inference is answered by `memory`, `fit`, `time`, `cost` "
            "and `plan`"
        )
    return workload


def serving_result(spec: ModelSpec, settings: ServingSettings, gpu_memory_gib: float | None) -> dict:
    """The inference mode's answer, shaped like the training one (peak_gib, components_gib)."""
    estimate = estimate_serving(spec, settings)
    result = {
        "model": spec.name,
        "mode": "inference",
        "settings": settings.model_dump(exclude={"overheads"}),
        "peak_gib": estimate.total_gib,
        "components_gib": {
            "weights": estimate.weights_gib,
            "kv_cache": estimate.kv_cache_gib,
            "activations": estimate.activations_gib,
            "framework_overhead": estimate.overhead_gib,
        },
    } | estimate.model_dump()
    if gpu_memory_gib is not None:
        result["fit"] = {
            "gpu_memory_gib": gpu_memory_gib,
            "verdict": verdict(estimate.total_gib, gpu_memory_gib),
            "headroom_gib": gpu_memory_gib - estimate.total_gib,
            "max_concurrency": max_concurrency(spec, settings, gpu_memory_gib),
            "max_context_len": max_context_len(spec, settings, gpu_memory_gib),
        }
    return result


def format_serving_table(result: dict) -> str:
    lines = [f"{result['model']} (inference): {result['peak_gib']:.2f} GiB per GPU"]
    lines += [f"warning: {warning}" for warning in result["warnings"]]
    for name, gib in result["components_gib"].items():
        lines.append(f"  {name.replace('_', ' '):<32}{gib:>10.2f} GiB")
    lines.append(f"  {'KV cache per sequence':<32}{result['kv_cache_per_sequence_gib']:>10.3f} GiB")
    if "fit" in result:
        fit = result["fit"]
        lines.append(
            f"On {fit['gpu_memory_gib']:g} GiB: {fit['verdict']} (headroom {fit['headroom_gib']:.2f} GiB); "
            f"most sequences {fit['max_concurrency']}, longest context {fit['max_context_len']:,}"
        )
    return "\n".join(lines)


def _refuse_context_parallel(args: argparse.Namespace, command: str) -> None:
    """The memory engine takes no context-parallel degree: `command` refuses one rather than give
    the peak of whole sequences (`time` and `cost` take it, the peak at seq_len / cp per GPU)."""
    if getattr(args, "context_parallel", 1) > 1:
        raise UsageError(
            f"`{command}` does not model context parallel; give --seq-len as the tokens each GPU holds "
            "(seq_len / context parallel), or use `time` or `cost` with --context-parallel"
        )


def memory_command(args: argparse.Namespace) -> str:
    if args.gpu_memory_gib is not None and not 0 < args.gpu_memory_gib < 100_000:
        raise UsageError("--gpu-memory-gib must be a positive number of GiB below 100,000")
    _refuse_context_parallel(args, "memory")
    image_model = named_vision_model(args)
    if image_model is not None:
        gpu = _named_gpu(args)
        capacity = args.gpu_memory_gib if args.gpu_memory_gib is not None or gpu is None else gpu_memory_gib(gpu)
        return _vision_answer(lambda: vision_memory_output(args, image_model, capacity))
    workload = workload_from_args(args)
    if not workload.is_training:
        result = serving_result(workload.model, workload.serving, args.gpu_memory_gib)
        result["warnings"] = workload_problems(workload)
        return json.dumps(result, indent=2) if args.json else format_serving_table(result)
    spec, settings = workload.model, workload.training
    estimate = estimate_memory(spec, settings)
    result = {"model": spec.name, "mode": workload.mode, "settings": settings.model_dump(exclude={"overheads"})}
    result |= estimate.model_dump() | {"warnings": workload_problems(workload)}
    result["active_parameters"] = active_parameters(spec)
    result["active_parameters_without_embedding"] = result["active_parameters"] - spec.vocab_size * spec.hidden_size
    gpu = _named_gpu(args)
    capacity_gib = args.gpu_memory_gib if args.gpu_memory_gib is not None or gpu is None else gpu_memory_gib(gpu)
    if capacity_gib is not None:
        result["fit"] = check_fit(spec, settings, capacity_gib).model_dump()
        result["suggestions"] = [s.model_dump() for s in suggestions(spec, settings, capacity_gib)]
        ranked = ranked_changes(spec, settings, capacity_gib, gpu, _ranking_time_settings(args))
        result["changes"] = [option.model_dump() for option in ranked]
    if args.json:
        return json.dumps(result, indent=2)
    return format_memory_table(result)


def _named_gpu(args: argparse.Namespace) -> GpuSpec | None:
    """The catalogue GPU of --gpu, or None without the flag."""
    if getattr(args, "gpu", None) is None:
        return None
    try:
        return find_gpu(args.gpu)
    except KeyError as error:
        raise UsageError(str(error).strip("'\"")) from None


def _ranking_time_settings(args: argparse.Namespace) -> TimeSettings:
    """The step flags (placement, overlap, kernels) the time model ranks the changes with."""
    step = {
        item.name: getattr(args, _flag_dest(item.flag))
        for item in all_settings()
        if item.model is TimeSettings and item.name in STEP_SETTING_FIELDS
    }
    try:
        return RANKING_TIME_SETTINGS.model_validate(RANKING_TIME_SETTINGS.model_dump() | step)
    except ValidationError as error:
        raise UsageError(describe_validation_error(error)) from None


def _change_lines(options: list[RankedChange]) -> list[str]:
    """The few combinations the Memory page shows, one sentence each."""
    if not options:
        return []
    return ["Changes that fit, cheapest first:", *(f"  {option.sentence()}" for option in best_few(options))]


def format_memory_table(result: dict) -> str:
    lines = [f"{result['model']}: peak {result['peak_gib']:.2f} GiB at {result['peak_phase']}"]
    lines += [f"warning: {warning}" for warning in result["warnings"]]
    for name, gib in result["components_gib"].items():
        if gib > 0:
            lines.append(f"  {COMPONENT_LABEL[name]:<32}{gib:>10.2f} GiB")
    lines.append(f"  {'allocated / reserved':<32}{result['allocated_gib']:>10.2f} / {result['reserved_gib']:.2f} GiB")
    lines.append(
        f"  {'trainable / all parameters':<32}{result['trainable_parameters']:>14,} / {result['parameters']:,}"
    )
    if result.get("host_memory_gib"):
        lines.append(f"  {'host RAM per GPU (offload)':<32}{result['host_memory_gib']:>10.2f} GiB")
    if result.get("pipeline_stage", "only") != "only":
        lines.append(f"  most loaded pipeline stage: {result['pipeline_stage']}")
    if "fit" in result:
        fit = result["fit"]
        largest = fit["max_micro_batch"] or "none (micro-batch 1 does not fit)"
        fewest = fit["min_gpus"] or "none (more GPUs do not lower the peak at this setting)"
        host = f", needs {result['host_memory_gib']:.0f} GiB host RAM per GPU" if result.get("host_memory_gib") else ""
        if fit["verdict"] == "does not fit" and result.get("changes"):
            host = f"; cheapest change that fits: {RankedChange.model_validate(result['changes'][0]).sentence()}"
        lines.append(
            f"On {fit['gpu_memory_gib']:g} GiB: {fit['verdict']} (headroom {fit['headroom_gib']:.2f} GiB){host}"
        )
        lines.append(f"  largest micro-batch that fits: {largest}; fewest GPUs that fit: {fewest}")
        lines += _change_lines([RankedChange.model_validate(option) for option in result.get("changes", [])])
        lines.append("What to change:")
        for suggestion in result["suggestions"]:
            mark = "fits" if suggestion["fits"] else "    "
            lines.append(f"  [{mark}] {suggestion['change']}: {suggestion['peak_gib']:.2f} GiB")
    return "\n".join(lines)


def _gpu_table_line(gpu: GpuSpec) -> str:
    bf16 = f"{gpu.bf16_tflops:g}" if gpu.bf16_tflops else "-"
    return f"{gpu.name:<32}{gpu.memory_gb:>7g} GB{gpu.memory_bandwidth_tbps:>8.2f} TB/s{bf16:>9} BF16 TFLOPS"


def gpus_command(args: argparse.Namespace) -> str:
    catalogue = load_gpu_catalogue()
    if args.json:
        return json.dumps([gpu.model_dump(mode="json") for gpu in catalogue], indent=2)
    return "\n".join(_gpu_table_line(gpu) for gpu in catalogue)


def fit_command(args: argparse.Namespace) -> str:
    _refuse_context_parallel(args, "fit")
    image_model = named_vision_model(args)
    if image_model is not None:
        return _vision_answer(lambda: vision_fit_output(args, image_model))
    workload = workload_from_args(args)
    catalogue = load_gpu_catalogue()
    if not workload.is_training:
        return _serving_fit_output(workload, catalogue, args.json)
    spec, settings = workload.model, workload.training
    rows = fit_matrix(spec, settings, catalogue)
    gpu = _named_gpu(args)
    ranked = None
    if gpu is not None:
        ranked = ranked_changes(spec, settings, gpu_memory_gib(gpu), gpu, _ranking_time_settings(args))
    if args.json:
        answer = [row.model_dump() for row in rows]
        for row in answer:
            if gpu is not None and row["gpu"] == gpu.name:
                row["changes"] = [option.model_dump() for option in ranked]
        return json.dumps(answer, indent=2)
    lines = [f"{spec.name}: peak {rows[0].peak_gib:.2f} GiB per GPU" if rows else spec.name]
    for row in rows:
        largest = row.max_micro_batch or "-"
        fewest = row.min_gpus or "-"
        lines.append(
            f"  {row.gpu:<32}{row.verdict:<14}headroom {row.headroom_gib:>8.1f} GiB  "
            f"max micro-batch {largest!s:>6}  fewest GPUs {fewest!s:>5}"
        )
    if ranked:
        lines += [f"On {gpu.name}:", *_change_lines(ranked)]
    return "\n".join(lines)


def _serving_fit_output(workload: ServeWorkload, catalogue, as_json: bool) -> str:
    """The serving fit on every GPU, with the training fit's keys where they mean the same."""
    rows = []
    for fit in serving_table(workload.model, workload.serving, catalogue):
        rows.append(
            {
                "gpu": fit.gpu,
                "gpu_memory_gib": fit.memory_gib,
                "fits": fit.fits,
                "verdict": verdict(fit.total_gib, fit.budget_gib),
                "peak_gib": fit.total_gib,
                "headroom_gib": fit.budget_gib - fit.total_gib,
                "max_concurrency": fit.max_concurrency,
                "max_context_len": fit.max_context_len,
                "min_gpus": fit.gpus_needed,
                "decode_tokens_per_s_per_sequence": fit.decode_tokens_per_s_per_sequence,
            }
        )
    if as_json:
        return json.dumps(rows, indent=2)
    lines = [f"{workload.model.name} (inference): {rows[0]['peak_gib']:.2f} GiB per GPU" if rows else ""]
    for row in rows:
        lines.append(
            f"  {row['gpu']:<32}{row['verdict']:<14}headroom {row['headroom_gib']:>8.1f} GiB  "
            f"most sequences {row['max_concurrency']:>7}  fewest GPUs {row['min_gpus'] or '-'!s:>5}"
        )
    return "\n".join(lines)


def _time_settings_from_args(args: argparse.Namespace, default_tokens: float | None = None) -> TimeSettings:
    tokens = args.dataset_tokens
    if tokens is None and args.dataset_samples is None:
        tokens = default_tokens
    if (tokens is None) == (args.dataset_samples is None):
        raise UsageError("give exactly one of --dataset-tokens or --dataset-samples")
    step = {
        item.name: getattr(args, _flag_dest(item.flag))
        for item in all_settings()
        if item.model is TimeSettings and item.name in STEP_SETTING_FIELDS
    }
    try:
        return TimeSettings(
            dataset_tokens=tokens,
            dataset_samples=args.dataset_samples,
            epochs=args.epochs,
            utilisation=args.utilisation,
            **step,
        )
    except ValidationError as error:
        raise UsageError(describe_validation_error(error)) from None


def _prices_from_args(args: argparse.Namespace, catalogue) -> list:
    if args.prices is None:
        prices = list(load_prices())
    else:
        try:
            prices = parse_price_csv(args.prices.read_bytes(), args.prices.name, catalogue)
        except OSError as error:
            raise UsageError(f"cannot read {echo(args.prices)}: {error.strerror}") from None
        except PriceCatalogueError as error:
            raise UsageError(str(error)) from None
    return adjusted_prices(prices, args.discount_pct / 100, args.interruptions_per_hour)


def cost_command(args: argparse.Namespace) -> str:
    image_model = named_vision_model(args)
    if image_model is not None:
        return _vision_cost(image_model, args)
    if args.cpu_vs_gpu:
        raise UsageError(
            "--cpu-vs-gpu compares a CPU and a GPU for an image model of the vision library (e.g. --model resnet50); "
            "a CPU does not train a transformer here"
        )
    if args.mode == "inference":
        return serving_cost_command(args)
    workload = training_workload(args, "cost")
    spec, settings = workload.model, workload.training
    time_settings = _time_settings_from_args(args)
    catalogue = list(load_gpu_catalogue())
    prices = _prices_from_args(args, catalogue)
    # under context parallel each GPU holds seq_len / cp tokens of every sequence
    peak = estimate_memory(spec, rank_settings(settings, time_settings.context_parallel)).peak_gib
    options = cost_options(
        spec,
        settings,
        time_settings,
        prices,
        catalogue,
        checkpoint_write_h=args.checkpoint_write_min / 60,
        restart_h=args.restart_min / 60,
        peak_gib=peak,
        energy=EnergySettings(**values_for(EnergySettings, setting_values(args))),
        time_band=time_band_for,
    )
    if args.fits_only:  # only what fits and whose software runs on the GPU
        options = [option for option in options if option.excluded_reason is None]
    if args.json:
        return json.dumps([option.model_dump(mode="json") for option in options], indent=2)
    lines = [
        f"{spec.name}: peak {peak:.1f} GiB per GPU; {len(options)} options, those that fit and run first, "
        "each cheapest on demand first"
    ]
    for option in options[: args.top]:
        spot = "-" if option.usd_spot_expected is None else f"${option.usd_spot_expected:,.0f}"
        lines.append(
            f"  {option.gpu:<24}{option.provider:<11}{option.instance_type:<26}{option.hours:>9.1f} h"
            f"  on demand ${option.usd_on_demand:>12,.0f}  spot {spot:>12}"
            + f"  range {hours_range_text(option.hours_range)}, {usd_range_text(option.usd_on_demand_range)}"
            + f"  {_energy_text(option)}"
            + (f"  left out: {option.excluded_reason}" if option.excluded_reason else "")
        )
    return "\n".join(lines)


def _energy_text(option: CostOption) -> str:
    """'1,234 kWh 456 kg CO2e' for the readable table; 'not known' in words where a figure is not."""
    kwh = "energy not known" if option.energy_kwh is None else f"{_amount(option.energy_kwh)} kWh"
    co2 = "CO2 not known" if option.co2_kg is None else f"{_amount(option.co2_kg)} kg CO2e"
    return f"{kwh} {co2}"


def _amount(value: float) -> str:
    """A figure with a decimal below 10 (a small run's 0.4 kg is not 0), whole above."""
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def serving_plan_command(args: argparse.Namespace) -> str:
    """The cheapest GPU x tensor parallel x precision x replicas x provider for a request rate."""
    if args.requests_per_s is None:
        raise UsageError("plan --mode inference needs --requests-per-s")
    workload, _ = _serving_request(args)
    catalogue = list(load_gpu_catalogue())
    prices = _prices_from_args(args, catalogue)
    known = {price.provider.casefold() for price in prices}
    unknown = [name for name in args.providers or () if name.casefold() not in known]
    if unknown:
        raise UsageError(f"unknown provider {', '.join(echo(name) for name in unknown)}")
    try:
        request = ServingPlanRequest(
            requests_per_s=args.requests_per_s,
            input_len=args.input_len,
            output_len=args.output_len,
            limits=_latency_limits(args),
            providers=tuple(args.providers) if args.providers else None,
            allow_spot=not args.no_spot,
        )
    except ValidationError as error:
        raise UsageError(describe_validation_error(error)) from None
    result = plan_serving(workload.model, workload.serving, request, catalogue, prices)
    if args.json:
        return json.dumps(result.model_dump(mode="json"), indent=2)
    return format_serving_plan(result)


def _serving_plan_line(plan) -> str:
    return (
        f"{plan.replicas} x {plan.tensor_parallel} {plan.gpu} ({plan.weight_precision}) on {rented_words(plan)}, "
        f"{plan.provider} {plan.pricing}: ${plan.usd_per_hour:,.2f}/h, ${plan.usd_per_million_output_tokens:,.3f} "
        f"per M output, TTFT {plan.ttft_s * 1e3:,.0f} ms, TPOT {plan.tpot_s * 1e3:,.1f} ms, concurrency "
        f"{plan.concurrency}"
    )


def format_serving_plan(result: ServingPlanResult) -> str:
    lines = [
        f"{result.model} (inference), {result.requests_per_s:g} requests/s of {result.input_len:,} in / "
        f"{result.output_len:,} out: {len(result.plans)} plans on the cost-latency front "
        f"({result.searched:,} configurations in {result.seconds:.2f} s)"
    ]
    lines += [f"problem: {problem}" for problem in result.problems]
    lines += [f"left out: {words}" for words in result.left_out if words not in result.problems]
    if result.cheapest is not None:
        lines.append(f"cheapest: {_serving_plan_line(result.cheapest)}")
    lines += [f"  {_serving_plan_line(plan)}" for plan in result.plans]
    return "\n".join(lines)


def plan_command(args: argparse.Namespace) -> str:
    """Search GPUs, counts, layouts, providers and pricing for the cheapest and fastest plans."""
    if args.mode == "inference":
        return serving_plan_command(args)
    image_model = vision_cli.vision_model_of(args)
    if image_model is not None:
        return _vision_plan(image_model, args)
    workload = training_workload(args, "plan")
    spec, settings = workload.model, workload.training
    time_settings = _time_settings_from_args(args)
    catalogue = list(load_gpu_catalogue())
    prices = _prices_from_args(args, catalogue)
    known = sorted({price.provider for price in prices})
    unknown = [name for name in args.providers or () if name.casefold() not in {k.casefold() for k in known}]
    if unknown:
        names = ", ".join(echo(name) for name in unknown)
        raise UsageError(f"unknown provider {names}; the price sheet has: {', '.join(known)}")
    try:
        request = PlanRequest(
            mode=workload.mode,
            dataset_tokens=time_settings.tokens_per_epoch(settings.seq_len),
            epochs=time_settings.epochs,
            global_batch_tokens=args.global_batch_tokens,
            deadline_hours=args.deadline_hours,
            budget_usd=args.budget_usd,
            max_gpus=args.max_gpus,
            providers=tuple(args.providers) if args.providers else None,
            allow_spot=not args.no_spot,
            include_owned=args.owned,
            checkpoint_write_h=args.checkpoint_write_min / 60,
            restart_h=args.restart_min / 60,
            rank_on=args.rank_on,
        )
        result = plan_run(spec, settings, request, catalogue, prices, time_settings, time_band=time_band_for)
    except ValidationError as error:
        raise UsageError(describe_validation_error(error)) from None
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.json:
        return json.dumps(result.model_dump(mode="json"), indent=2)
    return format_plan_table(result)


def format_plan_table(result: PlanResult) -> str:
    lines = [
        f"{result.model} ({result.mode}) on {result.dataset_tokens:,.0f} tokens x {result.epochs:g} epoch(s), "
        f"global batch {result.global_batch_tokens:,} tokens: {len(result.plans)} plans on the time-cost front "
        f"({result.searched:,} configurations examined in {result.seconds:.2f} s)"
    ]
    lines += [f"problem: {problem}" for problem in result.problems]
    for label, plan in (("cheapest within the limits", result.best_under_deadline),
                        ("fastest within the limits", result.best_under_budget)):  # fmt: skip
        if plan is not None:
            lines.append(f"{label}: {plan.gpus} x {plan.gpu} on {plan.provider} {plan.instance_type} ({plan.pricing}), "
                         f"{hours_text(plan.hours)}, {usd_text(plan.usd)} (range {hours_range_text(plan.hours_range)}, "
                         f"{usd_range_text(plan.usd_range)})")  # fmt: skip
    for plan in result.plans:
        lines.append(
            f"  {plan.gpus:>5} x {plan.gpu:<26}{plan.provider:<11}{plan.pricing:<10}ZeRO-{plan.zero} "
            f"tp {plan.tensor_parallel} pp {plan.pipeline_parallel} ckpt {plan.checkpointing:<10}"
            f"{'offload ' if plan.offload_optimizer or plan.offload_parameters else ''}"
            f"mb {plan.micro_batch:>3} x ga {plan.grad_accum:<5}{plan.peak_gib:>7.1f} GiB{hours_text(plan.hours):>13}"
            f"  {usd_text(plan.usd):>13}  range {hours_range_text(plan.hours_range)}, {usd_range_text(plan.usd_range)}"
        )
    return "\n".join(lines)


def _vision_cost(model, args: argparse.Namespace) -> str:
    """`cost` for an image model of the vision library (calculators.interface.vision_cli)."""
    prices = _prices_from_args(args, list(load_gpu_catalogue()))
    if args.cpu_vs_gpu:
        return _vision_cpu_gpu(model, args, prices)
    try:
        rows = vision_cli.cost_rows(model, args, prices)
    except VisionUsageError as error:
        raise UsageError(str(error)) from None
    if args.fits_only:
        rows = [row for row in rows if row.fits]
    if args.json:
        return json.dumps([row.model_dump(mode="json") for row in rows], indent=2)
    return vision_cli.cost_text(model, rows, args.top)


def _vision_cpu_gpu(model, args: argparse.Namespace, prices: list) -> str:
    """`cost --cpu-vs-gpu CPU GPU` for an image model: the Time and cost page's CPU vs GPU vs mixed
    precision table; `--json` prints {"cpu_gpu_precision": [rows]}."""
    try:
        rows = vision_cli.cpu_gpu_precision_rows(model, args, prices)
    except VisionUsageError as error:
        raise UsageError(str(error)) from None
    if args.json:
        return json.dumps({"cpu_gpu_precision": [row.model_dump(mode="json") for row in rows]}, indent=2)
    return vision_cli.cpu_gpu_precision_text(model, rows)


def _vision_plan(model, args: argparse.Namespace) -> str:
    """`plan` for an image model of the vision library (calculators.interface.vision_cli)."""
    prices = _prices_from_args(args, list(load_gpu_catalogue()))
    try:
        result = vision_cli.plan_result(model, args, list(load_gpu_catalogue()), prices)
    except vision_cli.VisionCliError as error:
        raise UsageError(str(error)) from None
    if args.json:
        return json.dumps(result.model_dump(mode="json"), indent=2)
    return vision_cli.plan_text(result)


def _vision_time(model, args: argparse.Namespace) -> str:
    """`time` for an image model of the vision library (calculators.interface.vision_cli)."""
    try:
        result = vision_cli.time_result(model, args)
    except VisionUsageError as error:
        raise UsageError(str(error)) from None
    return json.dumps(result, indent=2) if args.json else vision_cli.time_text(result)


def _serving_request(args: argparse.Namespace) -> tuple[ServeWorkload, ServingRequest]:
    """The served workload and its request lengths; `--concurrency 0` asks for the throughput-optimal
    concurrency (the settings themselves hold at least one sequence)."""
    best = args.concurrency == 0
    if best:
        args.concurrency = 1
    workload = workload_from_args(args)
    concurrency = 0 if best else workload.serving.concurrent_sequences
    request = ServingRequest(input_len=args.input_len, output_len=args.output_len, concurrency=concurrency)
    return workload, request


def _latency_limits(args: argparse.Namespace) -> LatencyLimits:
    """The targets of --ttft-ms and --tpot-ms (read in ms, kept in s by their declarations)."""
    return LatencyLimits(**values_for(LatencyLimits, setting_values(args)))


def serving_time_command(args: argparse.Namespace) -> str:
    """Throughput, TTFT and TPOT of serving the model on tensor_parallel x one GPU type."""
    workload, request = _serving_request(args)
    try:
        gpu = find_gpu(args.gpu)
        # --concurrency 0 picks the best concurrency within --ttft-ms and --tpot-ms, or says what is reachable
        speed = estimate_serving_speed(workload.model, workload.serving, gpu, request, _latency_limits(args))
    except (KeyError, ValueError) as error:
        raise UsageError(str(error).strip("'\"")) from None
    result = {"model": workload.model.name, "mode": "inference"} | speed.model_dump(mode="json")
    if args.json:
        return json.dumps(result, indent=2)
    lines = [
        f"{workload.model.name} on {speed.tensor_parallel} x {gpu.name}, {speed.weight_precision} weights, "
        f"{speed.input_len:,} in / {speed.output_len:,} out at concurrency {speed.concurrency} "
        f"(at most {speed.max_concurrency:,} fit):",
        f"  output {speed.output_tokens_per_s_per_gpu:,.0f} tokens/s per GPU, "
        f"{speed.output_tokens_per_s_per_sequence:,.1f} tokens/s per sequence",
        f"  TTFT {speed.ttft_s * 1e3:,.1f} ms, TPOT {speed.tpot_s * 1e3:,.2f} ms; prefill alone "
        f"{speed.prefill_s * 1e3:,.1f} ms, decode step {speed.decode_step_s * 1e3:,.2f} ms ({speed.bound} bound)",
        *(f"  {line}" for line in serving_assumptions(speed)),
    ]
    return "\n".join(lines)


def serving_cost_command(args: argparse.Namespace) -> str:
    """USD per million output and input tokens on every priced GPU and provider."""
    workload, request = _serving_request(args)
    too_long = context_problem(workload.model, request)  # the same on every GPU: one line, not a row each
    if too_long:
        raise UsageError(too_long)
    catalogue = list(load_gpu_catalogue())
    try:
        limits = _latency_limits(args)
        options = serving_cost_options(
            workload.model,
            workload.serving,
            request,
            _prices_from_args(args, catalogue),
            catalogue,
            limits,
            args.requests_per_s,
        )
    except ValidationError as error:
        raise UsageError(describe_validation_error(error)) from None
    if args.fits_only:
        options = [option for option in options if option.excluded_reason is None]
    if args.json:
        return json.dumps([option.model_dump(mode="json") for option in options], indent=2)
    lines = [
        f"{workload.model.name} (inference), {request.input_len:,} in / {request.output_len:,} out, tensor parallel "
        f"{workload.serving.tensor_parallel}: {len(options)} options, cheapest per million output tokens first "
        "(whole instances; the tokens of every replica they hold)"
    ]
    for option in options[: args.top]:
        if option.usd_per_hour is None:
            lines.append(f"  {option.gpu:<24}{option.provider:<11}{option.pricing:<10} left out: "
                         f"{option.excluded_reason}")  # fmt: skip
            continue
        missed = f"  misses the targets: {option.excluded_reason}" if option.excluded_reason else ""
        lines.append(
            f"  {option.gpu:<24}{option.provider:<11}{option.pricing:<10}${option.usd_per_hour:>8,.2f}/h for "
            f"{option.instances} x {option.instance_type} ({_replicas_text(option.replicas_per_instance)} each)  "
            f"${option.usd_per_million_output_tokens:>8,.3f} per M output, "
            f"${option.usd_per_million_input_tokens:>7,.3f} per M input  "
            f"concurrency {option.concurrency}, TPOT {option.tpot_s * 1e3:,.1f} ms{missed}"
        )
    return "\n".join(lines)


def _replicas_text(count: int) -> str:
    return f"{count:,} replica{'s' if count != 1 else ''}"


def time_command(args: argparse.Namespace) -> str:
    """The step time of the workload on one GPU type, broken down by op class and dimension."""
    image_model = named_vision_model(args)
    if image_model is not None:
        return _vision_time(image_model, args)
    if args.mode == "inference":
        return serving_time_command(args)
    workload = training_workload(args, "time")
    spec, settings = workload.model, workload.training
    time_settings = _time_settings_from_args(args, default_tokens=1e9)
    try:
        gpu = find_gpu(args.gpu)
        estimate = estimate_time(spec, settings, gpu, time_settings)
    except (KeyError, ValueError) as error:
        raise UsageError(str(error).strip("'\"")) from None
    # sequences per second per GPU, the text model's samples (images/s for an image model)
    samples_per_s_per_gpu = estimate.tokens_per_s_per_gpu / settings.seq_len
    result = {"model": spec.name, "samples_per_s_per_gpu": samples_per_s_per_gpu} | estimate.model_dump(mode="json")
    result["input_bound"] = False  # tokenized text: no decoding loader to wait for (images: vision_cli)
    if args.json:
        return json.dumps(result, indent=2)
    lines = [
        f"{spec.name} on {settings.total_gpus} x {gpu.name}: step {estimate.step_s:.3f} s, "
        f"{estimate.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, MFU {estimate.mfu:.1%} (HFU {estimate.hfu:.1%})",
        "  compute:",
        *(f"    {name:<14}{seconds:>10.4f} s" for name, seconds in estimate.compute_by_class_s.items()),
        "  communication (total / exposed):",
        *(
            f"    {dim:<14}{estimate.comm_by_dimension_s[dim]:>10.4f} s {exposed:>10.4f} s"
            for dim, exposed in estimate.comm_exposed_by_dimension_s.items()
        ),
        f"  pipeline bubble {estimate.bubble_s:.4f} s",
        f"  compute lost to hidden traffic's SMs {estimate.overlap_contention_s:.4f} s",
    ]
    return "\n".join(lines)


def trace_command(args: argparse.Namespace) -> str:
    """One real training step under fake tensors in a subprocess, next to the estimate."""
    from measure.trace.result import TraceError
    from measure.trace.runner import run_trace

    workload = training_workload(args, "trace")
    spec, settings = workload.model, workload.training
    if not 1 <= args.timeout_s <= 3600:
        raise UsageError("--timeout-s must be between 1 and 3600 seconds")
    try:
        traced = run_trace(spec, settings, timeout_s=args.timeout_s, extrapolate=args.extrapolate)
    except TraceError as error:
        raise UsageError(str(error)) from None
    estimate = estimate_memory(spec, settings)
    result = {"model": spec.name, "settings": settings.model_dump(exclude={"overheads"})} | traced.model_dump()
    result["estimate_allocated_gib"] = estimate.allocated_gib
    result["estimate_error_fraction"] = estimate.allocated_gib / traced.allocated_gib - 1
    if args.json:
        return json.dumps(result, indent=2)
    lines = [
        f"{spec.name}: traced peak {traced.peak_gib:.3f} GiB at {traced.peak_phase} ({traced.peak_op}); "
        f"estimate {estimate.allocated_gib:.3f} GiB ({result['estimate_error_fraction']:+.1%})",
        f"  saved activations at end of forward {traced.saved_activations_gib:.3f} GiB",
        f"  FLOPs {traced.flops_total:.4g} ({traced.flops_per_token:.4g} per token); traced in {traced.seconds:.1f} s",
    ]
    lines += [f"  {phase:<28}{gib:>10.3f} GiB" for phase, gib in traced.phases_gib.items()]
    return "\n".join(lines)


def calibrate_command(args: argparse.Namespace) -> str:
    """Run the benchmarks (or, with --collectives, the collective sweep) headless, write the result
    for the app to import, and keep it in the store $GPU_SIZING_CALIBRATION_DB names, if any."""
    from measure.calibration.collective_launch import CollectiveRunError
    from measure.calibration.runner import (
        CalibrationBusyError,
        CalibrationRequestError,
        check_calibration_request,
        check_collective_request,
        run_calibration,
        run_collective_calibration,
    )
    from measure.calibration.store import export_json

    try:  # before the run: a bad --out or price must not cost the whole budget
        for warning in check_calibration_request(args.out, args.usd_per_hour, args.budget_s):
            print(f"warning: {warning}", file=sys.stderr)
        if args.collectives:
            check_collective_request(args.nodes, args.node_rank, args.rdzv_endpoint, args.rdzv_timeout_s)
        elif args.nodes != 1 or args.node_rank is not None or args.rdzv_endpoint is not None:
            raise CalibrationRequestError("--nodes, --node-rank and --rdzv-endpoint go with --collectives")
    except CalibrationRequestError as error:
        raise UsageError(str(error)) from None

    def report(step: str, fraction: float) -> None:
        print(f"[{fraction:4.0%}] {step}", file=sys.stderr)

    try:
        if args.collectives:
            result = run_collective_calibration(
                args.device, args.budget_s, args.nodes, args.node_rank, args.rdzv_endpoint, args.rdzv_timeout_s,
                progress=report,
            )  # fmt: skip
        else:
            result = run_calibration(
                device=args.device, budget_s=args.budget_s, progress=report, usd_per_hour=args.usd_per_hour
            )
    except (CalibrationBusyError, CalibrationRequestError, CollectiveRunError) as error:
        raise UsageError(str(error)) from None
    text = export_json(result)
    temporary = args.out.with_name(args.out.name + ".tmp")
    try:
        temporary.write_text(text)
        temporary.replace(args.out)  # atomic: a reader never sees half a file
    except OSError as error:
        raise UsageError(f"cannot write {echo(args.out)}: {error.strerror}") from None
    if not args.collectives or not args.node_rank:  # the fleet keeps one copy of a multi-node sweep: node 0's
        args.warnings = _keep_in_store(result, args.out)
    return text if args.json else _calibration_summary(result, args.out)


def _keep_in_store(result, out: Path) -> list[str]:
    """Save the result in the store $GPU_SIZING_CALIBRATION_DB names (a file or a fleet's database);
    its warnings (a damaged file moved aside). A store that cannot be used is one error line that
    says the result is in `out` all the same."""
    import os

    from measure.calibration.store import DB_ENV_VAR, CalibrationStore, CalibrationStoreError

    if not os.environ.get(DB_ENV_VAR):
        return []
    try:
        store = CalibrationStore()
        store.save(result)
    except CalibrationStoreError as error:
        raise UsageError(f"{error}; the result is in {echo(out)}") from None
    return store.problems


def _calibration_summary(result, out: Path) -> str:
    lines = [f"{result.host} ({result.gpu_name or result.device}): {len(result.records)} benchmarks -> {out}"]
    for record in result.records:
        if record.ok:
            percent = (
                "" if record.percent_of_datasheet is None else f" ({record.percent_of_datasheet:.0f}% of datasheet)"
            )
            lines.append(f"  {record.name:<36}{record.value:>12.2f} {record.unit}{percent}")
        else:
            lines.append(f"  {record.name:<36}skipped: {record.skipped_reason or record.error}")
    return "\n".join(lines)


def validation_command(args: argparse.Namespace) -> str:
    """Every published measurement next to its estimate: peak memory and training throughput."""
    from calculators.interface.validation import validation_report  # it parses command lines with this module

    report = validation_report()
    if args.json:
        return json.dumps(report, indent=2)
    lines = []
    for section, unit in (("memory", "GiB"), ("throughput", "tokens/s per GPU")):
        lines.append(f"{section} ({unit}): id, measured, estimate, estimate / measured")
        for row in report[section]:
            if "error" in row:
                lines.append(f"  {row['id']:<34}error: {row['error']}")
                continue
            lines.append(f"  {row['id']:<34}{row['measured']:>12,.2f}{row['estimate']:>12,.2f}{row['ratio']:>8.3f}")
    return "\n".join(lines)


def presets_command(args: argparse.Namespace) -> str:
    presets = load_presets()
    if args.json:
        return json.dumps({name: spec.model_dump() for name, spec in presets.items()}, indent=2)
    return "\n".join(sorted(presets))


def models_command(args: argparse.Namespace) -> str:
    """Presets and bundled library models whose name contains every word of --search."""
    names = search_any(args.search or "", limit=args.limit)
    if args.json:
        return json.dumps(names, indent=2)
    return "\n".join(names)


MLPERF_KEYS = (
    "benchmark", "round", "submitter", "system", "accelerator", "accelerators", "nodes", "global_batch_size",
    "minutes_published", "minutes_predicted", "why_not", "ratio", "usd_to_reproduce", "source",
)  # fmt: skip


def mlperf_command(args: argparse.Namespace) -> str:
    """Every MLPerf Training result (of --benchmark, on the catalogue GPU --accelerator) with the
    time model's prediction, the ratio and the cost to reproduce it on rented GPUs."""
    from calculators.validation.mlperf import mlperf_table  # the MLPerf data is read only by this command

    try:
        rows = mlperf_table(args.benchmark, args.accelerator)
    except KeyError as error:
        raise UsageError(str(error).strip("'\"")) from None
    if args.json:
        return json.dumps([{key: getattr(row, key) for key in MLPERF_KEYS} | {"id": row.id} for row in rows], indent=2)

    def minutes(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = [
        f"{'benchmark':<16}{'round':<6}{'accelerator':<22}{'GPUs':>6}"
        f"{'published min':>15}{'predicted min':>15}{'ratio':>7}"
    ]
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        lines.append(
            f"{row.benchmark:<16}{row.round:<6}{(row.accelerator or '-')[:21]:<22}{row.accelerators:>6}"
            f"{minutes(row.minutes_published):>15}{minutes(row.minutes_predicted):>15}{ratio:>7}"
        )
    return "\n".join(lines)


def add_serving_request_arguments(parser: argparse.ArgumentParser) -> None:
    """--input-len, --output-len, --requests-per-s, --ttft-ms and --tpot-ms of --mode inference, as
    calculators.interface.settings declares them, and `--concurrency 0` for the best that fits."""
    requests = [item for item in all_settings() if item.model in (ServingRequest, ServingPlanRequest, LatencyLimits)]
    add_setting_arguments(parser.add_argument_group("serving (--mode inference)"), requests)
    for action in parser._actions:
        if "--concurrency" in action.option_strings:
            declared = action.type
            action.type = lambda raw, declared=declared: 0 if raw.strip() == "0" else declared(raw)
            action.help = _argparse_help("sequences in flight; 0 = the throughput-optimal concurrency that fits")


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m calculators", description="GPU memory and cost estimates")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    memory = commands.add_parser("memory", help="peak memory of a training step")
    add_workload_arguments(memory)
    memory.add_argument("--gpu-memory-gib", type=float, help="GPU capacity for a fit verdict")
    memory.add_argument(
        "--gpu", help="a catalogue GPU: its capacity (unless --gpu-memory-gib) and the time model rank the changes"
    )
    memory.set_defaults(handler=memory_command)
    gpus = commands.add_parser("gpus", help="list the GPU catalogue")
    gpus.add_argument("--json", action="store_true")
    gpus.set_defaults(handler=gpus_command)
    fit = commands.add_parser("fit", help="the workload on every GPU of the catalogue")
    add_workload_arguments(fit)
    fit.add_argument("--gpu", help="a catalogue GPU: its row gains the changes that make the workload fit, ranked")
    fit.set_defaults(handler=fit_command)
    cost = commands.add_parser("cost", help="time and cost of the run on every priced cloud option")
    add_workload_arguments(cost)
    run = cost.add_argument_group("run")
    add_setting_arguments(
        run, [item for item in all_settings() if item.model in (TimeSettings, RunInputs, EnergySettings)]
    )
    run.add_argument("--prices", type=Path, help="a price sheet CSV instead of data/cloud_prices.csv")
    run.add_argument("--fits-only", action="store_true", help="only GPUs the workload fits on")
    run.add_argument("--top", type=int, default=20, help="rows in the readable table")
    run.add_argument(
        "--cpu-vs-gpu",
        nargs=2,
        metavar=("CPU", "GPU"),
        help="an image model only: a server CPU (data/cpus.csv) and a GPU, each in fp32 and mixed precision, "
        "images/s, hours and cost per epoch side by side (the Time and cost page's table)",
    )
    add_serving_request_arguments(cost)
    cost.set_defaults(handler=cost_command)
    plan = commands.add_parser("plan", help="cheapest and fastest ways to train on N tokens: GPUs, layout, provider")
    add_workload_arguments(plan)
    plan_run_group = plan.add_argument_group("run")
    add_setting_arguments(plan_run_group, [item for item in all_settings() if item.model in (TimeSettings, RunInputs)])
    plan_run_group.add_argument("--prices", type=Path, help="a price sheet CSV instead of data/cloud_prices.csv")
    plan_run_group.add_argument("--deadline-hours", type=float, help="the run must end within this many hours")
    plan_run_group.add_argument("--budget-usd", type=float, help="the run must cost at most this many USD")
    plan_run_group.add_argument("--max-gpus", type=int, default=DEFAULT_MAX_GPUS, help="most GPUs in one plan")
    plan_run_group.add_argument("--providers", nargs="+", help="only these providers (default: all)")
    plan_run_group.add_argument("--no-spot", action="store_true", help="leave spot (preemptible) pricing out")
    plan_run_group.add_argument("--owned", action="store_true", help="also price owning the GPUs")
    plan_run_group.add_argument(
        "--rank-on",
        choices=("estimate", "pessimistic"),
        default="estimate",
        help="judge the deadline, budget and ranking on the estimates (default) or on the high end of each "
        "plan's range (the time model's measured error, interruptions, regional spot prices)",
    )
    plan_run_group.add_argument(
        "--global-batch-tokens",
        type=int,
        help="tokens per optimizer step (default: 4M to train, 128 sequences to fine-tune)",
    )
    add_serving_request_arguments(plan)
    plan.set_defaults(handler=plan_command)
    timing = commands.add_parser("time", help="step time of the workload on one GPU type, broken down")
    add_workload_arguments(timing)
    timing.add_argument("--gpu", required=True, help="a GPU of the catalogue, e.g. H100-SXM5-80GB")
    run_settings = [item for item in all_settings() if item.model is TimeSettings]
    add_setting_arguments(timing.add_argument_group("run"), run_settings)
    add_serving_request_arguments(timing)
    timing.set_defaults(handler=time_command)
    trace = commands.add_parser("trace", help="exact memory and FLOPs of one step under fake tensors (CPU)")
    add_workload_arguments(trace)
    trace.add_argument("--timeout-s", type=float, default=120.0, help="limit for the traced subprocess")
    trace.add_argument(
        "--extrapolate", action="store_true", help="trace 3-5 layers and extend exactly to all (big models)"
    )
    trace.set_defaults(handler=trace_command)
    calibrate = commands.add_parser("calibrate", help="measure this host (GPU or CPU) and write a result file")
    calibrate.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    calibrate.add_argument("--budget-s", type=float, default=110.0, help="total time budget in seconds")
    calibrate.add_argument("--usd-per-hour", type=float, help="price per GPU-hour for the cost per epoch")
    calibrate.add_argument("--out", type=Path, required=True, help="where to write the result JSON")
    calibrate.add_argument("--json", action="store_true", help="also print the result JSON")
    calibrate.add_argument(
        "--collectives", action="store_true", help="sweep all-reduce, all-gather, reduce-scatter from 1 KB to 1 GB"
    )
    calibrate.add_argument("--nodes", type=int, default=1, help="nodes of the sweep (all here without an endpoint)")
    calibrate.add_argument("--node-rank", type=int, help="this node's rank, 0 on the node at --rdzv-endpoint")
    calibrate.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="where the nodes meet (torchrun rendezvous)")
    calibrate.add_argument(
        "--rdzv-timeout-s", type=float, default=300.0, help="seconds to wait for every node to arrive"
    )
    calibrate.set_defaults(handler=calibrate_command)
    validation = commands.add_parser("validation", help="every published measurement next to its estimate")
    validation.add_argument("--json", action="store_true", help="print JSON")
    validation.set_defaults(handler=validation_command)
    presets = commands.add_parser("presets", help="list the model presets")
    presets.add_argument("--json", action="store_true")
    presets.set_defaults(handler=presets_command)
    models = commands.add_parser("models", help="search the presets and the bundled library of open models")
    models.add_argument("--search", help="words the name contains, e.g. qwen")
    models.add_argument("--limit", type=int, default=50)
    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=models_command)
    mlperf = commands.add_parser("mlperf", help="MLPerf Training results beside the time model's prediction")
    mlperf.add_argument("--benchmark", help="one benchmark, e.g. llama2_70b_lora")
    mlperf.add_argument("--accelerator", help="one catalogue GPU, e.g. H100-SXM5-80GB")
    mlperf.add_argument("--json", action="store_true")
    mlperf.set_defaults(handler=mlperf_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        print(args.handler(args))
    except BrokenPipeError:  # e.g. piped into `head`: the reader has what it wanted
        sys.stdout = None
    except UsageError as error:  # exactly one line on stderr, whatever text the message echoes
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        return 2
    for warning in getattr(args, "warnings", ()):  # only a command that succeeded warns
        print(f"warning: {one_line(warning)}", file=sys.stderr)
    return 0
