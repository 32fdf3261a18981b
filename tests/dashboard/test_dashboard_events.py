"""Server-sent events: a stream carries its experiment's changed trials (and nothing of other
experiments), a server at its stream limit refuses with 503, and a page follows a stream or,
refused, polls."""

from __future__ import annotations

import json
import queue
import threading
import time

import pytest
import requests
from dashboard_support import TINY_SPEC, browser, serving

from dnnframe.store.base import TrialState

OTHER = {**TINY_SPEC, "name": "other", "model": {"hidden_layers": 3, "width": 4},
         "search": {"seeds": 1}}


def _events(response) -> queue.Queue:
    """Parsed events of a streamed response, read by a thread (so waits can be bounded)."""
    out: queue.Queue = queue.Queue()

    def read() -> None:
        buffer = ""
        for chunk in response.response:
            buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                out.put(block)
        out.put(None)  # the stream ended

    threading.Thread(target=read, daemon=True).start()
    return out


def _next_event(events: queue.Queue, timeout: float = 20.0) -> str:
    """The next event (keep-alive comments skipped), waiting at most ``timeout`` in all;
    "" once the stream ended."""
    deadline = time.monotonic() + timeout
    while True:
        block = events.get(timeout=max(0.0, deadline - time.monotonic()))
        if block is None:
            return ""
        if block.startswith("event:"):
            return block


def test_a_stream_announces_changes_of_its_experiment_only(client, store):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    other = client.post("/api/v1/experiments", json=OTHER).json["id"]
    cursor = store.latest_seq()
    r = client.get(f"/api/v1/experiments/{exp_id}/events?since={cursor}", buffered=False)
    assert r.status_code == 200 and r.mimetype == "text/event-stream"
    events = _events(r)
    assert _next_event(events) == f'event: change\ndata: {{"cursor": {cursor}}}'
    # a change of another experiment says nothing here; one of this experiment comes with
    # the changed trial and the experiment's counts
    assert store.claim_trial(store.list_trials(other)[0].id, "w1")
    trial = store.list_trials(exp_id)[0].id
    assert store.claim_trial(trial, "w1")
    name, data = _next_event(events).split("\n", 1)
    update = json.loads(data.removeprefix("data: "))
    assert name == "event: trials" and update["cursor"] == store.get_trial(trial).seq
    assert [(t["id"], t["state"]) for t in update["trials"]] == [(trial, "RUNNING")]
    assert update["counts"] == {"QUEUED": 3, "RUNNING": 1} and update["status"] == "RUNNING"
    assert store.append_metrics(trial, {"epoch": 1, "val_loss": 0.5}, worker="w1")
    assert store.finish_trial(trial, TrialState.FAILED, error="boom", worker="w1")
    seen: list[tuple[str, int]] = []
    while not seen or seen[-1][0] != "FAILED":  # one update or two, as the feed read them
        update = json.loads(_next_event(events).split("\n", 1)[1].removeprefix("data: "))
        seen += [(t["state"], len(t["history"])) for t in update["trials"]]
    assert seen[-1] == ("FAILED", 1)
    # the server stopping ends the stream
    client.application.extensions["dnnframe"].feed.close()
    assert _next_event(events) == ""


def _finish_every_trial(store, exp_id):
    ids = [t.id for t in store.list_trials(exp_id)]
    assert len(store.claim_trials(ids, "w1")) == len(ids)
    result = {"metrics": {"test_accuracy": 0.9, "test_loss": 0.1}, "epochs_run": 2}
    items = [(tid, TrialState.COMPLETE, result, None) for tid in ids]
    assert len(store.finish_trials(items, worker="w1")) == len(ids)


def test_a_stream_ends_when_its_experiment_is_over_and_none_opens_after(client, store):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    r = client.get(f"/api/v1/experiments/{exp_id}/events?since={store.latest_seq()}",
                   buffered=False)
    events = _events(r)
    assert _next_event(events).startswith("event: change")
    _finish_every_trial(store, exp_id)
    names = []
    while not names or names[-1] != "":
        names.append(_next_event(events).split("\n", 1)[0])
    # the last update says the experiment is over; then `end`, and the stream closes
    assert names[-3:] == ["event: trials", "event: end", ""]
    assert client.application.extensions["dnnframe"].feed._open == 0
    # a finished experiment has nothing to stream: 204, which EventSource does not retry
    again = client.get(f"/api/v1/experiments/{exp_id}/events")
    assert again.status_code == 204 and again.get_data() == b""


