"""In real headless Chromium: every page works under its Content-Security-Policy (scripts,
the plotly charts and the parallel coordinates, with no 'unsafe-eval'), and Cancel asks
before it acts."""

from __future__ import annotations

import pytest
from dashboard_support import TINY_SPEC, drawn_trace_types, serving, watched_page

from dnnframe.store import TrialState

pytestmark = pytest.mark.browser


@pytest.fixture
def served(make_app, recorder):
    app = make_app()
    with serving(app) as base:
        yield base, app


def _finished_experiment(client, store) -> tuple[str, str]:
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    ids = [t.id for t in store.list_trials(exp_id)]
    store.claim_trials(ids, "w")
    for k, tid in enumerate(ids):
        history = [
            {
                "epoch": e,
                "train_loss": 1.0 / e,
                "val_loss": 1.2 / e,
                "val_accuracy": 0.5 + 0.1 * e + 0.01 * k,
            }
            for e in (1, 2)
        ]
        store.append_metrics_many({tid: history}, worker="w")
        store.finish_trial(
            tid,
            TrialState.COMPLETE,
            worker="w",
            result={
                "status": "COMPLETE",
                "history": history,
                "epochs_run": 2,
                "n_params": 40,
                "metrics": {"test_accuracy": 0.6 + 0.05 * k, "test_loss": 0.9 - 0.1 * k},
                "timings": {"data": 0.0, "compile": 0.1, "train": 0.2 + k, "total": 0.3 + k},
            },
        )
    return exp_id, ids[0]


@pytest.mark.slow
def test_pages_run_under_their_policy_and_cancel_asks_first(served, recorder):
    from playwright.sync_api import expect, sync_playwright

    base, app = served
    client, store = app.test_client(), app.extensions["dnnframe"].store
    done_id, trial_id = _finished_experiment(client, store)
    waiting = {**TINY_SPEC, "name": "waiting", "model": {"hidden_layers": 1, "width": 5}}
    running_id = client.post("/api/v1/experiments", json=waiting).json["id"]
    with sync_playwright() as p, watched_page(p) as (page, errors):
        for path in ("/", "/experiments/new"):
            page.goto(base + path)
            page.wait_for_load_state("load")
            assert page.evaluate("window.__blocked") == [], path
        # the trial's curves and the comparison's charts draw under the policy
        for path, chart in (
            (f"/trials/{trial_id}", "chart-loss"),
            (f"/compare?ids={done_id},{running_id}", "chart-compare-curves"),
        ):
            page.goto(base + path)
            page.wait_for_function(
                f"() => document.querySelector('#{chart} .main-svg') !== null", timeout=30_000
            )
            assert page.evaluate("window.__blocked") == [], path
            assert "scatter" in drawn_trace_types(page), path
        page.goto(base + f"/experiments/{done_id}")
        for chart in ("chart-accuracy", "chart-curves", "chart-parallel"):
            page.wait_for_function(
                f"() => document.querySelector('#{chart} .main-svg, #{chart} canvas') !== null",
                timeout=30_000,
            )
        page.wait_for_function("() => document.body.dataset.charts === 'drawn'", timeout=30_000)
        assert {"scatter", "bar"} <= drawn_trace_types(page)
        assert page.evaluate("window.__blocked") == []
        expect(page.locator("#cancel")).to_have_count(0)  # finished: nothing to cancel

        # an experiment that ends while its page is open loses its Cancel button
        ending = {**TINY_SPEC, "name": "ending", "model": {"hidden_layers": 1, "width": 6}}
        ending_id = client.post("/api/v1/experiments", json=ending).json["id"]
        page.goto(base + f"/experiments/{ending_id}")
        expect(page.locator("#cancel")).to_be_visible()
        ids = [t.id for t in store.list_trials(ending_id)]
        store.claim_trials(ids, "w")
        for tid in ids:
            store.finish_trial(tid, TrialState.FAILED, worker="w", error="boom")
        expect(page.locator("#cancel")).to_have_count(0, timeout=30_000)

        page.goto(base + f"/experiments/{running_id}")
        asked: list[str] = []

        def answer(dialog, accept: bool) -> None:
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        page.once("dialog", lambda d: answer(d, False))
        page.click("#cancel")
        expect(page.locator("#cancel")).to_be_visible()
        assert len(asked) == 1 and "Cancel this experiment?" in asked[0]
        assert recorder.cancelled == []
        page.once("dialog", lambda d: answer(d, True))
        with page.expect_navigation():
            page.click("#cancel")
        assert recorder.cancelled == [running_id] and len(asked) == 2
        assert page.evaluate("window.__blocked") == []
        assert errors == []
