"""The experiment page of a real sweep where the learning rate decides divergence
(diverging_sweep.py), in real headless Chromium: grouped by the learning rate, the trials
that diverged are a line of their own, ✕ at the worst accuracy; importance ranks the
learning rate first, draws the seed as the noise floor and says it rests on few trials;
the contour, slices, parallel coordinates, depth profile, rank plot and distribution
count every trial."""

from __future__ import annotations

import pytest
from dashboard_support import artifacts_dir, serving, watched_page
from diverging_sweep import DIVERGING_RATE

from dashboard import create_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the sweep trains for real

CHARTS = (
    "chart-accuracy",
    "chart-importance",
    "chart-contour",
    "chart-slice",
    "chart-parallel",
    "chart-depth",
    "chart-rank",
    "chart-ecdf",
    "chart-curves",
    "chart-best",
)


@pytest.fixture
def sweep_server(diverging_sweep, data_dir):
    url, exp_id = diverging_sweep
    app = create_app({"STORE_URL": url, "ALLOWED_HOSTS": "127.0.0.1"})
    try:
        with serving(app) as base:
            yield base, exp_id
    finally:
        app.extensions["dnnframe"].shutdown()


def _traces(page, chart_id):
    return page.evaluate("id => document.getElementById(id).data", chart_id)


def _title(page, chart_id):
    return page.evaluate(
        "id => document.getElementById(id).layout.title.text.replaceAll('<br>', ' ')", chart_id
    )


def test_group_by_and_importance_show_the_rate_that_decided_divergence(sweep_server):
    from playwright.sync_api import expect, sync_playwright

    base, exp_id = sweep_server
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}?x=hidden_layers&group=learning_rate")
        expect(page.locator("#group-by")).to_have_value("learning_rate")
        # every chart drawn, or saying why not
        page.wait_for_function(
            "ids => ids.every(id => document.getElementById(id).classList.contains('drawn')"
            " || document.querySelector('#' + id + ' .chart-waiting:not(:empty)')"
            " && !document.getElementById(id).textContent.includes('Loading'))",
            arg=list(CHARTS),
            timeout=30_000,
        )

        # grouped by the learning rate both rates are lines: 1000 at the worst accuracy, ✕
        lines = {t["name"]: t for t in _traces(page, "chart-accuracy")}
        assert sorted(lines) == ["learning rate 0.05", f"learning rate {DIVERGING_RATE}"]
        lost = lines[f"learning rate {DIVERGING_RATE}"]
        assert lost["x"] == [1, 2] and lost["y"] == [0, 0]
        assert lost["marker"]["symbol"] == ["x-thin-open", "x-thin-open"]
        assert all(text.endswith("2 diverged: counted as 0, the worst") for text in lost["text"])
        assert "4 diverged, ✕ at the worst" in _title(page, "chart-accuracy")

        for chart in CHARTS:
            expect(page.locator(f"#{chart}.drawn")).to_have_count(1)

        # importance: the learning rate first, the seed no bar but the noise floor, and a
        # warning that eight trials for two parameters are few
        bars = _traces(page, "chart-importance")[0]
        assert bars["y"][-1] == "learning rate" and "seed" not in " ".join(bars["y"])
        title = _title(page, "chart-importance")
        assert "8 trials, too few: a rough guide" in title
        assert "4 diverged, counted as the worst (0)" in title
        layout = page.evaluate("() => document.getElementById('chart-importance').layout")
        assert layout["shapes"][0]["line"]["dash"] == "dash"
        assert layout["annotations"][0]["text"].startswith("seed: noise floor")

        # the contour: two parameters vary, the rate's 1000 a column of its own at 0
        heat = _traces(page, "chart-contour")[0]
        rate_axis = (
            "x"
            if "learning"
            in page.evaluate(
                "() => document.getElementById('chart-contour').layout.xaxis.title.text"
            )
            else "y"
        )
        assert heat[rate_axis] == ["0.05", str(DIVERGING_RATE)]
        column = heat[rate_axis].index(str(DIVERGING_RATE))
        cells = [row[column] for row in heat["z"]] if rate_axis == "x" else heat["z"][column]
        assert cells == [0, 0]

        # every other view counts all eight trials, the four diverged ones at the worst
        lr_slice = next(t for t in _traces(page, "chart-slice") if t["name"] == "learning rate")
        assert (
            sorted(x for x, y in zip(lr_slice["x"], lr_slice["y"], strict=True) if y == 0)
            == [DIVERGING_RATE] * 4
        )
        parallel = page.evaluate("document.getElementById('chart-parallel').parallel")
        assert len(parallel["dimensions"][-1]["values"]) == 8
        assert sorted(parallel["kinds"]) == [
            "",
            "",
            "",
            "",
            "diverged",
            "diverged",
            "diverged",
            "diverged",
        ]
        mean = next(t for t in _traces(page, "chart-depth") if t["name"].endswith("· mean"))
        assert mean["marker"]["symbol"] == ["x-thin-open", "x-thin-open"]
        rank = {t["name"]: t for t in _traces(page, "chart-rank")}
        assert rank["diverged (4, the worst, ranked last)"]["x"] == [5, 6, 7, 8]
        ecdf = [t["name"] for t in _traces(page, "chart-ecdf")]
        assert ecdf == [
            "learning rate 0.05 (4)",
            f"learning rate {DIVERGING_RATE} (4, 4 diverged: counted as 0, the worst)",
        ]
        curves = [t for t in _traces(page, "chart-curves") if t.get("meta") == "DIVERGED"]
        assert len(curves) == 4 and all(c["marker"]["symbol"] == "x-thin-open" for c in curves)
        best = {t["name"]: t for t in _traces(page, "chart-best")}
        assert len(best["diverged trial (the worst)"]["x"]) == 4
        page.screenshot(path=str(artifacts_dir() / "dashboard-diverged-sweep.png"), full_page=True)
        assert errors == []