def test_a_server_at_its_stream_limit_says_poll_instead(make_app):
    client = make_app(EVENT_STREAMS=0).test_client()
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    r = client.get(f"/api/v1/experiments/{exp_id}/events")
    assert r.status_code == 503 and r.headers["Retry-After"] == "30"
    assert "poll trials?since= instead" in r.json["message"]
    assert client.get("/api/v1/experiments/exp-nope/events").status_code == 404
    paths = client.get("/api/v1/openapi.json").json["paths"]
    assert "/experiments/{experiment_id}/events" in paths


def _page_follows_changes(base, store, exp_id) -> str:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        b = browser(p)
        try:
            page = b.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + f"/experiments/{exp_id}")
            expect(page.locator("#trials tbody tr")).to_have_count(4, timeout=10_000)
            page.wait_for_function("() => document.body.dataset.live", timeout=10_000)
            live = page.evaluate("document.body.dataset.live")
            trial = store.list_trials(exp_id)[0].id
            assert store.claim_trial(trial, "w1")
            expect(page.locator(f"tr[data-trial='{trial}']")).to_have_attribute(
                "data-state", "RUNNING", timeout=10_000
            )
            assert errors == []
            return live
        finally:
            b.close()


@pytest.mark.browser
def test_the_page_follows_a_stream(quiet_server):
    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=TINY_SPEC, timeout=30).json()["id"]
    assert _page_follows_changes(base, store, exp_id) == "stream"


@pytest.mark.browser
def test_the_page_polls_when_the_server_refuses_a_stream(tmp_path, data_dir):
    from dashboard_support import RecordingExecutor

    from dashboard import create_app

    app = create_app({"STORE_URL": f"sqlite:///{tmp_path / 'poll.db'}", "EVENT_STREAMS": 0,
                      "EXECUTOR": RecordingExecutor(), "ALLOWED_HOSTS": "127.0.0.1"})
    try:
        with serving(app) as base:
            store = app.extensions["dnnframe"].store
            exp_id = requests.post(base + "/api/v1/experiments", json=TINY_SPEC,
                                   timeout=30).json()["id"]
            assert _page_follows_changes(base, store, exp_id) == "poll"
    finally:
        app.extensions["dnnframe"].shutdown()


@pytest.mark.browser
def test_seven_tabs_of_a_finished_experiment_and_the_list_all_load(quiet_server):
    """A browser keeps six connections per host for all its tabs: pages of a finished
    experiment must hold none of them."""
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=TINY_SPEC, timeout=30).json()["id"]
    url = base + f"/experiments/{exp_id}"
    with sync_playwright() as p:
        b = browser(p)
        try:
            context = b.new_context()  # one connection pool, as the tabs of one window
            errors: list[str] = []
            first = context.new_page()
            first.on("pageerror", lambda exc: errors.append(str(exc)))
            first.goto(url)
            first.wait_for_function("() => document.body.dataset.live === 'stream'",
                                    timeout=10_000)
            # the experiment finishes while its page listens: the stream ends, for good
            _finish_every_trial(store, exp_id)
            first.wait_for_function("() => document.body.dataset.live === 'finished'",
                                    timeout=15_000)
            expect(first.locator("#status")).to_contain_text("finished")
            for _ in range(6):
                page = context.new_page()
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.goto(url, timeout=15_000)
                expect(page.locator("#trials tbody tr[data-state=COMPLETE]")).to_have_count(4)
                page.wait_for_function("() => document.body.dataset.live === 'finished'",
                                       timeout=10_000)
            listing = context.new_page()
            listing.goto(base + "/", timeout=15_000)
            expect(listing.locator(f"tr[data-experiment='{exp_id}']")).to_be_visible()
            assert errors == []
        finally:
            b.close()
