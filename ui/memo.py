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
