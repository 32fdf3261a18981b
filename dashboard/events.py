"""Server-sent events: an open experiment page hears when its experiment changed instead of
asking every second.

One :class:`ChangeFeed` per server process follows the store's change cursor (``list_trials``
with ``since``) in one thread, while at least one stream is open, and wakes only the streams
whose experiment changed. A stream sends ``change`` events carrying the new cursor; the page
then reads the changed trials through the ordinary ``trials?since=`` API, so there is one
data path and a page that cannot stream simply polls it.

A stream holds one server thread while it is open (gunicorn's gthread workers), so each
process serves at most ``EVENT_STREAMS`` of them; the next is refused with 503 and the page
polls instead. Streams end after ``STREAM_SECONDS`` and the browser reconnects on its own.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from dnnframe.exceptions import DnnframeError

log = logging.getLogger(__name__)

INTERVAL_S = 0.5  # how often the feed reads the store's changes while streams are open
KEEPALIVE_S = 15.0  # a comment line this often finds closed connections and keeps proxies open
STREAM_SECONDS = 300.0  # then the browser reconnects (EventSource does, after `retry`)
MIN_GAP_S = 1.0  # at most one event a second per page, however fast trials change
PAGE = 1000
# streams one server process holds open at most (each holds a thread; see gunicorn_config)
DEFAULT_STREAMS = 16


class ChangeFeed:
    """The store's changes, read once per process and handed to the streams waiting on them."""

    def __init__(self, store: Callable[[], Any], max_streams: int):
        self._store = store
        self.max_streams = max_streams
        self._cond = threading.Condition()
        self._cursor = 0
        self._changed: dict[str, int] = {}  # experiment id → seq of its latest change seen
        self._open = 0
        self._thread: threading.Thread | None = None
        self.closed = False

    def close(self) -> None:
        """End every stream and the reader (the server is stopping)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def open_stream(self) -> bool:
        """Take a stream slot (starting the reader if it is idle); False when all are taken."""
        with self._cond:
            if self.closed or self._open >= self.max_streams:
                return False
            self._open += 1
            if self._thread is None:
                # the reader's cursor is set before any stream waits, so no change made
                # after this call can be missed
                self._cursor = self._store().latest_seq()
                self._thread = threading.Thread(target=self._follow, name="dnnframe-change-feed",
                                                daemon=True)
                self._thread.start()
            return True

    def close_stream(self) -> None:
        with self._cond:
            self._open -= 1

    def wait(self, experiment_id: str, after: int, timeout: float) -> int | None:
        """The experiment's latest change number once it is past ``after``; None on timeout."""
        with self._cond:
            self._cond.wait_for(
                lambda: self.closed or self._changed.get(experiment_id, 0) > after, timeout
            )
            latest = self._changed.get(experiment_id, 0)
        return latest if latest > after else None

    def _follow(self) -> None:
        while True:
            with self._cond:
                if self._open <= 0 or self.closed:
                    # the next stream starts a new reader from the store's cursor then
                    self._thread = None
                    return
            try:
                self._read()
            except DnnframeError as exc:  # a store hiccup: the streams keep waiting
                log.warning("the change feed cannot read the store: %s", exc)
            time.sleep(INTERVAL_S)

    def _read(self) -> None:
        store = self._store()
        changed: dict[str, int] = {}
        while True:
            rows = store.list_trials(since=self._cursor, limit=PAGE)
            for trial in rows:
                for experiment_id in trial.experiment_ids:
                    changed[experiment_id] = max(changed.get(experiment_id, 0), trial.seq)
                self._cursor = max(self._cursor, trial.seq)
            if len(rows) < PAGE:
                break
        if changed:
            with self._cond:
                self._changed.update(changed)
                self._cond.notify_all()


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def stream(feed: ChangeFeed, experiment_id: str, since: int) -> Iterator[str]:
    """The event stream of one page (the caller took a slot with ``open_stream``).

    It starts with a ``change`` event, so the page catches up on whatever changed between its
    cursor and the stream's start; after that an event comes only when the experiment changed.
    """
    try:
        yield "retry: 3000\n\n"
        yield _event("change", {"cursor": since})
        seen = since
        ends = time.monotonic() + STREAM_SECONDS
        while time.monotonic() < ends and not feed.closed:
            latest = feed.wait(experiment_id, seen, KEEPALIVE_S)
            if latest is None:
                yield ": keep-alive\n\n"
                continue
            seen = latest
            yield _event("change", {"cursor": latest})
            time.sleep(MIN_GAP_S)
    finally:
        feed.close_stream()
