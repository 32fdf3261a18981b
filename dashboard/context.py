"""The store and executor an app uses, and how a view finds them."""

from __future__ import annotations

import atexit
import logging
import threading

from flask import Flask, current_app

from dnnframe.settings import get as get_settings
from dnnframe.store import ResultStore, open_store

from .events import ChangeFeed

log = logging.getLogger(__name__)


class Services:
    """The store and executor one app uses, opened on first use (so importing is cheap)."""

    def __init__(self, app: Flask):
        self.config = app.config
        self._lock = threading.Lock()
        self._store: ResultStore | None = None
        self._executor = app.config.get("EXECUTOR")
        self._owns_executor = False
        self.feed = ChangeFeed(lambda: self.store, int(app.config["EVENT_STREAMS"]))

    @property
    def store(self) -> ResultStore:
        """The result store, opened on first use."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = open_store(self.config.get("STORE_URL"))
        return self._store

    def store_url(self) -> str | None:
        return self.config.get("STORE_URL")

    @property
    def executor(self):  # -> Executor
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    from dnnframe.executors import make_executor

                    url = self.config.get("STORE_URL")  # None → the executor's default
                    workers = self.config.get("WORKERS")
                    if self.config.get("LOCAL_POOL") == "service" and not self.config.get(
                        "BROKER_URL"
                    ):
                        # the server's driver service owns the one pool: hand trials to it
                        from dnnframe.executors.handoff import HandoffExecutor

                        self._executor = HandoffExecutor(
                            self.store, int(workers) if workers else get_settings().worker_count
                        )
                        return self._executor
                    self._executor = make_executor(
                        url,
                        broker_url=self.config.get("BROKER_URL"),
                        workers=int(workers) if workers else None,
                    )
                    self._owns_executor = True
                    # the local pool's worker processes must not outlive the server
                    atexit.register(self.shutdown)
        return self._executor

    @property
    def has_executor(self) -> bool:
        return self._executor is not None

    def shutdown(self) -> None:
        """End the event streams, stop the executor this app created (not one it was given)
        and close the store."""
        self.feed.close()
        with self._lock:
            if self._executor is not None and self._owns_executor:
                self._executor.shutdown(wait=False)
                self._executor = None
            if self._store is not None:
                self._store.close()
                self._store = None


def services() -> Services:
    """The current app's :class:`Services`."""
    return current_app.extensions["dnnframe"]
