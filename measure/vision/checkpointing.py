"""Every block of an image model under activation checkpointing, for the trace to measure what
calculators.memory.vision_training assumes: the blocks are the modules named as
calculators.models.vision_library.block_of names them (ResNet's `layer1.0`, ViT's `blocks.3`, Swin's
`layers.0.blocks.1`, ...), each wrapped so its forward runs under torch.utils.checkpoint (non-reentrant,
PyTorch's recommended form: https://pytorch.org/docs/stable/checkpoint.html), as timm's
`set_grad_checkpointing` does for its blocks (timm/models/_manipulate.py `checkpoint_seq`)."""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from calculators.models.vision_library import block_of


class CheckpointedBlock(torch.nn.Module):
    """A block whose activations are recomputed in backward instead of kept."""

    def __init__(self, block: torch.nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, *args):
        return checkpoint(self.block, *args, use_reentrant=False)


def block_names(model: torch.nn.Module) -> list[str]:
    """The blocks as the layer table groups its modules: the block each module's name falls in."""
    names = [name for name, _ in model.named_modules() if name]
    # a block holds modules of its own, as calculators.models.vision_library._block_profile groups the table
    blocks = {block_of(name) for name in names if block_of(name) not in (None, name)}
    # the outermost only: a block inside another is recomputed with it
    return [name for name in names if name in blocks and not any(name.startswith(b + ".") for b in blocks)]


def checkpoint_blocks(model: torch.nn.Module) -> int:
    """Wrap every block of `model` in place; the number wrapped."""
    blocks = block_names(model)
    for name in blocks:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, CheckpointedBlock(getattr(parent, child)))
    return len(blocks)


def block_input_bytes(
    model: torch.nn.Module, images: torch.Tensor, autocast_dtype: torch.dtype | None
) -> dict[str, int]:
    """Per block, the bytes of its input that checkpointing keeps and nothing else would: the input
    made by the block before it (an input made by the stem, a patch embedding or Swin's downsampling
    is live anyway, counted among what those modules keep). Under CUDA's autocast policy when
    `autocast_dtype` is given: a residual stream that adds an fp32 parameter (ViT's position
    embedding, ConvNeXt's layer scale) stays fp32, a convolutional one turns half; the forward says which."""
    import contextlib

    from measure.trace.cuda_emulation import cuda_autocast_policy

    made_by_blocks: list[torch.Tensor] = []  # held, so that their ids stay theirs
    kept: dict[str, int] = {}

    def recorder(name: str):
        def record_input(module, args):
            made = {id(tensor) for tensor in made_by_blocks}
            tensors = [a for a in args if isinstance(a, torch.Tensor) and id(a) in made]
            kept[name] = sum(a.numel() * a.element_size() for a in tensors)

        return record_input

    def record_output(module, args, output):
        if isinstance(output, torch.Tensor):
            made_by_blocks.append(output)

    handles = []
    for name in block_names(model):
        block = model.get_submodule(name)
        handles += [block.register_forward_pre_hook(recorder(name)), block.register_forward_hook(record_output)]
    policy = cuda_autocast_policy() if autocast_dtype else contextlib.nullcontext()
    autocast = torch.autocast("cpu", dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    try:
        with policy, autocast, torch.no_grad():
            model(images)
    finally:
        for handle in handles:
            handle.remove()
    return kept
