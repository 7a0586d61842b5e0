"""Keeps Python's full garbage collections off the reruns.

Python collects its oldest generation once enough objects survived younger collections; each
such collection walks every object the process holds. After the first page of a server ran, that
is the imported libraries, the catalogues and the data tables, about 180,000 objects that live as
long as the process: a full collection took 50-100 ms of a rerun's 55 ms on the Memory page, on
one change in three to five (cProfile of the script thread, 2-core machine; bench/bench_clicks.py).
`gc.freeze` (Python 3.7+, https://docs.python.org/3/library/gc.html#gc.freeze) moves what exists
then out of every later collection; what the sessions create afterwards is collected as before.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_loaded_objects() -> None:
    """Once per process, after the first run: collect what is garbage, then freeze the rest."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()  # garbage frozen now would never be freed
    gc.freeze()
