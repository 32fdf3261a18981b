"""The MongoDB store's change counter, safe for ``since=`` readers (see mongodb.py).

One counter document ``{"_id": "seq", "value": last seq reserved, "inflight": [marks]}``.
A writer reserves a block with one compare-and-set that both advances ``value`` and pushes
the mark ``{"first": first seq of the block, "at": time}``, so no seq exists without its
mark; it pulls the mark once its trial write has landed or failed. :meth:`SeqCounter.visible`
reads the document once: every seq up to ``min(first) - 1`` (or ``value``) has landed.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

from pymongo.errors import AutoReconnect, DuplicateKeyError

_ID = "seq"


class SeqCounter:
    """Reserves blocks of ``seq`` values and tells which prefix of them is visible."""

    def __init__(self, counters: Any, inflight_ttl_s: float):
        self._counters = counters
        self._ttl = inflight_ttl_s
        self._hint: int | None = None  # last value seen: usually saves the read before the CAS

    def _reserve(self, n: int) -> int:
        while True:
            value = self._hint
            if value is None:
                doc = self._counters.find_one({"_id": _ID}, {"value": 1})
                if doc is None:
                    with contextlib.suppress(DuplicateKeyError):
                        self._counters.insert_one({"_id": _ID, "value": 0, "inflight": []})
                    continue
                value = int(doc.get("value", 0))
            # Compare-and-set: the block and its mark appear in one atomic update. The mark
            # names this reservation, so one applied before the connection dropped is
            # recognised rather than left holding readers back until its TTL.
            mark = uuid.uuid4().hex
            try:
                res = self._counters.update_one(
                    {"_id": _ID, "value": value},
                    {
                        "$set": {"value": value + n},
                        "$push": {"inflight": {"first": value + 1, "at": time.time(), "by": mark}},
                    },
                )
                won = bool(res.modified_count)
            except AutoReconnect:
                if self._counters.find_one({"_id": _ID, "inflight.by": mark}, {"_id": 1}) is None:
                    raise
                won = True
            if won:
                self._hint = value + n
                return value + 1
            self._hint = None  # another writer moved the counter: read it and try again

    @contextlib.contextmanager
    def block(self, n: int = 1) -> Iterator[int]:
        """Reserve ``n`` consecutive seqs; yields the first. Write them inside the block."""
        first = self._reserve(max(1, n))
        try:
            yield first
        finally:
            self._counters.update_one({"_id": _ID}, {"$pull": {"inflight": {"first": first}}})

    def visible(self) -> int:
        """The largest seq below which every reserved block has landed (0 when none)."""
        doc = self._counters.find_one({"_id": _ID})
        if doc is None:
            return 0
        cutoff = time.time() - self._ttl
        marks = doc.get("inflight") or []
        live = [int(m["first"]) - 1 for m in marks if m.get("at", 0.0) >= cutoff]
        if len(live) < len(marks):  # abandoned by a writer that died: stop holding readers back
            self._counters.update_one(
                {"_id": _ID}, {"$pull": {"inflight": {"at": {"$lt": cutoff}}}}
            )
        return min([int(doc.get("value", 0)), *live])
