"""MongoDB-specific behaviour: URLs, schema document, foreign databases, hiccup retries."""

from __future__ import annotations

import threading

import mongomock
import pytest
from pymongo.errors import AutoReconnect
from store_support import MONGODB_URL
from tiers import skip_optional

from dnnframe.exceptions import SchemaVersionError, StoreCorruptError, StoreError
from dnnframe.store import SCHEMA_VERSION, TrialState, open_store
from dnnframe.store.mongodb import redact


def test_real_mongodb_server():
    """The contract suite runs against a real server only when one is configured."""
    if not MONGODB_URL:
        skip_optional(
            "no MongoDB server can be installed on this machine; set "
            "DNNFRAME_TEST_MONGODB_URL=mongodb://host:27017 to run the whole contract "
            "suite and the multi-process test against a real server"
        )
    s = open_store(MONGODB_URL.rstrip("/") + "/dnnframe_test_ping")
    try:
        assert s.list_experiments(limit=1) is not None
    finally:
        s._db.client.drop_database("dnnframe_test_ping")
        s.close()


def test_unreachable_server_names_url_without_password(monkeypatch):
    monkeypatch.setenv("DNNFRAME_MONGO_TIMEOUT_S", "0.3")
    with pytest.raises(
        StoreError, match=r"mongodb://user:\*\*\*@127\.0\.0\.1:1/db.*unreachable"
    ) as e:
        open_store("mongodb://user:secret@127.0.0.1:1/db")
    assert "secret" not in str(e.value)


def test_invalid_mongodb_url():
    with pytest.raises(StoreError, match="not a valid MongoDB URL"):
        open_store("mongodb://host:notaport/db")


def test_redact():
    assert redact("mongodb://u:p@h/db") == "mongodb://u:***@h/db"
    assert redact("mongodb://h/db") == "mongodb://h/db"


def test_same_mongomock_url_shares_data():
    a = open_store("mongomock://localhost/shared_case")
    a.create_experiment("e", "e", {}, 0)
    b = open_store("mongomock://localhost/shared_case")
    assert b.get_experiment("e").name == "e"


def test_newer_schema_refused():
    url = "mongomock://localhost/newer_schema"
    s = open_store(url)
    s._db.meta.update_one({"_id": "schema"}, {"$set": {"version": SCHEMA_VERSION + 1}})
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}.*newer"):
        open_store(url)


def test_foreign_database_refused_untouched():
    url = "mongomock://localhost/someone_elses"
    s = open_store("mongomock://localhost/placeholder")
    db = s._db.client["someone_elses"]
    db.users.insert_one({"_id": 1, "name": "ada"})
    with pytest.raises(StoreCorruptError, match=r"other collections \(users\)"):
        open_store(url)
    assert db.list_collection_names() == ["users"]


def test_autoreconnect_is_retried(monkeypatch):
    s = open_store("mongomock://localhost/hiccup")
    s.create_experiment("e", "e", {}, 1)
    s.create_trials("e", [("t", {})])
    real = mongomock.collection.Collection.update_one
    failures = {"left": 2}

    def flaky(self, *args, **kwargs):
        if self.name == "trials" and failures["left"]:
            failures["left"] -= 1
            raise AutoReconnect("primary stepped down")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(mongomock.collection.Collection, "update_one", flaky)
    rec = s.claim_trial("t", "w")
    assert rec is not None and rec.state is TrialState.RUNNING and failures["left"] == 0
    # the seq blocks of the failed attempts hold no reader back
    assert s._db.counters.find_one({"_id": "seq"})["inflight"] == []
    assert s.latest_seq() == rec.seq


def test_persistent_outage_becomes_store_error(monkeypatch):
    s = open_store("mongomock://localhost/outage")
    s.create_experiment("e", "e", {}, 0)

    def down(self, *args, **kwargs):
        raise AutoReconnect("connection refused")

    monkeypatch.setattr("dnnframe.retrying.pause", lambda s: None)
    monkeypatch.setattr(mongomock.collection.Collection, "find_one", down)
    with pytest.raises(
        StoreError, match="mongomock://localhost/outage.*unreachable after 6 attempts"
    ):
        s.get_experiment("e")


