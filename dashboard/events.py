"""Server-sent events: an open experiment page hears when its experiment changed instead of
asking every second.

One :class:`ChangeFeed` per server process follows the store's change cursor (``list_trials``
with ``since``) in one thread, while at least one stream is open. For each experiment some
page streams it turns the trials that changed into one JSON update, serialised once, and
every stream of that experiment sends it on: twenty open pages cost one read of the store,
not twenty. A page that cannot stream polls ``trials?since=`` instead.

A stream holds one server thread while it is open (gunicorn's gthread workers), so each
process serves at most ``EVENT_STREAMS`` of them; the next is refused with 503 and the page
polls instead. Streams end after ``STREAM_SECONDS`` and the browser reconnects on its own.

A stream also holds one of the six connections a browser keeps per host, so it must not
outlive its experiment: when an update says the experiment is over the stream sends ``end``
and closes (the page then stops listening), and a stream asked for a finished experiment is
answered 204, which tells EventSource not to reconnect.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from dnnframe.exceptions import DnnframeError

log = logging.getLogger(__name__)

INTERVAL_S = 0.5  # how often the feed reads the store's changes while streams are open
KEEPALIVE_S = 15.0  # a comment line this often finds closed connections and keeps proxies open
STREAM_SECONDS = 300.0  # then the browser reconnects (EventSource does, after `retry`)
MIN_GAP_S = 1.0  # at most one event a second per page, however fast trials change
PAGE = 1000
UPDATES_KEPT = 64  # per experiment: a stream further behind is told to read for itself
# streams one server process holds open at most (each holds a thread; see gunicorn_config)
DEFAULT_STREAMS = 16


class Update(NamedTuple):
    """One update of an experiment, serialised once for every stream."""

    seq: int  # the change number it reaches
    previous: int | None  # that of the experiment's update before it (None for its first)
    data: str  # the event's JSON
    over: bool  # the experiment is finished: the stream ends after this update


class ChangeFeed:
    """The store's changes, read once per process; for every experiment some page streams,
    each batch of its changed trials is described once and handed to all its streams."""

    def __init__(self, store: Callable[[], Any], max_streams: int):
        self._store = store
        self.max_streams = max_streams
        # what a page needs of an update: (store, experiment id, changed trials) → JSON
        # object, whose ``over`` is true once the experiment is finished
        self.describe: Callable[[Any, str, list[Any]], dict[str, Any]] | None = None
        self._cond = threading.Condition()
        self._cursor = 0
        self._watched: Counter[str] = Counter()  # experiment id → open streams
        self._updates: dict[str, deque[Update]] = {}
        self._open = 0
        self._thread: threading.Thread | None = None
        self.closed = False

    def close(self) -> None:
        """End every stream and the reader (the server is stopping)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def open_stream(self, experiment_id: str) -> int | None | bool:
        """Take a stream slot for ``experiment_id`` (starting the reader if it is idle).

        Returns False when every slot is taken, else the change number of the experiment's
        latest update (None before its first): where the new stream's updates start.
        """
        with self._cond:
            if self.closed or self._open >= self.max_streams:
                return False
            self._open += 1
            self._watched[experiment_id] += 1
            if self._thread is None:
                # the reader's cursor is set before any stream waits, so no change made
                # after this call can be missed
                self._cursor = self._store().latest_seq()
                self._thread = threading.Thread(target=self._follow, name="dnnframe-change-feed",
                                                daemon=True)
                self._thread.start()
            updates = self._updates.get(experiment_id)
            return updates[-1].seq if updates else None

    def close_stream(self, experiment_id: str) -> None:
        with self._cond:
            self._open -= 1
            self._watched[experiment_id] -= 1
            if self._watched[experiment_id] <= 0:
                del self._watched[experiment_id]
                self._updates.pop(experiment_id, None)

    def updates(self, experiment_id: str, after: int | None, timeout: float) -> list[Update]:
        """The experiment's updates past ``after`` (waiting up to ``timeout`` for one)."""
        def newer() -> list[Update]:
            return [u for u in self._updates.get(experiment_id, ()) if after is None or u.seq > after]

        with self._cond:
            self._cond.wait_for(lambda: self.closed or bool(newer()), timeout)
            return newer()

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
        rows: list[Any] = []
        while True:
            page = store.list_trials(since=self._cursor, limit=PAGE)
            rows.extend(page)
            self._cursor = max([self._cursor, *(t.seq for t in page)])
            if len(page) < PAGE:
                break
        # which experiments are watched is asked after the read: a stream opened later
        # starts by reading for itself, which then sees every row read here
        with self._cond:
            watched = set(self._watched)
        changed: dict[str, dict[str, Any]] = {}  # experiment id → its changed trials by id
        for trial in rows:
            for experiment_id in watched.intersection(trial.experiment_ids):
                changed.setdefault(experiment_id, {})[trial.id] = trial
        if not changed or self.describe is None:
            return
        described = {
            e: (max(t.seq for t in trials.values()), self.describe(store, e, list(trials.values())))
            for e, trials in changed.items()
        }
        with self._cond:
            for e, (seq, body) in described.items():
                if e not in self._watched:
                    continue
                kept = self._updates.setdefault(e, deque(maxlen=UPDATES_KEPT))
                kept.append(Update(seq, kept[-1].seq if kept else None, json.dumps(body),
                                   bool(body.get("over"))))
            self._cond.notify_all()


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def stream(feed: ChangeFeed, experiment_id: str, since: int, start: int | None) -> Iterator[str]:
    """The event stream of one page (the caller took a slot with ``open_stream``, which
    gave ``start``).

    It starts with a ``change`` event, so the page reads whatever changed between its cursor
    and the stream's start; then ``trials`` events carry the changed trials (and the
    experiment's counts) as the feed reads them. A stream that fell more than
    ``UPDATES_KEPT`` updates behind gets a ``change`` event instead, and the page reads.
    After the update that finishes the experiment comes ``end``, and the stream closes.
    """
    try:
        yield "retry: 3000\n\n"
        yield _event("change", {"cursor": since})
        seen = start
        ends = time.monotonic() + STREAM_SECONDS
        while time.monotonic() < ends and not feed.closed:
            updates = feed.updates(experiment_id, seen, KEEPALIVE_S)
            if not updates:
                yield ": keep-alive\n\n"
                continue
            if updates[0].previous != seen:  # some were dropped: the page reads them itself
                yield _event("change", {"cursor": since})
            else:
                yield "".join(f"event: trials\ndata: {u.data}\n\n" for u in updates)
            seen = updates[-1].seq
            if updates[-1].over:
                yield _event("end", {"cursor": seen})
                return
            time.sleep(MIN_GAP_S)
    finally:
        feed.close_stream(experiment_id)
