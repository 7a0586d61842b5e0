"""The strict field readers every framework-config format shares (calculators.workload.framework_files):
each takes the value the file gave and `where`, the field's dotted name in the file, and returns the
value checked, or raises FrameworkConfigError naming the field and quoting (short, on one line) what it
got. The type and the allowed values are checked before the value is used: a list where a name belongs,
true where a number belongs, a number too long to print are each one message, never a Python error.
"""

from __future__ import annotations

import reprlib
from typing import Any

from calculators.workload.training import TrainingSettings


class FrameworkConfigError(ValueError):
    """The file cannot be read, or a known key has a bad value; the message is one line."""


class _Quote(reprlib.Repr):
    """repr cut short: a few items, a few levels, 40 characters of a string; an integer too long to
    print (YAML reads 0x... of any length) is named by its size."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxstring, self.maxother = 2, 3, 4, 40, 40

    def repr_int(self, x: int, level: int) -> str:
        return f"a {x.bit_length():,}-bit number" if x.bit_length() > 256 else super().repr_int(x, level)


_QUOTE = _Quote()


def show_value(value: Any) -> str:
    """The value quoted in a message: Python's repr, short and on one line whatever the value holds."""
    return _QUOTE.repr(value)


def refusal(where: str, expected: str, value: Any) -> FrameworkConfigError:
    return FrameworkConfigError(f"{where}: expected {expected}, got {show_value(value)}")


def same_value(value: Any, option: Any) -> bool:
    """Equal and of the same type: 1 is not true, 1.0 is not 1, a list is never a name (no hashing)."""
    return type(value) is type(option) and value == option


def read_choice(value: Any, where: str, allowed: tuple, expected: str) -> Any:
    """One of `allowed` exactly (true is not 1)."""
    if not any(same_value(value, option) for option in allowed):
        raise refusal(where, expected, value)
    return value


def read_name(value: Any, where: str, known: dict | tuple | frozenset, listing: str) -> str:
    """A name the engine models (an optimizer, a loss, a distributed type)."""
    if not isinstance(value, str):
        raise refusal(where, f"a name ({listing})", value)
    if value not in known:
        raise FrameworkConfigError(f"{where}: {show_value(value)} is not one the engine models ({listing})")
    return value


def read_text(value: Any, where: str) -> str:
    """A name or a path: a string on one line."""
    if not isinstance(value, str) or not value.isprintable():
        raise refusal(where, "a name or path on one line", value)
    return value


def read_strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise refusal(where, "a list of names", value)
    return value


def read_mapping(value: Any, where: str, expected: str = "a mapping") -> dict:
    if not isinstance(value, dict):
        raise refusal(where, expected, value)
    return value


def given_or_default(section: dict, key: str, default: Any) -> Any:
    """The section's value for `key`; null, as left out, is the default."""
    value = section.get(key)
    return default if value is None else value


def read_component(section: Any, where: str) -> str:
    if not isinstance(section, dict) or not isinstance(section.get("_component_"), str):
        raise refusal(where, "a mapping with a _component_", section)
    return section["_component_"]


def read_bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise refusal(where, "true or false", value)
    return value


def read_int(value: Any, where: str, field: str | None = None) -> int:
    """A whole number from 1 up to the TrainingSettings field's bound (a million when it has none)."""
    high = field_upper_bound(field) if field else 1_000_000
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise refusal(where, f"a positive whole number up to {high:,}", value)
    return value


def field_upper_bound(field: str) -> int:
    bounds = [item.le for item in TrainingSettings.model_fields[field].metadata if getattr(item, "le", None)]
    return int(bounds[0]) if bounds else 1_000_000
