"""A tpe spec POSTed to the dashboard's API: a driver thread fills the experiment."""

from __future__ import annotations

from test_driver import RAW, shaped_train

from dashboard import create_app
from dnnframe.executors.local import LocalExecutor
from dnnframe.search.background import DRIVERS
from dnnframe.store import TrialState


def test_a_posted_tpe_spec_is_driven_in_the_background(tmp_path, monkeypatch):
    monkeypatch.setenv("DNNFRAME_DATA_DIR", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    raw = {**RAW, "name": "served-tpe", "search": {**RAW["search"], "num_samples": 5}}
    with LocalExecutor(url, workers=1, train_fn=shaped_train) as ex:
        app = create_app({"TESTING": True, "STORE_URL": url, "EXECUTOR": ex})
        try:
            response = app.test_client().post("/api/v1/experiments", json=raw)
            assert response.status_code == 201, response.get_json()
            eid = response.get_json()["id"]
            assert response.get_json()["n_trials"] == 5
            assert DRIVERS.join(eid, timeout=300)
            store = app.extensions["dnnframe"].store
            trials = store.list_trials(eid)
            assert len(trials) == 5 and {t.state for t in trials} == {TrialState.COMPLETE}
            # the same spec again while nothing runs: a new driver finds the budget spent
            again = app.test_client().post("/api/v1/experiments", json=raw)
            assert again.status_code == 200 and again.get_json()["new_trials"] == 0
            assert DRIVERS.join(eid, timeout=300)
            assert len(store.list_trials(eid)) == 5
        finally:
            app.extensions["dnnframe"].shutdown()
