"""One training step of a reference model, traced in-process on fake (or real) CPU tensors.

`trace_step(spec, settings)` builds `models.ReferenceTransformer` under
`torch._subclasses.fake_tensor.FakeTensorMode` on device "cpu" (no tensor memory is
allocated), runs two optimizer steps so that optimizer states exist, and records the second
step with `tracking.LiveStorageTracker` (live bytes per phase, the peak and its op, and FLOPs
with torch.utils.flop_counter's formulas, `flops.FlopTally`). It is meant to run in the
worker subprocess (`runner.run_trace`).

What the step does, per precision (`calculators.workload.training` describes the modes):
- fp32: fp32 weights, no autocast.
- amp-fp16 / amp-bf16: fp32 weights, forward under `torch.autocast("cpu", dtype)` with CUDA's
  op lists (`cuda_emulation.cuda_autocast_policy`). Loss scaling (GradScaler) is in place and
  is left out.
- fp16-mixed / bf16-mixed: half weights and gradients plus an fp32 master copy, emulating
  DeepSpeed/Megatron as the engine models them (ZeRO paper Sec. 3.1): at the optimizer step
  every half gradient is copied to an fp32 gradient of its master (all at once), the optimizer
  updates the masters, the masters are copied back into the half weights, and the fp32
  gradients are dropped.
- bf16: bf16 weights, and torch.optim keeps its states in bf16.
The optimizer implementation (foreach / fused / for-loop) is set explicitly from
`settings.optimizer_impl`, since torch's default differs by device. The loop is HF Trainer's:
`compute_loss` returns the loss only, so the model output (the logits) is released before
`loss.backward()` (a loop that keeps `logits` referenced holds b*s*V more bytes through the
backward: `logits_in_backward="kept"`, NeMo Automodel's recipe); then the optimizer step and
`zero_grad(set_to_none=settings.grads_freed_after_step)`.
With gradient accumulation, two micro-batches per step are run and the second (gradients alive
during its forward) is recorded.

Training-stack features: torchtune's chunked loss (`Step._chunked_loss`), Liger's fused linear
cross-entropy (`fused_loss`, settings.loss == "fused-linear") and torch.compile of the layers
(`compile_partition`: AOT autograd's min-cut partitioner decides what each layer saves).

Phases of the recorded micro-batch: "forward" (the peak during forward), "end of forward"
(live once the loss exists, before autocast exits), "loss backward" (until the gradient of the
last layer's output is complete), "backward, last layer", "backward, middle layers",
"backward, first layer", "backward, embeddings", and the step's "optimizer step". The
boundaries are gradient hooks on the layer inputs.
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from calculators.models.spec import ModelSpec, extension
from calculators.units import GIB
from calculators.workload.precision import is_autocast, master_weight_bytes
from calculators.workload.training import (
    TrainingSettings,
    decoder_settings,
    image_tokens_per_image,
    language_model_settings,
)
from calculators.workload.vision import frozen_tower_parameters, tower_settings, vision_tower
from measure.trace.cuda_emulation import cuda_autocast_policy
from measure.trace.flops import FlopTally
from measure.trace.fused_loss import fused_linear_cross_entropy
from measure.trace.lora import add_adapters
from measure.trace.models import build_model, loss_fn
from measure.trace.result import PHASES, TraceError, TraceResult
from measure.trace.support import check_traceable
from measure.trace.tracking import LiveStorageTracker, PhasePeak

PROBE_LAYERS = (3, 4, 5)

WEIGHT_DTYPE = {
    "fp32": torch.float32,
    "amp-fp16": torch.float32,
    "amp-bf16": torch.float32,
    "fp16-mixed": torch.float16,
    "bf16-mixed": torch.bfloat16,
    "bf16": torch.bfloat16,
}
AUTOCAST_DTYPE = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}
IMPL_FLAGS = {"foreach": {"foreach": True, "fused": False}, "fused": {"foreach": False, "fused": True}}
IMPL_FLAGS["for-loop"] = {"foreach": False, "fused": False}

NOTES = [
    "Traced on CPU fake tensors with CUDA's autocast op lists and fused-attention output layouts.",
    "Fused attention is traced with dropout_p=0 (CUDA kernels keep no dropout mask).",
    "Not emulated: LayerNorm mean/rstd in the input dtype on CPU (fp32 on CUDA, 4 B per token and norm).",
]


@dataclass
class RawTrace:
    """A trace in bytes and FLOPs (integers), before conversion to GiB."""

    phases: dict[str, int]
    phase_ops: dict[str, str]
    phase_components: dict[str, dict[str, int]]
    saved_by_op: dict[str, int]
    warmup_phases: dict[str, int]
    flops_by_op: dict[str, int]
    tokens: int
    layers: list[int] = field(default_factory=list)


# --- Setup -------------------------------------------------------------------------------


def make_optimizer(params: list[torch.Tensor], settings: TrainingSettings) -> torch.optim.Optimizer:
    """AdamW or SGD with momentum, implementation from settings.optimizer_impl."""
    flags = IMPL_FLAGS[settings.optimizer_impl]
    if settings.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **flags)
    return torch.optim.SGD(params, lr=1e-2, momentum=0.9, **flags)


def make_inputs(spec: ModelSpec, settings: TrainingSettings) -> tuple[torch.Tensor, torch.Tensor]:
    """The text tokens, and labels for the whole sequence the language model sees (its image
    tokens included: language_model_settings)."""
    b, s = settings.micro_batch, settings.seq_len
    tokens = torch.randint(0, spec.vocab_size, (b, s))
    if spec.head == "lm":
        label_tokens = decoder_settings(spec, language_model_settings(spec, settings)).seq_len
        return tokens, torch.randint(0, spec.vocab_size, (b, label_tokens))
    return tokens, torch.randint(0, spec.num_labels, (b,))


def make_images(spec: ModelSpec, settings: TrainingSettings, dtype: torch.dtype) -> tuple[torch.Tensor, int] | None:
    """Each sample's images as the encoder's first layer receives them, patch embeddings (the
    patch embedding itself is a flat parameter: its input needs no gradient), and the tokens
    each image gives the language model; None without images. Llama 3.2 Vision's images are its
    tiles' unpadded patches (the encoder pads them) and give the language model no tokens."""
    if not settings.images_per_sample:
        return None
    tower, run = vision_tower(spec), tower_settings(spec, settings)
    if tower.cross_attention_layers:
        patches = torch.randn(run.micro_batch, tower.cross_attention_tokens_per_image, tower.hidden_size, dtype=dtype)
        return patches, 0
    patches = torch.randn(run.micro_batch, run.seq_len, tower.hidden_size, dtype=dtype)
    return patches, image_tokens_per_image(spec, settings)


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """Build parameters directly in `dtype` (Module.to cannot swap fake parameters)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class Step:
    """The model, its optimizer and the tracker; runs micro-batches and optimizer steps."""

    def __init__(self, spec: ModelSpec, settings: TrainingSettings) -> None:
        self.spec, self.settings = spec, settings
        lora = settings.method == "lora"
        # LoRA: the frozen base in the half compute dtype (fp32 under fp32), adapters in the weight dtype
        base_dtype = AUTOCAST_DTYPE.get(settings.precision, WEIGHT_DTYPE[settings.precision]) if lora else None
        with default_dtype(base_dtype or WEIGHT_DTYPE[settings.precision]):
            self.model = build_model(
                spec, settings.attention, settings.checkpointing, settings.liger, settings.checkpoint_unit
            )
        if settings.compile:
            self._compile_layers()
        if hasattr(self.model, "target_len"):  # T5: the decoder runs on the target's tokens
            self.model.target_len = settings.target_len
        if frozen_tower_parameters(spec, settings):
            self.model.freeze_vision_encoder()  # --freeze-vision-tower: the projector trains
        self.images: tuple[torch.Tensor, int] | None = None  # (patches, tokens per image)
        if lora:
            adapter_dtype = WEIGHT_DTYPE[settings.precision]
            dropout = getattr(settings, "lora_dropout", 0.0) or 0.0
            self.params = add_adapters(self.model, settings.lora_targets, settings.lora_rank, adapter_dtype, dropout)
        else:
            self.params = [param for param in self.model.parameters() if param.requires_grad]
        mixed = master_weight_bytes(settings.precision) > 0
        self.masters = [p.detach().float() for p in self.params] if mixed else []
        self.optimizer = make_optimizer(self.masters or self.params, settings)
        # Optimizer in backward (torchtune optimizer_in_bwd): one optimizer per parameter, stepped
        # in its post-accumulate-grad hook, which then frees the gradient.
        self.in_backward = (
            {p: make_optimizer([p], settings) for p in self.params} if settings.optimizer_in_backward else {}
        )
        self.tracker = LiveStorageTracker()
        self.tracker.adopt(self.model.parameters(), "weights")
        self.tracker.adopt(self.model.buffers(), "weights")
        self.tracker.adopt(self.masters, "master_weights")
        for param in self.params:
            param.register_post_accumulate_grad_hook(self._on_gradient)
        self.micro_batches = min(settings.grad_accum, 2)

    def _compile_layers(self) -> None:
        """torch.compile of each layer as AOT autograd's min-cut partitioner splits it
        (`compile_partition`): traced and partitioned here, before tracking starts, on inputs of
        the step's shapes; the partitioned graphs run op by op (inductor would fuse the pointwise
        ones, so transients inside a layer are an upper bound; what is saved is exact)."""
        from measure.trace.compile_partition import compile_layers  # imports AOT autograd

        model, settings = self.model, self.settings
        dtype = model.embed_tokens.weight.dtype
        x = torch.empty(settings.micro_batch, settings.seq_len, self.spec.hidden_size, dtype=dtype)
        compile_layers(model, x, model.layer_context(settings.seq_len, dtype, x.device))

    def _on_gradient(self, param: torch.Tensor) -> None:
        record = self.tracker.track(param.grad, "gradients", "gradient")
        if record is not None:
            record.kind = "gradients"
        if self.in_backward:
            kind, self.tracker.kind = self.tracker.kind, "optimizer_step_temporaries"
            self.in_backward[param].step()
            param.grad = None
            self.tracker.kind = kind

    def _offloading(self):
        """Activation offloading (torchtune's OffloadActivations, torchtune/training/
        _activation_offloading.py @e511d5a2): every saved tensor of the layers but parameters and
        tensors under 1024 bytes leaves the device when saved and is brought back when backward
        unpacks it. Emulated without prefetch: the host copy is a shape and dtype, and unpacking
        makes a new device tensor, so one layer's tensors at a time are back on the device."""
        if not self.settings.activation_offload:
            return contextlib.nullcontext()

        def pack(tensor: torch.Tensor):
            if isinstance(tensor, torch.nn.Parameter) or tensor.numel() * tensor.element_size() < 1024:
                return tensor
            return (tuple(tensor.shape), tensor.dtype)

        def unpack(packed):
            if isinstance(packed, torch.Tensor):
                return packed
            shape, dtype = packed
            return torch.empty(shape, dtype=dtype)

        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def _autocast(self):
        dtype = AUTOCAST_DTYPE.get(self.settings.precision)
        return torch.autocast("cpu", dtype=dtype) if dtype else contextlib.nullcontext()

    def _phase_hook(self, phase: str):
        def hook(grad: torch.Tensor) -> None:
            self.tracker.set_phase(phase)
            self.tracker.logits_width = None

        return hook

    def _boundary_phases(self) -> dict[int, str]:
        """Layer-input index -> phase that starts once its gradient is complete."""
        n = self.spec.n_layers
        phases = {n: "backward, last layer", 0: "backward, embeddings"}
        if n >= 2:
            phases[n - 1] = "backward, middle layers" if n >= 3 else "backward, first layer"
        if n >= 3:
            phases[1] = "backward, first layer"
        return phases

    def micro_batch(self, tokens: torch.Tensor, labels: torch.Tensor, recorded: bool) -> None:
        tracker, boundaries = self.tracker, self._boundary_phases()

        def on_boundary(index: int, x: torch.Tensor) -> None:
            if recorded and index in boundaries and x.requires_grad:  # a frozen embedding has no grad
                x.register_hook(self._phase_hook(boundaries[index]))

        tracker.recording, tracker.kind = recorded, "activations"
        tracker.set_phase("forward")
        with self._autocast():
            with self._offloading():
                hidden = self.model.body(tokens, on_boundary, self.images)
            tracker.logits_width = self.model.output_width
            if self.settings.loss == "chunked":
                logits, loss = self._chunked_loss(hidden, labels)
            elif self.settings.loss == "fused-linear" and self.spec.head == "lm":
                logits, loss = None, fused_linear_cross_entropy(hidden, self.model.head_weight, labels, tracker)
            else:
                logits = self.model.head(hidden)
                loss = loss_fn(logits, labels)
            del hidden
            loss = loss / self.settings.grad_accum
            tracker.mark("end of forward")
        # HF Trainer's compute_loss returns the loss and torchtune's recipe deletes the logits;
        # NeMo Automodel's recipe keeps `out` (the logits) referenced until backward has returned
        kept = logits if self.settings.logits_in_backward == "kept" else None
        del logits
        tracker.set_phase("loss backward")
        loss.backward()
        tracker.logits_width = None
        del loss, kept

    def _chunked_loss(self, hidden: torch.Tensor, labels: torch.Tensor) -> tuple[list, torch.Tensor]:
        """torchtune's chunked output and CEWithChunkedOutputLoss (torchtune/modules/loss/
        ce_chunked_output_loss.py @ce5433b0): the head runs on n sequence chunks of the hidden
        state, each chunk's logits are upcast and go through cross-entropy on their own. torchtune's
        Gemma 2 soft-caps the final norm's output, not the logits (models/gemma2/_component_builders.py
        @bd2a0fc7, Gemma2FinalNorm), so the chunks are not capped here."""
        n = self.settings.loss_chunks
        logits = [self.model.head(part, softcap=False) for part in hidden.chunk(n, dim=1)]
        total = sum(
            F.cross_entropy(chunk.float().flatten(0, -2), part.flatten(), reduction="sum")
            for chunk, part in zip(logits, labels.chunk(n, dim=1), strict=True)
        )
        return logits, total / labels.numel()

    def optimizer_step(self, recorded: bool) -> None:
        tracker = self.tracker
        tracker.recording, tracker.kind = recorded, "optimizer_step_temporaries"
        tracker.set_phase("optimizer step")
        if self.masters:
            for master, param in zip(self.masters, self.params, strict=True):
                master.grad = param.grad.float()
        if not self.in_backward:  # stepped during backward otherwise
            self.optimizer.step()
        if self.masters:
            with torch.no_grad():
                for master, param in zip(self.masters, self.params, strict=True):
                    param.copy_(master)
                    master.grad = None
        self.model.zero_grad(set_to_none=self.settings.grads_freed_after_step)
        tracker.kind = "activations"

    def mark_optimizer_states(self) -> None:
        optimizers = list(self.in_backward.values()) or [self.optimizer]
        states = [
            v
            for optimizer in optimizers
            for state in optimizer.state.values()
            for v in state.values()
            if isinstance(v, torch.Tensor)
        ]
        self.tracker.adopt(states, "optimizer_states")


