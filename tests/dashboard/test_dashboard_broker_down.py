"""A sweep submitted while the broker cannot be reached: the API answers 503 at once and
the trials are kept, held in the store until a broker takes them."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import kombu.utils.functional
import pytest
from dashboard_support import TINY_SPEC

from dnnframe.store import TrialState


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A local port bound but never listened on: connections to it are refused, and no other
    process can start listening there while the test runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_submit_with_broker_unreachable_is_503_and_trials_are_held(
    make_app, dead_port: int, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("DNNFRAME_BROKER_URL", f"amqp://someone:s3cret-pw@127.0.0.1:{dead_port}//")
    app = make_app(EXECUTOR=None)  # the executor the environment configures: Celery
    # kombu's waits between connection attempts, recorded instead of slept: what the
    # request waits by design, whatever the machine's load
    waits: list[float] = []
    with monkeypatch.context() as patched:
        patched.setattr(kombu.utils.functional, "sleep", waits.append)
        response = app.test_client().post("/api/v1/experiments", json=TINY_SPEC)

    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.headers["Retry-After"] == "30"
    body = response.get_json()
    assert set(body) == {"status", "error", "message"} and body["status"] == 503
    message = body["message"]
    assert f"the broker amqp://someone:**@127.0.0.1:{dead_port}//" in message
    assert "\n" not in message
    assert "s3cret-pw" not in json.dumps(body)
    # a prompt answer, not the minute of retries a client gives up on
    assert sum(waits) < 5, waits

    store = app.extensions["dnnframe"].store
    (experiment,) = store.list_experiments()
    queued = store.list_trials(experiment.id, state=TrialState.QUEUED)
    assert len(queued) == 4 == experiment.n_trials
    assert sorted(store.take_dispatch()) == sorted((t.id, "default") for t in queued)
