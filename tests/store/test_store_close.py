"""Closing a store while other threads of the process still read it (a web server's change
feed, a heartbeat thread) ends their reads with a StoreError, never a crash: the SQLite and
PostgreSQL stores close a connection only when no thread is using it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Many rounds of: a store with trials, four threads listing them as fast as they can, the
# store closed under them. Run in a process of its own: a connection closed under a
# running query crashes the interpreter (SIGSEGV), which must not take the test run along.
RACE = textwrap.dedent("""
    import sys, threading
    from dnnframe.exceptions import StoreError
    from dnnframe.store import open_store
    from dnnframe.states import TrialState

    url, rounds = sys.argv[1], int(sys.argv[2])
    with open_store(url) as s:
        s.create_experiment("e", "race", {}, n_trials=200)
        s.create_trials("e", [(f"t{k}", {"seed": k}) for k in range(200)])
    ended = {"error": 0, "other": 0}
    for _ in range(rounds):
        store = open_store(url, create=False)
        reading = threading.Barrier(5)  # every reader has its connection and reads on

        def read():
            try:
                store.list_trials("e")
                reading.wait()
                while True:
                    store.list_trials("e")
            except StoreError:
                ended["error"] += 1
            except Exception as exc:
                ended["other"] += 1
                print("unexpected:", type(exc).__name__, exc, file=sys.stderr)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        reading.wait()
        store.close()
        for t in threads:
            t.join(30)
    print(ended["error"], ended["other"])
""")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_closing_a_store_under_reading_threads_ends_their_reads_cleanly(url, backend):
    rounds = 40 if backend == "sqlite" else 10
    done = subprocess.run(
        [sys.executable, "-c", RACE, url, str(rounds)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-3000:]}"
    errors, other = map(int, done.stdout.split())
    assert (errors, other) == (4 * rounds, 0), done.stderr[-3000:]
