"""Every value a user set, kept for the whole session and mirrored in the URL.

Streamlit forgets a widget's state when a run does not draw it (a hidden mode's controls,
another page's). So the value a user chose lives under a key of its own, never a widget's
key: a widget is seeded from it each time it is drawn and writes back what it returns.
Hidden settings are therefore kept, not reset, and a link holds every page's settings.

The settings themselves (default, bounds, URL key) are declared once, in
calculators.interface.settings; app-only ones (the Compare page's filters, say) in ui/page_settings.py,
with the same `Setting` type, so that a link read on any page knows them all.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import streamlit as st

from calculators.interface.settings import Setting, SettingError, all_settings, setting
from ui.messages import in_words

VALUE_PREFIX = "_value_"
URL_WARNINGS_KEY = "_url_warnings"
_APP_SETTINGS: dict[str, Setting] = {}


def register(*items: Setting) -> None:
    """Declare app-only settings (kept and linked like the calculators' ones)."""
    for item in items:
        _APP_SETTINGS[item.key] = item


def known_settings() -> list[Setting]:
    return [*all_settings(), *_APP_SETTINGS.values()]


def _declared(key: str) -> Setting:
    """The declaration of `key`, the calculators' first (as `known_settings` lists them): a dict look-up, since
    every widget and kept value asks, a few hundred times a rerun."""
    try:
        return setting(key)
    except KeyError:
        return _APP_SETTINGS[key]  # a KeyError for a key nobody declared, as before


def value(key: str) -> Any:
    """The value the user chose for `key`, or its declared default."""
    stored = VALUE_PREFIX + key
    return st.session_state[stored] if stored in st.session_state else _declared(key).start_value


def set_value(key: str, new_value: Any) -> None:
    st.session_state[VALUE_PREFIX + key] = new_value


def is_set(key: str) -> bool:
    return VALUE_PREFIX + key in st.session_state


def forget(key: str) -> None:
    """Back to the declared default: the user has not set `key`."""
    st.session_state.pop(VALUE_PREFIX + key, None)


def _keep_change(key: str, from_widget) -> None:
    """on_change: the user's new widget value becomes the kept one (callbacks run before the
    script, so the run that follows already sees it)."""
    shown = st.session_state[key]
    set_value(key, from_widget(shown) if from_widget else shown)


# True while the widgets of a closed section are read, not drawn (see `section`); a context variable,
# since each browser session's script runs in its own thread.
_NOT_DRAWN: contextvars.ContextVar[bool] = contextvars.ContextVar("not_drawn", default=False)


@contextlib.contextmanager
def section(container, label: str, key: str, expanded: bool = False) -> Iterator[Any]:
    """A collapsible section whose widgets are drawn only while it is open: closed, each control
    in it returns its kept value without drawing, so a rerun sends the browser a few elements
    instead of every hidden widget. Opening or closing it reruns the page (streamlit's expander
    state); the values are kept either way (`value`).

    Whether it is open is kept under its own key: streamlit forgets an expander's state when its
    label changes (a title that says what the section holds changes with what is chosen inside),
    which would close it under the user's hand. `expanded` opens it when it turns True."""
    open_key, asked_key = f"_section_open_{key}", f"_section_asked_{key}"
    if expanded and not st.session_state.get(asked_key):
        st.session_state[open_key] = True
    st.session_state[asked_key] = expanded
    is_open = st.session_state.setdefault(open_key, False)
    box = container.expander(label, expanded=is_open, key=key, on_change=_keep_open, args=(key, open_key))
    token = _NOT_DRAWN.set(box.open is False)
    try:
        with box:
            yield box
    finally:
        _NOT_DRAWN.reset(token)


def _keep_open(key: str, open_key: str) -> None:
    st.session_state[open_key] = bool(st.session_state.get(key))


def drawn() -> bool:
    """Whether the controls being declared now are drawn (False inside a closed section)."""
    return not _NOT_DRAWN.get()


def columns(container, count: int) -> list:
    """`count` columns of `container` for a section's controls; inside a closed section, whose controls
    draw nothing, `container` itself `count` times, so the closed section sends no empty columns (each
    is an element the browser is sent and redraws on every run)."""
    return list(container.columns(count)) if drawn() else [container] * count


def widget(draw: Callable[..., Any], key: str, *args, to_widget=None, from_widget=None, **kwargs) -> Any:
    """Draw a widget for `key` showing the kept value, and keep what it returns.
    `to_widget`/`from_widget` convert between the kept value and the widget's (per cent,
    billions). The value is returned as kept; inside a closed `section` nothing is drawn.

    The kept value is written into the widget's state on every run, not only when the widget
    is new: a browser that dropped a hidden widget would otherwise show the widget's default
    when it comes back, and send that default with the next change."""
    if not drawn():
        return value(key)
    kept = value(key)
    st.session_state[key] = to_widget(kept) if to_widget else kept
    shown = draw(*args, key=key, on_change=_keep_change, args=(key, from_widget), **kwargs)
    kept = from_widget(shown) if from_widget else shown
    set_value(key, kept)
    return kept


def number(container, key: str, label: str | None = None, **kwargs) -> Any:
    """A number input with the declared bounds, unit scale and help."""
    item = _declared(key)
    scale = item.ui_scale
    (low, low_open), (high, high_open) = item.lower, item.upper
    is_int = item.value_type is int and scale == 1
    if low is not None and low_open:
        low = low + 1 if is_int else low
    bounds = {}
    if low is not None:
        bounds["min_value"] = int(low) if is_int else low / scale
    if high is not None:
        # a widget's maximum is inclusive: an exclusive bound becomes the value just below it
        high = high / scale if not is_int else int(high)
        bounds["max_value"] = (high - 1 if is_int else math.nextafter(high, -math.inf)) if high_open else high
    if not is_int:
        bounds = {name: float(bound) for name, bound in bounds.items()}
        kwargs.setdefault("format", "%g")
    optional_zero = item.zero_means_unset
    if optional_zero:
        bounds["min_value"] = 0 if is_int else 0.0

    def to_widget(kept):
        if kept is None:
            return 0.0 if not is_int else bounds.get("min_value", 0)
        return kept if is_int else float(kept) / scale

    def from_widget(shown):
        if shown is None or (optional_zero and shown == 0):
            return None
        return int(shown) if is_int else float(shown) * scale

    return widget(
        container.number_input,
        key,
        label or item.label,
        to_widget=to_widget,
        from_widget=from_widget,
        help=kwargs.pop("help", item.help_text or None),
        **bounds,
        **kwargs,
    )


def quoted(text: Any, limit: int = 40) -> str:
    """A value a user gave, as code in a warning: cut to `limit` characters, with the backticks
    and line breaks that would end the code span (and let markdown or HTML through) replaced."""
    text = str(text)
    cut = text[:limit] + ("..." if len(text) > limit else "")
    return "`" + "".join("'" if char == "`" else " " if not char.isprintable() else char for char in cut) + "`"


def _shown(option, format_func=None) -> str:
    """An option as its widget shows it, for a warning."""
    if format_func is not None:
        return quoted(format_func(option))
    return quoted("none (the default)" if option is None else option)


def _replaced(label: str, what: str, used: str, notes=None) -> None:
    """A kept value the page cannot use is named, with what is used instead (never replaced silently),
    in `notes` (a container) or where the page is."""
    (notes or st).warning(f"{label}: {what}; using {used} instead.", icon=":material/warning:")


def choice(
    container, key: str, label: str | None = None, options: Iterable | None = None, page_default: Any = None, **kwargs
) -> Any:
    """A select box over the declared choices (or `options`). A kept value that is not among
    them (a link's unknown GPU, a dropout the box does not offer) is named in a warning with
    the option used instead.

    `page_default` is what the box shows until the user picks (a choice that depends on the
    page, such as the cheapest GPU): it is shown, never kept, so it never enters the link."""
    item = _declared(key)
    options = list(options if options is not None else item.choices)
    if page_default is not None and page_default in options and not is_set(key):
        set_value(key, page_default)
        try:
            return choice(container, key, label, options, **kwargs)
        finally:
            forget(key)
    kept = value(key)
    if options and kept not in options:
        used = page_default if page_default in options else item.start_value
        used = used if used in options else options[0]
        if is_set(key):
            format_func = kwargs.get("format_func")
            _replaced(label or item.label, f"{_shown(kept)} is not one of the choices", _shown(used, format_func))
        set_value(key, used)
    kwargs.setdefault("help", item.help_text or None)
    if None in options:
        return _choice_with_none(container, key, label or item.label, options, **kwargs)
    return widget(container.selectbox, key, label or item.label, options, **kwargs)


NONE_OPTION = "\u2063none"  # stands for the option None in a select box (an invisible separator: no one types it)


def _choice_with_none(container, key: str, label: str, options: list, format_func=str, **kwargs) -> Any:
    """A select box offering None ("framework default"): streamlit reads a None value as nothing
    chosen and shows its placeholder ("Choose an option"), so None travels as a stand-in option."""
    shown = [NONE_OPTION if option is None else option for option in options]

    def named(option):
        return format_func(None if option == NONE_OPTION else option)

    return widget(
        container.selectbox,
        key,
        label,
        shown,
        to_widget=lambda kept: NONE_OPTION if kept is None else kept,
        from_widget=lambda picked: None if picked in (None, NONE_OPTION) else picked,
        format_func=named,
        **kwargs,
    )


def multiselect(
    container, key: str, options: Iterable, max_selections: int | None = None, notes=None, **kwargs
) -> list:
    """A multiselect. Streamlit refuses items it does not offer, repeats and more than
    `max_selections`, so those are left out of the kept value and named in a warning (in `notes`,
    a container, when the widget sits in a row the warning would squeeze)."""
    item = _declared(key)
    options = list(options)
    kept = list(value(key))
    chosen = list(dict.fromkeys(choice for choice in kept if choice in options))
    problems = []
    unknown = list(dict.fromkeys(choice for choice in kept if choice not in options))
    if unknown:
        problems.append(
            ", ".join(quoted(name) for name in unknown) + (" is" if len(unknown) == 1 else " are") + " not offered"
        )
    if len(chosen) + len(unknown) < len(kept):
        problems.append("repeats are counted once")
    if max_selections is not None and len(chosen) > max_selections:
        problems.append(f"at most {max_selections} can be picked, so the first {max_selections} are kept")
        chosen = chosen[:max_selections]
    if problems:
        used = ", ".join(quoted(name) for name in chosen) or "none"
        _replaced(item.label, "; ".join(problems), used, notes)
    set_value(key, chosen)
    if max_selections is not None:
        kwargs["max_selections"] = max_selections
    return widget(container.multiselect, key, item.label, options, **kwargs)


def checkbox(container, key: str, label: str | None = None, **kwargs) -> bool:
    item = _declared(key)
    kwargs.setdefault("help", item.help_text or None)
    return widget(container.checkbox, key, label or item.label, **kwargs)


def load_from_url() -> None:
    """Once per session: the link's values become the user's, each checked by its declaration.
    A bad value is ignored with a warning (shown on whichever page the link opens)."""
    if st.session_state.get("_url_loaded"):
        return
    st.session_state["_url_loaded"] = True
    warnings = []
    params = st.query_params
    for item in known_settings():
        query = next((name for name in (item.query, *item.old_queries) if name in params), None)
        if query is None:
            continue
        raw = params[query]
        try:
            set_value(item.key, item.parse_shown(raw))
        except SettingError as error:
            warnings.append(f"Ignored {quoted(f'{query}={raw}', limit=60)} from the link: {in_words(error)}.")
    st.session_state[URL_WARNINGS_KEY] = warnings


def url_warnings() -> list[str]:
    """The link's bad values, once: they are shown on the first page the link opens."""
    return st.session_state.pop(URL_WARNINGS_KEY, [])


def save_to_url() -> None:
    """Mirror every value the user set into the query string (defaults are left out)."""
    wanted = {}
    for item in known_settings():
        if not is_set(item.key):
            continue
        kept = value(item.key)
        if kept == item.start_value:
            continue
        if kept is not None:
            wanted[item.query] = item.format_shown(kept)
        elif item.zero_means_unset:  # 0 = none, where the app starts from a value (a latency target)
            wanted[item.query] = "0"
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)
