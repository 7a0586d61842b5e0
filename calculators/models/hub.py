"""Reading one config.json from the Hugging Face Hub, never weights.

huggingface_hub is imported inside the function, so importing calculators never loads it and
works without it installed. `HF_TOKEN` (read by huggingface_hub itself) opens gated repos, and
`HF_HUB_OFFLINE=1` (also read by huggingface_hub) answers at once from the local cache only.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

from calculators.models.hf_config import MAX_CONFIG_BYTES

# The client retries an unreachable Hub five times with back-off (about 25 s); a person waiting
# on a page or a script wants an answer within 5 s, imports included; a config.json is a few kB.
HUB_DEADLINE_S = 3.5


class HubUnreachableError(ConnectionError):
    """The Hub did not answer within HUB_DEADLINE_S."""


def _download(repo: str, revision: str) -> bytes:
    """The bytes of `repo`'s config.json, through huggingface_hub's `hf_hub_download` (docs:
    huggingface.co/docs/huggingface_hub, "Download files"), which caches it locally."""
    from huggingface_hub import hf_hub_download  # only here: the one place that reaches the Hub

    # after the import, which sets the client's own log level: its retry warnings are noise to a
    # person, who gets one message from the caller instead
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    path = Path(hf_hub_download(repo_id=repo, filename="config.json", revision=revision))
    if path.stat().st_size > MAX_CONFIG_BYTES:
        return path.read_bytes()[: MAX_CONFIG_BYTES + 1]  # the reader refuses it with its size message
    return path.read_bytes()


def fetch_hub_config(repo: str, revision: str = "main", deadline_s: float = HUB_DEADLINE_S) -> bytes:
    """`repo`'s config.json at `revision`, or HubUnreachableError after `deadline_s`. Raises what the
    client raises for offline mode, a missing or gated repo. The client's retry warnings are
    silenced: the caller turns any failure into one message of its own."""
    answers: queue.Queue = queue.Queue(maxsize=1)

    def fetch() -> None:
        try:
            answers.put((True, _download(repo, revision)))
        except Exception as error:  # handed to the caller's thread as it is
            answers.put((False, error))

    # A daemon thread: a Hub that never answers must not keep a script from exiting.
    threading.Thread(target=fetch, name=f"hub-config-{repo}", daemon=True).start()
    try:
        ok, answer = answers.get(timeout=deadline_s)
    except queue.Empty:
        raise HubUnreachableError(f"the Hugging Face Hub did not answer within {deadline_s:g} s") from None
    if ok:
        return answer
    raise answer
