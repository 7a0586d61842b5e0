"""Any model by its name: a preset, a bundled library of open models, the local Hugging Face
cache, or the Hub.

`data/model_library.json` holds, per Hugging Face repo id, the architecture fields of its
config.json, the published parameter count (total, and active for a mixture of experts) with
the document that publishes it, the license and gated flag, and the date it was read. A model
is resolved in this order: a preset of data/models.csv, the library, the local Hugging Face
cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or ~/.cache/huggingface/hub), then the Hub itself
(calculators/models/hub.py, config.json only). Nothing here reaches the network.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import os
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from calculators import DATA_DIR
from calculators.hardware import csv_rows
from calculators.models.hf_config import spec_from_config_dict, spec_from_hf_config
from calculators.models.hub import HubUnreachableError
from calculators.models.presets import load_presets
from calculators.models.spec import ModelSpec

DEFAULT_LIBRARY_PATH = DATA_DIR / "model_library.json"
# org/name, optionally @revision: what huggingface_hub accepts as a repo id (letters, digits, - _ .).
_REPO_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(?:@(?P<revision>[\w./-]{1,100}))?")
CLI_UPLOAD_HINT = "give its config.json with --config-json FILE"
PAGE_UPLOAD_HINT = "upload its config.json in the sidebar (Model from: config.json)"

ConfigFetcher = Callable[[str, str], bytes]


class LibraryError(ValueError):
    """The library file is malformed; the message names the model and field."""


class ModelNotFound(LookupError):
    """No preset, library entry, cached or Hub config for a name; one line for the user, which
    names the way to upload a config.json where the user is: the flag on the command line
    (str), the sidebar's box on a page (`for_page`)."""

    def __init__(self, problem: str, closest: list[str]):
        super().__init__(problem)
        self.problem, self.closest = problem, closest

    def _worded(self, upload_hint: str) -> str:
        hint = f"; closest bundled: {', '.join(self.closest)}" if self.closest else ""
        return f"{self.problem}; {upload_hint}{hint}"

    def __str__(self) -> str:
        return self._worded(CLI_UPLOAD_HINT)

    def for_page(self) -> str:
        return self._worded(PAGE_UPLOAD_HINT)


class LibraryModel(BaseModel):
    """One open model of the library, as its row in data/model_library.json reads."""

    id: str
    revision: str = "main"
    license: str
    gated: bool
    config_source: str
    parameters: int = Field(gt=0)
    parameters_unit: int = Field(default=1, gt=0)
    active_parameters: int | None = None
    active_parameters_unit: int = Field(default=1, gt=0)
    active_excludes_embedding: bool = False
    parameters_source: str
    counted: Literal["all", "without a task head", "without embeddings"] = "all"
    buffers: str = ""
    as_of: str
    notes: str = ""
    config: dict


def split_model_ref(name: str) -> tuple[str, str | None] | None:
    """(repo id, revision or None) for `org/name[@revision]`; None when `name` is not one."""
    match = _REPO_ID.fullmatch(name.strip())
    if match is None:
        return None
    return match["repo"], match["revision"]


@lru_cache(maxsize=4)
def load_library(path: Path | None = None) -> dict[str, LibraryModel]:
    """Every library model by its repo id, in file order, each checked: a public source for its
    config and its count, an ISO as_of date, and a unique id. Cached; do not mutate."""
    path = Path(path) if path is not None else DEFAULT_LIBRARY_PATH
    document = json.loads(path.read_text(encoding="utf-8"))
    models: dict[str, LibraryModel] = {}
    seen: set[str] = set()
    for number, row in enumerate(document.get("models", []), start=1):
        where = f"{path}: model {number} ({row.get('id', '?')!r})"
        try:
            model = LibraryModel.model_validate(row)
        except ValidationError as error:
            raise LibraryError(f"{where}: {error.errors()[0]['loc']}: {error.errors()[0]['msg']}") from None
        for field in ("config_source", "parameters_source"):
            csv_rows.require_public_source(getattr(model, field), f"{where}: {field}", LibraryError)
        try:
            dt.date.fromisoformat(model.as_of)
        except ValueError:
            raise LibraryError(f"{where}: as_of: expected an ISO date, got {model.as_of!r}") from None
        if model.id.casefold() in seen:
            raise LibraryError(f"{where}: id: duplicate")
        seen.add(model.id.casefold())
        models[model.id] = model
    return models


