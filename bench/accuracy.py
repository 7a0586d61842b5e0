"""Closed-form memory engine against traced training steps, over a grid of configurations.

For each configuration, `calculators.memory.engine.estimate_memory(spec, settings).allocated_gib` is
compared with the peak of a step traced under fake tensors (`measure.trace`): the trace
has no CUDA context and no allocator reserve, so the engine's allocated bytes are the
comparable figure. Deep models are traced at 3, 4 and 5 layers and extended exactly
(`tracer.trace_extrapolated` checks linearity to the byte). Two worker processes trace in
parallel, each importing torch once (`runner.TraceSession`, with a time limit per trace).

    python bench/accuracy.py [--json PATH] [--limit N] [--match TEXT] [--workers 2]
    python bench/accuracy.py --vision [--match TEXT] [--json PATH]

`--vision` compares the image models of the vision library instead: every model at its reference
resolution and one it was not fitted at, in fp32 and fp16 autocast, 64 images, SGD with momentum
(the check of bench/vision_library.py), one row per configuration and how many are within 3%.

Prints one row per configuration, the engine's and the trace's peak phase, the median and
maximum relative error of the peak, and for each configuration off by more than 3% the
components that differ at the trace's peak phase.
"""

from __future__ import annotations

import argparse
import itertools
import json
import queue
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from calculators.memory.engine import estimate_memory  # noqa: E402
from calculators.models.library import library_spec  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.models.spec import ModelSpec  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402
from measure.trace import TraceError  # noqa: E402
from measure.trace.runner import TraceSession  # noqa: E402

THRESHOLD = 0.03
TIMEOUT_S = 180.0
NOT_ENGINE = ("allocator_reserve", "framework_overhead")
# Trace phases the engine does not compute, compared with the engine phase closest to them.
ENGINE_PHASE = {
    "forward": "end of forward",
    "backward, middle layers": "backward, last layer",
}

# Workloads per small model: (micro-batch, sequence) sized as typically trained.
SMALL_WORKLOADS = {
    "gpt2": (4, 1024),
    "bert-base-uncased": (8, 512),
    "llama-3.2-1b": (2, 2048),
    "qwen2.5-0.5b": (2, 2048),
}
LARGE_MODELS = (
    "gpt2-xl", "bert-large-uncased", "phi-3-mini-4k", "llama-2-7b", "llama-3.1-8b", "mistral-7b-v0.1", "qwen2.5-7b",
    "gemma-2-9b", "llama-2-13b", "mixtral-8x7b", "llama-2-70b", "llama-3.1-70b", "qwen2.5-72b",
)  # fmt: skip


@dataclass
class Config:
    label: str
    model: str
    settings: dict

    def spec(self) -> ModelSpec:
        return library_spec(self.model) if "/" in self.model else get_preset(self.model)

    def training(self) -> TrainingSettings:
        return TrainingSettings(**self.settings)


@dataclass
class Row:
    config: Config
    engine_gib: float
    engine_phase: str
    trace_gib: float | None = None
    trace_phase: str = ""
    trace_op: str = ""
    error: str = ""
    extrapolated: bool = False
    seconds: float = 0.0
    component_diffs_gib: dict = field(default_factory=dict)
    engine_phases_gib: dict = field(default_factory=dict)
    trace_phases_gib: dict = field(default_factory=dict)

    @property
    def relative_error(self) -> float | None:
        """(engine - trace) / trace: positive when the engine overestimates."""
        return None if self.trace_gib is None else (self.engine_gib - self.trace_gib) / self.trace_gib


def _seq_for(model: str, seq: int) -> int:
    return min(seq, get_preset(model).max_position_embeddings)


