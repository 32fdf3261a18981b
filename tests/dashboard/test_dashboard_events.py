"""Server-sent events: a stream carries its experiment's changed trials (and nothing of other
experiments), a server at its stream limit refuses with 503, and a page follows a stream or,
refused, polls."""

from __future__ import annotations

import json

import pytest
import requests
from dashboard_support import (
    TINY_SPEC,
    browser,
    next_event,
    read_events,
    serving,
    wait_until,
    watched_page,
)

from dnnframe.store.base import TrialState
from dnnframe.testing.chromium import log_failed_requests

OTHER = {
    **TINY_SPEC,
    "name": "other",
    "model": {"hidden_layers": 3, "width": 4},
    "search": {"seeds": 1},
}


def test_a_stream_announces_changes_of_its_experiment_only(client, store):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    other = client.post("/api/v1/experiments", json=OTHER).json["id"]
    cursor = store.latest_seq()
    r = client.get(f"/api/v1/experiments/{exp_id}/events?since={cursor}", buffered=False)
    assert r.status_code == 200 and r.mimetype == "text/event-stream"
    events = read_events(r)
    assert next_event(events) == (
        f'event: change\ndata: {{"cursor": {cursor}, "experiment_id": "{exp_id}"}}'
    )
    # a change of another experiment says nothing here; one of this experiment comes with
    # the changed trial and the experiment's counts
    assert store.claim_trial(store.list_trials(other)[0].id, "w1")
    trial = store.list_trials(exp_id)[0].id
    assert store.claim_trial(trial, "w1")
    name, data = next_event(events).split("\n", 1)
    update = json.loads(data.removeprefix("data: "))
    assert name == "event: trials" and update["cursor"] == store.get_trial(trial).seq
    assert [(t["id"], t["state"]) for t in update["trials"]] == [(trial, "RUNNING")]
    assert update["counts"] == {"QUEUED": 3, "RUNNING": 1} and update["status"] == "RUNNING"
    assert store.append_metrics(trial, {"epoch": 1, "val_loss": 0.5}, worker="w1")
    assert store.finish_trial(trial, TrialState.FAILED, error="boom", worker="w1")
    seen: list[tuple[str, int]] = []
    while not seen or seen[-1][0] != "FAILED":  # one update or two, as the feed read them
        update = json.loads(next_event(events).split("\n", 1)[1].removeprefix("data: "))
        seen += [(t["state"], len(t["history"])) for t in update["trials"]]
    assert seen[-1] == ("FAILED", 1)
    # the server stopping ends the stream
    client.application.extensions["dnnframe"].feed.close()
    assert next_event(events) == ""


def _finish_every_trial(store, exp_id):
    ids = [t.id for t in store.list_trials(exp_id)]
    queued = [t.id for t in store.list_trials(exp_id) if t.state == TrialState.QUEUED]
    assert len(store.claim_trials(queued, "w1")) == len(queued)
    result = {"metrics": {"test_accuracy": 0.9, "test_loss": 0.1}, "epochs_run": 2}
    items = [(tid, TrialState.COMPLETE, result, None) for tid in ids]
    assert len(store.finish_trials(items, worker="w1")) == len(ids)


def test_a_stream_ends_when_its_experiment_is_over_and_none_opens_after(client, store):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    r = client.get(
        f"/api/v1/experiments/{exp_id}/events?since={store.latest_seq()}", buffered=False
    )
    events = read_events(r)
    assert next_event(events).startswith("event: change")
    _finish_every_trial(store, exp_id)
    names = []
    while not names or names[-1] != "":
        names.append(next_event(events).split("\n", 1)[0])
    # the last update says the experiment is over; then `end`, and the stream closes
    assert names[-3:] == ["event: trials", "event: end", ""]
    assert client.application.extensions["dnnframe"].feed._open == 0
    # a finished experiment has nothing to stream: 204, which EventSource does not retry
    again = client.get(f"/api/v1/experiments/{exp_id}/events")
    assert again.status_code == 204 and again.get_data() == b""


def _name_and_data(event: str) -> tuple[str, dict]:
    name, data = event.split("\n", 1)
    return name.removeprefix("event: "), json.loads(data.removeprefix("data: "))