@lru_cache(maxsize=1)
def _library_keys() -> dict[str, str]:
    """Case-folded id and bare name (after the org) -> id, for case-insensitive lookups."""
    keys: dict[str, str] = {}
    for model_id in load_library():
        keys.setdefault(model_id.split("/", 1)[1].casefold(), model_id)
    for model_id in load_library():
        keys[model_id.casefold()] = model_id
    return keys


def library_model(name: str) -> LibraryModel | None:
    """The library entry for a repo id or its bare name, case-insensitively."""
    model_id = _library_keys().get(name.strip().casefold())
    return load_library()[model_id] if model_id else None


@lru_cache(maxsize=256)
def _library_spec(model_id: str) -> ModelSpec:
    model = load_library()[model_id]
    label = f"{model_id}@{model.revision}"
    spec = spec_from_config_dict(model.config, f"{label} config.json", model_id=label)
    return spec.model_copy(
        update={
            "reported_params": model.parameters if model.parameters_unit == 1 and model.counted == "all" else None,
            "reported_active_params": model.active_parameters,
            "source": f"{model.config_source} | {model.parameters_source}",
            "as_of": model.as_of,
        }
    )


def library_spec(name: str) -> ModelSpec:
    """A copy of the ModelSpec of a library model (KeyError when it is not there)."""
    model = library_model(name)
    if model is None:
        raise KeyError(name)
    return _library_spec(model.id).model_copy()


def model_names() -> list[str]:
    """Preset names then library ids: what the model box offers."""
    return [*load_presets(), *load_library()]


def fold_name(name: str, keep: str = "") -> str:
    """A name with case and punctuation folded away: Llama-2-7B, llama2 7b and LLAMA_2_7B all read
    "llama27b", so a person need not type a model's exact spelling. `keep`: punctuation that
    stays (a Hub id's "/")."""
    return re.sub(f"[^0-9a-z{re.escape(keep)}]", "", name.casefold())


@lru_cache(maxsize=1)
def _names_by_fold() -> dict[str, str]:
    """Folded spelling -> bundled name; presets win over library ids, a full id over a bare name."""
    by_fold: dict[str, str] = {}
    for name in reversed(model_names()):  # presets come first in model_names: let them overwrite
        by_fold[fold_name(name.split("/")[-1])] = name
    for name in reversed(model_names()):
        by_fold[fold_name(name)] = name
    return by_fold


def bundled_spelling(name: str) -> str | None:
    """The bundled name that `name` spells with other case or punctuation (a preset before a
    library id), or None."""
    return _names_by_fold().get(fold_name(name.split("@")[0]))


@lru_cache(maxsize=1)
def _folded_names() -> tuple[tuple[str, str], ...]:
    return tuple((name, name.casefold()) for name in model_names())


def search_models(query: str, limit: int = 20) -> list[str]:
    """Names (presets and library ids) containing every word of `query`, case-insensitively, the
    closest first: an exact name, then names starting with the query, then the shortest."""
    words = query.casefold().split()
    if not words:
        return list(model_names())[:limit]
    whole = " ".join(words)
    hits = [(name, folded) for name, folded in _folded_names() if all(word in folded for word in words)]
    hits.sort(key=lambda hit: (hit[1] != whole, not hit[1].split("/")[-1].startswith(whole), len(hit[1])))
    return [name for name, _ in hits[:limit]]


def closest_names(name: str, n: int = 3) -> list[str]:
    """The bundled names most like `name` (search hits first, then spelling)."""
    found = search_models(name.split("/")[-1].split("@")[0], limit=n)
    if len(found) < n:
        bare = {folded.split("/")[-1]: original for original, folded in _folded_names()}
        close = difflib.get_close_matches(name.split("/")[-1].casefold(), list(bare), n=n, cutoff=0.4)
        found += [bare[item] for item in close if bare[item] not in found]
    return found[:n]