def grid() -> list[Config]:
    """At least 100 configurations: families x precision x checkpointing x attention, optimizers,
    sizes up to 72B and batch/sequence variations."""
    configs = []
    precisions = ("fp32", "amp-bf16", "bf16-mixed", "bf16")
    for model, (batch, seq) in SMALL_WORKLOADS.items():
        for precision, ckpt, attention in itertools.product(
            precisions, ("none", "selective", "full"), ("eager", "fused")
        ):
            settings = dict(
                micro_batch=batch, seq_len=seq, precision=precision, checkpointing=ckpt, attention=attention
            )
            configs.append(Config(f"{model} {precision} ckpt={ckpt} {attention} b{batch} s{seq}", model, settings))
    optimizers = [
        ("adamw", "foreach"),
        ("adamw", "fused"),
        ("adamw", "for-loop"),
        ("sgd", "foreach"),
        ("sgd", "for-loop"),
    ]
    for model, (optimizer, impl), precision in itertools.product(
        ("gpt2", "llama-3.2-1b"), optimizers, ("fp32", "amp-fp16", "fp16-mixed")
    ):
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision=precision, optimizer=optimizer, optimizer_impl=impl)
        configs.append(Config(f"{model} {precision} {optimizer}/{impl} b{batch} s{seq}", model, settings))
    large = [
        dict(micro_batch=1, seq_len=2048, precision="bf16-mixed", attention="fused", optimizer_impl="fused"),
        dict(micro_batch=1, seq_len=4096, precision="amp-bf16", attention="eager", checkpointing="selective"),
        dict(micro_batch=2, seq_len=4096, precision="bf16", attention="fused", checkpointing="full", optimizer="sgd"),
    ]
    for model, settings in itertools.product(LARGE_MODELS, large):
        settings = {**settings, "seq_len": _seq_for(model, settings["seq_len"])}
        label = f"{model} {settings['precision']} ckpt={settings.get('checkpointing', 'none')} {settings['attention']}"
        configs.append(Config(f"{label} b{settings['micro_batch']} s{settings['seq_len']}", model, settings))
    for model, (batch, seq), attention in itertools.product(
        ("llama-3.2-1b", "gpt2-medium"), ((1, 512), (8, 512), (1, 4096), (16, 1024)), ("eager", "fused")
    ):
        seq = _seq_for(model, seq)
        settings = dict(micro_batch=batch, seq_len=seq, precision="amp-fp16", attention=attention)
        configs.append(Config(f"{model} amp-fp16 {attention} b{batch} s{seq}", model, settings))
    # Training-stack features the trace emulates: torchtune's chunked cross-entropy.
    for model, chunks, precision in itertools.product(("llama-3.2-1b", "qwen2.5-0.5b"), (4, 8), ("bf16", "amp-bf16")):
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision=precision, loss="chunked", loss_chunks=chunks)
        configs.append(Config(f"{model} {precision} chunked CE x{chunks} b{batch} s{seq}", model, settings))
    # ... and the optimizer step in backward (torchtune optimizer_in_bwd), alone and with the chunked loss.
    for model, loss, precision in itertools.product(
        ("llama-3.2-1b", "qwen2.5-0.5b"), ("full", "chunked"), ("bf16", "fp32")
    ):
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision=precision, loss=loss, optimizer_in_backward=True)
        configs.append(Config(f"{model} {precision} {loss} CE, step in backward b{batch} s{seq}", model, settings))
    # ... and Liger's RMSNorm and SwiGLU (with the full loss).
    for model, precision in itertools.product(("llama-3.2-1b", "qwen2.5-0.5b"), ("bf16", "fp32")):
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision=precision, liger=True, loss="full")
        configs.append(Config(f"{model} {precision} Liger norms and SwiGLU b{batch} s{seq}", model, settings))
    # ... and Liger's fused linear cross-entropy, alone and with Liger's norms and SwiGLU.
    for model, precision, liger in itertools.product(
        ("llama-3.2-1b", "qwen2.5-0.5b"), ("bf16", "fp32", "amp-bf16"), (False, True)
    ):
        if liger and precision == "amp-bf16":
            continue  # Liger's kernels under autocast are not traced
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision=precision, liger=liger, loss="fused-linear")
        what = "Liger kernels and fused-linear CE" if liger else "fused-linear CE"
        configs.append(Config(f"{model} {precision} {what} b{batch} s{seq}", model, settings))
    # ... and torch.compile of the layers (AOT autograd's min-cut partitioner, measure.trace.compile_partition).
    for model, precision in itertools.product(("llama-3.2-1b", "qwen2.5-0.5b", "gpt2"), ("bf16", "fp32")):
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision=precision, compile=True)
        configs.append(Config(f"{model} {precision} compiled layers b{batch} s{seq}", model, settings))
    for model, changes in itertools.product(
        ("llama-3.2-1b", "qwen2.5-0.5b"), ({"attention": "eager"}, {"loss": "fused-linear"})
    ):
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision="bf16", compile=True, **changes)
        what = "eager attention" if "attention" in changes else "fused-linear CE"
        configs.append(Config(f"{model} bf16 compiled layers, {what} b{batch} s{seq}", model, settings))
    # ... and torchtitan's per-op selective checkpointing.
    for model, precision in itertools.product(("llama-3.2-1b", "qwen2.5-0.5b", "gpt2"), ("bf16", "bf16-mixed")):
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision=precision, checkpointing="op-selective")
        configs.append(Config(f"{model} {precision} ckpt=op-selective b{batch} s{seq}", model, settings))
    # ... and LoRA with and without dropout on the adapters' inputs (a mask and an output each).
    for model, targets, dropout in itertools.product(("llama-3.2-1b", "gpt2"), ("qv", "all-linear"), (0.0, 0.1)):
        batch, seq = SMALL_WORKLOADS[model]
        settings = dict(micro_batch=batch, seq_len=seq, precision="bf16", method="lora", lora_rank=16,
                        lora_targets=targets, lora_dropout=dropout)  # fmt: skip
        configs.append(Config(f"{model} bf16 LoRA {targets} dropout {dropout} b{batch} s{seq}", model, settings))
    # ... and multi-head latent attention (DeepSeek-V2-Lite: values 128 wide, queries and keys 192),
    # fused through the memory-efficient kernel or eager, with the core checkpointed or not; LoRA,
    # so that the activations, not AdamW's states of 15.7B parameters, make the peak.
    for precision, ckpt, attention in itertools.product(
        ("bf16", "amp-bf16"), ("none", "selective"), ("eager", "fused")
    ):
        settings = dict(micro_batch=2, seq_len=2048, precision=precision, checkpointing=ckpt, attention=attention,
                        method="lora", lora_targets="all-linear")  # fmt: skip
        label = f"DeepSeek-V2-Lite {precision} LoRA ckpt={ckpt} {attention} b2 s2048"
        configs.append(Config(label, "deepseek-ai/DeepSeek-V2-Lite", settings))
    # ... and Llama 3.2 Vision's images: the tiled encoder and the cross-attention layers
    # (measure.trace.mllama), traced whole (its layers are not all alike).
    vision_runs = [
        dict(micro_batch=1, seq_len=2048, precision="bf16", method="lora", images_per_sample=1),
        dict(micro_batch=1, seq_len=2048, precision="amp-bf16", attention="eager", method="lora", images_per_sample=1),
        dict(micro_batch=2, seq_len=1024, precision="bf16", checkpointing="selective", method="lora",
             images_per_sample=2),
        dict(micro_batch=2, seq_len=1024, precision="bf16-mixed", checkpointing="full", images_per_sample=1),
    ]  # fmt: skip
    for settings in vision_runs:
        what = f"{settings['precision']} {settings.get('method', 'full')} ckpt={settings.get('checkpointing', 'none')}"
        label = f"Llama-3.2-11B-Vision {what} {settings['images_per_sample']} image(s) b{settings['micro_batch']}"
        configs.append(Config(f"{label} s{settings['seq_len']}", "meta-llama/Llama-3.2-11B-Vision", settings))
    return configs