# --- The trace -------------------------------------------------------------------------


@contextlib.contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector (collecting when asked, between micro-batches).

    Tensors kept alive only by reference cycles are freed whenever the collector happens to
    run, which depends on allocation counts; pausing it makes a trace deterministic (and exactly
    linear in the layer count). The reference step creates no such cycles: FlopCounterMode's
    module tracker did (its register_multi_grad_hook closures kept recomputed graphs of
    checkpointed layers alive), which is why FLOPs are tallied without it (`flops.FlopTally`).
    """
    enabled = gc.isenabled()
    gc.disable()
    gc.freeze()  # objects from before the trace are left out of its collections (much faster)
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def _run_steps(step: Step, tokens: torch.Tensor, labels: torch.Tensor, flops: FlopTally) -> dict[str, int]:
    """Two optimizer steps. The first (warm-up, no optimizer states yet) is recorded whole; of
    the second, the last micro-batch (FLOPs counted into `flops`) and the optimizer step.
    Returns the warm-up step's phase peaks."""
    tracker, warmup = step.tracker, {}
    for index in range(2):
        for micro in range(step.micro_batches):
            gc.collect()
            last = micro == step.micro_batches - 1
            recorded = index == 0 or last
            tracker.flops = flops if index == 1 and last else None
            step.micro_batch(tokens, labels, recorded)
            tracker.flops = None
        step.optimizer_step(recorded=True)
        if index == 0:
            step.mark_optimizer_states()
            warmup = {name: peak.bytes for name, peak in tracker.peaks.items()}
            tracker.peaks, tracker.marks = {}, {}
    tracker.recording = False
    return warmup


