"""Notes on experiments and trials, on every backend: kept across reopening the store,
bounded and checked, numbered so a stale save is refused instead of overwriting a newer
one, never touching results, gone with what they were about, and written by many threads
and processes at once without losing any. Time is the store's ``now``, a clock the test
sets."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading

import pytest
from store_support import MONGODB_URL

from dnnframe.exceptions import NoteConflictError, NotFoundError
from dnnframe.store import MAX_NOTE_CHARS, NoteRecord, TrialState, open_store, postgresql_schema
from dnnframe.store import notes as notes_module


@pytest.fixture
def clock(monkeypatch):
    """The notes' clock, at 1000.0 until a test moves it."""
    t = [1000.0]
    monkeypatch.setattr(notes_module, "now", lambda: t[0])
    return t


def _experiment(store, eid: str = "e", trials: tuple[str, ...] = ("t0", "t1")) -> None:
    store.create_experiment(eid, eid, {"spec": eid}, len(trials))
    store.create_trials(eid, [(t, {"seed": i}) for i, t in enumerate(trials)])


def test_a_note_is_empty_until_written_then_replaced_whole(store, clock):
    _experiment(store)
    assert store.experiment_note("e") == NoteRecord("", 0, None)
    assert store.trial_note("t0") == NoteRecord("", 0, None)
    text = "# Findings\n\n- width 8 **beats** 4\n\ttabbed, é, 日本, 🙂\r\n"
    assert store.set_experiment_note("e", text) == NoteRecord(text, 1, 1000.0)
    clock[0] = 1005.0
    assert store.set_experiment_note("e", "shorter") == NoteRecord("shorter", 2, 1005.0)
    assert store.experiment_note("e") == NoteRecord("shorter", 2, 1005.0)
    assert store.set_trial_note("t0", "odd curve", expected_version=0) == NoteRecord(
        "odd curve", 1, 1005.0
    )
    assert store.trial_note("t1") == NoteRecord()  # each trial has its own
    clock[0] = 1010.0
    assert store.set_experiment_note("e", "", expected_version=2) == NoteRecord("", 3, 1010.0)


def test_notes_are_kept_by_the_store_for_the_next_reader(url, clock):
    with open_store(url) as s:
        _experiment(s)
        s.set_experiment_note("e", "kept")
        s.set_trial_note("t1", "kept too")
    with open_store(url, create=False) as s:
        assert s.experiment_note("e") == NoteRecord("kept", 1, 1000.0)
        assert s.trial_note("t1") == NoteRecord("kept too", 1, 1000.0)


def test_saving_the_text_a_note_holds_changes_nothing(store, clock):
    _experiment(store)
    first = store.set_experiment_note("e", "same", expected_version=0)
    clock[0] = 2000.0
    # a save repeated after a lost answer, from the version it started from: not a conflict
    assert store.set_experiment_note("e", "same", expected_version=0) == first
    assert store.set_experiment_note("e", "same") == first == NoteRecord("same", 1, 1000.0)
    assert store.set_trial_note("t0", "") == NoteRecord()  # empty stays never written


def test_a_save_from_a_stale_version_is_refused_and_changes_nothing(store):
    _experiment(store)
    store.set_experiment_note("e", "mine", expected_version=0)
    store.set_experiment_note("e", "theirs", expected_version=1)
    for stale in (0, 1, 7):
        with pytest.raises(NoteConflictError, match="saved by someone else") as caught:
            store.set_experiment_note("e", "mine again", expected_version=stale)
        assert caught.value.current_version == 2
    assert store.experiment_note("e").text == "theirs"
    with pytest.raises(NoteConflictError) as caught:  # expecting a note where none is yet
        store.set_trial_note("t0", "x", expected_version=3)
    assert caught.value.current_version == 0 and store.trial_note("t0") == NoteRecord()
    assert store.set_experiment_note("e", "last word").version == 3  # no version: it wins


