"""Compressed responses: the API's JSON and the static files come compressed to a client that
accepts it and decompress to what an uncompressed client gets; an event stream is never
compressed, so each event still arrives as it happens."""

from __future__ import annotations

import gzip
import queue
import threading
from pathlib import Path

import pytest
import requests
from dashboard_support import next_event, read_events

from dashboard import create_app
from dnnframe.store.base import TrialState

GRID = {
    "name": "large",
    "dataset": {"name": "iris"},
    "model": {
        "hidden_layers": {"grid": [1, 2, 3, 4]},
        "width": {"grid": [4, 8, 16, 32]},
        "activation": {"grid": ["relu", "tanh", "elu"]},
    },
    "training": {"max_epochs": 30, "learning_rate": 0.01},
    "search": {"seeds": 2},
}


def _finish_with_histories(store, exp_id: str, epochs: int = 30) -> None:
    ids = [t.id for t in store.list_trials(exp_id)]
    assert len(store.claim_trials(ids, "w1")) == len(ids)
    for epoch in range(1, epochs + 1):
        store.append_metrics_many(
            {
                tid: {
                    "epoch": epoch,
                    "val_accuracy": epoch / (epochs + i),
                    "val_loss": 1 - epoch / (epochs + i),
                }
                for i, tid in enumerate(ids)
            },
            worker="w1",
        )
    for tid in ids:
        assert store.finish_trial(
            tid,
            TrialState.COMPLETE,
            worker="w1",
            result={"metrics": {"test_accuracy": 0.9, "test_loss": 0.1}, "epochs_run": epochs},
        )


def test_a_large_trial_list_is_gzip_when_asked_and_the_same_decompressed(client, store):
    exp_id = client.post("/api/v1/experiments", json=GRID).json["id"]
    _finish_with_histories(store, exp_id)
    url = f"/api/v1/experiments/{exp_id}/trials?history=1"
    plain = client.get(url, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    assert len(plain.data) > 200_000 and len(plain.json["trials"]) == 96
    packed = client.get(url, headers={"Accept-Encoding": "gzip"})
    assert packed.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in packed.headers["Vary"]
    assert int(packed.headers["Content-Length"]) == len(packed.data) < len(plain.data) / 5
    assert gzip.decompress(packed.data) == plain.data
    # a browser's usual header: the best encoding both sides have, decoded the same
    best = client.get(url, headers={"Accept-Encoding": "gzip, deflate, br, zstd"})
    assert best.headers["Content-Encoding"] == "zstd"


@pytest.mark.parametrize(
    "path", ["/static/experiment-charts.js", "/static/style.css", "/vendor/plotly.min.js"]
)
def test_static_files_are_compressed_and_revalidate_against_the_compressed_etag(client, path):
    plain = client.get(path, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    packed = client.get(path, headers={"Accept-Encoding": "gzip"})
    assert packed.status_code == 200 and packed.headers["Content-Encoding"] == "gzip"
    body = packed.get_data()
    assert gzip.decompress(body) == plain.data and len(body) < len(plain.data) / 2
    again = client.get(
        path, headers={"Accept-Encoding": "gzip", "If-None-Match": packed.headers["ETag"]}
    )
    assert again.status_code == 304


def test_an_event_stream_is_never_compressed_and_delivers_each_event(client, store):
    exp_id = client.post("/api/v1/experiments", json=GRID).json["id"]
    cursor = store.latest_seq()
    r = client.get(
        f"/api/v1/experiments/{exp_id}/events?since={cursor}",
        buffered=False,
        headers={"Accept-Encoding": "gzip, deflate, br, zstd"},
    )
    assert r.status_code == 200 and r.mimetype == "text/event-stream"
    assert "Content-Encoding" not in r.headers
    events = read_events(r)
    assert next_event(events).startswith("event: change")
    trial = store.list_trials(exp_id)[0].id
    assert store.claim_trial(trial, "w1")
    assert next_event(events).startswith("event: trials")
    client.application.extensions["dnnframe"].feed.close()
    assert next_event(events) == ""


def test_an_event_stream_over_a_real_socket_flushes_each_event(tmp_path: Path, data_dir):
    from dashboard_support import RecordingExecutor, serving

    app = create_app(
        {
            "STORE_URL": f"sqlite:///{tmp_path / 'events.db'}",
            "EXECUTOR": RecordingExecutor(),
            "ALLOWED_HOSTS": "127.0.0.1",
        }
    )
    store = app.extensions["dnnframe"].store
    try:
        with serving(app) as base:
            exp_id = requests.post(base + "/api/v1/experiments", json=GRID, timeout=30).json()["id"]
            cursor = store.latest_seq()
            r = requests.get(
                f"{base}/api/v1/experiments/{exp_id}/events?since={cursor}",
                stream=True,
                timeout=30,
                headers={"Accept-Encoding": "gzip, deflate, br, zstd"},
            )
            assert "Content-Encoding" not in r.headers
            lines: queue.Queue = queue.Queue()

            def read() -> None:  # the two events this test waits for, then no more
                for line in r.iter_lines(chunk_size=1, decode_unicode=True):
                    if line.startswith("event:"):
                        lines.put(line)
                        if line == "event: trials":
                            return

            threading.Thread(target=read, daemon=True).start()
            assert lines.get(timeout=20) == "event: change"
            # a change while the stream is open arrives on its own, not held for more
            assert store.claim_trial(store.list_trials(exp_id)[0].id, "w1")
            assert lines.get(timeout=20) == "event: trials"
            r.close()
    finally:
        app.extensions["dnnframe"].shutdown()