def _raw_result(step: Step, warmup: dict[str, int], flops: FlopTally, tokens: int) -> RawTrace:
    tracker = step.tracker
    peaks: dict[str, PhasePeak] = {**tracker.peaks, **tracker.marks}
    ordered = [name for name in PHASES if name in peaks]
    end_of_forward = tracker.marks["end of forward"]
    return RawTrace(
        phases={name: peaks[name].bytes for name in ordered},
        phase_ops={name: peaks[name].op for name in ordered if peaks[name].op},
        phase_components={name: peaks[name].by_kind() for name in ordered},
        saved_by_op=end_of_forward.by_op("activations"),
        warmup_phases=warmup,
        flops_by_op=dict(flops.by_op),
        tokens=tokens,
        layers=[step.spec.n_layers],
    )


def trace_raw(spec: ModelSpec, settings: TrainingSettings, *, fake: bool = True) -> RawTrace:
    """Run the two steps and return bytes and FLOPs as integers (fake=False: real CPU tensors)."""
    check_traceable(spec, settings)
    policy = cuda_autocast_policy() if is_autocast(settings.precision) else contextlib.nullcontext()
    tensors = FakeTensorMode() if fake else contextlib.nullcontext()
    with collector_paused(), policy, tensors:
        step, flops = Step(spec, settings), FlopTally()
        with step.tracker:
            step.tracker.kind = "inputs"
            tokens, labels = make_inputs(spec, settings)
            step.images = make_images(spec, settings, step.model.embed_tokens.weight.dtype)
            warmup = _run_steps(step, tokens, labels, flops)
        return _raw_result(step, warmup, flops, labels.numel() if spec.head == "lm" else tokens.numel())


