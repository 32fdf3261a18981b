"""Seeing a search: an ASHA experiment really pruned (real store, the runner, a stand-in train
function) shown by ``dnnframe status``, ``dnnframe report``, the API and the experiment page
in real headless Chromium (rung chart, best so far against time)."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner
from test_asha import ORDER, _spec, _stored, curve_train

from dashboard import create_app
from dnnframe.cli import cli
from dnnframe.store import open_store
from dnnframe.testing.chromium import launch, log_failed_requests
from dnnframe.testing.packs import run_one


@pytest.fixture
def pruned(tmp_path) -> tuple[str, str]:
    """A store holding one ASHA experiment of 8 trials, 5 of them pruned (see test_asha)."""
    url = f"sqlite:///{tmp_path / 'seen.db'}"
    store = open_store(url)
    ids = _stored(store, _spec(max_epochs=4))  # rungs at epochs 1 and 2
    for q in ORDER:
        run_one(ids[q], store, worker="w", train=curve_train)
    eid = store.list_experiments()[0].id
    assert store.counts_by_state(eid)["PRUNED"] == 5
    store.close()
    return url, eid


def test_status_and_report_count_pruned_trials(pruned, tmp_path):
    url, eid = pruned
    runner = CliRunner()
    as_json = runner.invoke(cli, ["status", eid, "--store", url, "--json"])
    assert as_json.exit_code == 0, as_json.output
    counts = json.loads(as_json.output)["counts"]
    assert counts["PRUNED"] == 5 and counts["COMPLETE"] == 3
    text = runner.invoke(cli, ["status", eid, "--store", url])
    assert "PRUNED 5" in text.output and "COMPLETE 3" in text.output
    out = tmp_path / "report.html"
    report = runner.invoke(cli, ["report", eid, "--store", url, "-o", str(out)])
    assert report.exit_code == 0, report.output
    assert "PRUNED: 5" in out.read_text(encoding="utf-8")
    listing = runner.invoke(cli, ["ls", "--store", url], env={"COLUMNS": "200"})
    assert listing.exit_code == 0, listing.output
    header, row = [
        line.split()
        for line in listing.output.splitlines()
        if line.strip() and not set(line.strip()) <= set("─ ")
    ][:2]
    assert row[header.index("pruned") + 1] == "5"  # the created column is two words


def test_the_api_gives_the_rungs_of_the_experiment(pruned):
    url, eid = pruned
    app = create_app({"TESTING": True, "STORE_URL": url})
    body = app.test_client().get(f"/api/v1/experiments/{eid}").get_json()
    assert body["search"] == {
        "method": "asha",
        "prunes": True,
        "rung_metric": "val_accuracy",
        "rungs": [1, 2],
    }
    assert body["counts"]["PRUNED"] == 5
    assert body["status_text"] == "finished, 5 of 8 pruned"


@pytest.mark.browser
def test_experiment_page_draws_the_rung_chart_and_best_so_far(pruned):
    from playwright.sync_api import expect, sync_playwright
    from werkzeug.serving import make_server

    url, eid = pruned
    app = create_app({"STORE_URL": url, "ALLOWED_HOSTS": "127.0.0.1"})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_playwright() as p:
            browser = launch(p)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1600})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                log_failed_requests(page)
                page.goto(f"http://127.0.0.1:{server.server_port}/experiments/{eid}")
                expect(page.locator("#chart-curves .main-svg").first).to_be_visible()
                expect(page.locator("#chart-best .main-svg").first).to_be_visible()
                rung = page.evaluate("""() => {
                    const el = document.getElementById('chart-curves');
                    return {title: el.layout.title.text,
                            rungs: el.layout.shapes.map(s => s.x0),
                            // pruned curves: fainter than finished ones, marked with a cross
                            faded: el.data.filter(t => t.opacity < 0.6 && t.marker &&
                                                       t.marker.symbol === 'x').map(t => t.meta),
                            lengths: el.data.map(t => t.x.length).sort()};
                }""")
                assert rung["title"].startswith("Rung chart: val accuracy by epoch")
                assert "5 pruned" in rung["title"]
                assert rung["rungs"] == [1, 2]
                assert rung["faded"] == ["PRUNED"] * 5
                assert rung["lengths"] == [1, 1, 1, 1, 2, 4, 4, 4]
                best = page.evaluate("""() => {
                    const el = document.getElementById('chart-best');
                    const line = el.data[el.data.length - 1];
                    return {names: el.data.map(t => t.name), xs: line.x, ys: line.y,
                            shape: line.line.shape};
                }""")
                # the pruned trials are drawn, at the value they stopped at; the line is the
                # best complete trial so far
                assert best["names"] == ["completed trial", "pruned trial", "best so far"]
                assert best["shape"] == "hv" and len(best["ys"]) == 3
                assert best["ys"] == sorted(best["ys"])  # never gets worse
                assert best["ys"][-1] == pytest.approx(0.804)  # q 8: 10 * 0.08 + 4 / 1000
                assert best["xs"] == sorted(best["xs"]) and best["xs"][0] >= 0
                assert errors == []
            finally:
                browser.close()
    finally:
        server.shutdown()
        thread.join(10)
        app.extensions["dnnframe"].shutdown()