# --- the local Hugging Face cache --------------------------------------------------------


def hf_cache_dirs() -> list[Path]:
    """Where huggingface_hub keeps downloads: $HF_HUB_CACHE, else $HF_HOME/hub, else
    ~/.cache/huggingface/hub (huggingface_hub constants.py)."""
    if os.environ.get("HF_HUB_CACHE"):
        return [Path(os.environ["HF_HUB_CACHE"])]
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    return [home / "hub"]


def cached_config(repo: str, revision: str | None = None) -> Path | None:
    """config.json of `repo` in the local cache (models--org--name/snapshots/<commit>/), at the
    commit `revision` (a commit or a ref under refs/, default main) names; None when absent."""
    for root in hf_cache_dirs():
        folder = root / ("models--" + repo.replace("/", "--"))
        ref = folder / "refs" / (revision or "main")
        commit = ref.read_text(encoding="utf-8").strip() if ref.is_file() else revision
        if commit and (folder / "snapshots" / commit / "config.json").is_file():
            return folder / "snapshots" / commit / "config.json"
    return None


# --- resolution --------------------------------------------------------------------------


def _not_found(name: str, why: str, what: str = "model") -> ModelNotFound:
    return ModelNotFound(f"{what} {name!r} {why}", closest_names(name))


def hub_failure(error: Exception) -> str:
    """Why the Hub gave no config.json, from the error's class (huggingface_hub.errors names)."""
    kind = type(error).__name__
    if isinstance(error, ImportError):
        return "is not bundled, not cached, and huggingface_hub (the Hub client) is not installed"
    if kind == "GatedRepoError":
        return "is gated on the Hub: accept its license there and set HF_TOKEN"
    if kind in ("RepositoryNotFoundError", "RevisionNotFoundError", "EntryNotFoundError"):
        return "is not on the Hub (or is private: set HF_TOKEN)"
    if isinstance(error, HubUnreachableError):
        return f"is not bundled nor cached, and {error}"
    if kind in ("LocalEntryNotFoundError", "OfflineModeIsEnabled") or isinstance(error, OSError):
        return "is not bundled nor cached, and the Hub cannot be reached (offline)"
    return f"could not be read from the Hub ({kind})"


def resolve_model(name: str, fetch: ConfigFetcher | None = None) -> ModelSpec:
    """The ModelSpec for a preset name or a Hugging Face repo id `org/name[@revision]`: the preset,
    the library, the local cache, then `fetch(repo, revision)` (the Hub's config.json; see
    calculators/models/hub.py). Raises ModelNotFound (one line naming the upload alternative and
    the closest bundled names) or ModelInputError for a config that cannot be read."""
    name = name.strip()
    presets = load_presets()
    if name in presets:
        return presets[name].model_copy()
    ref = split_model_ref(name)
    if ref is None:
        model = library_model(name)
        if model is not None:
            return library_spec(model.id)
        spelled = bundled_spelling(name)
        if spelled is not None:
            return resolve_model(spelled)
        raise _not_found(name, "(nor a Hugging Face id org/name)", what="unknown model preset")
    repo, revision = ref
    model = library_model(repo)
    if model is not None and revision in (None, model.revision):
        return library_spec(model.id)
    typed = f"{repo}@{revision}" if revision else repo
    cached = cached_config(repo, revision)
    if cached is not None:
        label = f"{repo}@{cached.parent.name[:12]}"  # the snapshot's commit
        return spec_from_hf_config(cached.read_bytes(), f"{typed} config.json", model_id=label)
    if fetch is None:
        raise _not_found(typed, "is not bundled nor in the local Hugging Face cache")
    try:
        text = fetch(repo, revision or "main")
    except Exception as error:  # the Hub client's own errors: offline, not found, gated without a token
        raise _not_found(typed, hub_failure(error)) from None
    return spec_from_hf_config(text, f"{typed} config.json", model_id=f"{repo}@{revision or 'main'}")