def test_one_stream_follows_several_experiments_and_closes_after_the_last(client, store):
    """The stream every tab of a browser shares: each event names its experiment."""
    first = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    second = client.post("/api/v1/experiments", json=OTHER).json["id"]
    over = client.post(
        "/api/v1/experiments", json={**OTHER, "name": "over", "search": {"seeds": [5]}}
    ).json["id"]
    _finish_every_trial(store, over)
    r = client.get(
        f"/api/v1/events?experiment={first}&experiment={second}&experiment={over}"
        f"&experiment=exp-gone&experiment={first}",
        buffered=False,
    )
    assert r.status_code == 200 and r.mimetype == "text/event-stream"
    events = read_events(r)
    # a finished or unknown experiment ends at once; each followed one is read up to date
    opening = [_name_and_data(next_event(events)) for _ in range(4)]
    assert opening == [
        ("end", {"experiment_id": over}),
        ("end", {"experiment_id": "exp-gone"}),
        ("change", {"experiment_id": first}),
        ("change", {"experiment_id": second}),
    ]
    trial = store.list_trials(second)[0].id
    assert store.claim_trial(trial, "w1")
    name, update = _name_and_data(next_event(events))
    assert (name, update["experiment_id"]) == ("trials", second)
    assert [t["id"] for t in update["trials"]] == [trial]
    # the first experiment ends; the stream goes on for the second, then closes after it
    _finish_every_trial(store, first)
    seen = []
    while ("end", first) not in seen:
        name, update = _name_and_data(next_event(events))
        seen.append((name, update["experiment_id"]))
    assert set(seen) == {("trials", first), ("end", first)}
    assert client.application.extensions["dnnframe"].feed._open == 1
    for t in store.list_trials(second):
        if t.state == TrialState.QUEUED:
            assert store.claim_trial(t.id, "w1")
        assert store.finish_trial(
            t.id,
            TrialState.COMPLETE,
            result={"metrics": {"test_accuracy": 0.5}, "epochs_run": 2},
            worker="w1",
        )
    names = []
    while not names or names[-1] != "":
        names.append(next_event(events).split("\n", 1)[0])
    assert names[-2:] == ["event: end", ""]
    assert client.application.extensions["dnnframe"].feed._open == 0


def test_the_shared_stream_refuses_what_it_cannot_follow(client, store):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    _finish_every_trial(store, exp_id)
    # nothing left to follow: 204, which EventSource does not retry
    done = client.get(f"/api/v1/events?experiment={exp_id}&experiment=exp-gone")
    assert done.status_code == 204 and done.get_data() == b""
    for query in ("", "?experiment=", "?" + "&".join(f"experiment=e{i}" for i in range(101))):
        r = client.get("/api/v1/events" + query)
        assert r.status_code == 400 and r.json["errors"][0]["path"] == "experiment"
    paths = client.get("/api/v1/openapi.json").json["paths"]
    assert paths["/events"]["get"]["parameters"][0]["schema"]["maxItems"] == 100


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

    with sync_playwright() as p, watched_page(p) as (page, errors):
        page.goto(base + f"/experiments/{exp_id}")
        expect(page.locator("#trials tbody tr")).to_have_count(4)
        wait_until(page, "() => document.body.dataset.live")
        live = page.evaluate("document.body.dataset.live")
        trial = store.list_trials(exp_id)[0].id
        assert store.claim_trial(trial, "w1")
        expect(page.locator(f"tr[data-trial='{trial}']")).to_have_attribute("data-state", "RUNNING")
        assert errors == []
        return live


@pytest.mark.browser
def test_the_page_follows_a_stream(quiet_server):
    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=TINY_SPEC, timeout=30).json()["id"]
    assert _page_follows_changes(base, store, exp_id) == "stream"


@pytest.mark.browser
def test_the_page_polls_when_the_server_refuses_a_stream(tmp_path, data_dir):
    from dashboard_support import RecordingExecutor

    from dashboard import create_app

    app = create_app(
        {
            "STORE_URL": f"sqlite:///{tmp_path / 'poll.db'}",
            "EVENT_STREAMS": 0,
            "EXECUTOR": RecordingExecutor(),
            "ALLOWED_HOSTS": "127.0.0.1",
        }
    )
    try:
        with serving(app) as base:
            store = app.extensions["dnnframe"].store
            exp_id = requests.post(base + "/api/v1/experiments", json=TINY_SPEC, timeout=30).json()[
                "id"
            ]
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
            log_failed_requests(first)
            first.goto(url)
            wait_until(first, "() => document.body.dataset.live === 'stream'")
            # the experiment finishes while its page listens: the stream ends, for good
            _finish_every_trial(store, exp_id)
            wait_until(first, "() => document.body.dataset.live === 'finished'")
            expect(first.locator("#status")).to_contain_text("finished")
            for _ in range(6):
                page = context.new_page()
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                log_failed_requests(page)
                page.goto(url)
                expect(page.locator("#trials tbody tr[data-state=COMPLETE]")).to_have_count(4)
                wait_until(page, "() => document.body.dataset.live === 'finished'")
            listing = context.new_page()
            listing.goto(base + "/")
            expect(listing.locator(f"tr[data-experiment='{exp_id}']")).to_be_visible()
            assert errors == []
        finally:
            b.close()


