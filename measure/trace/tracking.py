"""Live tensor bytes (and FLOPs), op by op: a TorchDispatchMode that follows every tensor storage.

Every tensor an op returns has an untyped storage; the tracker records each new storage's
`nbytes()` and a weak reference whose callback subtracts it again when torch frees the
storage (torch keeps a storage's Python object alive while C++ holds it, so the callback fires
exactly at deallocation; the same scheme as torch.distributed._tools.mem_tracker.MemTracker).
Views and in-place results share a storage and add nothing. It works unchanged on real and
on fake tensors, which is how the tests check the fake trace against a real CPU step.

Each storage gets a kind, the engine's component it belongs to (`calculators.memory.result.COMPONENTS`):
weights, master_weights, gradients, optimizer_states, optimizer_step_temporaries,
autocast_weight_copies (casts of a weight), logits_and_loss (tensors as wide as the logits in
the head, the loss and the loss backward), activations (everything else made in forward and
backward, the backward's transient gradients included) and inputs (token ids and labels).
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from measure.trace.cuda_emulation import cuda_sdpa_layout
from measure.trace.flops import FlopTally

TO_COPY = torch.ops.aten._to_copy.default


class StorageRecord:
    """One live storage: its bytes, what it is, and the op that made it."""

    __slots__ = ("nbytes", "kind", "op", "ref", "__weakref__")

    def __init__(self, nbytes: int, kind: str, op: str) -> None:
        self.nbytes, self.kind, self.op = nbytes, kind, op
        self.ref = None


@dataclass
class PhasePeak:
    """The largest live bytes seen in one phase, the op that reached it and what was live."""

    bytes: int
    op: str
    live: list[StorageRecord] = field(repr=False)

    def by_kind(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for record in self.live:
            totals[record.kind] = totals.get(record.kind, 0) + record.nbytes
        return totals

    def by_op(self, kind: str) -> dict[str, int]:
        totals: dict[str, int] = {}
        for record in self.live:
            if record.kind == kind:
                totals[record.op] = totals.get(record.op, 0) + record.nbytes
        return totals


def _op_name(func) -> str:
    return str(func).removeprefix("aten.")


class LiveStorageTracker(TorchDispatchMode):
    """Follow live storage bytes; keep the peak of each phase while `recording`."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, StorageRecord] = {}
        self.live_bytes = 0
        self.phase = "setup"
        self.kind = "activations"
        self.logits_width: int | None = None
        self.recording = False
        self.peaks: dict[str, PhasePeak] = {}
        self.marks: dict[str, PhasePeak] = {}
        self.overall_peak = 0
        self.flops: FlopTally | None = None  # counts FLOPs while set
        self.untracked_depth = 0  # > 0: inside a fused kernel's emulation (`in_registers`)

    # --- bookkeeping ---------------------------------------------------------------

    def _free(self, key: int, _ref=None) -> None:
        record = self.live.pop(key, None)
        if record is not None:
            self.live_bytes -= record.nbytes

    def record_of(self, tensor: torch.Tensor) -> StorageRecord | None:
        return self.live.get(id(tensor.untyped_storage()))

    def track(self, tensor: torch.Tensor, kind: str, op: str = "") -> StorageRecord | None:
        """Count `tensor`'s storage if new (and re-kind it if `kind` is given for a known one)."""
        if tensor.device.type == "meta":
            return None
        storage = tensor.untyped_storage()
        key = id(storage)
        record = self.live.get(key)
        if record is None:
            record = StorageRecord(storage.nbytes(), kind, op)
            record.ref = weakref.ref(storage, lambda ref, key=key: self._free(key))
            self.live[key] = record
            self.live_bytes += record.nbytes
        elif record.nbytes != storage.nbytes():  # resized in place
            self.live_bytes += storage.nbytes() - record.nbytes
            record.nbytes = storage.nbytes()
        return record

    def adopt(self, tensors, kind: str) -> None:
        """Count tensors made before tracking started, and set their kind."""
        for tensor in tensors:
            record = self.track(tensor, kind, "adopted")
            if record is not None:
                record.kind = kind

    @contextlib.contextmanager
    def in_registers(self):
        """Ops inside stand for one fused GPU kernel: the storages they make are its registers
        and shared memory and are not counted (what the kernel writes in place into tensors
        made outside is). Used for Liger's cross-entropy kernel (`fused_loss`)."""
        self.untracked_depth += 1
        try:
            yield
        finally:
            self.untracked_depth -= 1

    @contextlib.contextmanager
    def kind_as(self, kind: str):
        """Count the storages made inside as `kind`."""
        previous, self.kind = self.kind, kind
        try:
            yield
        finally:
            self.kind = previous

    # --- phases --------------------------------------------------------------------

    def set_phase(self, phase: str) -> None:
        self.phase = phase

    def mark(self, name: str) -> None:
        """Remember the live bytes now, under `name` (e.g. "end of forward")."""
        if self.recording:
            self.marks[name] = PhasePeak(self.live_bytes, "", self._snapshot())

    def _snapshot(self) -> list[StorageRecord]:
        """Copies of the live records: a storage's kind as it is now (a record is re-kinded later
        when, say, a tensor made in forward becomes a parameter's gradient)."""
        return [StorageRecord(r.nbytes, r.kind, r.op) for r in self.live.values()]

    def _update_peaks(self, op: str) -> None:
        live = self.live_bytes
        self.overall_peak = max(self.overall_peak, live)
        if not self.recording:
            return
        peak = self.peaks.get(self.phase)
        if peak is None or live > peak.bytes:
            self.peaks[self.phase] = PhasePeak(live, op, self._snapshot())

    # --- dispatch ------------------------------------------------------------------

    def _kind_for(self, func, args: tuple, output: torch.Tensor) -> str:
        if func is TO_COPY and isinstance(args[0], torch.Tensor):
            source = self.record_of(args[0])
            if source is not None and source.kind == "weights":
                return "autocast_weight_copies"
        if self.logits_width is not None and output.dim() > 0 and output.shape[-1] == self.logits_width:
            return "logits_and_loss"
        return self.kind

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.untracked_depth:
            return out
        out = cuda_sdpa_layout(func, args, out)
        if self.flops is not None:
            self.flops.add(func, args, kwargs, out)
        op = _op_name(func)
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self.track(tensor, self._kind_for(func, args, tensor), op)
        self._update_peaks(op)
        return out