def test_batch_writes_without_order_field_still_get_one_seq_per_trial():
    # documents written before trials carried ``order`` are numbered one by one
    s = open_store("mongomock://localhost/no_order_field")
    s.create_experiment("e", "e", {}, 5)
    s.create_trials("e", [(f"t{i}", {}) for i in range(5)])
    s._db.trials.update_many({}, {"$unset": {"order": ""}})
    cursor = s.latest_seq()
    assert s.cancel_experiment("e") == 5
    changed = s.list_trials(since=cursor)
    assert len(changed) == 5 and len({t.seq for t in changed}) == 5
    assert {t.state for t in changed} == {TrialState.CANCELLED}


def _stall_first_finish(s, monkeypatch):
    """Make the next ``finish_trials`` of the calling thread stop after it reserved its seq
    and before its write lands, until the returned event is set (a slow writer)."""
    reserved, release = threading.Event(), threading.Event()
    real = s._update_all
    owner: dict[str, int | None] = {"thread": None}

    def slow(ops):
        if threading.get_ident() == owner["thread"]:
            reserved.set()
            assert release.wait(30)
        return real(ops)

    monkeypatch.setattr(s, "_update_all", slow)
    return owner, reserved, release


def test_a_write_in_flight_holds_back_the_cursor_so_no_reader_skips_it(monkeypatch):
    # Writer A reserves seq n, then stalls; writer B takes n+1 and lands first. A reader
    # must not be handed B (and jump past n) before A's write is visible.
    s = open_store("mongomock://localhost/inflight")
    s.create_experiment("e", "e", {}, 2)
    s.create_trials("e", [("a", {}), ("b", {})])
    s.claim_trials(["a", "b"], "w")
    cursor = s.latest_seq()
    owner, reserved, release = _stall_first_finish(s, monkeypatch)

    def writer_a():
        owner["thread"] = threading.get_ident()
        s.finish_trials([("a", TrialState.COMPLETE, {"who": "a"}, None)], worker="w")

    slow = threading.Thread(target=writer_a)
    slow.start()
    assert reserved.wait(30)
    assert s.finish_trial("b", TrialState.COMPLETE, result={"who": "b"}, worker="w")
    assert s.get_trial("b").seq > s._db.counters.find_one({"_id": "seq"})["inflight"][0]["first"]
    assert s.list_trials(since=cursor) == []  # b waits behind a's write in flight
    assert s.latest_seq() == cursor
    release.set()
    slow.join()
    changed = s.list_trials(since=cursor)
    assert [t.id for t in changed] == ["a", "b"]
    assert {t.state for t in changed} == {TrialState.COMPLETE}
    assert s.latest_seq() == changed[-1].seq


def test_an_abandoned_seq_block_stops_holding_readers_back(monkeypatch):
    s = open_store("mongomock://localhost/abandoned")
    s.create_experiment("e", "e", {}, 1)
    s.create_trials("e", [("t", {})])
    cursor = s.latest_seq()
    first = s._seq._reserve(1)  # a writer that died right after reserving
    assert s.claim_trial("t", "w") is not None
    assert s.list_trials(since=cursor) == [] and s.latest_seq() == first - 1
    monkeypatch.setattr(s._seq, "_ttl", 0.0)
    assert [t.id for t in s.list_trials(since=cursor)] == ["t"]
    assert s._db.counters.find_one({"_id": "seq"})["inflight"] == []  # swept


def test_take_dispatch_gives_back_what_it_took_when_the_server_drops_mid_way(monkeypatch):
    """A connection lost after some entries were deleted must not lose them: they are held
    again and the call fails (a whole-call retry would return only the later ones)."""
    s = open_store("mongomock://localhost/take_dispatch_drop")
    s.hold_dispatch([("t1", "default.retry"), ("t2", "default.retry"), ("t3", "gpu.retry")])
    collection = type(s._db.held_dispatch)
    real, calls = collection.find_one_and_delete, []

    def flaky(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise AutoReconnect("connection reset")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(collection, "find_one_and_delete", flaky)
    with pytest.raises(StoreError, match="connection reset"):
        s.take_dispatch()
    monkeypatch.undo()
    assert sorted(s.take_dispatch()) == [
        ("t1", "default.retry"),
        ("t2", "default.retry"),
        ("t3", "gpu.retry"),
    ]
