"""Keep a worker's long-lived objects out of the cyclic garbage collector's passes.

A worker process holds a few hundred thousand long-lived objects: its imports and, above
all, its compiled graphs (PyTensor's Apply/Variable nodes). Every full pass of the cyclic
collector walks all of them; between the training calls of a pack (claims, results,
store writes allocate freely) those passes cost about a fifth of a small trial's time.
:func:`settle` collects once, then moves every survivor to the permanent generation
(``gc.freeze``), so later passes only see objects made since. It runs after a compiled
model enters or leaves this process's model cache, the moments the long-lived heap
changes; before collecting it unfreezes, so a dropped model's cycles are reclaimed.

Only processes that opt in (:func:`enable`: the worker processes) are affected: freezing
is process-wide, and a library caller's own objects are theirs to manage.
"""

from __future__ import annotations

import gc
import threading

_enabled = False
_lock = threading.Lock()


def enable() -> None:
    """Opt this process in, and settle what it holds now (its imports)."""
    global _enabled
    _enabled = True
    settle()


def enabled() -> bool:
    return _enabled


def settle() -> None:
    """Collect cyclic garbage, then freeze every surviving object (in an opted-in process;
    otherwise nothing)."""
    if not _enabled:
        return
    with _lock:
        gc.unfreeze()
        gc.collect()
        gc.freeze()


def disable() -> None:
    """Opt out again: every frozen object is back under the collector."""
    global _enabled
    with _lock:
        _enabled = False
        gc.unfreeze()