def test_unknown_experiments_and_trials_are_not_found_and_get_no_note(store):
    _experiment(store)
    for call in (
        lambda: store.experiment_note("nope"),
        lambda: store.set_experiment_note("nope", "x"),
        lambda: store.trial_note("nope"),
        lambda: store.set_trial_note("nope", "x", expected_version=0),
    ):
        with pytest.raises(NotFoundError, match="'nope' not found"):
            call()
    # an experiment id is no trial id, and the reverse
    with pytest.raises(NotFoundError, match="trial 'e'"):
        store.set_trial_note("e", "x")
    with pytest.raises(NotFoundError, match="experiment 't0'"):
        store.set_experiment_note("t0", "x")
    store.create_experiment("nope", "later", {}, 0)
    assert store.experiment_note("nope") == NoteRecord()


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "note text must be a string, got NoneType"),
        (42, "note text must be a string, got int"),
        ("x" * (MAX_NOTE_CHARS + 1), f"at most {MAX_NOTE_CHARS:,} characters, got 10,001"),
        ("a\x00b", r"control characters .* got '\\x00' at character 2"),
        ("bell\x07", r"got '\\x07' at character 5"),
        ("\x1b[31m", "control characters"),
        ("del\x7f", "control characters"),
        ("half \ud800 a pair", "lone surrogate at character 6"),
    ],
)
def test_a_bad_text_is_refused_by_name(store, text, message):
    _experiment(store)
    with pytest.raises(ValueError, match=message):
        store.set_experiment_note("e", text)
    with pytest.raises(ValueError, match=message):
        store.set_trial_note("t0", text)
    assert store.experiment_note("e") == store.trial_note("t0") == NoteRecord()


@pytest.mark.parametrize("version", [-1, True, 1.0, "1", 2**53])
def test_a_bad_expected_version_is_refused_by_name(store, version):
    _experiment(store)
    with pytest.raises(ValueError, match="note version must be an integer from 0"):
        store.set_experiment_note("e", "x", expected_version=version)


def test_empty_ids_are_refused_by_name(store):
    with pytest.raises(ValueError, match="experiment_id must be a non-empty string"):
        store.experiment_note("")
    with pytest.raises(ValueError, match="trial_id must be a non-empty string"):
        store.set_trial_note("", "x")


