"""PostgreSQL-specific behaviour, on the machine's real server (each test in a database of its
own): answers lost after commit, connections killed, a server restarting (on a cluster the
test starts), the change cursor behind a write in flight, fork, schema migrations,
unreachable servers and foreign databases. Several processes racing over the same trials:
test_store_sqlite_files.py, which runs on PostgreSQL too."""

from __future__ import annotations

import functools
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from store_support import (
    create_postgresql_database,
    drop_postgresql_database,
    postgresql_unreachable,
)
from test_store_retries import WRITES, _answer, _contents

from dnnframe import retrying
from dnnframe.exceptions import SchemaVersionError, StoreCorruptError, StoreError
from dnnframe.store import TrialState, open_store, postgresql_conn
from dnnframe.store import postgresql_schema as schema


@pytest.fixture
def new_db() -> Iterator[Callable[[], str]]:
    """Makes fresh databases on the local server (URLs); drops them all afterwards."""
    reason = postgresql_unreachable()
    if reason:
        pytest.skip(reason)
    names: list[str] = []

    def make() -> str:
        name, url = create_postgresql_database()
        names.append(name)
        return url

    yield make
    for name in names:
        drop_postgresql_database(name)


@pytest.fixture
def private_cluster() -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """A PostgreSQL cluster of this test's own, never the machine's shared one, on a free
    port: ``(url, start, stop)``; stopped and deleted afterwards."""
    initdb = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not initdb:
        pytest.skip("no PostgreSQL server binaries (Debian's postgresql package) here")
    pg_ctl = str(Path(initdb[-1]).parent / "pg_ctl")
    as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    home = Path(tempfile.mkdtemp(prefix="dnnframe-pg-"))
    if as_owner:
        shutil.chown(home, "postgres", "postgres")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data, log = home / "data", home / "server.log"

    def ctl(*args: str) -> None:
        subprocess.run(
            [*as_owner, pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", "60", *args],
            check=True,
            capture_output=True,
            timeout=90,
        )

    subprocess.run(
        [*as_owner, initdb[-1], "-D", str(data), "-U", "postgres", "--auth=trust"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    start = functools.partial(
        ctl,
        "-o",
        f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={home}",
        "start",
    )
    stop = functools.partial(ctl, "-m", "fast", "stop")
    start()
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres", start, stop
    finally:
        subprocess.run(
            [*as_owner, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=90,
        )
        shutil.rmtree(home, ignore_errors=True)


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class LostCommits:
    """Lets the ``fail_at``-th commit of a call reach the server, then raises the error a
    dropped connection gives (the caller cannot know the commit happened)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.count, self.fail_at, self.armed = 0, None, False
        monkeypatch.setattr("dnnframe.retrying.pause", lambda seconds: None)
        real = psycopg.Connection.commit

        def commit(conn: psycopg.Connection) -> None:
            real(conn)
            if self.armed:
                self.count += 1
                if self.count == self.fail_at:
                    raise psycopg.OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(psycopg.Connection, "commit", commit)

    def run(self, action: Callable[[], Any], fail_at: int | None) -> Any:
        self.count, self.fail_at, self.armed = 0, fail_at, True
        try:
            return action()
        finally:
            self.armed = False


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_committed_before_its_answer_was_lost_is_not_applied_twice(
    write, new_db, monkeypatch
):
    setup, action = WRITES[write]
    lost = LostCommits(monkeypatch)
    with open_store(new_db()) as clean:
        setup(clean)
        expected_answer = _answer(lost.run(lambda: action(clean), fail_at=None))
        expected = _contents(clean)
    assert lost.count >= 1
    with open_store(new_db()) as s:
        setup(s)
        answer = _answer(lost.run(lambda: action(s), fail_at=1))
        assert lost.count >= 2, "the call was not retried"
        assert answer == expected_answer
        assert _contents(s) == expected


def test_a_connection_killed_by_the_server_is_replaced(new_db):
    with open_store(new_db()) as s:
        s.create_experiment("e", "e", {}, 2)
        s.create_trials("e", [("a", {}), ("b", {})])
        with psycopg.connect(s.url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                "datname = current_database() AND application_name = 'dnnframe'"
            ).fetchall()
        assert killed and all(ok for (ok,) in killed)
        assert [r.id for r in s.claim_trials(["a", "b"], "w")] == ["a", "b"]
        assert s.get_experiment("e").counts == {"RUNNING": 2}


def test_a_call_waits_for_its_server_to_restart(private_cluster, monkeypatch):
    url, start, stop = private_cluster
    refused = threading.Event()
    real_pause = retrying.pause

    def pause(seconds: float) -> None:
        refused.set()
        real_pause(seconds)

    monkeypatch.setattr(retrying, "pause", pause)
    with open_store(url) as s:
        s.create_experiment("e", "e", {}, 2)
        s.create_trials("e", [("a", {}), ("b", {})])
        stop()  # ends the store's connection too
        answer: dict[str, Any] = {}
        call = threading.Thread(target=lambda: answer.update(won=s.claim_trials(["a", "b"], "w")))
        call.start()
        _wait_for(refused.is_set, "the call to find the server gone")
        start()
        call.join(timeout=120)
        assert [r.id for r in answer["won"]] == ["a", "b"]
        assert s.get_experiment("e").counts == {"RUNNING": 2}


def test_a_server_that_stays_away_is_retried_then_named(new_db, monkeypatch):
    """The database refuses every new connection (as a server gone for good would): the call
    waits the store_write policy's back-off, then says which server it could not reach."""
    slept: list[float] = []
    monkeypatch.setattr(retrying, "pause", slept.append)
    with open_store(new_db()) as s:
        s.create_experiment("e", "e", {}, 1)
        name = psycopg.conninfo.conninfo_to_dict(s.url)["dbname"]
        admin_url = psycopg.conninfo.make_conninfo(s.url, dbname="postgres")
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name = 'dnnframe'",
                (name,),
            )
            try:
                with pytest.raises(
                    StoreError,
                    match="PostgreSQL server unreachable.*not currently accepting connections",
                ):
                    s.create_trials("e", [("a", {})])
            finally:
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    assert slept == [0.2, 0.4, 0.8, 1.6, 3.0]


def test_a_writer_stopped_inside_its_transaction_does_not_hold_the_store(new_db, monkeypatch):
    """A writer that stops between the statements of a write (its host cut off, its process
    frozen) holds the change counter every write takes: the server ends its session after
    the idle-in-transaction limit, another writer goes on, and the stopped write, resumed,
    is retried on a new connection and applied once."""
    monkeypatch.setattr(postgresql_conn, "_IDLE_IN_TRANSACTION_S", 1)
    stopped, resume = threading.Event(), threading.Event()
    real_commit = psycopg.Connection.commit

    def commit(conn: psycopg.Connection) -> None:
        if threading.current_thread().name == "stopped-writer" and not resume.is_set():
            stopped.set()
            resume.wait(timeout=60)
        real_commit(conn)

    monkeypatch.setattr(psycopg.Connection, "commit", commit)
    url = new_db()
    with open_store(url) as s, open_store(url) as other:
        s.create_experiment("e", "e", {}, 2)
        writer = threading.Thread(
            target=lambda: s.create_trials("e", [("a", {})]), name="stopped-writer"
        )
        writer.start()
        _wait_for(stopped.is_set, "the writer to stop inside its transaction")
        done = threading.Thread(target=lambda: other.create_trials("e", [("b", {})]))
        done.start()
        done.join(timeout=60)
        assert not done.is_alive(), "the other writer waited for the stopped one"
        resume.set()
        writer.join(timeout=60)
        assert sorted(t.id for t in other.list_trials("e")) == ["a", "b"]


def test_threads_that_ended_leave_no_connection_behind(new_db):
    with open_store(new_db()) as s:
        s.create_experiment("e", "e", {}, 0)
        for _ in range(12):  # a thread per request, as a threaded web server runs
            t = threading.Thread(target=s.list_experiments)
            t.start()
            t.join(timeout=60)
        s.list_trials()  # this thread's connection; the ended threads' ones are closed
        with psycopg.connect(s.url, autocommit=True) as watch:
            _wait_for(
                lambda: (
                    watch.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND application_name = 'dnnframe'"
                    ).fetchone()[0]
                    <= 2
                ),
                "the ended threads' connections to close",
            )


def test_a_cursor_reader_never_passes_a_write_still_in_flight(new_db):
    with open_store(new_db()) as s:
        s.create_experiment("e", "e", {}, 2)
        s.create_trials("e", [("slow", {}), ("fast", {})])
        cursor = s.latest_seq()
        # Another writer has taken its seq and not committed yet.
        slow = psycopg.connect(s.url)
        slow.execute("UPDATE change_counter SET value = value + 1")
        slow.execute(
            "UPDATE trials SET state = 'CANCELLED', seq = (SELECT value FROM "
            "change_counter) WHERE id = 'slow'"
        )
        done = threading.Event()
        worker = threading.Thread(target=lambda: (s.claim_trial("fast", "w"), done.set()))
        worker.start()
        try:
            with psycopg.connect(s.url, autocommit=True) as watch:
                _wait_for(
                    lambda: (
                        watch.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock'"
                        ).fetchone()[0]
                        >= 1
                    ),
                    "the second writer to wait for the first",
                )
            # The later write has not landed ahead of the earlier one, and nothing is shown.
            assert not done.is_set()
            assert s.list_trials(since=cursor) == [] and s.latest_seq() == cursor
        finally:
            slow.commit()
            slow.close()
            worker.join(timeout=60)
        assert done.is_set()
        changed = s.list_trials(since=cursor)
        assert [(t.id, t.state) for t in changed] == [
            ("slow", TrialState.CANCELLED),
            ("fast", TrialState.RUNNING),
        ]
        assert changed[0].seq < changed[1].seq == s.latest_seq()


def test_a_store_used_across_fork_keeps_the_parents_connection(new_db):
    with open_store(new_db()) as s:
        s.create_experiment("e", "e", {}, 1)
        pid = os.fork()
        if pid == 0:  # the child writes through a connection of its own
            code = 0
            try:
                s.create_trials("e", [("from-child", {})])
            except BaseException:  # noqa: BLE001 - reported by the exit status
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert [t.id for t in s.list_trials()] == ["from-child"]  # the parent's still works


def test_schema_is_versioned_and_newer_ones_are_refused(new_db):
    url = new_db()
    with open_store(url) as s:
        s.create_experiment("e", "e", {}, 0)
    with psycopg.connect(url, autocommit=True) as c:
        assert [r[0] for r in c.execute("SELECT version FROM schema_version ORDER BY 1")] == [
            n for n, _ in schema.MIGRATIONS
        ]
        c.execute("INSERT INTO schema_version VALUES (%s, 0)", (schema.latest_version() + 1,))
    with pytest.raises(SchemaVersionError, match=r"schema version \d+, written by a newer"):
        open_store(url)


def test_a_new_migration_is_applied_once_to_an_existing_store(new_db, monkeypatch):
    url = new_db()
    with open_store(url) as s:
        s.create_experiment("e", "e", {}, 0)
    nxt = schema.latest_version() + 1
    monkeypatch.setattr(
        schema, "MIGRATIONS", [*schema.MIGRATIONS, (nxt, "ALTER TABLE trials ADD COLUMN note TEXT")]
    )
    for _ in range(2):  # the second open finds it applied
        with open_store(url) as s:
            assert s.get_experiment("e").name == "e"
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("SELECT max(version) FROM schema_version").fetchone()[0] == nxt
        assert (
            c.execute(
                "SELECT count(*) FROM information_schema.columns WHERE "
                "table_name = 'trials' AND column_name = 'note'"
            ).fetchone()[0]
            == 1
        )


def test_a_foreign_database_is_refused_untouched(new_db):
    url = new_db()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE users (id INT)")
    with pytest.raises(StoreCorruptError, match=r"other tables \(users\).*left untouched"):
        open_store(url)
    with psycopg.connect(url, autocommit=True) as c:
        assert [
            r[0]
            for r in c.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        ] == ["users"]


def test_unreachable_server_and_missing_database_are_named_without_password(new_db, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(retrying, "pause", slept.append)
    with pytest.raises(
        StoreError, match=r"postgresql://u:\*\*\*@127\.0\.0\.1:1/db.*unreachable"
    ) as e:
        open_store("postgresql://u:secret@127.0.0.1:1/db")
    assert "secret" not in str(e.value)
    assert slept == []  # refused at once: opening a store is not retried
    base = new_db().rsplit("/", 1)[0]
    with pytest.raises(StoreError, match=r"no store at .*dnnframe_test_missing.*does not exist"):
        open_store(base + "/dnnframe_test_missing", create=False)
    with pytest.raises(StoreError, match="not a valid PostgreSQL URL"):
        open_store("postgresql://host:notaport/db")
