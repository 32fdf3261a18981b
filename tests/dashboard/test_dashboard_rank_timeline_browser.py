"""The experiment page's rank plot, metric distribution (ECDF) and timeline of trials, in
real headless Chromium: their points for a known experiment, the cross-filter, the choices
kept in the URL through a reload, a regression (lower is better) and a live experiment.

As in the other browser tests the server's executor runs nothing: the test writes the
trials' states and results through the store and waits on what the page draws.
"""

from __future__ import annotations

import math

import pytest
import requests
from dashboard_support import artifacts_dir, watched_page

from dnnframe.store.base import TrialState

pytestmark = pytest.mark.browser

SPEC = {
    "name": "ranked",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": 2, "width": 8, "activation": {"grid": ["relu", "tanh"]}},
    "training": {"max_epochs": 3, "learning_rate": {"grid": [0.001, 0.01, 0.1]}},
    "search": {"seeds": 2},
}


def _accuracy(config) -> float:
    lr = config["training"]["learning_rate"]
    relu = config["model"]["activation"] == "relu"
    return {0.001: 0.4, 0.01: 0.7, 0.1: 0.9}[lr] + (0.02 if relu else 0) + 0.001 * config["seed"]


def _result(accuracy: float) -> dict:
    return {
        "metrics": {"test_accuracy": accuracy, "test_loss": 1 - accuracy},
        "timings": {"train": 1.0, "compile": 0.5},
        "epochs_run": 3,
    }


def _setup(store, exp_id) -> dict[str, tuple]:
    """Of the 12 trials (by learning rate, activation, seed): those at 0.1 and seed 0 diverge,
    the relu one at 0.001 and seed 1 is pruned with a value, the tanh one there still runs
    (on a second worker), and the other 8 complete. Returns id → (state, rate, activation)."""
    trials = store.list_trials(exp_id)
    plan, items = {}, []
    for t in trials:
        lr, act = t.config["training"]["learning_rate"], t.config["model"]["activation"]
        seed = t.config["seed"]
        if lr == 0.1 and seed == 0:
            state, result, error = TrialState.DIVERGED, None, "diverged at epoch 2"
        elif lr == 0.001 and seed == 1 and act == "relu":
            state, result, error = TrialState.PRUNED, _result(0.3), None
        elif lr == 0.001 and seed == 1:
            state, result, error = TrialState.RUNNING, None, None
        else:
            state, result, error = TrialState.COMPLETE, _result(_accuracy(t.config)), None
        plan[t.id] = (state.value, lr, act)
        if state is TrialState.RUNNING:
            assert store.claim_trial(t.id, "w2")
        else:
            assert store.claim_trial(t.id, "w1")
            items.append((t.id, state, result, error))
    assert len(store.finish_trials(items, worker="w1")) == len(items)
    return plan


def _chart(page, chart_id):
    """Each trace's name, points and trial ids."""
    return page.evaluate(
        "id => (document.getElementById(id).data || []).map(t => ("
        "{name: t.name, x: t.x, y: t.y, ids: t.customdata}))",
        chart_id,
    )


def test_rank_distribution_and_timeline_follow_choices_filters_and_reloads(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=SPEC, timeout=30).json()["id"]
    plan = _setup(store, exp_id)
    complete = {i for i, p in plan.items() if p[0] == "COMPLETE"}
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}")
        expect(page.locator("#trials tbody tr")).to_have_count(12)
        expect(page.locator("#chart-rank.drawn")).to_have_count(1)
        # rank: coloured by the grouping (activation), the pruned trial after the complete
        expect(page.locator("#rank-colour")).to_have_value("activation")
        rank = _chart(page, "chart-rank")
        assert [t["name"] for t in rank] == [
            "activation relu",
            "activation tanh",
            "pruned (1, ranked after the complete)",
            "diverged (2, the worst, ranked last)",
        ]
        assert sorted(i for t in rank[:2] for i in t["ids"]) == sorted(complete)
        by_rank = sorted((x, y) for t in rank[:2] for x, y in zip(t["x"], t["y"], strict=True))
        assert [x for x, _ in by_rank] == list(range(1, 9))
        assert [y for _, y in by_rank] == sorted((y for _, y in by_rank), reverse=True)
        assert rank[2]["x"] == [9] and rank[2]["y"] == [0.3]
        # the two diverged trials are ranked last, at the worst accuracy, as on the other charts
        assert rank[3]["x"] == [10, 11] and rank[3]["y"] == [0, 0]
        label = page.get_attribute("#chart-rank", "aria-label")
        assert "1 pruned" in label and "2 diverged" in label and "11 values" in label
        # distribution: a line per activation, its points every trial that finished with a
        # value (the pruned one at its value, the diverged ones at the worst)
        ecdf = _chart(page, "chart-ecdf")
        assert [len(t["x"]) for t in ecdf] == [6, 5]
        assert all(t["y"][-1] == 1 and t["x"] == sorted(t["x"]) for t in ecdf)
        assert [t["name"] for t in ecdf] == [
            "activation relu (6, 1 diverged: counted as 0, the worst)",
            "activation tanh (5, 1 diverged: counted as 0, the worst)",
        ]
        # timeline: a bar per started trial, by state, one row each
        times = _chart(page, "chart-timeline")
        assert {t["name"]: len(t["x"]) for t in times} == {
            "complete (8)": 8,
            "diverged (2)": 2,
            "pruned (1)": 1,
            "running (1)": 1,
        }
        assert sorted(y for t in times for y in t["y"]) == list(range(1, 13))
        assert "2 workers" in page.get_attribute("#chart-timeline", "aria-label")
        for chart in ("chart-rank", "chart-ecdf", "chart-timeline"):
            page.locator(f"#{chart}").screenshot(
                path=str(artifacts_dir() / f"dashboard-{chart[6:]}.png")
            )

        # the column filter narrows all three
        page.get_by_label("Filter activation").fill("=relu")
        expect(page.locator("#trials tbody tr")).to_have_count(6)
        page.wait_for_function("() => document.getElementById('chart-ecdf').data.length === 1")
        relu = {i for i, p in plan.items() if p[2] == "relu"}
        rank = _chart(page, "chart-rank")
        assert {i for t in rank for i in t["ids"]} == relu
        assert {i for t in _chart(page, "chart-timeline") for i in t["ids"]} == relu
        page.click("#clear-brush")
        page.wait_for_function("() => document.getElementById('chart-ecdf').data.length === 2")

        # the choices go into the URL and come back after a reload
        page.select_option("#rank-colour", "learning_rate")
        page.select_option("#ecdf-group", "learning_rate")
        page.select_option("#timeline-rows", "workers")
        page.wait_for_function("() => document.getElementById('chart-ecdf').data.length === 3")
        assert "rankColour=learning_rate" in page.url and "timelineRows=workers" in page.url
        page.reload()
        expect(page.locator("#chart-timeline.drawn")).to_have_count(1)
        expect(page.locator("#rank-colour")).to_have_value("learning_rate")
        expect(page.locator("#ecdf-group")).to_have_value("learning_rate")
        expect(page.locator("#timeline-rows")).to_have_value("workers")
        page.wait_for_function("() => document.getElementById('chart-ecdf').data.length === 3")
        rank = _chart(page, "chart-rank")
        assert [t["name"] for t in rank][:3] == [
            "learning rate 0.001",
            "learning rate 0.01",
            "learning rate 0.1",
        ]
        assert [len(t["x"]) for t in _chart(page, "chart-ecdf")] == [3, 4, 4]
        lanes = {y for t in _chart(page, "chart-timeline") for y in t["y"]}
        assert lanes == {"w1", "w2"}
        assert errors == []


