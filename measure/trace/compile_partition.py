"""What torch.compile saves for backward in one layer: AOT autograd's min-cut partitioner, traced.

torch.compile hands a layer's joint forward-backward graph to AOT autograd, whose partitioner
(torch/_functorch/partitioners.py, `min_cut_rematerialization_partition`, the one inductor
uses) chooses the tensors the forward saves: a minimum cut of the graph in which pointwise
ops are cheap to recompute and matmuls, attention and reductions are not. Inductor's codegen
then fuses what is left but does not change that set. This module runs one reference layer
(`blocks.Block`) through `torch._functorch.aot_autograd.aot_function` with inductor's
decompositions and that partitioner, and compilers that run the partitioned graphs as they are
(python code, no inductor codegen, no C compiler). The forward graph returns the layer's output
followed by the saved tensors; their bytes, counted once per storage, less the parameters and
the rotary tables every layer shares, are what one compiled layer keeps until its backward.

`saved_per_layer(spec, settings)` measures it on fake tensors (no memory) for the spec's
shapes; `compile_layers(model, ...)` makes every layer of a reference model run the partitioned
graphs, which is how the traced step emulates settings.compile (`tracer.Step`).

Measured (torch 2.13): for Llama-style layers with fused attention the saved set is the layer
input and fp32 rstd of each norm's, the normed inputs of q/k/v and gate/up, q, k, v, SDPA's
output and log-sum-exp, o's output (the residual sum is recomputed from it), gate, up and their
product; for eager attention the partitioner saves the QK^T scores in the compute dtype and the
fp32 row max and sum of the softmax, not its fp32 output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch._functorch.aot_autograd import aot_function
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.func import functional_call

from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings
from measure.trace.blocks import Block, LayerContext, rotary_cos_sin


@dataclass
class SavedTensor:
    """One tensor the partitioned forward saves: the node that makes it, its shape, dtype and bytes."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass
class Partition:
    """The saved tensors of one compiled layer (activation storages only, each counted once)."""

    saved: list[SavedTensor] = field(default_factory=list)
    tokens: int = 0
    forward_graph: str = ""

    @property
    def saved_bytes(self) -> int:
        return sum(t.nbytes for t in self.saved)

    @property
    def bytes_per_token(self) -> float:
        return self.saved_bytes / self.tokens


def _decompositions() -> dict:
    """Inductor's decomposition table (importing it needs no compiler)."""
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table()


