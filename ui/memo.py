"""Results of pure functions kept per browser session, so a rerun that did not change their
inputs (a click elsewhere on the page, a setting changed and changed back) does not work them
out again.

Why not st.cache_data: its key is a hash of the arguments, and the arguments here are pydantic
models and lists of hundreds of them (the catalogue, the price sheet), which it would pickle on
every call; the caller knows a cheap exact key (the models' JSON) instead. Per session, not
global: a session's results are only useful to it, and nothing grows without bound.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import streamlit as st

KEPT_PER_NAME = 4  # the last few asks: enough for a change and its undo, small enough to hold in memory
Result = TypeVar("Result")


def remembered(name: str, key: object, compute: Callable[[], Result]) -> Result:
    """`compute()`, or its result from an earlier call with the same `name` and `key` in this
    session. `key` must be hashable and name every input `compute` reads."""
    kept: OrderedDict = st.session_state.setdefault(f"_memo_{name}", OrderedDict())
    if key in kept:
        kept.move_to_end(key)
        return kept[key]
    result = compute()
    kept[key] = result
    while len(kept) > KEPT_PER_NAME:
        kept.popitem(last=False)
    return result


def json_key(*models) -> tuple:
    """An exact key for pydantic models (and lists of them): their JSON, which names every field."""
    parts = []
    for model in models:
        if isinstance(model, list | tuple):
            parts.append(tuple(item.model_dump_json() for item in model))
        elif hasattr(model, "model_dump_json"):
            parts.append(model.model_dump_json())
        else:
            parts.append(repr(model))
    return tuple(parts)


def frame_key(frame, columns: list[str]) -> str:
    """An exact key for the columns of a table a figure reads: their JSON."""
    return frame[columns].to_json(orient="split", date_format="iso")


class FrozenKey:
    """An exact key for a list of frozen pydantic models (the price rows, the GPU catalogue): the models
    themselves, which hash and compare by every field's value, in a tuple hashed once. Five times quicker
    than their JSON for the Time and cost page's 160 price rows and 50 GPUs, and a key is hashed on
    every look-up (a tuple does not keep its hash, a string does)."""

    __slots__ = ("models", "_hash")

    def __init__(self, models) -> None:
        self.models = tuple(models)
        self._hash = hash(self.models)  # a model that is not frozen has no hash: TypeError, never a wrong key

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenKey) and self.models == other.models
