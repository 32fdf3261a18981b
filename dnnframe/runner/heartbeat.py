"""A background thread that keeps the heartbeats of running trials fresh.

Heartbeats from epochs alone are not enough: a graph compile or a long epoch can outlast the
heartbeat timeout, and the reaper (or a second ``dnnframe run`` on the same store) would
requeue a live trial. One :class:`Heartbeat` beats for any number of trials of one worker,
in one store call per beat, and remembers which of them the store says the worker lost.

>>> from unittest import mock
>>> store = mock.Mock(heartbeat_trials=lambda ids, worker: set(ids) - {"b"})
>>> with Heartbeat(store, "w", interval_s=60) as hb:
...     hb.track(["a", "b"])
...     sorted(hb.beat())
['b']
>>> sorted(hb.lost)
['b']

A long-lived process shares one thread per store and worker (:meth:`Heartbeat.shared`): a
thread per pack would also leave one store connection per pack behind.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)
_SHARED: weakref.WeakKeyDictionary[Any, dict[str, Heartbeat]] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


class Heartbeat:
    """Beats every ``interval_s`` seconds for the tracked trials until the context exits.

    ``store`` needs ``heartbeat_trials(ids, worker) -> set of ids still owned``; the thread
    holds it weakly and ends once the store is gone. A store error is logged and retried at
    the next beat; it never stops the thread (a later beat or the epoch's own writes catch
    up well within the timeout).
    """

    @classmethod
    def shared(cls, store: Any, worker: str, interval_s: float) -> Heartbeat:
        """The running heartbeat of ``worker`` on ``store`` in this process (started on first use)."""
        with _SHARED_LOCK:
            per_store = _SHARED.setdefault(store, {})
            beat = per_store.get(worker)
            if beat is None:
                beat = per_store[worker] = cls(store, worker, interval_s)
        beat.start()
        return beat

    def __init__(self, store: Any, worker: str, interval_s: float):
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self._store = weakref.ref(store)
        self.worker = worker
        self.interval_s = interval_s
        self.lost: set[str] = set()
        self._ids: dict[str, None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def track(self, trial_ids: Iterable[str]) -> None:
        """Beat for these trials too (from the next beat on); they count as held again."""
        ids = list(trial_ids)
        with self._lock:
            self._ids.update(dict.fromkeys(ids))
            self.lost.difference_update(ids)

    def untrack(self, trial_ids: Iterable[str]) -> None:
        """Stop beating for these trials (finished, stopped or lost)."""
        with self._lock:
            for tid in trial_ids:
                self._ids.pop(tid, None)

    def beat(self) -> set[str]:
        """Refresh the tracked trials now; returns those this worker has lost (and untracks them)."""
        with self._lock:
            ids = list(self._ids)
        store = self._store()
        if not ids or store is None:
            return set()
        lost = set(ids) - set(store.heartbeat_trials(ids, self.worker))
        if lost:
            log.warning(
                "worker %s lost %d trial(s) to another worker or the reaper: %s",
                self.worker,
                len(lost),
                ", ".join(sorted(lost)),
            )
            with self._lock:
                self.lost |= lost
            self.untrack(lost)
        return lost

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self._store() is None:
                return
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - a store hiccup must not kill the thread
                log.warning(
                    "heartbeat of %s failed; retrying in %.1fs",
                    self.worker,
                    self.interval_s,
                    exc_info=True,
                )

    def start(self) -> None:
        """Start the thread unless it runs (again after ``fork``: threads do not survive it)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, name=f"heartbeat-{self.worker}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread (after a beat in progress)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> Heartbeat:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