def test_the_longest_note_is_kept_whole(store):
    _experiment(store)
    text = ("é" * 99 + "\n") * (MAX_NOTE_CHARS // 100)
    assert len(text) == MAX_NOTE_CHARS
    store.set_trial_note("t0", text)
    assert store.trial_note("t0").text == text


def test_notes_leave_trials_results_and_the_change_cursor_alone(store):
    _experiment(store)
    store.claim_trial("t0", "w")
    store.append_metrics("t0", {"epoch": 1, "val_loss": 0.5}, worker="w")
    store.finish_trial("t1", TrialState.CANCELLED)
    before = [store.get_trial(t) for t in ("t0", "t1")]
    exp_before = store.get_experiment("e")
    cursor = store.latest_seq()
    store.set_trial_note("t0", "running: looks fine")
    store.set_trial_note("t1", "cancelled on purpose")
    store.set_experiment_note("e", "half done")
    assert [store.get_trial(t) for t in ("t0", "t1")] == before
    assert store.get_experiment("e") == exp_before
    assert store.latest_seq() == cursor and store.list_trials(since=cursor) == []
    # the owner still finishes its trial as if nothing happened
    assert store.finish_trial("t0", TrialState.COMPLETE, result={"metrics": {}}, worker="w")


def test_deleting_an_experiment_deletes_its_notes_and_those_of_trials_it_takes(store):
    _experiment(store, "a", ("only-a", "shared"))
    _experiment(store, "b", ("shared",))
    for eid in ("a", "b"):
        store.set_experiment_note(eid, f"about {eid}")
    for tid in ("only-a", "shared"):
        store.set_trial_note(tid, f"about {tid}")
    store.cancel_experiment("a")
    store.cancel_experiment("b")
    assert store.delete_experiment("a") == 1
    assert store.trial_note("shared").text == "about shared"  # b's too: it stays
    assert store.experiment_note("b").text == "about b"
    # submitted again, the same ids start without the old notes
    _experiment(store, "a", ("only-a",))
    assert store.experiment_note("a") == NoteRecord()
    assert store.trial_note("only-a") == NoteRecord()


def test_threads_writing_different_notes_lose_none(store, atomic_operations):
    trials = tuple(f"t{k}" for k in range(6))
    _experiment(store, "e", trials)
    rounds = 5
    barrier = threading.Barrier(len(trials) + 1)
    failures: list[BaseException] = []

    def writer(target: str) -> None:
        try:
            barrier.wait()
            for r in range(rounds):
                if target == "e":
                    store.set_experiment_note("e", f"e round {r}", expected_version=r)
                else:
                    store.set_trial_note(target, f"{target} round {r}", expected_version=r)
        except BaseException as e:  # noqa: BLE001 - reported below, in the test's thread
            failures.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("e", *trials)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert (store.experiment_note("e").text, store.experiment_note("e").version) == (
        f"e round {rounds - 1}",
        rounds,
    )
    for tid in trials:
        note = store.trial_note(tid)
        assert (note.text, note.version) == (f"{tid} round {rounds - 1}", rounds)


def test_of_threads_saving_one_note_from_one_version_exactly_one_wins(store, atomic_operations):
    _experiment(store)
    n = 6
    barrier = threading.Barrier(n)
    won: list[str] = []
    refused: list[int] = []

    def saver(k: int) -> None:
        barrier.wait()
        try:
            store.set_trial_note("t0", f"from {k}", expected_version=0)
            won.append(f"from {k}")
        except NoteConflictError as e:
            refused.append(e.current_version)

    threads = [threading.Thread(target=saver, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and refused == [1] * (n - 1)
    assert store.trial_note("t0") == NoteRecord(won[0], 1, store.trial_note("t0").updated_at)


def _save_in_process(url: str, k: int, barrier, out) -> None:  # noqa: ANN001
    with open_store(url) as s:
        barrier.wait()
        try:
            s.set_experiment_note("e", f"from process {k}", expected_version=0)
            out.put((k, True))
        except NoteConflictError:
            out.put((k, False))
        s.set_trial_note(f"t{k}", f"process {k} was here")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"] + (["mongodb"] if MONGODB_URL else []))
def test_processes_saving_at_once_lose_nothing_and_one_first_save_wins(url, backend):
    n = 3
    with open_store(url) as s:
        _experiment(s, "e", tuple(f"t{k}" for k in range(n)))
    ctx = mp.get_context("spawn")  # fresh interpreters: nothing shared but the store
    out, barrier = ctx.Queue(), ctx.Barrier(n)
    procs = [ctx.Process(target=_save_in_process, args=(url, k, barrier, out)) for k in range(n)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    winners = [k for k, won in results.items() if won]
    assert len(winners) == 1
    with open_store(url) as s:
        assert s.experiment_note("e").text == f"from process {winners[0]}"
        assert [s.trial_note(f"t{k}").text for k in range(n)] == [
            f"process {k} was here" for k in range(n)
        ]


def test_a_sqlite_store_from_before_notes_gets_them_when_opened(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with open_store(url) as s:
        _experiment(s)
        s.claim_trial("t0", "w")
    with sqlite3.connect(tmp_path / "old.db") as c:  # the layout of a store made before notes
        c.execute("DROP TABLE experiment_notes")
        c.execute("DROP TABLE trial_notes")
    with open_store(url, create=False) as s:
        assert s.get_trial("t0").state == TrialState.RUNNING
        assert s.experiment_note("e") == NoteRecord()
        s.set_trial_note("t0", "written into an upgraded file")
    with open_store(url, create=False) as s:
        assert s.trial_note("t0").text == "written into an upgraded file"


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_postgresql_store_from_before_notes_is_migrated_when_opened(url, backend, monkeypatch):
    before_notes = [m for m in postgresql_schema.MIGRATIONS if m[0] < 3]
    with monkeypatch.context() as m:  # the dnnframe of before: its migrations only
        m.setattr(postgresql_schema, "MIGRATIONS", before_notes)
        with open_store(url) as s:
            _experiment(s)
            s.claim_trial("t0", "w")
    with open_store(url, create=False) as s:
        assert s.get_trial("t0").state == TrialState.RUNNING
        assert s.experiment_note("e") == NoteRecord()
        s.set_trial_note("t0", "written into an upgraded database")
    with open_store(url, create=False) as s:
        assert s.trial_note("t0").text == "written into an upgraded database"
