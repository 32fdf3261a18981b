"""The experiment page's first read: one request for its trials and the importance of the
metric it shows first, built and compressed once for a finished experiment; the page draws
every chart from it, and a second visit gets the static files from the browser's cache."""

from __future__ import annotations

import math

import brotli
import pytest
import requests
from dashboard_support import RecordingExecutor, serving, watched_page

from dashboard import create_app, page_data
from dnnframe.store.base import TrialState

GRID = {
    "name": "curves",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2, 3]}, "width": {"grid": [4, 8]}},
    "training": {"max_epochs": 6, "learning_rate": {"grid": [0.01, 0.1]}},
    "search": {"seeds": 2},
}


def _finish(store, exp_id: str, epochs: int = 6) -> None:
    ids = [t.id for t in store.list_trials(exp_id)]
    assert len(store.claim_trials(ids, "w1")) == len(ids)
    for epoch in range(1, epochs + 1):
        store.append_metrics_many(
            {
                tid: {
                    "epoch": epoch,
                    "val_accuracy": 1 / 3 + epoch / (7 * epochs + i),
                    "val_loss": math.pi / (epoch + i),
                }
                for i, tid in enumerate(ids)
            },
            worker="w1",
        )
    for i, tid in enumerate(ids):
        acc = 0.5 + i / 97
        assert store.finish_trial(
            tid,
            TrialState.COMPLETE,
            worker="w1",
            result={
                "metrics": {"test_accuracy": acc, "test_loss": 1 - acc},
                "epochs_run": epochs,
                "timings": {"train": 0.1 + i / 31, "compile": 1.5, "total": 1.7 + i / 31},
            },
        )


@pytest.fixture(autouse=True)
def _no_cached_answers(monkeypatch):
    monkeypatch.setattr(page_data, "_cache", type(page_data._cache)())


def test_one_read_holds_every_trial_with_its_curves_as_columns_and_the_importance(client, store):
    exp_id = client.post("/api/v1/experiments", json=GRID).json["id"]
    _finish(store, exp_id)
    body = client.get(
        f"/experiments/{exp_id}/page-data?metric=test_accuracy&evaluator=ped_anova"
    ).json
    api = client.get(f"/api/v1/experiments/{exp_id}/trials?history=1&since=0").json
    assert len(body["trials"]) == 24 and body["more"] is False
    for key in ("cursor", "counts", "n_trials", "status", "status_text", "can_cancel"):
        assert body[key] == api[key]
    for ours, theirs in zip(body["trials"], api["trials"], strict=True):
        curve = theirs.pop("history")
        columns = ours.pop("history")
        assert ours == theirs  # the table's values keep every digit
        assert list(columns) == ["epoch", "val_accuracy", "val_loss"]
        for key, values in columns.items():
            assert values == [
                float(f"{h[key]:.6g}") if isinstance(h[key], float) else h[key] for h in curve
            ]
            assert values == pytest.approx([h[key] for h in curve], rel=1e-5)
    importance = client.get(
        f"/api/v1/experiments/{exp_id}/importance?metric=test_accuracy&evaluator=ped_anova"
    ).json
    assert body["importance"] == importance


def test_a_metric_the_api_does_not_know_brings_no_importance(client, store):
    exp_id = client.post("/api/v1/experiments", json=GRID).json["id"]
    body = client.get(f"/experiments/{exp_id}/page-data?metric=nope").json
    assert body["importance"] is None and len(body["trials"]) == 24
    assert client.get("/experiments/exp-nope/page-data").status_code == 404


def test_a_finished_experiments_answer_is_built_and_compressed_once(client, store, monkeypatch):
    exp_id = client.post("/api/v1/experiments", json=GRID).json["id"]
    _finish(store, exp_id)
    built = []
    real = page_data.page_json
    monkeypatch.setattr(page_data, "page_json", lambda *a: built.append(a) or real(*a))
    url = f"/experiments/{exp_id}/page-data?metric=test_accuracy&evaluator=ped_anova"
    plain = client.get(url, headers={"Accept-Encoding": "identity"})
    packed = client.get(url, headers={"Accept-Encoding": "gzip, deflate, br, zstd"})
    assert packed.headers["Content-Encoding"] == "br"
    assert brotli.decompress(packed.data) == plain.data
    assert packed.data == brotli.compress(plain.data, quality=11)
    assert len(built) == 1
    again = client.get(
        url, headers={"Accept-Encoding": "br", "If-None-Match": packed.headers["ETag"]}
    )
    assert again.status_code == 304 and len(built) == 1
    assert packed.headers["Cache-Control"] == "no-cache"


def test_a_live_experiments_answer_follows_its_changes(client, store):
    exp_id = client.post("/api/v1/experiments", json=GRID).json["id"]
    url = f"/experiments/{exp_id}/page-data"
    first = client.get(url)
    trial = store.list_trials(exp_id)[0].id
    assert store.claim_trial(trial, "w1")
    second = client.get(url)
    assert second.headers["ETag"] != first.headers["ETag"]
    assert second.json["cursor"] > first.json["cursor"]
    assert second.json["counts"]["RUNNING"] == 1


