"""One name, any model: a transformer (preset, bundled library, cache or Hub: models.library) or an
image model of the vision library (models.vision_library). The vision library is read first and
offline, so `resnet50`, `timm/vit_base_patch16_224` or `microsoft/resnet-50` never reach the Hub;
a name found in neither gets one message whose closest names come from both."""

from __future__ import annotations

import difflib

from calculators.models.library import (
    ConfigFetcher,
    ModelNotFound,
    closest_names,
    model_names,
    resolve_model,
    search_models,
)
from calculators.models.spec import ModelSpec
from calculators.models.vision_library import VisionModel, vision_model, vision_model_names


def resolve_any(name: str, fetch: ConfigFetcher | None = None) -> ModelSpec | VisionModel:
    """The vision library's model for `name`, else the transformer resolve_model finds. Raises
    ModelNotFound, whose closest names include the vision library's."""
    found = vision_model(name)
    if found is not None:
        return found
    try:
        return resolve_model(name, fetch)
    except ModelNotFound as error:
        raise ModelNotFound(error.problem, closest_any(name)) from None


def _vision_search(query: str, limit: int) -> list[str]:
    """Vision-library names containing every word of `query`, case-insensitively, shortest first."""
    words = query.casefold().split()
    hits = [name for name in vision_model_names() if all(word in name.casefold() for word in words)]
    return sorted(hits, key=lambda name: (name.casefold() != query.casefold().strip(), len(name)))[:limit]


def search_any(query: str, limit: int = 20) -> list[str]:
    """Transformer names (presets and library ids) then vision-library names matching `query`:
    what the sidebar's model box and `models --search` offer."""
    text = search_models(query, limit)
    return [*text, *_vision_search(query, limit - len(text))] if len(text) < limit else text


def all_model_names() -> list[str]:
    """Every bundled name: presets, library ids, then every name the vision library answers to (its
    keys, torchvision and timm names, Hub ids), so a search box finds `microsoft/resnet-50` too."""
    return [*model_names(), *vision_model_names()]


def closest_any(name: str, n: int = 3) -> list[str]:
    """The bundled names most like `name`: vision names first where they match the words."""
    bare = name.split("@")[0].strip()
    vision = _vision_search(bare.split("/")[-1], n) or difflib.get_close_matches(bare, vision_model_names(), n, 0.6)
    return list(dict.fromkeys([*vision, *closest_names(name, n)]))[:n]
