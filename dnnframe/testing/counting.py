"""A store that counts its calls: how many round trips a code path makes, by method."""

from __future__ import annotations

import collections
from typing import Any


class CountingStore:
    """Wraps a store; every call of one of its public methods (each a query or a
    transaction) is counted in :attr:`calls` by name, then passed on. Attributes that are
    not methods, and ``close``, are passed on uncounted."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value) or name.startswith("_") or name == "close":
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return value(*args, **kwargs)

        return counted

    @property
    def round_trips(self) -> int:
        """Calls counted so far."""
        return sum(self.calls.values())
