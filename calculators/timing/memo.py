"""Facts of one workload worked out once, however many GPUs and layouts time it.

The Time and cost page times one workload on about 90 GPU and instance-size pairs per rerun
(calculators.cost.options.cost_options) and the planner many more; much of each estimate depends
only on the model and the training settings (FLOPs per token, the kernels a step issues, the
messages each parallel dimension sends) or on the GPU and the kernels (the step's compute). Those
parts are cached here, keyed exactly on what they read.

The model and the settings are pydantic models that can change in place, so they are not
hashable; the key (`workload_key`) is each one's class and the repr of its field values in the
class's order: repr writes every value exactly (a float in its round-trip form, inf and nan by
name, 1, 1.0 and True apart, a string quoted, a nested model field by field), so two inputs share
a key only when every field is equal. (Their JSON would be as exact but for inf and NaN, which it
writes as null, as it writes None.) Each cache is bounded (functools.lru_cache) and thread-safe, as
the app's sessions run in threads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from pydantic import BaseModel

from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings


def workload_key(*models: BaseModel) -> tuple[str, ...]:
    """An exact, hashable stand-in for `models`: each one's class and the repr of its field values."""
    key: list[str] = []
    for model in models:
        key += (type(model).__qualname__, repr(tuple(model.__dict__.values())))
    return tuple(key)


class Workload(NamedTuple):
    """A model and its training settings with their key (workload_key), made once by a caller that
    times them on many GPUs or layouts (calculators.cost.options.cost_options); the key stands for
    them while neither changes, so make a new one after changing either."""

    spec: ModelSpec
    settings: TrainingSettings
    key: tuple[str, ...]


def workload_of(spec: ModelSpec, settings: TrainingSettings) -> Workload:
    """`spec` and `settings` with their key."""
    return Workload(spec, settings, workload_key(spec, settings))


class _Keyed:
    """Arguments that hash and compare by their key alone, for functools.lru_cache."""

    __slots__ = ("key", "args")

    def __init__(self, key: tuple, args: tuple) -> None:
        self.key, self.args = key, args

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Keyed) and self.key == other.key


def cached_on_key(maxsize: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Cache `function(*args)` on a key the caller gives, `cached(key, *args)`: the key must stand
    exactly for the arguments (workload_key, and hashable values of the rest), which need not be
    hashable themselves. The value is shared by every caller: return immutable values."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.lru_cache(maxsize=maxsize)
        def on_key(keyed: _Keyed) -> Any:
            return function(*keyed.args)

        @functools.wraps(function)
        def cached(key: tuple, *args: Any) -> Any:
            return on_key(_Keyed(key, args))

        cached.cache_clear = on_key.cache_clear  # type: ignore[attr-defined]
        cached.cache_info = on_key.cache_info  # type: ignore[attr-defined]
        return cached

    return decorate