def _component_diffs(estimate, trace, phase: str) -> dict[str, float]:
    """Engine minus trace, by component, at the trace's `phase` (or the engine phase closest to it)."""
    engine_phase = ENGINE_PHASE.get(phase, phase)
    engine = estimate.phase_components_gib.get(engine_phase, {})
    engine = {k: v for k, v in engine.items() if k not in NOT_ENGINE}
    traced = dict(trace.phase_components_gib.get(phase, {}))
    traced["activations"] = traced.get("activations", 0.0) + traced.pop("inputs", 0.0)
    keys = set(engine) | set(traced)
    diffs = {k: engine.get(k, 0.0) - traced.get(k, 0.0) for k in keys}
    return {k: v for k, v in sorted(diffs.items()) if abs(v) > 1e-6}


def evaluate(config: Config, session: TraceSession) -> Row:
    spec, settings = config.spec(), config.training()
    estimate = estimate_memory(spec, settings)
    row = Row(config, estimate.allocated_gib, estimate.peak_phase, engine_phases_gib=estimate.phases_gib)
    try:
        trace = session.trace(spec, settings, extrapolate=True)
    except TraceError as exc:
        row.error = str(exc)
        return row
    row.trace_gib, row.trace_phase, row.trace_op = trace.allocated_gib, trace.peak_phase, trace.peak_op
    row.extrapolated, row.seconds, row.trace_phases_gib = trace.extrapolated, trace.seconds, trace.phases_gib
    row.component_diffs_gib = _component_diffs(estimate, trace, trace.peak_phase)
    return row


