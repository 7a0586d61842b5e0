"""One training step of a torchvision/timm image model (or our U-Net) under fake tensors on the CPU.

`trace_vision_step(entry, image_size, precision, channels_last, micro_batch)` builds the real
module definition under `torch._subclasses.fake_tensor.FakeTensorMode` (no tensor memory is
allocated, so ViT-L or EfficientNet-B7 at 600 pixels trace on a laptop), runs one training
step (forward, cross-entropy, backward, optimizer step, `zero_grad(set_to_none=True)`) after
the optimizer's states exist (`make_optimizer_states`) and records it with the transformer trace's
`measure.trace.tracking.LiveStorageTracker` (every storage's bytes from allocation to free):

- parameters and buffers (BatchNorm's running mean and variance and its int64 step counter);
- per module (the innermost one running when an op runs): forward FLOPs with the formulas of
  `torch.utils.flop_counter` (a convolution is 2 x output elements x in_channels/groups x kernel
  area, a linear 2 x m x n x k, fused attention 2 matmuls of 2 x b x h x s^2 x d), the output
  shape of each leaf module, and the bytes still live at the end of forward that it made: what
  autograd keeps for backward;
- the saved activations: live bytes at the end of forward minus weights, buffers, autocast weight
  copies and inputs (the logits and cross-entropy's log-softmax are included, as small as they are);
- the peak of live bytes over the whole recorded step and per phase (forward, backward,
  optimizer step), to check the closed-form engine against.

Precisions: "fp32"; "amp-bf16" / "amp-fp16": fp32 weights, forward under `torch.autocast("cpu")`
with CUDA's op lists (`measure.trace.cuda_emulation.cuda_autocast_policy`: layer_norm and
group_norm in fp32 as on CUDA; BatchNorm runs in its input's dtype on both). Loss scaling is left
out (GradScaler's scale is one scalar). Memory format: channels-last moves the parameters and the
images to `torch.channels_last`, as `model.to(memory_format=torch.channels_last)` in a training
script does.
"""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from measure.trace.cuda_emulation import cuda_autocast_policy
from measure.trace.flops import FlopTally
from measure.trace.tracking import LiveStorageTracker
from measure.vision.catalogue import VisionEntry
from measure.vision.models import build_vision_model, materialize

AUTOCAST_DTYPE = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}
PRECISIONS = ("fp32", "amp-bf16", "amp-fp16")


@dataclass
class LayerRecord:
    """One module of the model, in the order it first ran."""

    name: str
    type: str
    output_shape: list[int]
    forward_flops: int
    saved_bytes: int


@dataclass
class VisionTrace:
    """A traced training step, in bytes and FLOPs (integers)."""

    key: str
    image_size: int
    precision: str
    channels_last: bool
    micro_batch: int
    optimizer: str
    parameters: int
    buffers: int
    buffer_bytes: int
    forward_flops: int
    saved_bytes: int
    autocast_copy_bytes: int
    input_bytes: int
    peak_bytes: int
    end_of_forward_bytes: int
    phase_peaks: dict[str, int]
    phase_components: dict[str, dict[str, int]]
    layers: list[LayerRecord] = field(default_factory=list)


class ModuleFlopTally(FlopTally):
    """FlopTally that also sums FLOPs per module (the innermost running one)."""

    def __init__(self) -> None:
        super().__init__()
        self.module = ""
        self.by_module: dict[str, int] = {}

    def add(self, func, args: tuple, kwargs: dict, out) -> None:
        formula = self.registry.get(func._overloadpacket)
        if formula is not None:
            flops = int(formula(*args, **kwargs, out_val=out))
            self.by_op[str(func._overloadpacket)] += flops
            self.by_module[self.module] = self.by_module.get(self.module, 0) + flops