# --- Layer extrapolation -----------------------------------------------------------------


def _extend(values: list[int], probes: tuple[int, ...], layers: int, what: str) -> int:
    """Extend three values measured at consecutive layer counts to `layers`, if they are linear."""
    first, second, third = values
    if second - first != third - second:
        raise TraceError(f"{what} is not linear in the layer count ({first}, {second}, {third} bytes)")
    return first + (layers - probes[0]) * (second - first)


def _extend_dict(dicts: list[dict], probes: tuple[int, ...], layers: int, what: str) -> dict:
    keys = {key for d in dicts for key in d}
    out = {}
    for key in sorted(keys):
        values = [d.get(key, 0) for d in dicts]
        if isinstance(values[0], dict) or any(isinstance(v, dict) for v in values):
            out[key] = _extend_dict([d.get(key, {}) for d in dicts], probes, layers, f"{what} {key}")
        else:
            out[key] = _extend(values, probes, layers, f"{what} {key!r}")
    return out


def extrapolate(raws: list[RawTrace], probes: tuple[int, ...], layers: int) -> RawTrace:
    """Every byte and FLOP count is checked to be exactly linear across the probes, then extended.

    Layers are identical, so each phase adds the same bytes per extra layer: activations saved by
    the other layers, their weights, gradients and states. The check makes this a verified
    identity rather than an assumption; a non-linear quantity raises TraceError.
    """
    return RawTrace(
        phases=_extend_dict([r.phases for r in raws], probes, layers, "phase"),
        phase_ops=raws[-1].phase_ops,
        phase_components=_extend_dict([r.phase_components for r in raws], probes, layers, "phase"),
        saved_by_op=_extend_dict([r.saved_by_op for r in raws], probes, layers, "saved by"),
        warmup_phases=_extend_dict([r.warmup_phases for r in raws], probes, layers, "warm-up phase"),
        flops_by_op=_extend_dict([r.flops_by_op for r in raws], probes, layers, "FLOPs of"),
        tokens=raws[0].tokens,
        layers=list(probes),
    )


