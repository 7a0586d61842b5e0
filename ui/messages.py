"""The one path from a caught error to the words a page shows.

Every page and widget that catches an error shows `in_words(error)`: pydantic's problems become
"<the setting's label>: <what is wrong>", any other error its own sentence. Text a user should
never read (pydantic's "1 validation error for ...", its documentation links, "[type=...]",
a traceback) never gets through, whatever raised it.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

RAW_ERROR_MARKERS = ("validation error for", "errors.pydantic.dev", "Traceback", "[type=")
_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")
_FALLBACK = "the values given cannot be used together; change the last one you set"


def _label(model_name: str, field: str) -> str:
    """The label a page shows for `field` of the pydantic model named `model_name`, else the field
    name in words (purchase_usd_per_gpu -> "purchase usd per gpu")."""
    from ui import state  # here: ui.state shows its link warnings through this module

    for item in state.known_settings():
        if item.model is not None and item.model.__name__ == model_name and item.name == field:
            return item.label
    return field.replace("_", " ")


def _problem(model_name: str, problem: dict) -> str:
    message = str(problem.get("msg", ""))
    for prefix in _PYDANTIC_PREFIXES:
        message = message.removeprefix(prefix)
    message = re.sub(r"^Input should be\b", "must be", message)
    fields = [str(part) for part in problem.get("loc", ()) if not isinstance(part, int)]
    if not fields:
        return message
    return f"{_label(model_name, fields[-1])}: {message}"


def in_words(error: BaseException) -> str:
    """One line for a page: what is wrong, with the setting it is about, in words."""
    validation = error if isinstance(error, ValidationError) else error.__cause__
    if isinstance(validation, ValidationError):
        text = "; ".join(_problem(validation.title, problem) for problem in validation.errors())
    else:
        text = str(error)
    if not text.strip() or any(marker in text for marker in RAW_ERROR_MARKERS):
        return _FALLBACK
    return text
