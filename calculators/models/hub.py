"""Reading one config.json from the Hugging Face Hub, never weights.

huggingface_hub is imported inside the function, so importing calculators never loads it and
works without it installed. `HF_TOKEN` (read by huggingface_hub itself) opens gated repos.
"""

from __future__ import annotations

from pathlib import Path

from calculators.models.hf_config import MAX_CONFIG_BYTES


def fetch_hub_config(repo: str, revision: str = "main") -> bytes:
    """The bytes of `repo`'s config.json at `revision`, downloaded into the local Hugging Face
    cache by huggingface_hub's `hf_hub_download` (docs: huggingface.co/docs/huggingface_hub,
    "Download files"). Raises whatever the client raises: offline, not found, gated."""
    from huggingface_hub import hf_hub_download  # only here: the one place that reaches the Hub

    path = Path(hf_hub_download(repo_id=repo, filename="config.json", revision=revision))
    if path.stat().st_size > MAX_CONFIG_BYTES:
        return path.read_bytes()[: MAX_CONFIG_BYTES + 1]  # the reader refuses it with its size message
    return path.read_bytes()
