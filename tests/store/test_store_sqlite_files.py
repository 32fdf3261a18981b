"""SQLite file safety: corrupt or foreign files are refused untouched; schema versions;
URLs; and several real processes claiming from one file."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from store_support import MONGODB_URL

from dnnframe.exceptions import SchemaVersionError, StoreCorruptError, StoreError
from dnnframe.store import SCHEMA_VERSION, TrialState, open_store


def snapshot(path: Path) -> dict[str, bytes]:
    """Bytes of the file and any sidecar (-wal, -shm, -journal) next to it."""
    return {p.name: p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name)}


@pytest.mark.parametrize(
    "content",
    [
        b"this is a CSV file, not a database\n1,2,3\n" * 10,
        b"SQLite format 3\x00" + b"\xff" * 5000,  # right header, garbage after it
        b"SQLite",  # truncated header
    ],
)
def test_corrupt_file_is_refused_and_untouched(tmp_path, content):
    path = tmp_path / "results.db"
    path.write_bytes(content)
    before = snapshot(path)
    with pytest.raises(StoreCorruptError, match="results.db"):
        open_store(f"sqlite:///{path}")
    assert snapshot(path) == before


def test_foreign_sqlite_database_is_refused_and_untouched(tmp_path):
    path = tmp_path / "app.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'ada')")
    con.commit()
    con.close()
    before = snapshot(path)
    with pytest.raises(StoreCorruptError, match=r"not a dnnframe store \(tables: users\)"):
        open_store(f"sqlite:///{path}")
    assert snapshot(path) == before


def test_newer_schema_version_is_refused(tmp_path):
    path = tmp_path / "new.db"
    open_store(f"sqlite:///{path}").close()
    con = sqlite3.connect(path)
    con.execute(
        "UPDATE dnnframe_meta SET value = ? WHERE key = 'schema_version'",
        (str(SCHEMA_VERSION + 1),),
    )
    con.commit()
    con.close()
    before = snapshot(path)
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}.*newer"):
        open_store(f"sqlite:///{path}")
    # A WAL-mode database can only be read with its -wal/-shm sidecars, which SQLite creates
    # empty for the read; the database file itself must not change.
    assert path.read_bytes() == before[path.name]


def test_schema_version_recorded(tmp_path):
    path = tmp_path / "s.db"
    open_store(f"sqlite:///{path}").close()
    con = sqlite3.connect(path)
    (v,) = con.execute("SELECT value FROM dnnframe_meta WHERE key = 'schema_version'").fetchone()
    con.close()
    assert int(v) == SCHEMA_VERSION


def test_empty_file_is_initialised(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    with open_store(f"sqlite:///{path}") as s:
        s.create_experiment("e", "e", {}, 0)
    assert path.stat().st_size > 0


@pytest.mark.parametrize(
    "url, message",
    [
        ("sqlite:///{tmp}/missing/dir/x.db", "does not exist"),
        ("sqlite:///{tmp}", "is a directory"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite://relative.db", "sqlite:///relative/path.db"),
        ("mysql://db/x", "not supported"),
    ],
)
def test_bad_urls_name_the_url(tmp_path, url, message):
    url = url.format(tmp=tmp_path)
    with pytest.raises(StoreError, match=message) as err:
        open_store(url)
    assert url in str(err.value) or "directory" in message


def test_default_url_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("DNNFRAME_STORE_URL", f"sqlite:///{tmp_path}/env.db")
    with open_store(None) as s:
        assert s.url.endswith("env.db")
    assert (tmp_path / "env.db").exists()
    same = open_store(s)
    assert same is s


def test_store_survives_fork_of_parent_connection(tmp_path):
    """A store used before fork works in the child (fresh connection) and in the parent after."""
    url = f"sqlite:///{tmp_path}/fork.db"
    s = open_store(url)
    s.create_experiment("e", "e", {}, 2)
    s.create_trials("e", [("a", {}), ("b", {})])
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_claim_one_inherited, args=(s, "a"))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert s.get_trial("a").state is TrialState.COMPLETE
    assert s.claim_trial("b", "parent") is not None
    s.close()


def _claim_one_inherited(store, tid):
    assert store.claim_trial(tid, "child") is not None
    assert store.finish_trial(tid, TrialState.COMPLETE, worker="child")


def _worker(url: str, name: str, ids: list[str], out, barrier) -> None:
    store = open_store(url)
    barrier.wait(60)  # spawn start-up is slow: start racing together
    finished = []
    for i, tid in enumerate(ids):
        rec = store.claim_trial(tid, name, max_attempts=3)
        if i == 0:
            # Everyone claims its own starting trial before anyone walks on, so a worker the
            # scheduler runs first on a busy machine cannot take all of them alone.
            barrier.wait(60)
        if rec is None:
            continue
        store.heartbeat(tid, name)
        store.append_metrics(tid, {"epoch": 0, "worker": name})
        if store.finish_trial(tid, TrialState.COMPLETE, result={"by": name}, worker=name):
            finished.append(tid)
    store.close()
    out.put((name, finished))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"] + (["mongodb"] if MONGODB_URL else []))
def test_processes_claim_and_finish_each_trial_exactly_once(url, backend):
    """4 processes race over the same 200 trials (each walks the list from a different
    starting point); every trial must end COMPLETE exactly once, by the worker that won it."""
    n, procs = 200, 4
    with open_store(url) as s:
        s.create_experiment("race", "race", {}, n)
        ids = [f"t{i:03d}" for i in range(n)]
        s.create_trials("race", [(t, {"i": i}) for i, t in enumerate(ids)])
    ctx = mp.get_context("spawn")  # fresh interpreters: nothing shared but the file
    out = ctx.Queue()
    barrier = ctx.Barrier(procs)
    workers = [
        ctx.Process(
            target=_worker, args=(url, f"w{k}", ids[k * 50 :] + ids[: k * 50], out, barrier)
        )
        for k in range(procs)
    ]
    for p in workers:
        p.start()
    results = dict(out.get(timeout=120) for _ in workers)
    for p in workers:
        p.join(30)
        assert p.exitcode == 0
    done = [t for fin in results.values() for t in fin]
    assert sorted(done) == ids  # each exactly once
    with open_store(url) as s:
        trials = {t.id: t for t in s.list_trials(experiment_id="race")}
        assert s.counts_by_state("race")["COMPLETE"] == n
    winner = {t: w for w, fin in results.items() for t in fin}
    for tid, t in trials.items():
        assert t.attempts == 1 and t.worker == winner[tid]
        assert t.metrics == [{"epoch": 0, "worker": winner[tid]}]
        # the result as written, with the stored curve shown as its history
        assert t.result == {"by": winner[tid], "history": t.metrics}
    assert all(results.values())  # they really did race: each won at least its first trial


def test_requeue_stale_waiting_behind_a_lock_judges_ages_as_of_the_call(tmp_path):
    """A requeue that waits behind another writer's lock judges heartbeats as of when it was
    called: heartbeats the lock kept from being written are not taken for dead workers."""
    path = tmp_path / "locked.db"
    s = open_store(f"sqlite:///{path}")
    s.create_experiment("e", "e", {}, 1)
    s.create_trials("e", [("a", {})])
    assert s.claim_trial("a", "alive") is not None
    lock = sqlite3.connect(path, isolation_level=None, timeout=30)
    lock.execute("BEGIN EXCLUSIVE")
    requeued: list[list[str]] = []
    waiter = threading.Thread(target=lambda: requeued.append(s.requeue_stale(2.0)))
    try:
        waiter.start()
        deadline = time.monotonic() + 30
        # WAL: reads go on under the write lock; hold it until the heartbeat is 3 s old
        while time.time() - s.get_trial("a").heartbeat_at < 3.0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert waiter.is_alive()  # still waiting for the lock
    finally:
        lock.execute("COMMIT")
        lock.close()
    waiter.join(30)
    assert requeued == [[]]
    assert s.get_trial("a").state is TrialState.RUNNING
    s.close()