# --- Conversion ----------------------------------------------------------------------------


def _gib(values: dict[str, int]) -> dict[str, float]:
    return {key: value / GIB for key, value in values.items()}


def to_result(raw: RawTrace, spec: ModelSpec, settings: TrainingSettings, seconds: float) -> TraceResult:
    """Convert bytes to GiB; the peak is the largest phase of the recorded step."""
    peak_phase = max(raw.phases, key=raw.phases.get)
    flops = sum(raw.flops_by_op.values())
    notes = list(NOTES)
    if spec.n_experts > 1:
        notes.append("Mixture of experts: tokens are routed evenly across experts (balanced routing).")
    if settings.loss == "fused-linear" and spec.head == "lm":
        notes.append(
            "Liger's fused linear cross-entropy emulated (measure.trace.fused_loss); its Triton kernel's "
            "fp32 work is in registers and not counted."
        )
    if settings.compile:
        notes.append(
            "torch.compile: each layer runs the graphs of AOT autograd's min-cut partitioner op by op "
            "(saved tensors exact; transients inside a layer are an upper bound, inductor fuses them)."
        )
    if len(raw.layers) > 1:
        notes.append(f"Traced with {raw.layers} layers and extended exactly (linear to the byte) to {spec.n_layers}.")
    saved = raw.phase_components["end of forward"].get("activations", 0)
    return TraceResult(
        peak_gib=raw.phases[peak_phase] / GIB,
        allocated_gib=raw.phases[peak_phase] / GIB,
        peak_phase=peak_phase,
        peak_op=raw.phase_ops.get(peak_phase, ""),
        phases_gib=_gib(raw.phases),
        phase_ops=raw.phase_ops,
        components_gib=_gib(raw.phase_components[peak_phase]),
        phase_components_gib={name: _gib(c) for name, c in raw.phase_components.items()},
        saved_activations_gib=saved / GIB,
        saved_by_op_gib=dict(sorted(_gib(raw.saved_by_op).items(), key=lambda item: -item[1])),
        warmup_peak_gib=max(raw.warmup_phases.values()) / GIB,
        flops_total=float(flops),
        flops_per_token=flops / raw.tokens,
        flops_by_op={op: float(n) for op, n in raw.flops_by_op.items()},
        tokens=raw.tokens,
        traced_layers=raw.layers,
        extrapolated=len(raw.layers) > 1,
        seconds=seconds,
        torch_version=torch.__version__,
        notes=notes,
    )


