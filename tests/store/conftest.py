"""Fixtures: every test taking ``store`` runs once per backend in ``BACKENDS``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from store_support import (
    BACKENDS,
    create_postgresql_database,
    drop_postgresql_database,
    postgresql_unreachable,
    store_url,
)

from dnnframe.store import ResultStore, open_store


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


@pytest.fixture
def store(url, backend) -> Iterator[ResultStore]:
    s = open_store(url)
    yield s
    if backend == "mongodb":  # leave nothing behind on a shared server
        s._db.client.drop_database(s._db.name)  # type: ignore[attr-defined]
    s.close()