REGRESSION = {
    "name": "regress-ranked",
    "dataset": {"name": "diabetes"},
    "model": {
        "hidden_layers": {"grid": [1, 2]},
        "width": {"grid": [4, 8]},
        "loss": "squared_error",
    },
    "training": {"max_epochs": 5},
    "search": {"seeds": 1},
}


def test_a_live_regression_ranks_its_loss_lowest_first_as_trials_finish(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=REGRESSION, timeout=30).json()["id"]
    first, second, running, queued = [t.id for t in store.list_trials(exp_id)]

    def finish(tid, loss):
        result = {
            "metrics": {"test_loss": loss, "val_loss": loss + 0.1, "test_accuracy": None},
            "timings": {"train": 1.0, "compile": 0.2},
            "epochs_run": 5,
        }
        assert store.finish_trial(tid, TrialState.COMPLETE, result=result, worker="w1")

    for tid, loss in ((first, 0.5), (second, 0.3)):
        assert store.claim_trial(tid, "w1")
        finish(tid, loss)
    assert store.claim_trial(running, "w1")
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}")
        expect(page.locator("#chart-rank.drawn")).to_have_count(1)
        page.select_option("#rank-colour", "")
        rank = _chart(page, "chart-rank")
        assert [(t["x"], t["y"], t["ids"]) for t in rank] == [([1, 2], [0.3, 0.5], [second, first])]
        expect(page.locator("#chart-rank .gtitle")).to_contain_text("lowest first")
        expect(page.locator("#chart-ecdf .gtitle")).to_contain_text("lowest is better")
        times = _chart(page, "chart-timeline")
        assert {t["name"]: len(t["x"]) for t in times} == {"complete (2)": 2, "running (1)": 1}
        expect(page.locator("#chart-timeline .gtitle")).to_contain_text("1 not started")
        # the running trial finishes best: the page redraws live
        finish(running, 0.1)
        page.wait_for_function("() => document.getElementById('chart-rank').data[0].x.length === 3")
        rank = _chart(page, "chart-rank")
        assert rank[0]["y"] == [0.1, 0.3, 0.5] and rank[0]["ids"][0] == running
        times = _chart(page, "chart-timeline")
        assert {t["name"]: len(t["x"]) for t in times} == {"complete (3)": 3}
        assert errors == []


def test_a_parameter_of_many_values_colours_the_rank_plot_on_a_log_scale(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    rates = [0.0001 * 2**k for k in range(12)]
    spec = {
        "name": "many-rates",
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": 1, "width": 4},
        "training": {"max_epochs": 2, "learning_rate": {"grid": rates}},
        "search": {"seeds": 1},
    }
    exp_id = requests.post(base + "/api/v1/experiments", json=spec, timeout=30).json()["id"]
    items = []
    for t in store.list_trials(exp_id):
        assert store.claim_trial(t.id, "w1")
        items.append(
            (t.id, TrialState.COMPLETE, _result(t.config["training"]["learning_rate"]), None)
        )
    assert len(store.finish_trials(items, worker="w1")) == 12
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}?rankColour=learning_rate")
        expect(page.locator("#chart-rank.drawn")).to_have_count(1)
        expect(page.locator("#rank-colour")).to_have_value("learning_rate")
        marker = page.evaluate("() => document.getElementById('chart-rank').data[0].marker")
        # twelve values: one colour scale (log10 of the rate), its bar ticked in real values
        assert len(page.evaluate("() => document.getElementById('chart-rank').data")) == 1
        assert marker["color"] == pytest.approx(
            [math.log10(r) for r in sorted(rates, reverse=True)]
        )
        assert marker["showscale"] is True and "0.001" in marker["colorbar"]["ticktext"]
        assert errors == []
