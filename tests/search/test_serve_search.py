"""A tpe spec POSTed to the dashboard's API is only stored; a driver service (in this
process, on a thread, as ``dnnframe drive`` runs it) takes its lease and fills it. Two
services never drive one experiment, and a driver whose lease is taken over asks nothing
more."""

from __future__ import annotations

import threading
import time

import pytest
from test_driver import RAW, shaped_train

from dashboard import create_app
from dnnframe.executors.local import LocalExecutor
from dnnframe.search.driver import SearchDriver
from dnnframe.search.lease import LeaseKeeper, driver_lease_name
from dnnframe.search.service import DriverService, unfinished_driven
from dnnframe.spec import parse_spec
from dnnframe.store import TrialState, open_store
from dnnframe.testing.packs import one_by_one


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class Running:
    """A DriverService polling on a thread until stopped."""

    def __init__(self, service: DriverService):
        self.service, self.stop = service, threading.Event()
        self.thread = threading.Thread(target=service.serve, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive()


def test_a_posted_tpe_spec_is_stored_and_a_driver_service_fills_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DNNFRAME_DATA_DIR", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    raw = {**RAW, "name": "served-tpe", "search": {**RAW["search"], "num_samples": 5}}
    app = create_app({"TESTING": True, "STORE_URL": url})
    store = open_store(url)
    try:
        response = app.test_client().post("/api/v1/experiments", json=raw)
        assert response.status_code == 201, response.get_json()
        eid = response.get_json()["id"]
        assert response.get_json()["n_trials"] == 5
        # the web tier started nothing: no executor, no trial, no lease
        assert not app.extensions["dnnframe"].has_executor
        assert store.list_trials(eid) == [] and store.get_lease(driver_lease_name(eid)) is None
        with LocalExecutor(url, workers=1, train_fn=one_by_one(shaped_train)) as ex:
            running = Running(
                DriverService(store, lambda: ex, owner="svc:1", ttl_s=30, poll_s=0.05)
            )
            try:
                _wait(lambda: store.counts_by_state(eid)["COMPLETE"] == 5, 300, "5 trials")
                _wait(lambda: not running.service.driving, 60, "the driver to end")
            finally:
                running.close()
        trials = store.list_trials(eid)
        assert len(trials) == 5 and {t.state for t in trials} == {TrialState.COMPLETE}
        assert store.get_lease(driver_lease_name(eid)) is None  # released when done
        # the same spec again once done: stored as it is, nothing to drive
        again = app.test_client().post("/api/v1/experiments", json=raw)
        assert again.status_code == 200 and again.get_json()["new_trials"] == 0
        assert DriverService(store, lambda: ex, owner="svc:2").poll() == []
    finally:
        app.extensions["dnnframe"].shutdown()
        store.close()


def test_a_service_leaves_an_experiment_whose_lease_another_holds(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    spec = parse_spec({**RAW, "search": {**RAW["search"], "num_samples": 3}})
    store = open_store(url)
    store.create_experiment(spec.experiment_id, spec.name, spec.to_dict(), 3)
    assert store.acquire_lease(driver_lease_name(spec.experiment_id), "elsewhere:7", 60)
    made = []
    service = DriverService(store, lambda: made.append(1), owner="svc:1", ttl_s=60)
    assert service.poll() == [] and made == []  # no driver, not even an executor
    store.release_lease(driver_lease_name(spec.experiment_id), "elsewhere:7")
    store.close()


def test_a_driver_that_loses_its_lease_asks_nothing_more(tmp_path, monkeypatch):
    monkeypatch.setenv("DNNFRAME_DATA_DIR", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'lost.db'}"
    spec = parse_spec({**RAW, "search": {**RAW["search"], "num_samples": 12}})
    store = open_store(url)
    name = driver_lease_name(spec.experiment_id)
    lease = LeaseKeeper(store, name, "first:1", ttl_s=60)
    assert lease.acquire()
    asked_after_loss = []

    def keep_going() -> bool:
        held = lease.held
        if store.counts_by_state(spec.experiment_id)["COMPLETE"] >= 2 and held:
            # another owner takes the lease over (as after an expiry); the keeper learns it
            # at its next renewal, which this test makes at once
            store.release_lease(name, "first:1")
            assert store.acquire_lease(name, "second:2", 60)
            assert not lease._renew()
            held = lease.held
        if not held:
            asked_after_loss.append(True)
        return held

    with LocalExecutor(url, workers=1, train_fn=one_by_one(shaped_train)) as ex:
        result = SearchDriver(spec, store, ex, keep_going=keep_going).run()
    lease.release()
    assert result.stopped and not result.finished
    assert asked_after_loss == [True]  # asked once more, answered no, and stopped
    assert len(result.asked) < 12 and len(store.list_trials(spec.experiment_id)) == len(
        result.asked
    )
    assert store.get_lease(name).owner == "second:2"  # the old holder's release left it alone
    store.close()


def test_resubmitting_a_cancelled_search_lifts_the_cancel_for_the_service(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    raw = {**RAW, "name": "cancelled-tpe", "search": {**RAW["search"], "num_samples": 3}}
    app = create_app({"TESTING": True, "STORE_URL": url})
    store = open_store(url)
    try:
        client = app.test_client()
        eid = client.post("/api/v1/experiments", json=raw).get_json()["id"]
        assert [s.experiment_id for s in unfinished_driven(store)] == [eid]
        assert client.post(f"/api/v1/experiments/{eid}/cancel").status_code == 200
        assert unfinished_driven(store) == []  # a cancelled search is not driven
        assert client.post("/api/v1/experiments", json=raw).status_code == 200
        assert [s.experiment_id for s in unfinished_driven(store)] == [eid]
    finally:
        app.extensions["dnnframe"].shutdown()
        store.close()
