"""The shared workload controls in the sidebar, kept in the URL.

Every page reads the same workload from `st.session_state`. The URL's query
parameters mirror the controls, so a link reproduces the scenario; a bad value in
a link is ignored with a warning instead of breaking the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st
from pydantic import ValidationError

from calculators.fit_matrix import gpu_memory_gib
from calculators.gpu_catalogue import GpuSpec, load_gpu_catalogue
from calculators.inference import KV_PRECISIONS, WEIGHT_PRECISIONS, ServingSettings
from calculators.memory import check_supported
from calculators.model_input import (
    ModelInputError,
    describe_validation_error,
    spec_from_hf_config,
    spec_from_parameter_count,
)
from calculators.model_spec import ModelSpec
from calculators.modes import METHOD_OF_MODE, MODE_LABEL, MODES
from calculators.presets import load_presets
from calculators.training import (
    ATTENTION,
    CHECKPOINTING,
    FSDP_NAME,
    LORA_TARGET_LABEL,
    LORA_TARGETS,
    OPTIMIZER_IMPLS,
    OPTIMIZERS,
    PRECISION_LABEL,
    PRECISIONS,
    USER_SETTING_FIELDS,
    ZERO_STAGES,
    TrainingSettings,
)
from ui.calibration_state import active_calibration
from ui.remember import SAVED_PREFIX
from ui.user_gpus import user_gpus

MODEL_SOURCES = ("Preset", "Custom architecture", "config.json", "Parameter count")
CUSTOM_GPU = "Custom capacity"
DEFAULT_PRESET = "llama-3.1-8b"
DEFAULT_GPU = "H100-SXM5-80GB"


@dataclass
class Workload:
    """What the pages need: a model and settings, or the reasons there are none.
    Training modes fill `settings`; the inference mode fills `serving`."""

    spec: ModelSpec | None
    settings: TrainingSettings | None
    gpu_name: str
    gpu_memory_gib: float
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    mode: str = "train"
    serving: ServingSettings | None = None

    @property
    def is_inference(self) -> bool:
        return self.mode == "inference"

    @property
    def ready(self) -> bool:
        if self.is_inference:
            return self.spec is not None and self.serving is not None
        return self.spec is not None and self.settings is not None


@dataclass(frozen=True)
class Between:
    low: float
    high: float


# (session key, query key, type, default, allowed choices or a Between range)
FIELDS: list[tuple[str, str, type, object, object]] = [
    ("mode", "mode", str, "train", MODES),
    ("model_source", "src", str, "Preset", MODEL_SOURCES),
    ("preset", "model", str, DEFAULT_PRESET, None),
    ("params_billion", "params_b", float, 7.0, Between(0.001, 100_000.0)),
    ("c_layers", "layers", int, 32, Between(1, 1000)),
    ("c_hidden", "hidden", int, 4096, Between(1, 1_000_000)),
    ("c_heads", "heads", int, 32, Between(1, 10_000)),
    ("c_kv_heads", "kv_heads", int, 8, Between(1, 10_000)),
    ("c_ffn", "ffn", int, 14336, Between(1, 10_000_000)),
    ("c_vocab", "vocab", int, 128256, Between(1, 10_000_000)),
    ("c_activation", "act", str, "swiglu", ("gelu", "swiglu", "geglu")),
    ("c_norm", "norm", str, "rmsnorm", ("layernorm", "rmsnorm")),
    ("c_tied", "tied", bool, False, None),
    ("micro_batch", "mb", int, 1, Between(1, 1_000_000)),
    ("seq_len", "seq", int, 2048, Between(1, 10_000_000)),
    ("grad_accum", "ga", int, 1, Between(1, 1_000_000)),
    ("gpus", "gpus", int, 1, Between(1, 1_000_000)),
    ("precision", "prec", str, "bf16-mixed", PRECISIONS),
    ("optimizer", "opt", str, "adamw", OPTIMIZERS),
    ("optimizer_impl", "impl", str, "foreach", OPTIMIZER_IMPLS),
    ("zero", "zero", int, 0, ZERO_STAGES),
    ("checkpointing", "ckpt", str, "none", CHECKPOINTING),
    ("attention", "attn", str, "fused", ATTENTION),
    ("lora_rank", "rank", int, 16, Between(1, 4096)),
    ("lora_targets", "targets", str, "all-linear", LORA_TARGETS),
    ("frozen_layers", "frozen", int, 0, Between(0, 1000)),
    ("offload_optimizer", "off_opt", bool, False, None),
    ("offload_parameters", "off_params", bool, False, None),
    ("tensor_parallel", "tp", int, 1, Between(1, 1024)),
    ("pipeline_parallel", "pp", int, 1, Between(1, 1000)),
    ("s_weight_precision", "wprec", str, "bf16", WEIGHT_PRECISIONS),
    ("s_kv_precision", "kvprec", str, "bf16", KV_PRECISIONS),
    ("s_context_len", "ctx", int, 8192, Between(1, 10_000_000)),
    ("s_concurrency", "conc", int, 1, Between(1, 100_000)),
    ("s_tensor_parallel", "tp_serve", int, 1, Between(1, 1024)),
    ("gpu", "gpu", str, DEFAULT_GPU, None),
    ("gpu_memory_gib", "gib", float, 80.0, Between(0.1, 100_000.0)),
]


# Controls drawn by one page only (the Cost page). Streamlit forgets a widget's value
# while another page runs, so these are kept under ui.remember's saved copy as well.
PAGE_FIELDS: list[tuple[str, str, type, object, object]] = [
    ("mode", "mode", str, "train", MODES),
    ("cost_dataset_unit", "unit", str, "tokens", ("tokens", "samples")),
    ("cost_tokens_billion", "tokens_b", float, 1.0, Between(1e-6, 1e6)),
    ("cost_samples", "samples", int, 100_000, Between(1, 10**12)),
    ("cost_epochs", "epochs", float, 1.0, Between(0.01, 100_000.0)),
    ("cost_utilisation_pct", "mfu", float, 0.0, Between(0.0, 100.0)),
    ("cost_inter_node_gbps", "net_gbps", float, 400.0, Between(1.0, 100_000.0)),
    ("cost_overlap_pct", "overlap", float, 50.0, Between(0.0, 100.0)),
    ("cost_checkpoint_min", "ckpt_min", float, 3.0, Between(0.0, 1440.0)),
    ("cost_restart_min", "restart_min", float, 15.0, Between(0.0, 1440.0)),
    ("cost_override_rate", "rate_set", bool, False, None),
    ("cost_interruptions_per_hour", "rate", float, 0.5, Between(0.0, 100.0)),
    ("cost_discount_pct", "discount", float, 0.0, Between(0.0, 99.0)),
    ("cost_fits_only", "fits_only", bool, True, None),
]


def _parse(raw: str, kind: type, allowed: object) -> object:
    """A query value converted and checked against its range or choices."""
    if kind is bool:
        if raw not in ("0", "1", "true", "false"):
            raise ValueError(raw)
        return raw in ("1", "true")
    value = kind(raw)
    if isinstance(allowed, Between) and not allowed.low <= value <= allowed.high:
        raise ValueError(raw)
    if isinstance(allowed, tuple) and value not in allowed:
        raise ValueError(raw)
    return value


def load_from_url() -> list[str]:
    """Once per session: seed the controls from the URL. Returns warnings."""
    if st.session_state.get("_url_loaded"):
        return []
    st.session_state["_url_loaded"] = True
    warnings = []
    params = st.query_params
    for key, query_key, kind, default, allowed in FIELDS + PAGE_FIELDS:
        is_page_field = (key, query_key, kind, default, allowed) in PAGE_FIELDS
        if not is_page_field:
            st.session_state.setdefault(key, default)
        if query_key not in params:
            continue
        try:
            value = _parse(params[query_key], kind, allowed)
            st.session_state[SAVED_PREFIX + key if is_page_field else key] = value
        except (TypeError, ValueError):
            warnings.append(f"Ignored `{query_key}={params[query_key]}` from the link: not a valid value.")
    return warnings


def save_to_url() -> None:
    """Mirror the controls into the query string (only values that differ from defaults)."""
    wanted = {}
    for key, query_key, kind, default, _ in FIELDS + PAGE_FIELDS:
        value = st.session_state.get(key, st.session_state.get(SAVED_PREFIX + key, default))
        if value != default:
            wanted[query_key] = ("1" if value else "0") if kind is bool else str(value)
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)


def _model_controls(presets: dict[str, ModelSpec]) -> tuple[ModelSpec | None, list[str], list[str]]:
    errors: list[str] = []
    notes: list[str] = []
    source = st.sidebar.radio("Model from", MODEL_SOURCES, key="model_source", horizontal=True)
    if source == "Preset":
        if st.session_state.get("preset") not in presets:
            errors.append(f"Unknown preset {st.session_state.get('preset')!r}; showing {DEFAULT_PRESET}.")
            st.session_state["preset"] = DEFAULT_PRESET
        name = st.sidebar.selectbox("Preset", sorted(presets), key="preset")
        return presets[name], errors, notes
    if source == "Parameter count":
        billions = st.sidebar.number_input(
            "Parameters (billions)", min_value=0.001, max_value=100_000.0, step=0.5, key="params_billion"
        )
        try:
            spec = spec_from_parameter_count(billions * 1e9)
        except ModelInputError as error:
            return None, [str(error)], notes
        notes.append(
            f"Assumed a Llama-style shape for {billions:g}B parameters: {spec.n_layers} layers, hidden "
            f"{spec.hidden_size}, {spec.n_heads} heads, FFN {spec.ffn_hidden_size}, vocab {spec.vocab_size}."
        )
        return spec, errors, notes
    if source == "config.json":
        upload = st.sidebar.file_uploader("Hugging Face config.json", type=["json"], key="config_upload")
        if upload is None:
            return None, ["Upload a config.json to estimate its model (it is parsed, never downloaded)."], notes
        try:
            return spec_from_hf_config(upload.getvalue(), upload.name), errors, notes
        except ModelInputError as error:
            return None, [str(error)], notes
    return _custom_architecture(), errors, notes


def _custom_architecture() -> dict:
    """The custom-architecture fields; validated into a ModelSpec by the caller."""
    with st.sidebar.expander("Architecture", expanded=True):
        col1, col2 = st.columns(2)
        col1.number_input("Layers", min_value=1, max_value=1000, key="c_layers")
        col2.number_input("Hidden", min_value=1, max_value=1_000_000, key="c_hidden")
        col1.number_input("Heads", min_value=1, max_value=10_000, key="c_heads")
        col2.number_input("KV heads", min_value=1, max_value=10_000, key="c_kv_heads")
        col1.number_input("FFN size", min_value=1, max_value=10_000_000, key="c_ffn")
        col2.number_input("Vocab", min_value=1, max_value=10_000_000, key="c_vocab")
        col1.selectbox("Activation", ("gelu", "swiglu", "geglu"), key="c_activation")
        col2.selectbox("Norm", ("layernorm", "rmsnorm"), key="c_norm")
        st.checkbox("Tied embeddings", key="c_tied")
    state = st.session_state
    return dict(
        name="custom",
        n_layers=state.c_layers,
        hidden_size=state.c_hidden,
        n_heads=state.c_heads,
        n_kv_heads=state.c_kv_heads,
        ffn_hidden_size=state.c_ffn,
        vocab_size=state.c_vocab,
        activation=state.c_activation,
        norm=state.c_norm,
        position_embedding="learned" if state.c_norm == "layernorm" else "rope",
        tied_embeddings=state.c_tied,
    )


def _training_controls() -> dict:
    sidebar = st.sidebar
    sidebar.subheader("Training")
    col1, col2 = sidebar.columns(2)
    col1.number_input("Micro-batch", min_value=1, max_value=1_000_000, key="micro_batch")
    col2.number_input("Sequence length", min_value=1, max_value=10_000_000, key="seq_len")
    col1.number_input("Grad. accumulation", min_value=1, max_value=1_000_000, key="grad_accum")
    col2.number_input("Data-parallel GPUs", min_value=1, max_value=1_000_000, key="gpus")
    sidebar.selectbox("Precision", PRECISIONS, format_func=PRECISION_LABEL.get, key="precision")
    sidebar.selectbox("Optimizer", OPTIMIZERS, key="optimizer")
    sidebar.selectbox(
        "Optimizer implementation",
        OPTIMIZER_IMPLS,
        key="optimizer_impl",
        help="torch AdamW: foreach (default on CUDA) holds one extra copy of the states during step(); "
        "fused updates in place; for-loop holds one tensor's worth.",
    )
    sidebar.selectbox("ZeRO stage", ZERO_STAGES, format_func=lambda z: f"ZeRO-{z} · FSDP {FSDP_NAME[z]}", key="zero")
    sidebar.selectbox("Activation checkpointing", CHECKPOINTING, key="checkpointing")
    attention_label = {"eager": "eager", "fused": "fused (SDPA/flash)"}
    sidebar.selectbox("Attention", ATTENTION, format_func=attention_label.get, key="attention")
    return {key: st.session_state[key] for key in USER_SETTING_FIELDS}


def _gpu_controls(catalogue: list[GpuSpec]) -> tuple[str, float]:
    names = [gpu.name for gpu in catalogue] + [CUSTOM_GPU]
    if st.session_state.get("gpu") not in names:
        st.session_state["gpu"] = DEFAULT_GPU if DEFAULT_GPU in names else names[0]
    st.sidebar.subheader("GPU")
    name = st.sidebar.selectbox("GPU for the verdict", names, key="gpu")
    if name == CUSTOM_GPU:
        gib = st.sidebar.number_input("GPU memory (GiB)", min_value=0.1, max_value=100_000.0, key="gpu_memory_gib")
        return name, float(gib)
    gpu = next(g for g in catalogue if g.name == name)
    return name, gpu_memory_gib(gpu)


WEIGHT_PRECISION_LABEL = {
    "fp32": "FP32",
    "fp16": "FP16",
    "bf16": "BF16",
    "fp8": "FP8",
    "int8": "INT8 (GPTQ/AWQ-style groups)",
    "int4": "INT4 (GPTQ/AWQ-style groups)",
}


def _serving_controls() -> dict:
    sidebar = st.sidebar
    sidebar.subheader("Serving")
    col1, col2 = sidebar.columns(2)
    col1.selectbox("Weights", WEIGHT_PRECISIONS, format_func=WEIGHT_PRECISION_LABEL.get, key="s_weight_precision")
    col2.selectbox("KV cache", KV_PRECISIONS, key="s_kv_precision")
    col1.number_input("Context (tokens)", min_value=1, max_value=10_000_000, step=1024, key="s_context_len")
    col2.number_input("Concurrent sequences", min_value=1, max_value=100_000, key="s_concurrency")
    sidebar.number_input("Tensor-parallel GPUs", min_value=1, max_value=1024, key="s_tensor_parallel")
    return {
        "weight_precision": st.session_state.s_weight_precision,
        "kv_cache_precision": st.session_state.s_kv_precision,
        "context_len": st.session_state.s_context_len,
        "concurrent_sequences": st.session_state.s_concurrency,
        "tensor_parallel": st.session_state.s_tensor_parallel,
    }


def _lora_controls() -> dict:
    col1, col2 = st.sidebar.columns(2)
    col1.number_input("LoRA rank", min_value=1, max_value=4096, key="lora_rank")
    col2.selectbox("LoRA on", LORA_TARGETS, key="lora_targets", help="; ".join(LORA_TARGET_LABEL.values()))
    return {"lora_rank": st.session_state.lora_rank, "lora_targets": st.session_state.lora_targets}


def _parallel_controls(full_training: bool) -> dict:
    """Model parallelism, offload and frozen layers, folded away: most users need none."""
    with st.sidebar.expander("Parallelism, offload, frozen layers"):
        col1, col2 = st.columns(2)
        col1.number_input("Tensor parallel", min_value=1, max_value=1024, key="tensor_parallel")
        col2.number_input("Pipeline stages", min_value=1, max_value=1000, key="pipeline_parallel")
        st.checkbox("Optimizer on the CPU (ZeRO-Offload)", key="offload_optimizer")
        st.checkbox("Parameters on the CPU (ZeRO-Infinity, ZeRO-3)", key="offload_parameters")
        if full_training:
            st.number_input("Frozen first layers", min_value=0, max_value=1000, key="frozen_layers")
    keys = ["tensor_parallel", "pipeline_parallel", "offload_optimizer", "offload_parameters"]
    keys += ["frozen_layers"] if full_training else []
    return {key: st.session_state[key] for key in keys}


def _restore_hidden_fields() -> None:
    """Streamlit drops the state of widgets a run does not draw (the training controls
    while serving, say); bring back their last values, kept under ui.remember's prefix."""
    for key, *_ in FIELDS:
        if key not in st.session_state and SAVED_PREFIX + key in st.session_state:
            st.session_state[key] = st.session_state[SAVED_PREFIX + key]


