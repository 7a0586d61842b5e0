"""Import torchvision and timm, which only the vision trace needs (never the app's pages).

PyPI's torchvision 0.28.0 wheel for Linux is built against CUDA torch: on the CPU build of
torch 2.13.0 (requirements-dev.txt) its `_C` extension does not load (it needs libc10_cuda.so),
and `torchvision/_meta_registrations.py` (0.28.0) then registers fake kernels for
`torchvision::nms` and `torchvision::qnms` that no library defined, which raises at import. The
model definitions (torchvision/models/*.py) use none of those compiled ops, so when `_C` is
missing the two schemas are declared here (as torchvision/csrc/ops/nms.cpp declares them) and the
import goes on; on a host where `_C` loads nothing is declared.
"""

from __future__ import annotations

import sys
from functools import lru_cache

_NMS_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_libraries: list = []  # keep the fragment alive: dropping it would remove the schemas


@lru_cache(maxsize=1)
def torchvision_module():
    """torchvision, imported (with the two schemas declared first when its `_C` cannot load)."""
    try:
        import torchvision
    except RuntimeError as error:
        if "torchvision::" not in str(error):
            raise
        _forget_partial_import()
        _declare_nms_schemas()
        import torchvision
    return torchvision


@lru_cache(maxsize=1)
def timm_module():
    """timm (which imports torchvision itself, so torchvision comes first)."""
    torchvision_module()
    import timm

    return timm


def _forget_partial_import() -> None:
    for name in [name for name in sys.modules if name == "torchvision" or name.startswith("torchvision.")]:
        del sys.modules[name]


def _declare_nms_schemas() -> None:
    import torch

    library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _NMS_SCHEMAS:
        library.define(schema)
    _libraries.append(library)
