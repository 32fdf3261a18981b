"""End to end in real headless Chromium: fill the sweep form, submit, watch the trials train.

Real parts only: the app is served by a real HTTP server on 127.0.0.1, trials run in a real
LocalExecutor process pool through the engine, results land in a real SQLite file, and the
page follows them through the API's since-cursor.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from dashboard_support import artifacts_dir, serving, watched_page
from dashboard_support import browser as _browser

from dashboard import create_app

pytestmark = pytest.mark.browser


@pytest.fixture
def live_server(tmp_path, data_dir, monkeypatch):
    """The app on a real werkzeug server with the real local executor (no broker)."""

    monkeypatch.delenv("DNNFRAME_BROKER_URL", raising=False)
    monkeypatch.delenv("DNNFRAME_API_TOKEN", raising=False)
    # the real engine behind a gate the test opens once the page has shown unfinished trials
    gate = tmp_path / "gate"
    monkeypatch.setenv("DNNFRAME_TRAIN_FN", "dnnframe.testing.hooks:gate_then_train")
    monkeypatch.setenv("DNNFRAME_HOOK_GATE", str(gate))
    app = create_app({"STORE_URL": f"sqlite:///{tmp_path / 'e2e.db'}", "WORKERS": 1})
    try:
        with serving(app) as base:
            yield base, app, gate
    finally:
        app.extensions["dnnframe"].shutdown()


def _table_state(page) -> dict:
    return page.evaluate("""() => {
        const rows = Array.from(document.querySelectorAll('#trials tbody tr'));
        const chart = document.getElementById('chart-accuracy');
        const points = (chart.data || []).reduce((n, t) => n + (t.x ? t.x.length : 0), 0);
        return {rows: rows.length, states: rows.map(r => r.dataset.state), points: points,
                progress: document.getElementById('progress-text').textContent};
    }""")


@pytest.mark.slow
def test_submit_sweep_in_chromium_and_watch_it_complete(live_server):
    from playwright.sync_api import expect, sync_playwright

    base, app, gate = live_server
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1400}) as (page, errors),
    ):
        page.on(
            "request",
            lambda req: (
                errors.append("external request " + req.url)
                if not req.url.startswith(base)
                else None
            ),
        )
        page.goto(base + "/experiments/new")

        page.fill("#name", "browser-e2e")
        page.select_option("#dataset", "iris")
        page.fill("#hidden_layers", "1-2")
        page.fill("#width", "4")
        page.fill("#epochs", "2")
        page.fill("#seeds", "1")
        page.fill("#batch_size", "32")
        # a bad value: the server's message appears next to the field before submitting
        page.fill("#learning_rate", "-0.5")
        expect(page.locator("#error-learning_rate")).to_contain_text("greater than 0")
        page.fill("#learning_rate", "0.05")
        expect(page.locator("#trial-count")).to_have_text("2 trials")
        expect(page.locator("#error-learning_rate")).to_have_text("")

        page.click("#submit")
        page.wait_for_url("**/experiments/exp-*", timeout=30_000)
        expect(page.locator("#trials tbody tr")).to_have_count(2)

        # the trials wait at the gate: the page shows them unfinished first
        expect(page.locator("#progress-text")).to_contain_text("0 of 2")
        samples = [_table_state(page)]
        gate.touch()
        # bounds a failure only: on a machine with no compiled graph yet, the first trial
        # compiles its C modules first (past four minutes once, on two loaded cores)
        deadline = time.monotonic() + 480
        while time.monotonic() < deadline:
            state = _table_state(page)
            if not samples or state != samples[-1]:
                samples.append(state)
            if state["states"].count("COMPLETE") == 2 and state["points"] == 2:
                break
            if any(s in ("FAILED", "DIVERGED") for s in state["states"]):
                break
            page.wait_for_timeout(250)
        final = samples[-1]
        shot = artifacts_dir() / "dashboard-experiment.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"\nscreenshot: {shot.resolve()}")
        print("observed:", samples)

        assert final["states"] == ["COMPLETE", "COMPLETE"], (final, samples)
        assert final["points"] == 2  # hidden layers 1 and 2 on the accuracy chart
        # the page changed without a reload: it showed unfinished trials first
        assert any(s["states"].count("COMPLETE") < 2 for s in samples), samples
        assert samples[0]["points"] < final["points"], samples
        expect(page.locator("#progress-text")).to_have_text("2 of 2 trials done: 2 complete")
        # the table sorts by a clicked column
        column = "#trials tbody tr td:nth-child(2)"
        page.click("#trials th[data-key=hidden_layers]")  # numbers sort descending first
        assert page.eval_on_selector_all(column, "tds => tds.map(t => t.textContent)") == [
            "2",
            "1",
        ]
        page.click("#trials th[data-key=hidden_layers]")
        assert page.eval_on_selector_all(column, "tds => tds.map(t => t.textContent)") == [
            "1",
            "2",
        ]
        # the parallel coordinates: a line per trial on a canvas, axes and ticks in SVG
        parallel = page.evaluate("document.getElementById('chart-parallel').parallel")
        rows = page.eval_on_selector_all("#trials tbody tr", "rs => rs.map(r => r.dataset.trial)")
        assert sorted(parallel["ids"]) == sorted(rows)
        expect(page.locator("#chart-parallel canvas")).to_have_count(1)
        expect(page.locator("#chart-parallel .parallel-axis")).to_have_count(2)
        # a trial's own page draws its learning curve
        page.click("#trials tbody tr:first-child td:last-child a")
        page.wait_for_url("**/trials/t-*")
        expect(page.locator("#chart-loss .main-svg").first).to_be_visible()
        assert page.evaluate("document.getElementById('chart-loss').data[1].y.length") == 2
        assert errors == []


def test_csv_upload_fills_label_choices_and_counts(live_server, tmp_path):
    """The form uploads a CSV, offers its header as label columns and validates the sweep."""
    from playwright.sync_api import expect, sync_playwright

    base, app, gate = live_server
    csv_file = tmp_path / "flowers.csv"
    rows = ["petal,sepal,kind"] + [f"{i % 7}.5,{i % 5}.25,{'ab'[i % 2]}" for i in range(40)]
    csv_file.write_text("\n".join(rows) + "\n")
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = browser.new_page()
            page.goto(base + "/experiments/new")
            page.select_option("#dataset", "csv")
            expect(page.locator("#csv-fields")).to_be_visible()
            page.set_input_files("#csv-file", str(csv_file))
            expect(page.locator("#upload-info")).to_contain_text("40 rows")
            assert page.eval_on_selector_all(
                "#label_column option", "os => os.map(o => o.value)"
            ) == ["petal", "sepal", "kind"]
            expect(page.locator("#label_column")).to_have_value("kind")  # the non-numeric column
            page.fill("#hidden_layers", "1, 3")
            page.fill("#seeds", "1")
            expect(page.locator("#trial-count")).to_have_text("2 trials")
            # a numeric column as label makes 'kind' a (non-numeric) feature: error at the field
            page.select_option("#label_column", "petal")
            expect(page.locator("#error-label_column")).to_contain_text(
                "'kind': feature values must be numeric"
            )
            page.select_option("#label_column", "kind")
            expect(page.locator("#trial-count")).to_have_text("2 trials")
            upload_id = page.input_value("#upload")
            assert (
                Path(os.environ["DNNFRAME_DATA_DIR"]) / "uploads" / f"{upload_id}.csv"
            ).is_file()
        finally:
            browser.close()


def test_a_refused_csv_shows_the_servers_message_in_the_form(live_server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    base, app, gate = live_server
    csv_file = tmp_path / "one-column.csv"
    csv_file.write_text("only\n1\n2\n3\n")
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = browser.new_page()
            page.goto(base + "/experiments/new")
            page.select_option("#dataset", "csv")
            page.set_input_files("#csv-file", str(csv_file))
            expect(page.locator("#error-upload")).to_contain_text(
                "upload failed: CSV needs at least one feature column"
            )
            assert "cannot reach" not in page.inner_text("#sweep-form")
            assert page.input_value("#upload") == ""
        finally:
            browser.close()


def _train(store, trial_id: str, epochs: int, accuracy: float) -> None:
    from dnnframe.store.base import TrialState

    assert store.claim_trial(trial_id, "w1") is not None
    for epoch in range(1, epochs + 1):
        store.append_metrics(
            trial_id,
            {
                "epoch": epoch,
                "val_accuracy": accuracy * epoch / epochs,
                "val_loss": 1 - accuracy * epoch / epochs,
            },
        )
    result = {
        "metrics": {"test_accuracy": accuracy, "test_loss": 1 - accuracy},
        "timings": {"train": 0.5 + accuracy, "compile": 0.1},
        "epochs_run": epochs,
    }
    assert store.finish_trial(trial_id, TrialState.COMPLETE, result=result, worker="w1")


CHARTS = ["chart-accuracy", "chart-time", "chart-curves", "chart-parallel"]


def test_experiment_page_waits_then_draws_readable_charts_in_a_stable_table(quiet_server):
    import requests
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    spec = {
        "name": "forty-epochs",
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": {"grid": [1, 2]}, "width": 4},
        "training": {"max_epochs": 40, "batch_size": 32, "learning_rate": 0.01},
        "search": {"seeds": 2},
    }
    exp_id = requests.post(base + "/api/v1/experiments", json=spec, timeout=30).json()["id"]
    trial_ids = [t.id for t in store.list_trials(exp_id)]
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1400}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}")
        expect(page.locator("#trials tbody tr")).to_have_count(4)
        for chart in CHARTS:  # no empty axes before the first result
            expect(page.locator(f"#{chart}")).to_contain_text("Waiting for the first")
            assert (
                page.evaluate(f"(el => el.data || el.parallel)(document.getElementById('{chart}'))")
                is None
            )
        page.screenshot(path=str(artifacts_dir() / "dashboard-experiment-waiting.png"))
        order = page.eval_on_selector_all("#trials tbody tr", "rs => rs.map(r => r.dataset.trial)")

        # the last row finishes first: rows keep their places while states change
        _train(store, order[-1], 40, 0.8)
        expect(page.locator(f"#trials tbody tr[data-trial='{order[-1]}']")).to_have_attribute(
            "data-state", "COMPLETE"
        )
        assert (
            page.eval_on_selector_all("#trials tbody tr", "rs => rs.map(r => r.dataset.trial)")
            == order
        )
        expect(page.locator("#chart-accuracy .main-svg").first).to_be_visible()

        for trial_id, accuracy in zip(order[:-1], (0.6, 0.7, 0.9)):
            _train(store, trial_id, 40, accuracy)
        expect(page.locator("#trials tbody tr[data-state=COMPLETE]")).to_have_count(4)
        assert (
            page.eval_on_selector_all("#trials tbody tr", "rs => rs.map(r => r.dataset.trial)")
            == order
        )
        curves = page.evaluate("""() => {
            const el = document.getElementById('chart-curves');
            return {names: el.data.map(t => t.name), dtick: el.layout.xaxis.dtick,
                    ticks: Array.from(el.querySelectorAll('.xtick text'))
                        .map(t => t.textContent)};
        }""")
        # every parameter that varies names a curve, so no two legend entries are alike
        assert sorted(curves["names"]) == [
            "hidden layers 1, seed 0",
            "hidden layers 1, seed 1",
            "hidden layers 2, seed 0",
            "hidden layers 2, seed 1",
        ]
        # epochs 1..40: integer ticks every 5 epochs, not one per epoch
        assert curves["dtick"] == 5 and curves["ticks"][:7] == [
            "5",
            "10",
            "15",
            "20",
            "25",
            "30",
            "35",
        ]
        assert len(curves["ticks"]) <= 8
        # parallel coordinates spend no axis on the seed while other parameters vary
        dims = page.evaluate("""() => document.getElementById('chart-parallel').parallel
            .dimensions.map(d => [d.label, d.tickvals])""")
        assert dims == [["hidden layers", [1, 2]], ["test accuracy", None]]
        expect(page.locator("#status")).to_have_text("finished")
        shot = artifacts_dir() / "dashboard-experiment-charts.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"\nscreenshot: {shot.resolve()}")
        assert errors == []
        assert sorted(order) == sorted(trial_ids)