@pytest.mark.browser
def test_eight_tabs_of_live_experiments_share_one_stream_and_a_tenth_loads(tmp_path, data_dir):
    """A browser keeps six connections per host for all its tabs: live pages share one
    stream, so every tab hears its experiment's changes and pages and API calls still load."""
    from dashboard_support import RecordingExecutor
    from playwright.sync_api import expect, sync_playwright

    from dashboard import create_app

    app = create_app(
        {
            "STORE_URL": f"sqlite:///{tmp_path / 'tabs.db'}",
            "EXECUTOR": RecordingExecutor(),
            "ALLOWED_HOSTS": "127.0.0.1",
        }
    )
    try:
        with serving(app) as base, sync_playwright() as p:
            store = app.extensions["dnnframe"].store

            def post(spec):
                answer = requests.post(base + "/api/v1/experiments", json=spec, timeout=30)
                return answer.json()["id"]

            exp_id, other = post(TINY_SPEC), post(OTHER)
            b = browser(p)
            try:
                context = b.new_context()  # one connection pool, as the tabs of one window
                errors: list[str] = []
                pages = []
                # eight tabs of one experiment, a ninth of another (the stream follows both)
                for target in [exp_id] * 8 + [other]:
                    page = context.new_page()
                    page.on("pageerror", lambda exc: errors.append(str(exc)))
                    log_failed_requests(page)
                    page.goto(base + f"/experiments/{target}")
                    wait_until(page, "() => document.body.dataset.live === 'stream'")
                    pages.append(page)
                trial = store.list_trials(exp_id)[0].id
                other_trial = store.list_trials(other)[0].id
                assert store.claim_trial(trial, "w1") and store.claim_trial(other_trial, "w1")
                for page, watched in zip(pages, [trial] * 8 + [other_trial]):
                    expect(page.locator(f"tr[data-trial='{watched}']")).to_have_attribute(
                        "data-state", "RUNNING"
                    )
                # the eighth tab's API calls and a tenth tab's page complete
                status = pages[7].evaluate(
                    "async (url) => (await fetch(url)).status", f"/api/v1/experiments/{exp_id}"
                )
                assert status == 200
                listing = context.new_page()
                listing.goto(base + "/")
                expect(listing.locator(f"tr[data-experiment='{other}']")).to_be_visible()
                # the experiment finishes: its tabs stop following, the other tab goes on
                _finish_every_trial(store, exp_id)
                for page in pages[:8]:  # nine tabs redraw their charts on two loaded cores
                    page.wait_for_function(
                        "() => document.body.dataset.live === 'finished'", timeout=30_000
                    )
                assert pages[8].evaluate("document.body.dataset.live") == "stream"
                assert errors == []
            finally:
                b.close()
    finally:
        app.extensions["dnnframe"].shutdown()


@pytest.mark.browser
def test_a_running_trials_page_follows_its_epochs_and_shows_its_end(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=TINY_SPEC, timeout=30).json()["id"]
    trial = store.list_trials(exp_id)[0].id
    assert store.claim_trial(trial, "w1")
    assert store.append_metrics(
        trial, {"epoch": 1, "val_loss": 0.9, "train_loss": 1.0}, worker="w1"
    )
    with sync_playwright() as p, watched_page(p) as (page, errors):
        page.goto(base + f"/trials/{trial}")
        wait_until(page, "() => document.body.dataset.live === 'stream'")
        assert page.evaluate("document.getElementById('chart-loss').data[1].y") == [0.9]
        for epoch in (2, 3):
            assert store.append_metrics(
                trial,
                {"epoch": epoch, "val_loss": 0.9 - 0.1 * epoch, "train_loss": 1.0},
                worker="w1",
            )
        wait_until(page, "() => document.body.dataset.epochs === '3'")
        assert page.evaluate("document.getElementById('chart-loss').data[1].y") == [
            0.9,
            pytest.approx(0.7),
            pytest.approx(0.6),
        ]
        expect(page.locator("#state")).to_have_text("RUNNING")
        # it ends: the page shows its final state and metrics
        result = {"metrics": {"test_accuracy": 0.75, "test_loss": 0.5}, "epochs_run": 3}
        assert store.finish_trial(trial, TrialState.COMPLETE, result=result, worker="w1")
        expect(page.locator("#state")).to_have_text("COMPLETE")
        expect(page.locator("#final-metrics")).to_contain_text("test_accuracy")
        assert errors == []


@pytest.mark.browser
@pytest.mark.parametrize(
    "worker_script",
    [
        {"status": 404},  # cannot be had (a proxy, a broken deploy): the worker errs
        # runs but never answers (a stale or foreign script): no error, only silence
        {"status": 200, "body": "", "content_type": "text/javascript"},
    ],
    ids=["missing", "silent"],
)
def test_a_page_polls_when_the_shared_stream_worker_cannot_start(quiet_server, worker_script):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=TINY_SPEC, timeout=30).json()["id"]
    with sync_playwright() as p:
        b = browser(p)
        try:
            context = b.new_context()
            context.route("**/live-worker.js*", lambda route: route.fulfill(**worker_script))
            # the page's patience with a silent worker, shortened (10 s by default)
            context.add_init_script("window.DNN_LIVE_SILENCE_MS = 1000")
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            log_failed_requests(page)
            page.goto(base + f"/experiments/{exp_id}")
            wait_until(page, "() => document.body.dataset.live === 'poll'")
            trial = store.list_trials(exp_id)[0].id
            assert store.claim_trial(trial, "w1")
            expect(page.locator(f"tr[data-trial='{trial}']")).to_have_attribute(
                "data-state", "RUNNING"
            )
            assert errors == []
        finally:
            b.close()