def run(configs: list[Config], workers: int) -> list[Row]:
    """Trace `configs` with `workers` parallel worker processes, printing rows as they finish."""
    todo: queue.Queue[tuple[int, Config]] = queue.Queue()
    for item in enumerate(configs):
        todo.put(item)
    rows: dict[int, Row] = {}
    lock = threading.Lock()

    def work() -> None:
        with TraceSession(TIMEOUT_S) as session:
            while True:
                try:
                    index, config = todo.get_nowait()
                except queue.Empty:
                    return
                row = evaluate(config, session)
                with lock:
                    rows[index] = row
                    print(format_row(row), flush=True)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [rows[i] for i in range(len(configs))]


def format_row(row: Row) -> str:
    if row.trace_gib is None:
        return f"{row.config.label:64s} engine {row.engine_gib:9.3f} GiB  trace: {row.error}"
    flag = " *" if abs(row.relative_error) > THRESHOLD else ""
    return (
        f"{row.config.label:64s} engine {row.engine_gib:9.3f}  trace {row.trace_gib:9.3f}  "
        f"{100 * row.relative_error:+7.2f}%  [{row.engine_phase} | {row.trace_phase}: {row.trace_op}]{flag}"
    )


def summarize(rows: list[Row], seconds: float) -> None:
    traced = [r for r in rows if r.relative_error is not None]
    errors = [abs(r.relative_error) for r in traced]
    print()
    extrapolated = sum(r.extrapolated for r in traced)
    print(f"{len(rows)} configurations, {len(traced)} traced ({extrapolated} by layer extrapolation), ", end="")
    print(f"{len(rows) - len(traced)} could not be traced; wall time {seconds:.0f} s")
    if errors:
        signed = statistics.mean(r.relative_error for r in traced)
        print(f"peak (engine allocated vs trace): median |error| {100 * statistics.median(errors):.2f}%, ", end="")
        print(f"max |error| {100 * max(errors):.2f}%, mean signed error {100 * signed:+.2f}%")
    off = sorted((r for r in traced if abs(r.relative_error) > THRESHOLD), key=lambda r: -abs(r.relative_error))
    print(f"{len(off)} configurations off by more than {100 * THRESHOLD:.0f}%:")
    for row in off:
        diffs = ", ".join(f"{k} {v:+.3f}" for k, v in row.component_diffs_gib.items())
        where = f"at '{row.trace_phase}'" + (
            f" (vs '{ENGINE_PHASE[row.trace_phase]}')" if row.trace_phase in ENGINE_PHASE else ""
        )
        print(f"  {row.config.label}: {100 * row.relative_error:+.2f}% {where} (engine - trace, GiB: {diffs})")


def vision_table(match: str | None, out: Path | None) -> None:
    """The vision library's engine against fresh fake-tensor traces (bench/vision_library.py's check)."""
    import vision_library  # bench/vision_library.py, beside this script

    keys = [entry.key for entry in vision_library.ENTRIES if match is None or match in entry.key]
    start = time.perf_counter()
    rows = vision_library.check(keys, vision_library.ROOT / "data" / "vision_library.json")
    print()
    vision_library.summarize(rows)
    within = sum(abs(row["peak_error"]) <= THRESHOLD and abs(row["saved_error"]) <= THRESHOLD for row in rows)
    print(f"{within} of {len(rows)} configurations within {100 * THRESHOLD:.0f}% (peak and saved activations); "
          f"{len(keys)} models, wall time {time.perf_counter() - start:.0f} s")  # fmt: skip
    if out:
        out.write_text(json.dumps(rows, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--limit", type=int, help="only the first N configurations")
    parser.add_argument("--match", help="only the configurations whose label contains this text")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vision", action="store_true", help="the vision library's image models instead")
    args = parser.parse_args()
    if args.vision:
        vision_table(args.match, args.json)
        return
    configs = [config for config in grid() if args.match is None or args.match in config.label][: args.limit]
    start = time.perf_counter()
    rows = run(configs, args.workers)
    summarize(rows, time.perf_counter() - start)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"relative_error": r.relative_error} for r in rows], indent=1))


if __name__ == "__main__":
    main()