class ModuleTracker(LiveStorageTracker):
    """LiveStorageTracker whose records name the module that made each storage (in `op`)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.flop_tally: ModuleFlopTally | None = None

    def track(self, tensor: torch.Tensor, kind: str, op: str = ""):
        return super().track(tensor, kind, self.stack[-1] if self.stack and op != "adopted" else op)

    def enter(self, name: str) -> None:
        self.stack.append(name)
        if self.flop_tally is not None:
            self.flop_tally.module = name

    def leave(self) -> None:
        self.stack.pop()
        if self.flop_tally is not None:
            self.flop_tally.module = self.stack[-1] if self.stack else ""


class ModuleHooks:
    """Forward pre/post hooks on every module: the module stack for the tracker, and each leaf's
    output shape (first call only; recording while `recording`)."""

    def __init__(self, model: torch.nn.Module, tracker: ModuleTracker) -> None:
        self.tracker, self.recording = tracker, False
        self.order: list[str] = []
        self.types: dict[str, str] = {}
        self.shapes: dict[str, list[int]] = {}
        self.handles = []
        for name, module in model.named_modules():
            name = name or "(model)"
            self.types[name] = type(module).__name__
            leaf = next(module.children(), None) is None
            self.handles.append(module.register_forward_pre_hook(self._pre(name)))
            self.handles.append(module.register_forward_hook(self._post(name, leaf)))

    def _pre(self, name: str):
        def hook(module, args):
            self.tracker.enter(name)
            if self.recording and name not in self.order:
                self.order.append(name)

        return hook

    def _post(self, name: str, leaf: bool):
        def hook(module, args, output):
            self.tracker.leave()
            if self.recording and leaf and isinstance(output, torch.Tensor) and name not in self.shapes:
                self.shapes[name] = list(output.shape)

        return hook


def make_optimizer(params, optimizer: str) -> torch.optim.Optimizer:
    """SGD with momentum 0.9 and weight decay 1e-4 (torchvision's classification reference recipe,
    references/classification/train.py defaults), or AdamW; foreach, CUDA's default."""
    if optimizer == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05, foreach=True)
    return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4, foreach=True)


def _inputs(entry: VisionEntry, micro_batch: int, image_size: int, channels_last: bool):
    images = torch.randn(micro_batch, 3, image_size, image_size)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    if entry.kind == "unet":  # a class per pixel
        labels = torch.randint(0, entry.num_classes, (micro_batch, image_size, image_size))
    else:
        labels = torch.randint(0, entry.num_classes, (micro_batch,))
    return images, labels


