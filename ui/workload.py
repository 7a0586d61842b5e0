"""The shared workload controls in the sidebar.

Every page reads the same workload from `st.session_state["workload"]`. The controls are
drawn from the declarations in calculators.interface.settings (bounds, defaults, help) and keep their
values through ui.state, so switching modes, model sources or pages never changes them,
and the URL reproduces the scenario.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
from pydantic import ValidationError

from calculators.hardware.catalogue import GpuSpec, load_gpu_catalogue
from calculators.interface.settings import Setting, all_settings, applicable_values, build_workload
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.memory.vision_training import (
    VisionInputError,
    VisionTrainingInput,
    check_image_size,
    checks_checkpointing,
)
from calculators.models.hf_config import (
    IMAGE_MODEL_HINT,
    IMAGE_MODEL_SIZED_PARAMETERS,
    ModelInputError,
    spec_from_hf_config,
    spec_from_parameter_count,
)
from calculators.models.hub import fetch_hub_config
from calculators.models.library import (
    ModelNotFound,
    bundled_spelling,
    library_model,
    split_model_ref,
)
from calculators.models.names import all_model_names, resolve_any
from calculators.models.presets import load_presets
from calculators.models.spec import ModelSpec
from calculators.models.vision_library import VisionModel, vision_model
from calculators.workload.build import GpuTarget, Workload
from calculators.workload.config_fields import FrameworkConfigError
from calculators.workload.framework_files import (
    describe_unknown,
    read_framework_config,
    setting_fields,
)
from calculators.workload.frameworks import FRAMEWORK_LABEL
from calculators.workload.modes import MODE_LABEL
from calculators.workload.serving import ServingSettings
from calculators.workload.training import (
    FRAMEWORKS,
    FSDP_NAME,
    LORA_TARGET_LABEL,
    LOSSES,
    OPTIMIZER_IMPLS,
    PRECISION_LABEL,
    CheckpointUnit,
    LogitsInBackward,
    Nf4Scales,
    QkvProjection,
    QuantisedLinears,
    ShardingImpl,
    TrainingSettings,
)
from ui import page_settings, state
from ui.calibration_state import active_calibration
from ui.messages import in_words
from ui.user_gpus import user_gpus

MODEL_SOURCES = ("Preset", "Custom architecture", "config.json", "Parameter count")
CUSTOM_GPU = "Custom capacity"
DEFAULT_PRESET = "llama-3.1-8b"
DEFAULT_GPU = "H100-SXM5-80GB"
CONFIG_KEY = "_uploaded_config"  # (file name, bytes) of the last config.json: uploads are not in a link
STACK_FILE_KEY = "_uploaded_stack_config"  # (file name, bytes) of the last framework config file
STACK_REPORT_KEY = "_stack_config_report"  # what that file set, and what it could not read

state.register(
    Setting("model_source", "src", "Model from", kind=str, default="Preset", options=MODEL_SOURCES),
    Setting("preset", "model", "Preset", kind=str, default=DEFAULT_PRESET),
    Setting("params_billion", "params_b", "Parameters (billions)", kind=float, default=7.0, low=0.001, high=100_000),
    Setting("gpu", "gpu", "GPU for the verdict", kind=str, default=DEFAULT_GPU),
    Setting("gpu_memory_gib", "gib", "GPU memory (GiB)", kind=float, default=80.0, low=0.1, high=100_000),
)
assert page_settings.COMPARE_DEFAULT_PICK  # the pages' settings are declared before a link is read
CUSTOM_KEYS = [item.key for item in all_settings() if item.model is ModelSpec]


@dataclass
class SidebarWorkload:
    """What the pages need: the workload (None when an input is wrong) and the reasons."""

    workload: Workload | None
    gpu_name: str
    gpu_memory_gib: float
    mode: str
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    vision: VisionTrainingInput | None = None  # an image model of the vision library: its own training step

    @property
    def ready(self) -> bool:
        """A transformer workload the pages can answer (an image model's is `vision`)."""
        return self.workload is not None

    @property
    def is_vision(self) -> bool:
        return self.vision is not None

    @property
    def is_inference(self) -> bool:
        return self.mode == "inference"

    @property
    def spec(self) -> ModelSpec | None:
        return self.workload.model if self.workload else None

    @property
    def settings(self) -> TrainingSettings | None:
        return self.workload.training if self.workload and self.workload.is_training else None

    @property
    def serving(self) -> ServingSettings | None:
        return self.workload.serving if self.workload and not self.workload.is_training else None


# --- the model ---------------------------------------------------------------------------


def _named_model(name: str) -> tuple[ModelSpec | VisionModel | None, list[str], list[str]]:
    """A preset, a bundled library model, an image model of the vision library, a cached or Hub config
    by its id; what the user typed stays in the box when it cannot be found."""
    image_model = vision_model(name)
    if image_model is not None:
        return image_model, [], [_vision_note(image_model)]
    try:
        if split_model_ref(name) is not None and library_model(name) is None:
            with st.spinner(f"Looking up {name} on Hugging Face..."):
                spec = resolve_any(name, fetch_hub_config)
        else:
            spec = resolve_any(name, fetch_hub_config)
    except ModelNotFound as error:
        return None, [error.for_page()], []
    except ModelInputError as error:
        return None, [in_words(error)], []
    spelled = bundled_spelling(name)
    if spelled is not None and spelled != name and name not in load_presets() and library_model(name) is None:
        name = spelled
    bundled = library_model(name)
    if bundled is None:
        return spec, [], [] if name in load_presets() else [f"Model {spec.name} read from its config.json."]
    gated = ", gated (accept the license on the Hub)" if bundled.gated else ""
    note = f"{spec.name}: license {bundled.license}{gated}; parameters from {bundled.parameters_source}."
    return spec, [], [note]


def _as_listed(name: str) -> str:
    """A bundled model's name typed in another case or punctuation ("Llama-2-7B") as the list spells
    it ("llama-2-7b"), so the box shows and the link carries the model the page answers for: the box
    ranks its "Add: Llama-2-7B" entry first, and Enter picks it. A listed name, a name with a
    revision and a name nothing bundled spells are kept as typed."""
    if "@" in name or name in all_model_names():
        return name
    return bundled_spelling(name) or name


def _vision_note(model: VisionModel) -> str:
    return (
        f"{model.key}: an image model of the vision library ({model.parameters / 1e6:.1f}M parameters at "
        f"{model.reference_resolution} px), traced from {model.source} as of {model.as_of}."
    )


def _model_controls(presets: dict[str, ModelSpec]) -> tuple[ModelSpec | VisionModel | None, list[str], list[str]]:
    sidebar = st.sidebar
    source = state.widget(sidebar.radio, "model_source", "Model from", MODEL_SOURCES, horizontal=True)
    preset_name = state.value("preset")
    if source == "Preset":
        names = all_model_names()
        options = names if preset_name in names else [*names, preset_name]  # a typed Hub id stays
        state.choice(
            sidebar,
            "preset",
            label="Model (preset or Hugging Face id)",
            options=options,
            accept_new_options=True,
            to_widget=_as_listed,
            from_widget=_as_listed,
            help="Type any part of a name to search the presets, the bundled open models and the image models of "
            "the vision library (resnet50, vit_base_patch16_224, microsoft/resnet-50...), or a Hugging Face id "
            "org/name[@revision] to read its config.json.",
        )
        return _named_model(state.value("preset"))
    if source == "Parameter count":
        return _parameter_count_model()
    if source == "config.json":
        return _uploaded_model()
    start_from, errors, _ = _named_model(preset_name)
    if isinstance(start_from, VisionModel):
        start_from, errors = None, [f"{start_from.key} is an image model: its architecture is the traced one."]
    if start_from is None:
        start_from = presets[DEFAULT_PRESET]
        errors = [f"{errors[0]} Starting from {DEFAULT_PRESET}."]
    spec, more_errors, notes = _custom_architecture(start_from)
    return spec, [*errors, *more_errors], notes


def _parameter_count_model() -> tuple[ModelSpec | None, list[str], list[str]]:
    billions = state.number(st.sidebar, "params_billion", step=0.5)
    try:
        spec = spec_from_parameter_count(billions * 1e9)
    except ModelInputError as error:
        return None, [in_words(error)], []
    note = (
        f"Assumed a Llama-style shape for {billions:g}B parameters: {spec.n_layers} layers, hidden "
        f"{spec.hidden_size}, {spec.n_heads} heads, FFN {spec.ffn_hidden_size}, vocab {spec.vocab_size}."
    )
    if billions * 1e9 < IMAGE_MODEL_SIZED_PARAMETERS:
        note += f" {IMAGE_MODEL_HINT[0].upper()}{IMAGE_MODEL_HINT[1:]} in the Preset box."
    return spec, [], [note]


def _keep_upload() -> None:
    upload = st.session_state.get("config_upload")
    if upload is not None:
        st.session_state[CONFIG_KEY] = (upload.name, upload.getvalue())


def _uploaded_model() -> tuple[ModelSpec | None, list[str], list[str]]:
    st.sidebar.file_uploader("Hugging Face config.json", type=["json"], key="config_upload", on_change=_keep_upload)
    kept = st.session_state.get(CONFIG_KEY)
    if kept is None:
        return None, ["Upload a config.json to estimate its model (it is parsed, never downloaded)."], []
    name, data = kept
    try:
        return spec_from_hf_config(data, name), [], [f"Model from the uploaded {name} (kept for this session)."]
    except ModelInputError as error:
        return None, [in_words(error)], []


def _custom_architecture(start_from: ModelSpec) -> tuple[ModelSpec | None, list[str], list[str]]:
    """The architecture by hand, starting from the selected preset's numbers."""
    for key in CUSTOM_KEYS:
        if not state.is_set(key) or state.value(key) is None:
            state.set_value(key, getattr(start_from, state_field(key)))
    with st.sidebar.expander("Architecture", expanded=True):
        col1, col2 = st.columns(2)
        for index, key in enumerate(CUSTOM_KEYS):
            column = (col1, col2)[index % 2]
            item = _setting(key)
            if item.value_type is bool:
                state.checkbox(st, key)
            elif item.choices:
                state.choice(column, key)
            else:
                state.number(column, key)
    fields = {state_field(key): state.value(key) for key in CUSTOM_KEYS}
    fields["position_embedding"] = "learned" if fields["norm"] == "layernorm" else "rope"
    try:
        spec = ModelSpec(name=f"custom (from {start_from.name})", **fields)
    except ValidationError as error:
        return None, [f"Custom architecture: {in_words(error)}"], []
    return spec, [], []


def _setting(key: str) -> Setting:
    return next(item for item in state.known_settings() if item.key == key)


def state_field(key: str) -> str:
    return _setting(key).name


# --- the workload settings ---------------------------------------------------------------


def _training_controls(mode: str, spec: ModelSpec | None) -> None:
    """The settings that decide a training answer first; the stack (sharding, offload, kernels, the
    framework) in a collapsed section whose title says what it assumes. A control that means nothing
    for the model (images for a text-only one) is not drawn; its kept value stays for the next model."""
    sidebar = st.sidebar
    state.choice(sidebar, "precision", format_func=PRECISION_SHORT.get, help=PRECISION_HELP)
    col1, col2 = sidebar.columns(2)
    state.number(col1, "micro_batch")
    state.number(col2, "seq_len")
    state.number(col1, "grad_accum", label="Grad. accum.")  # a column's width: the full label wraps
    state.number(col2, "gpus")
    state.choice(sidebar, "checkpointing")
    state.choice(sidebar, "optimizer")
    if mode != "train":
        col1, col2 = sidebar.columns(2)
        state.number(col1, "lora_rank")
        state.choice(col2, "lora_targets", help="; ".join(LORA_TARGET_LABEL.values()))
    if applies("images_per_sample", spec):
        state.number(sidebar, "images_per_sample", help="each image adds its tokens to the sample's sequence")
        state.number(sidebar, "image_tokens", help="0 = the model's own count (fixed-resolution towers)")
        if mode == "train":
            state.checkbox(
                sidebar,
                "freeze_vision_tower",
                help="LLaVA and Qwen2.5-VL's fine-tuning script freeze the image encoder; HF Trainer trains it. "
                "LoRA and QLoRA always keep it frozen.",
            )
    if applies("target_len", spec):
        state.number(
            sidebar, "target_len", help="T5's decoder and LM head run on the target's tokens; 0 = as many as the input"
        )
    report = st.session_state.get(STACK_REPORT_KEY)
    with state.section(sidebar, stack_summary(mode), key="stack_expander", expanded=report is not None):
        _parallel_controls(mode)
        _kernel_controls(mode)
        _stack_controls(report)


def applies(key: str, spec: ModelSpec | None) -> bool:
    """Whether the setting under `key` means anything for the model (its `needs`)."""
    return _setting(key).applies_to(spec)


def stack_summary(mode: str) -> str:
    """The stack section's title: what the estimate assumes about sharding, offload and the framework."""
    value = state.value
    parts = [f"ZeRO-{value('zero')}"]
    tp, pp = value("tensor_parallel"), value("pipeline_parallel")
    if tp > 1 or pp > 1:
        parts.append(f"TP {tp} x PP {pp}")
    offloaded = [
        what
        for key, what in (
            ("offload_optimizer", "optimizer"),
            ("offload_parameters", "parameters"),
            ("activation_offload", "activations"),
        )
        if value(key)
    ]
    parts.append(f"{' + '.join(offloaded)} on the CPU" if offloaded else "no offload")
    framework = value("framework")
    parts.append(FRAMEWORK_LABEL[framework] if framework else "plain PyTorch")
    if mode == "train" and value("frozen_layers"):
        parts.append(f"{value('frozen_layers')} frozen layers")
    return "Training stack: " + ", ".join(parts)


# The sidebar's boxes show a short name that fits their width; what each means is in the help.
PRECISION_SHORT = {
    "fp32": "FP32", "amp-fp16": "AMP FP16", "amp-bf16": "AMP BF16", "fp16-mixed": "FP16 mixed",
    "bf16-mixed": "BF16 mixed", "bf16": "Pure BF16", "fp8": "FP8 linears",
}  # fmt: skip
PRECISION_HELP = "  \n".join(
    # the long label's bracket is the detail: "BF16 mixed (bf16 weights + fp32 master)"
    f"**{PRECISION_SHORT[name]}**" + (f": {label.split(' (', 1)[1].removesuffix(')')}" if " (" in label else "")
    for name, label in PRECISION_LABEL.items()
)
ZERO_SHORT = {0: "ZeRO-0 · DDP", 1: "ZeRO-1 · optimizer", 2: "ZeRO-2 · SHARD_GRAD_OP", 3: "ZeRO-3 · FULL_SHARD"}
ZERO_HELP = (
    "What each data-parallel GPU holds a shard of instead of a full copy: ZeRO-1 the optimizer states, ZeRO-2 "
    "also the gradients, ZeRO-3 also the weights (Rajbhandari et al. 2020, arXiv 1910.02054).  \n"
    + "  \n".join(f"ZeRO-{stage} in PyTorch FSDP: {name}" for stage, name in FSDP_NAME.items())
)


def _parallel_controls(mode: str) -> None:
    _heading("**Sharding and offload**")
    state.choice(st, "zero", format_func=ZERO_SHORT.get, help=ZERO_HELP)
    col1, col2 = state.columns(st, 2)
    state.number(col1, "tensor_parallel")
    state.number(col2, "pipeline_parallel")
    state.checkbox(st, "offload_optimizer")
    state.checkbox(st, "offload_parameters")
    if mode == "train":
        state.number(st, "frozen_layers")


def _kernel_controls(mode: str) -> None:
    _heading("**Kernels and implementation**")
    attention_label = {"eager": "eager", "fused": "fused (SDPA/flash)"}
    state.choice(st, "attention", format_func=attention_label.get)
    state.choice(
        st,
        "optimizer_impl",
        options=[None, *OPTIMIZER_IMPLS],
        format_func=lambda impl: impl or "framework default (foreach)",
        help="torch AdamW: foreach (default on CUDA) holds one extra copy of the states during step(); "
        "fused updates in place; for-loop holds one tensor's worth.",
    )
    if mode == "train":
        return
    unset = {"format_func": framework_default_label}
    state.choice(st, "lora_dropout", options=[None, 0.0, 0.05, 0.1], **unset)
    if mode == "finetune-qlora":
        state.choice(st, "quant_backend", options=[None, "bitsandbytes", "torchao"], **unset)
        col1, col2 = state.columns(st, 2)
        state.choice(col1, "nf4_scales", options=[None, *Nf4Scales.__args__], **unset)
        state.choice(col2, "quantised_linears", options=[None, *QuantisedLinears.__args__], **unset)


def framework_default_label(value) -> str:
    """A stack setting's option as the select box shows it: None is the framework's default."""
    return "framework default" if value is None else str(value)


def _stack_controls(report: StackFileReport | None) -> None:
    """The training stack: its framework's defaults fill the loss and the AdamW implementation
    left on 'framework default'; the stack's own config file sets them all at once."""
    _heading("**Framework**")
    if state.drawn():  # a closed section sends no file box either (its applied settings are kept values)
        _stack_file_controls(report)
    state.choice(st, "framework", options=[None, *FRAMEWORKS], format_func=lambda f: f or "none (plain PyTorch)")
    framework_default = {"format_func": framework_default_label}
    state.choice(st, "loss", options=[None, *LOSSES], **framework_default)
    state.number(st, "loss_chunks")
    state.choice(st, "checkpoint_unit", options=[None, *CheckpointUnit.__args__], **framework_default)
    state.choice(st, "logits_in_backward", options=[None, *LogitsInBackward.__args__], **framework_default)
    state.choice(st, "sharding_impl", options=[None, *ShardingImpl.__args__], **framework_default)
    state.choice(st, "qkv_projection", options=[None, *QkvProjection.__args__], **framework_default)
    state.checkbox(st, "liger")
    state.checkbox(st, "optimizer_in_backward")
    state.checkbox(st, "activation_offload")
    state.checkbox(st, "load_whole_model")
    if state.drawn():
        st.caption("torch.compile: the run's compile switch (--compile) also changes the memory estimate.")


def _heading(text: str) -> None:
    """A heading inside the stack section, drawn only while it is open: closed, the section's widgets
    draw nothing (ui/state.section), and a heading alone would still be an element sent on every run."""
    if state.drawn():
        st.markdown(text)


@dataclass
class StackFileReport:
    """What an uploaded framework config did: the settings it set (label and value), the keys it
    could not read, or why it could not be read at all (then nothing was changed)."""

    name: str
    applied: list[str] = field(default_factory=list)
    warning: str | None = None
    error: str | None = None


def apply_stack_file(data: bytes, name: str, session: MutableMapping[str, Any]) -> StackFileReport:
    """The file's settings written over the kept sidebar values in `session` (st.session_state, or a
    dict), each checked by read_framework_config; the settings the file does not give are left alone."""
    try:
        config = read_framework_config(data, name)  # bytes: the size is checked before decoding
    except FrameworkConfigError as error:
        return StackFileReport(name, error=in_words(error))
    declared = {item.name: item for item in all_settings() if item.model is TrainingSettings}
    report = StackFileReport(name, warning=describe_unknown(config, name))
    for name_, value in setting_fields(config).items():
        key, label = (declared[name_].key, declared[name_].label) if name_ in declared else ("mode", "Mode")
        session[state.VALUE_PREFIX + key] = value
        report.applied.append(f"{label} {'on' if value is True else 'off' if value is False else value}")
    return report


def _apply_stack_upload() -> None:
    """on_change: a new file is applied once, before the run draws the widgets, so later edits win."""
    upload = st.session_state.get("stack_config_upload")
    if upload is None:
        st.session_state.pop(STACK_REPORT_KEY, None)
        return
    st.session_state[STACK_FILE_KEY] = (upload.name, upload.getvalue())
    st.session_state[STACK_REPORT_KEY] = apply_stack_file(upload.getvalue(), upload.name, st.session_state)


def _stack_file_controls(report: StackFileReport | None) -> None:
    st.file_uploader(
        "Framework config (torchtune/axolotl YAML, DeepSpeed/HF JSON, accelerate YAML)",
        type=["yaml", "yml", "json"],
        key="stack_config_upload",
        on_change=_apply_stack_upload,
        help="Sets the settings the file gives (batch, precision, optimizer, sharding, checkpointing, ...) once; "
        "change any of them afterwards as usual.",
    )
    if report is None:
        return
    if report.error:
        st.error(f"{report.error}. Nothing was changed.")
        return
    if report.warning:
        st.warning(report.warning)
    st.caption(f"{report.name} set: {', '.join(report.applied)}.")


WEIGHT_PRECISION_LABEL = {
    "fp32": "FP32",
    "fp16": "FP16",
    "bf16": "BF16",
    "fp8": "FP8",
    "int8": "INT8 (GPTQ/AWQ-style groups)",
    "int4": "INT4 (GPTQ/AWQ-style groups)",
    "nf4": "NF4 (bitsandbytes, double quantisation)",
    "fp4": "FP4 (NVFP4; FP4 tensor cores on Blackwell)",
}


FP4_FORMAT_LABEL = {
    "nvfp4": "NVFP4 (fp8 scale per 16)",
    "mxfp4": "MXFP4 (power-of-two scale per 32, gpt-oss)",
}


def _serving_controls(spec: ModelSpec | None) -> None:
    sidebar = st.sidebar
    col1, col2 = sidebar.columns(2)
    state.choice(col1, "s_weight_precision", format_func=WEIGHT_PRECISION_LABEL.get)
    state.choice(col2, "s_kv_precision")
    state.number(col1, "s_context_len", step=1024)
    state.number(col2, "s_concurrency", label="Concurrency", help="sequences served at once")
    state.number(sidebar, "s_tensor_parallel")
    if state.value("s_weight_precision") == "fp4":
        state.choice(sidebar, "s_fp4_format", format_func=FP4_FORMAT_LABEL.get)
    if not applies("s_images", spec):
        return
    state.number(
        sidebar,
        "s_images",
        help="Llama 3.2 Vision caches 4 tiles x 1601 keys and values per image in its cross-attention layers; "
        "for models that read images as tokens, count those tokens in the context",
    )


def _gpu_controls(catalogue: list[GpuSpec]) -> GpuTarget:
    names = [gpu.name for gpu in catalogue] + [CUSTOM_GPU]
    name = state.choice(st.sidebar, "gpu", options=names)
    if name == CUSTOM_GPU:
        return GpuTarget(name=name, memory_gib=state.number(st.sidebar, "gpu_memory_gib"))
    gpu = next(g for g in catalogue if g.name == name)
    return GpuTarget(name=name, memory_gib=gpu_memory_gib(gpu))


def workload_sidebar() -> SidebarWorkload:
    """Draw the shared controls, model and GPU first, and return the workload they describe."""
    state.load_from_url()
    presets = load_presets()
    catalogue = list(load_gpu_catalogue()) + user_gpus()
    spec, errors, notes = _model_controls(presets)
    gpu = _gpu_controls(catalogue)
    if isinstance(spec, VisionModel):
        return _vision_sidebar(spec, gpu, errors, notes)
    mode = state.choice(st.sidebar, "mode", format_func=MODE_LABEL.get)
    if mode == "inference":
        _serving_controls(spec)
    else:
        _training_controls(mode, spec)
    workload = None
    if spec is not None:
        workload = _built(mode, spec, gpu, errors)
    if workload is not None and workload.is_training:
        workload = _with_calibration(workload, notes)
    return SidebarWorkload(
        workload=workload, gpu_name=gpu.name, gpu_memory_gib=gpu.memory_gib, mode=mode, errors=errors, notes=notes
    )


def _vision_controls(model: VisionModel) -> None:
    """An image model's training step: images per GPU, their size and memory format, precision,
    optimizer, checkpointing where the model has blocks, data parallel GPUs and ZeRO. The transformer's
    controls (sequence length, LoRA, the training stack) mean nothing here and are not drawn."""
    sidebar = st.sidebar
    sidebar.caption("Mode: training (image models of the vision library are sized for training).")
    state.choice(sidebar, "v_precision", format_func=PRECISION_LABEL.get)
    col1, col2 = sidebar.columns(2)
    state.number(col1, "v_micro_batch", label="Micro-batch (images)")
    state.number(col2, "image_size", label="Image size (px, 0 = model's)", help=f"0 = {model.reference_resolution} px")
    state.number(col1, "gpus")
    # full width: "ZeRO-2 · FSDP SHARD_GRAD_OP" is cut off in half the sidebar
    state.choice(sidebar, "zero", format_func=lambda z: f"ZeRO-{z} · FSDP {FSDP_NAME[z]}")
    state.choice(sidebar, "v_optimizer")
    if checks_checkpointing(model) is None:
        state.choice(sidebar, "v_checkpointing", format_func={"none": "none", "full": "every block"}.get)
    state.checkbox(sidebar, "channels_last")
    state.number(sidebar, "cudnn_workspace_gib")


def vision_run(model: VisionModel) -> VisionTrainingInput:
    """The kept settings as an image model's training step; raises ValueError (pydantic's, or
    VisionInputError naming the bound) for settings it cannot take."""
    checkpointing = state.value("v_checkpointing") if checks_checkpointing(model) is None else "none"
    run = VisionTrainingInput(
        model=model,
        micro_batch=state.value("v_micro_batch"),
        image_size=state.value("image_size"),
        precision=state.value("v_precision"),
        channels_last=state.value("channels_last"),
        optimizer=state.value("v_optimizer"),
        checkpointing=checkpointing,
        gpus=state.value("gpus"),
        zero=state.value("zero"),
        cudnn_workspace_gib=state.value("cudnn_workspace_gib"),
    )
    check_image_size(model, run.resolution)
    return run


def _vision_sidebar(model: VisionModel, gpu: GpuTarget, errors: list[str], notes: list[str]) -> SidebarWorkload:
    _vision_controls(model)
    run = None
    try:
        run = vision_run(model)
    except (ValueError, VisionInputError) as error:  # pydantic's ValidationError is a ValueError
        errors.append(f"Training settings: {in_words(error)}")
    return SidebarWorkload(
        workload=None, gpu_name=gpu.name, gpu_memory_gib=gpu.memory_gib, mode="train", errors=errors, notes=notes,
        vision=run,
    )  # fmt: skip


def _built(mode: str, spec: ModelSpec, gpu: GpuTarget, errors: list[str]) -> Workload | None:
    # a kept setting the model does not take (images on a text-only model) stays kept, unused
    values = applicable_values({item.key: state.value(item.key) for item in all_settings()}, spec)
    label = "Serving settings" if mode == "inference" else "Training settings"
    try:
        return build_workload(mode, spec, values, gpu)
    except ValueError as error:  # pydantic's ValidationError is one
        errors.append(f"{label}: {in_words(error)}")
    return None


def _with_calibration(workload: Workload, notes: list[str]) -> Workload:
    """The measured overheads of an applied calibration replace the assumed ones."""
    calibration = active_calibration()
    if calibration is None:
        return workload
    overheads = calibration.apply_to_overheads(workload.training.overheads)
    notes.append(f"Using the overheads measured on {calibration.host} ({calibration.gpu_name or calibration.device}).")
    return workload.model_copy(update={"training": workload.training.model_copy(update={"overheads": overheads})})


def require_training(workload: SidebarWorkload, what: str, purpose: str) -> None:
    """Stop a training-only page with the reason when the sidebar has no training workload:
    `what` names the page's answers ("Plans"), `purpose` what fixing the sidebar gives."""
    if workload.is_vision:
        st.info(
            f"{what} are worked out for transformers; for the image model in the sidebar the Memory and Compare "
            "pages give its memory and fit."
        )
        st.stop()
    if not workload.ready:
        reasons = " ".join(workload.errors)
        st.error(f"The workload in the sidebar has an error; fix it to {purpose}. {reasons}".strip())
        st.stop()
    if workload.is_inference:
        st.info(f"{what} are for training runs: pick a training or fine-tuning mode in the sidebar.")
        st.stop()
