"""One contract suite, every backend: a real SQLite file, mongomock, and a real MongoDB server
whenever DNNFRAME_TEST_MONGODB_URL is set (no MongoDB server can be installed here)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from dnnframe.store import ResultStore, open_store

BACKENDS = ["sqlite"]  # mongo backends: next commit


def store_url(backend: str, tmp_path) -> str:
    """A fresh, empty store URL for ``backend``."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    db = f"dnnframe_test_{uuid.uuid4().hex[:12]}"
    if backend == "mongomock":
        return f"mongomock://localhost/{db}"
    base = os.environ.get("DNNFRAME_TEST_MONGODB_URL")
    if not base:
        pytest.skip("real MongoDB case: set DNNFRAME_TEST_MONGODB_URL=mongodb://host:27017 "
                    "(no MongoDB server exists on this machine; mongomock covers the contract)")
    return base.rstrip("/") + "/" + db


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def url(backend, tmp_path) -> str:
    return store_url(backend, tmp_path)


@pytest.fixture
def store(url, backend) -> Iterator[ResultStore]:
    s = open_store(url)
    yield s
    if backend == "mongodb":  # leave nothing behind on a shared server
        s._db.client.drop_database(s._db.name)  # type: ignore[attr-defined]
    s.close()
