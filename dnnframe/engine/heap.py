"""Worker-process memory settings: long-lived objects out of the collector's passes, and
freed memory kept for reuse.

A worker process holds a few hundred thousand long-lived objects: its imports and, above
all, its compiled graphs (PyTensor's Apply/Variable nodes). Every full pass of the cyclic
collector walks all of them; between the training calls of a pack (claims, results,
store writes allocate freely) those passes cost about a fifth of a small trial's time.
:func:`settle` collects once, then moves every survivor to the permanent generation
(``gc.freeze``), so later passes only see objects made since. It runs after a compiled
model enters or leaves this process's model cache, the moments the long-lived heap
changes. When a model entered, only the objects made since the last freeze are collected
(the new model and its build's garbage): a full pass over every cached model cost a
worker 0.2 s after its first build and 0.7 s after its twelfth. When a model left, it
unfreezes first, so the dropped model's cycles are reclaimed.

The same processes keep the memory they free for reuse (:func:`keep_freed_memory`): a
compiled step frees and reallocates its intermediate arrays (about 1 MB each in a pack) on
every call, and glibc's default hands such blocks back to the kernel, so each call paid
fresh page faults; in a VM that made a deep ReLU pack's step about 30% slower.

Only processes that opt in (:func:`enable`: the worker processes) are affected: both
settings are process-wide, and a library caller's process is theirs to manage.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading

# glibc's mallopt parameters (malloc.h) and the values workers use: blocks up to 64 MiB
# come from the heap instead of fresh mappings, and up to 256 MiB of free heap is kept
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 256 << 20

_enabled = False
_lock = threading.Lock()


def enable() -> None:
    """Opt this process in: keep freed memory for reuse, and settle what it holds now
    (its imports)."""
    global _enabled
    _enabled = True
    keep_freed_memory()
    settle(full=True)


def keep_freed_memory() -> bool:
    """Ask the C allocator to reuse freed blocks rather than return them to the kernel;
    False where it is not glibc (the process goes on with the allocator's defaults)."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        mallopt = None
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def settle(full: bool = False) -> None:
    """Collect cyclic garbage, then freeze every surviving object (in an opted-in process;
    otherwise nothing). ``full``: collect the frozen objects too (after a model was
    dropped); otherwise only those made since the last freeze."""
    if not _enabled:
        return
    with _lock:
        if full:
            gc.unfreeze()
        gc.collect()
        gc.freeze()


def disable() -> None:
    """Opt out again: every frozen object is back under the collector."""
    global _enabled
    with _lock:
        _enabled = False
        gc.unfreeze()
