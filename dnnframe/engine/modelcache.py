"""A per-process LRU cache of compiled models, bounded by the bytes they hold.

A compiled model keeps its shared values (parameters, optimiser state: a deep stack or a
large pack makes these big) and its compiled functions alive. The cache evicts the least
recently used models once their total size exceeds ``max_bytes`` (default 1 GiB,
``DNNFRAME_MODEL_CACHE_BYTES``); the model just added or used is never evicted, so a
single model larger than the bound still works.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from .. import settings
from . import heap

DEFAULT_MAX_BYTES = 2**30
FUNCTION_OVERHEAD = 2 * 2**20  # rough size of a model's compiled functions and graph


def default_max_bytes() -> int:
    """``DNNFRAME_MODEL_CACHE_BYTES`` (an integer), else 1 GiB."""
    return settings.get().model_cache_bytes


def model_bytes(model: Any) -> int:
    """Bytes held by a model's shared values (``model.params`` and ``model.opt_state``)
    plus a fixed estimate for its compiled functions."""
    total = FUNCTION_OVERHEAD
    shared = list(getattr(model, "params", []))
    shared += [s for s, _ in getattr(model, "opt_state", [])]
    for var in shared:
        value = var.get_value(borrow=True)
        total += int(getattr(value, "nbytes", 0))
    return total


class ModelCache:
    """Thread-safe LRU map ``key -> model`` bounded by :func:`model_bytes` totals."""

    def __init__(self, max_bytes: int | None = None, size: Callable[[Any], int] = model_bytes):
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self._size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.RLock()
        self.evictions = 0

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> tuple[Any, bool]:
        """The model for ``key`` (built by ``build()`` on a miss); returns (model, was_cached).

        Building happens under the lock: two threads asking for one shape compile it once.
        A model built (and any evicted) changes the process's long-lived heap: it is
        settled (:func:`heap.settle`, fully when a model was evicted) in worker processes.
        """
        with self._lock:
            model = self._items.get(key)
            cached = model is not None
            if cached:
                self._items.move_to_end(key)
            else:
                model = build()
                self._items[key] = model
            evicted = self._evict(keep=key)
        if not cached or evicted:
            heap.settle(full=evicted > 0)
        return model, cached

    def _evict(self, keep: Hashable) -> int:
        """Drop least recently used models until the total fits; returns how many."""
        # sizes are measured now, not at insertion: shared values change shape between trials
        sizes = {k: self._size(m) for k, m in self._items.items()}
        total = sum(sizes.values())
        dropped = 0
        for k in list(self._items):
            if total <= self.max_bytes:
                break
            if k == keep:
                continue
            del self._items[k]
            total -= sizes[k]
            dropped += 1
        self.evictions += dropped
        return dropped

    def clear(self) -> None:
        """Forget every model."""
        with self._lock:
            self._items.clear()
        heap.settle(full=True)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items