def compile_block(block: Block, on_forward=None):
    """`block` compiled by AOT autograd with the min-cut partitioner, its graphs run as python:
    a function of (params, x, cos, sin, mask) returning the layer's output. The parameters go in
    as explicit inputs (`aot_function` on `torch.func.functional_call`; `aot_module` refuses
    fake parameters), so any block of the same shapes can be run with it and the parameters'
    gradients accumulate as usual. `on_forward(graph, outputs, user_outputs)` sees each forward
    call's graph module, its outputs (user outputs first, then the saved tensors) and how many
    are user outputs."""
    names = [name for name, _ in block.named_parameters()]
    counts: dict[str, int] = {}

    def call(params, x, cos, sin, mask):
        return functional_call(block, dict(zip(names, params, strict=True)), (x, LayerContext(cos, sin, mask)))

    def partition(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        counts["user"] = num_fwd_outputs
        return min_cut_rematerialization_partition(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)

    def fw_compiler(graph: torch.fx.GraphModule, example_inputs):
        def run(args):
            outputs = graph(*args)
            if on_forward is not None:
                on_forward(graph, outputs, counts["user"])
            return outputs

        run._boxed_call = True
        return run

    def bw_compiler(graph: torch.fx.GraphModule, example_inputs):
        def run(args):
            return graph(*args)

        run._boxed_call = True
        return run

    return aot_function(
        call,
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        partition_fn=partition,
        decompositions=_decompositions(),
    )


class CompiledLayer(nn.Module):
    """A layer run through `compiled` (from `compile_block` on a block of the same shapes)."""

    def __init__(self, block: Block, compiled) -> None:
        super().__init__()
        self.block, self.compiled = block, compiled

    def forward(self, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        params = list(self.block.parameters())
        return self.compiled(params, x, context.cos, context.sin, context.hidden_future)


def compile_layers(model, x: torch.Tensor, context: LayerContext) -> None:
    """torch.compile of every layer of a `models.ReferenceTransformer`, as the partitioner sees
    it: one compiled function (the layers have the same shapes) replaces each layer's forward.
    It is traced and partitioned here, once, on `x` and `context` (the shapes of the step to
    come) with detached copies of the parameters, so no gradient is left behind."""
    compiled = compile_block(model.layers[0])
    params = [p.detach().requires_grad_(p.requires_grad) for p in model.layers[0].parameters()]
    x = x.detach().requires_grad_(True)
    compiled(params, x, context.cos, context.sin, context.hidden_future).sum().backward()
    model.layers = nn.ModuleList(CompiledLayer(block, compiled) for block in model.layers)


def _storage(tensor: torch.Tensor) -> int:
    return id(tensor.untyped_storage())


def measure_block(block: Block, x: torch.Tensor, cos=None, sin=None, mask=None) -> Partition:
    """Compile `block`, run it on x (with the rotary tables and the causal mask of eager
    attention, which every layer shares) and return what its forward saves."""
    shared = {_storage(p) for p in block.parameters()}
    shared |= {_storage(t) for t in (cos, sin, mask) if t is not None}
    result = Partition(tokens=x.shape[0] * x.shape[1])

    def on_forward(graph: torch.fx.GraphModule, outputs, user_outputs: int) -> None:
        output_node = next(node for node in graph.graph.nodes if node.op == "output")
        names = [str(node) for node in output_node.args[0]]
        seen = set(shared)
        for name, tensor in zip(names[user_outputs:], outputs[user_outputs:], strict=True):
            if not isinstance(tensor, torch.Tensor) or _storage(tensor) in seen:
                continue
            seen.add(_storage(tensor))
            dtype = str(tensor.dtype).removeprefix("torch.")
            result.saved.append(SavedTensor(name, tuple(tensor.shape), dtype, tensor.untyped_storage().nbytes()))
        result.forward_graph = graph.code

    params = list(block.parameters())
    compile_block(block, on_forward)(params, x, cos, sin, mask).sum().backward()
    return result


def saved_per_layer(spec: ModelSpec, settings: TrainingSettings, *, fake: bool = True) -> Partition:
    """What one compiled layer of `spec` saves for backward at settings' micro-batch and
    sequence (weights in the precision's dtype: fp32, bf16 or fp16; autocast is not run)."""
    if settings.precision not in ("fp32", "bf16"):
        raise ValueError("the compiled-layer measurement runs fp32 or bf16 weights without autocast")
    dtype = torch.float32 if settings.precision == "fp32" else torch.bfloat16
    batch, seq, hidden = settings.micro_batch, settings.seq_len, spec.hidden_size
    mode = FakeTensorMode() if fake else None
    previous = torch.get_default_dtype()
    try:
        if mode is not None:
            mode.__enter__()
        torch.set_default_dtype(dtype)
        block = Block(spec, settings.attention, "none", settings.liger)
        x = torch.randn(batch, seq, hidden, requires_grad=True)
        rope = spec.position_embedding == "rope"
        cos, sin = rotary_cos_sin(seq, spec.attention_head_dim, dtype) if rope else (None, None)
        causal = spec.head == "lm" and settings.attention == "eager"
        mask = torch.ones(seq, seq, dtype=torch.bool).triu(1) if causal else None
        return measure_block(block, x, cos, sin, mask)
    finally:
        torch.set_default_dtype(previous)
        if mode is not None:
            mode.__exit__(None, None, None)
