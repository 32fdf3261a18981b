"""Fixtures: every test taking ``store`` runs once per backend in ``BACKENDS``."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from store_support import (
    BACKENDS,
    create_postgresql_database,
    drop_postgresql_database,
    postgresql_unreachable,
    store_url,
)

from dnnframe.store import ResultStore, base_trials, open_store


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def url(backend, tmp_path) -> Iterator[str]:
    if backend != "postgresql":
        yield store_url(backend, tmp_path)
        return
    reason = postgresql_unreachable()
    if reason:
        pytest.skip(reason)
    name, db_url = create_postgresql_database()
    try:
        yield db_url
    finally:
        drop_postgresql_database(name)


class SteppedClock:
    """A clock that moves only when the test says (``advance``): ages are exact."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.time = start

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


@pytest.fixture
def clock(monkeypatch) -> SteppedClock:
    """The stores' clock (every timestamp they write, every age they judge), test-driven."""
    stepped = SteppedClock()
    monkeypatch.setattr(base_trials, "clock", stepped)
    return stepped


@pytest.fixture
def store(url, backend) -> Iterator[ResultStore]:
    s = open_store(url)
    yield s
    if backend == "mongodb":  # leave nothing behind on a shared server
        s._db.client.drop_database(s._db.name)  # type: ignore[attr-defined]
    s.close()


@pytest.fixture
def atomic_operations(backend, monkeypatch):
    """On mongomock, make each single collection operation atomic, as a MongoDB server does.

    mongomock applies one update in several Python steps, so threads can interleave inside
    a single update (two compare-and-sets on one document can both succeed), and a ``find``
    filters and sorts documents while other threads change them, so one query can see one
    document in two versions; a server never does either. With one lock around each
    operation (a cursor reads all its documents under it) the test checks the store's logic,
    not mongomock's thread safety.
    """
    if backend != "mongomock":
        return
    import mongomock

    lock = threading.RLock()
    for name in (
        "update_one",
        "update_many",
        "find_one",
        "find_one_and_update",
        "insert_one",
        "insert_many",
        "count_documents",
        "aggregate",
        "find_one_and_delete",
    ):
        real = getattr(mongomock.collection.Collection, name)

        def locked(self, *args, _real=real, **kwargs):
            with lock:
                return _real(self, *args, **kwargs)

        monkeypatch.setattr(mongomock.collection.Collection, name, locked)
    real_dataset = mongomock.collection.Collection._get_dataset

    def snapshot(self, *args, **kwargs):
        with lock:
            return iter(list(real_dataset(self, *args, **kwargs)))

    monkeypatch.setattr(mongomock.collection.Collection, "_get_dataset", snapshot)
