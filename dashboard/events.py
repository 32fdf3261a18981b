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

A stream also holds one of the six connections a browser keeps per host for all its tabs.
So one stream may follow several experiments (``/api/v1/events?experiment=…``): the
dashboard's tabs share one, held by a SharedWorker (static/live-worker.js), however many
tabs and experiments are open. And a stream must not outlive its experiments: when an update
says an experiment is over the stream sends ``end`` for it, and closes after its last one;
a stream asked only for finished experiments is answered 204, which tells EventSource not
to reconnect.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from dnnframe.exceptions import DnnframeError

from .note_feed import NoteFeed, Target

log = logging.getLogger(__name__)

INTERVAL_S = 0.5  # how often the feed reads the store's changes while streams are open
KEEPALIVE_S = 15.0  # a comment line this often finds closed connections and keeps proxies open
STREAM_SECONDS = 300.0  # then the browser reconnects (EventSource does, after `retry`)
MIN_GAP_S = 1.0  # at most one event a second per page, however fast trials change
PAGE = 1000
MAX_STREAMED = 100  # experiments one stream follows at most (a browser's open tabs)
UPDATES_KEPT = 64  # per experiment: a stream further behind is told to read for itself


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
        # the notes the streams' pages show, followed by their own versions
        self.notes = NoteFeed(self._cond)
        self._open = 0
        self._thread: threading.Thread | None = None
        self.closed = False

    def close(self) -> None:
        """End every stream and the reader (the server is stopping)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def open_stream(
        self, experiment_ids: Iterable[str], notes: Iterable[Target] = ()
    ) -> dict[str, int | None] | None:
        """Take one stream slot for ``experiment_ids`` and the ``notes`` its pages show
        (starting the reader if it is idle).

        Returns None when every slot is taken, else each experiment's latest update's change
        number (None before its first): where the new stream's updates start.
        """
        ids = list(dict.fromkeys(experiment_ids))
        with self._cond:
            if self.closed or self._open >= self.max_streams:
                return None
            self._open += 1
            self._watched.update(ids)
            self.notes.follow(notes)
            if self._thread is None:
                # the reader's cursor is set before any stream waits, so no change made
                # after this call can be missed
                self._cursor = self._store().latest_seq()
                self._thread = threading.Thread(
                    target=self._follow, name="dnnframe-change-feed", daemon=True
                )
                self._thread.start()
            starts: dict[str, int | None] = {}
            for e in ids:
                updates = self._updates.get(e)
                starts[e] = updates[-1].seq if updates else None
        # the notes' versions as the stream starts, so a save from now on is sent on
        self.notes.read(self._store(), notes)
        return starts

    def close_stream(self, experiment_ids: Iterable[str], notes: Iterable[Target] = ()) -> None:
        with self._cond:
            self._open -= 1
            self.notes.unfollow(notes)
            for e in dict.fromkeys(experiment_ids):
                self._watched[e] -= 1
                if self._watched[e] <= 0:
                    del self._watched[e]
                    self._updates.pop(e, None)

    def updates(
        self, after: dict[str, int | None], timeout: float, notes: dict[Target, int] | None = None
    ) -> tuple[dict[str, list[Update]], dict[Target, tuple[int, str]]]:
        """Each experiment's updates past its change number in ``after``, and the notes of
        ``notes`` saved since the version given there (waiting up to ``timeout`` for
        either); experiments and notes with none are left out."""

        def newer() -> dict[str, list[Update]]:
            found = {}
            for e, seen in after.items():
                kept = [u for u in self._updates.get(e, ()) if seen is None or u.seq > seen]
                if kept:
                    found[e] = kept
            return found

        with self._cond:
            seen = notes or {}
            self._cond.wait_for(
                lambda: self.closed or bool(newer()) or bool(self.notes.newer(seen)), timeout
            )
            return newer(), self.notes.newer(seen)

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
        self.notes.read(store)
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
                kept.append(
                    Update(
                        seq,
                        kept[-1].seq if kept else None,
                        json.dumps(body),
                        bool(body.get("over")),
                    )
                )
            self._cond.notify_all()


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def stream(
    feed: ChangeFeed,
    starts: dict[str, int | None],
    since: int | None = None,
    ended: Iterable[str] = (),
    notes: Iterable[Target] = (),
) -> Iterator[str]:
    """The event stream of one page, or of every tab of one browser (the caller took a slot
    with ``open_stream``, which gave ``starts``: the experiments it follows, and ``notes``:
    the notes its pages show).

    ``ended`` are experiments asked for that are already over (or unknown): each gets ``end``
    at once. Then a ``change`` event for each followed experiment, so the page reads whatever
    changed between its cursor (``since``, when the page gave one) and the stream's start;
    then ``trials`` events carry the changed trials (and the experiment's counts) as the feed
    reads them, and a ``note`` event each note of ``notes`` saved meanwhile (:mod:`.note_feed`).
    An experiment whose stream fell more than ``UPDATES_KEPT`` updates behind gets a
    ``change`` event instead, and its page reads. After the update that finishes an
    experiment comes its ``end``; the stream closes after the last one.
    """
    cursor = {} if since is None else {"cursor": since}
    try:
        yield "retry: 3000\n\n" + "".join(
            [_event("end", {**cursor, "experiment_id": e}) for e in ended]
            + [_event("change", {**cursor, "experiment_id": e}) for e in starts]
        )
        seen = dict(starts)
        noted = feed.notes.versions(notes)  # each note's version sent on
        ends = time.monotonic() + STREAM_SECONDS
        while seen and time.monotonic() < ends and not feed.closed:
            found, saved = feed.updates(seen, KEEPALIVE_S, noted)
            if not found and not saved:
                yield ": keep-alive\n\n"
                continue
            noted.update((target, version) for target, (version, _) in saved.items())
            yield "".join(f"event: note\ndata: {body}\n\n" for _, body in saved.values()) + "".join(
                _sent(e, updates, seen, cursor) for e, updates in found.items()
            )
            if seen:
                time.sleep(MIN_GAP_S)
    finally:
        feed.close_stream(starts, notes)


def _sent(
    experiment_id: str, updates: list[Update], seen: dict[str, int | None], cursor: dict[str, int]
) -> str:
    """The events that pass ``updates`` of one experiment on; ``seen`` moves past them and
    forgets an experiment that is over."""
    if updates[0].previous != seen[experiment_id]:  # some were dropped: the page reads them
        text = _event("change", {**cursor, "experiment_id": experiment_id})
    else:
        text = "".join(f"event: trials\ndata: {u.data}\n\n" for u in updates)
    seen[experiment_id] = updates[-1].seq
    if updates[-1].over:
        del seen[experiment_id]
        text += _event("end", {"cursor": updates[-1].seq, "experiment_id": experiment_id})
    return text