def _keep_fields() -> None:
    for key, *_ in FIELDS:
        if key in st.session_state:
            st.session_state[SAVED_PREFIX + key] = st.session_state[key]


def workload_sidebar() -> Workload:
    """Draw the shared controls and return the workload they describe."""
    warnings = load_from_url()
    _restore_hidden_fields()
    presets = load_presets()
    catalogue = list(load_gpu_catalogue()) + user_gpus()
    mode = st.sidebar.selectbox("Mode", MODES, format_func=MODE_LABEL.get, key="mode")
    spec, errors, notes = _model_controls(presets)
    training, serving = None, None
    if mode == "inference":
        serving = _serving_controls()
    else:
        training = _training_controls() | {"method": METHOD_OF_MODE[mode]}
        if mode != "train":
            training |= _lora_controls()
        training |= _parallel_controls(full_training=mode == "train")
    gpu_name, gpu_gib = _gpu_controls(catalogue)
    _keep_fields()
    save_to_url()
    errors = warnings + errors
    if isinstance(spec, dict):
        try:
            spec = ModelSpec(**spec)
        except ValidationError as error:
            errors.append(f"Custom architecture: {describe_validation_error(error)}")
            spec = None
    settings = _validated(TrainingSettings, training, "Training settings", errors)
    if settings is not None and spec is not None and not isinstance(spec, dict):
        try:
            check_supported(spec, settings)
        except ValueError as error:
            errors.append(f"Training settings: {error}")
            settings = None
    calibration = active_calibration()
    if calibration is not None and settings is not None:
        settings = settings.model_copy(update={"overheads": calibration.apply_to_overheads(settings.overheads)})
        notes.append(
            f"Using the overheads measured on {calibration.host} ({calibration.gpu_name or calibration.device})."
        )
    serving_settings = _validated(ServingSettings, serving, "Serving settings", errors)
    return Workload(
        spec=spec,
        settings=settings,
        gpu_name=gpu_name,
        gpu_memory_gib=gpu_gib,
        errors=errors,
        notes=notes,
        mode=mode,
        serving=serving_settings,
    )


def _validated(model: type, fields: dict | None, label: str, errors: list[str]):
    """The pydantic model built from `fields`, or None with the reason added to `errors`."""
    if fields is None:
        return None
    try:
        return model(**fields)
    except (ValidationError, ValueError) as error:
        reason = describe_validation_error(error) if isinstance(error, ValidationError) else str(error)
        errors.append(f"{label}: {reason}")
        return None