def trace_step(
    spec: ModelSpec, settings: TrainingSettings, *, layers: int | None = None, fake: bool = True
) -> TraceResult:
    """Trace one step of `spec` (with `layers` layers when given) and return the result."""
    start = time.perf_counter()
    if layers is not None:
        spec = spec.model_copy(update={"n_layers": layers})
    raw = trace_raw(spec, settings, fake=fake)
    return to_result(raw, spec, settings, time.perf_counter() - start)


def trace_extrapolated(spec: ModelSpec, settings: TrainingSettings, probes: tuple[int, ...] = PROBE_LAYERS):
    """Trace `probes` layer counts and extend exactly to `spec.n_layers` (a direct trace when
    the model is no deeper than the largest probe, or when its layers are not all alike: T5's
    decoder layers, Llama 3.2 Vision's cross-attention layers)."""
    tower = vision_tower(spec)
    mixed_layers = extension(spec, "cross_attention_layers") or (tower is not None and tower.cross_attention_layers)
    if spec.n_layers <= probes[-1] or mixed_layers:
        return trace_step(spec, settings)
    start = time.perf_counter()
    raws = [trace_raw(spec.model_copy(update={"n_layers": n}), settings) for n in probes]
    raw = extrapolate(raws, probes, spec.n_layers)
    return to_result(raw, spec, settings, time.perf_counter() - start)
