"""Helpers for the store tests. One contract suite, every backend: a real SQLite file,
mongomock, the in-memory reference backend, the real PostgreSQL server of this machine (each test in a database of its own,
dropped afterwards), and a real MongoDB server whenever DNNFRAME_TEST_MONGODB_URL is set
(no MongoDB server can be installed here)."""

from __future__ import annotations

import functools
import os
import uuid

from dnnframe.store import ResultStore, TrialState

MONGODB_URL = os.environ.get("DNNFRAME_TEST_MONGODB_URL")
# The server the PostgreSQL cases create their databases on (trust auth in CI, see .ci/run).
POSTGRESQL_URL = os.environ.get(
    "DNNFRAME_TEST_POSTGRESQL_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
# The real-server case joins the suite only when a server is configured;
# test_store_mongodb.py::test_real_mongodb_server says once, explicitly, when it is not.
BACKENDS = ["sqlite", "mongomock", "memory", "postgresql"] + (["mongodb"] if MONGODB_URL else [])


@functools.cache
def postgresql_unreachable() -> str | None:
    """Why the PostgreSQL cases cannot run here (None when the server answers)."""
    import psycopg

    try:
        psycopg.connect(POSTGRESQL_URL, connect_timeout=3, autocommit=True).close()
    except psycopg.Error as e:
        return (
            f"no PostgreSQL server answers at {POSTGRESQL_URL} ({' '.join(str(e).split())}); "
            ".ci/run installs and starts one, or set DNNFRAME_TEST_POSTGRESQL_URL"
        )
    return None


def postgresql_admin(sql: str) -> None:
    """Run one statement on the test server's maintenance database (autocommit)."""
    import psycopg

    with psycopg.connect(POSTGRESQL_URL, connect_timeout=10, autocommit=True) as conn:
        conn.execute(sql)


def create_postgresql_database() -> tuple[str, str]:
    """A new, empty database of a random name: ``(name, its store URL)``."""
    name = f"dnnframe_test_{uuid.uuid4().hex[:12]}"
    postgresql_admin(f'CREATE DATABASE "{name}"')
    return name, POSTGRESQL_URL.rsplit("/", 1)[0] + "/" + name


def drop_postgresql_database(name: str) -> None:
    """Drop a database made by :func:`create_postgresql_database` (and its sessions)."""
    assert name.startswith("dnnframe_test_"), name  # never anything else on a shared server
    postgresql_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def store_url(backend: str, tmp_path) -> str:
    """A fresh, empty store URL for ``backend`` (for postgresql use the ``url`` fixture,
    which also drops the database afterwards)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    db = f"dnnframe_test_{uuid.uuid4().hex[:12]}"
    if backend == "mongomock":
        return f"mongomock://localhost/{db}"
    if backend == "memory":
        return f"memory://{db}"
    assert MONGODB_URL, "backend 'mongodb' needs DNNFRAME_TEST_MONGODB_URL"
    return MONGODB_URL.rstrip("/") + "/" + db


# ---------------------------------------------------------------- contract suite data
# A trial config, and the experiments and runs the contract suite (test_store_*.py) builds on.
CFG = {"model": {"hidden_layers": 2, "width": 8}, "seed": 0}


def cfg(layers: int, seed: int = 0) -> dict:
    return {"model": {"hidden_layers": layers, "width": 8}, "seed": seed}


def make(store: ResultStore, n: int = 3, eid: str = "exp1") -> list[str]:
    store.create_experiment(eid, f"name-{eid}", {"spec": eid}, n)
    ids = [f"{eid}-t{i}" for i in range(n)]
    store.create_trials(eid, [(t, cfg(i + 1)) for i, t in enumerate(ids)])
    return ids


def run(
    store: ResultStore,
    tid: str,
    acc: float | None,
    state=TrialState.COMPLETE,
    epochs: int = 2,
    worker: str = "w",
) -> None:
    assert store.claim_trial(tid, worker) is not None
    for e in range(epochs):
        store.append_metrics(tid, {"epoch": e, "val_loss": 1.0 / (e + 1)})
    result = {
        "status": state.value,
        "metrics": {"test_accuracy": acc},
        "timings": {"train": 10 - (acc or 0)},
        "history": [{"epoch": 0}],
    }
    assert store.finish_trial(tid, state, result=result, worker=worker)