class VisionStep:
    """The model, its optimizer, the tracker and the hooks."""

    def __init__(self, entry: VisionEntry, model, precision: str, channels_last: bool, optimizer: str):
        self.entry, self.precision = entry, precision
        self.model = materialize(model, channels_last)
        self.model.train()
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(self.params, optimizer)
        self.tracker = ModuleTracker()
        self.tracker.adopt(self.model.parameters(), "weights")
        self.tracker.adopt(self.model.buffers(), "buffers")
        self.hooks = ModuleHooks(self.model, self.tracker)
        for param in self.params:
            param.register_post_accumulate_grad_hook(self._on_gradient)

    def _on_gradient(self, param: torch.Tensor) -> None:
        record = self.tracker.track(param.grad, "gradients", "gradient")
        if record is not None:
            record.kind = "gradients"

    def _autocast(self):
        dtype = AUTOCAST_DTYPE.get(self.precision)
        return torch.autocast("cpu", dtype=dtype) if dtype else contextlib.nullcontext()

    def run(self, images, labels, recorded: bool) -> None:
        tracker = self.tracker
        tracker.recording, tracker.kind = recorded, "activations"
        self.hooks.recording = recorded
        tracker.flop_tally = tracker.flops = ModuleFlopTally() if recorded else None
        tracker.set_phase("forward")
        with self._autocast():
            logits = self.model(images)
            tracker.flops = None  # forward FLOPs only
            loss = F.cross_entropy(logits, labels)  # per image, or per pixel for the U-Net
            del logits
            tracker.mark("end of forward")
        tracker.set_phase("backward")
        loss.backward()
        del loss
        tracker.kind = "optimizer_step_temporaries"
        tracker.set_phase("optimizer step")
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        tracker.kind = "activations"

    def make_optimizer_states(self) -> None:
        """The states a first step leaves (momentum; AdamW's moments and step counts), made by one
        optimizer step on zero gradients: the recorded step then runs as the second of a run does,
        without tracing a whole warm-up step."""
        for param in self.params:
            param.grad = torch.zeros_like(param)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        states = [v for s in self.optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        self.tracker.adopt(states, "optimizer_states")


def _layers(step: VisionStep, saved_by_module: dict[str, int]) -> list[LayerRecord]:
    hooks, flops = step.hooks, step.tracker.flop_tally.by_module
    rows = []
    for name in hooks.order:
        if name in hooks.shapes or flops.get(name) or saved_by_module.get(name):
            rows.append(
                LayerRecord(
                    name=name,
                    type=hooks.types[name],
                    output_shape=hooks.shapes.get(name, []),
                    forward_flops=flops.get(name, 0),
                    saved_bytes=saved_by_module.get(name, 0),
                )
            )
    return rows


def _collector_paused():
    """As measure.trace.tracer.collector_paused: no cyclic collection during the trace, so a
    storage is freed exactly when its last reference goes (deterministic peaks)."""
    from measure.trace.tracer import collector_paused

    return collector_paused()


def trace_vision_step(
    entry: VisionEntry,
    image_size: int,
    precision: str = "fp32",
    channels_last: bool = False,
    micro_batch: int = 2,
    optimizer: str = "sgd",
    checkpointing: bool = False,
) -> VisionTrace:
    """Trace one training step (the second of two) and return its bytes and FLOPs; with
    `checkpointing`, every block recomputed in backward (measure.vision.checkpointing)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    policy = cuda_autocast_policy() if precision in AUTOCAST_DTYPE else contextlib.nullcontext()
    model = build_vision_model(entry, image_size)
    if checkpointing:
        from measure.vision.checkpointing import checkpoint_blocks

        checkpoint_blocks(model)
    with _collector_paused(), policy, FakeTensorMode():
        step = VisionStep(entry, model, precision, channels_last, optimizer)
        with step.tracker:
            step.tracker.kind = "inputs"
            images, labels = _inputs(entry, micro_batch, image_size, channels_last)
            step.make_optimizer_states()
            gc.collect()
            step.tracker.peaks, step.tracker.marks = {}, {}
            step.run(images, labels, recorded=True)
        return _result(step, entry, image_size, precision, channels_last, micro_batch, optimizer, images, labels)


def _result(step, entry, image_size, precision, channels_last, micro_batch, optimizer, images, labels) -> VisionTrace:
    tracker = step.tracker
    end = tracker.marks["end of forward"]
    components = end.by_kind()
    buffers = list(step.model.buffers())
    params = list(step.model.parameters())
    return VisionTrace(
        key=entry.key,
        image_size=image_size,
        precision=precision,
        channels_last=channels_last,
        micro_batch=micro_batch,
        optimizer=optimizer,
        parameters=sum(p.numel() for p in params),
        buffers=sum(b.numel() for b in buffers),
        buffer_bytes=sum(b.numel() * b.element_size() for b in buffers),
        forward_flops=sum(tracker.flop_tally.by_module.values()),
        saved_bytes=components.get("activations", 0),
        autocast_copy_bytes=components.get("autocast_weight_copies", 0),
        input_bytes=images.numel() * images.element_size() + labels.numel() * labels.element_size(),
        peak_bytes=max(peak.bytes for peak in tracker.peaks.values()),
        end_of_forward_bytes=end.bytes,
        phase_peaks={name: peak.bytes for name, peak in tracker.peaks.items()},
        phase_components={name: peak.by_kind() for name, peak in tracker.peaks.items()},
        layers=_layers(step, end.by_op("activations")),
    )