def _recording(app) -> list[tuple[str, int]]:
    """The path and status of every request ``app`` answers, from now on."""
    log: list[tuple[str, int]] = []
    inner = app.wsgi_app

    def wsgi(environ, start_response):
        def start(status, headers, exc_info=None):
            log.append((environ["PATH_INFO"], int(status.split()[0])))
            return start_response(status, headers, exc_info)

        return inner(environ, start)

    app.wsgi_app = wsgi
    return log


# the page's own mark that its drawing is done: every chart holds its drawing by then (plotly's,
# or the parallel coordinates' own)
CHARTS_DRAWN = "() => document.body.dataset.charts === 'drawn'"
EVERY_CHART = """() => Array.from(document.querySelectorAll('.chart'))
    .every(c => c.querySelector('.main-svg, .parallel-svg'))"""
# the frame (counted by requestAnimationFrame) in which each chart first held plotly's drawing,
# and how many times plotly drew each chart
FRAMES = """
window.__frameOf = {};
window.__draws = {};
let frame = 0, plotly;
Object.defineProperty(window, 'Plotly', { configurable: true, get() { return plotly; }, set(v) {
  plotly = v;
  const react = v.react;
  v.react = function (el) { window.__draws[el.id] = (window.__draws[el.id] || 0) + 1; return react.apply(this, arguments); };
} });
(function tick() { frame++; requestAnimationFrame(tick); })();
new MutationObserver(function () {
  for (const c of document.querySelectorAll('.chart')) {
    if (!(c.id in window.__frameOf) && c.querySelector('.main-svg')) window.__frameOf[c.id] = frame;
  }
}).observe(document, { childList: true, subtree: true });
"""


@pytest.mark.browser
def test_the_page_draws_every_chart_from_one_read_and_a_revisit_sends_no_static_file(
    tmp_path, data_dir
):
    from playwright.sync_api import expect, sync_playwright

    app = create_app(
        {
            "STORE_URL": f"sqlite:///{tmp_path / 'page.db'}",
            "EXECUTOR": RecordingExecutor(),
            "ALLOWED_HOSTS": "127.0.0.1",
        }
    )
    store = app.extensions["dnnframe"].store
    log = _recording(app)
    try:
        with (
            serving(app) as base,
            sync_playwright() as p,
            watched_page(p, viewport={"width": 1280, "height": 1000}) as (page, errors),
        ):
            exp_id = requests.post(base + "/api/v1/experiments", json=GRID, timeout=30).json()["id"]
            _finish(store, exp_id)
            log.clear()
            page.add_init_script(FRAMES)
            page.goto(f"{base}/experiments/{exp_id}")
            expect(page.locator("#trials tbody tr")).to_have_count(24)
            page.wait_for_function(CHARTS_DRAWN, timeout=30_000)
            assert page.evaluate(EVERY_CHART)
            # the charts in view come first, the ones below the window in a later frame, and
            # each is drawn once
            frames = page.evaluate("window.__frameOf")
            assert frames["chart-accuracy"] == frames["chart-curves"] < frames["chart-timeline"]
            draws = page.evaluate("window.__draws")
            assert len(draws) == 11 and set(draws.values()) == {1}, draws
            importance = page.evaluate("document.getElementById('chart-importance').data[0]")
            # the three parameters (the seed is the noise floor, no bar)
            assert importance["type"] == "bar" and len(importance["y"]) == 3
            assert (
                page.evaluate("document.getElementById('chart-contour').data[0].type") == "heatmap"
            )
            curves = page.evaluate("document.getElementById('chart-curves').data")
            assert curves and all(len(c["x"]) in (6, 12) for c in curves)
            data = [path for path, _ in log if "/api/" in path or path.endswith("/page-data")]
            # one read for the trials and the importance: no /trials, no /importance; the
            # page's head preloads it (the script's fetch takes that answer)
            assert data == [f"/experiments/{exp_id}/page-data"], data
            reads = page.evaluate("""() => performance.getEntriesByType('resource')
                .filter(e => e.name.includes('/page-data')).map(e => e.initiatorType)""")
            assert reads == ["link"], reads
            assert errors == [] and page.evaluate("window.__blocked") == []

            # a second visit: every static file and plotly.js come from the browser's cache
            # (their URLs hold their content hash), the data is revalidated: 304
            log.clear()
            page.goto(f"{base}/experiments/{exp_id}")
            page.wait_for_function(CHARTS_DRAWN, timeout=30_000)
            assert page.evaluate(EVERY_CHART)
            assert [p for p, _ in log if p.startswith(("/static/", "/vendor/"))] == []
            assert (f"/experiments/{exp_id}/page-data", 304) in log
            assert errors == []
    finally:
        app.extensions["dnnframe"].shutdown()
