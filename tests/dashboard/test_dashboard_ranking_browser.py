"""The best configuration of a real sweep at the edge of divergence (diverging_sweep.py's
EDGE_SWEEP: ties on the accuracy, a seed that diverged), in real headless Chromium: the
page's ranking (plotting.js over outcomes.js) and the server's (dashboard/ranking.py) give
every configuration the same mean, counts and trials, and name the same best, before and
after a reload; "sweep again" centres on it."""

from __future__ import annotations

import pytest
import yaml
from dashboard_support import serving, watched_page
from diverging_sweep import EDGE_SWEEP, run_diverging_sweep

from dashboard import create_app
from dashboard.ranking import rank_configurations
from dnnframe.states import ANALYSED_STATES
from dnnframe.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the sweep trains for real

# the page's own rule, run in the page over the trials the API gives
PAGE_RANKING = """async (url) => {
    const trials = (await (await fetch(url)).json()).trials;
    const counted = window.DnnOutcomes.over(trials, () => 'max');
    return window.DnnPlot.rankConfigurations(trials, (t) => counted.value(t, 'test_accuracy'), 'max')
        .map((c) => [c.params.width, c.params.learning_rate, c.mean, c.n, c.diverged, c.pruned,
                     c.trialIds, c.bestTrialId]);
}"""


@pytest.fixture(scope="module")
def edge_sweep(tmp_path_factory):
    return run_diverging_sweep(tmp_path_factory.mktemp("edge"), EDGE_SWEEP)


def test_the_page_and_the_server_rank_configurations_alike(edge_sweep, data_dir):
    from playwright.sync_api import sync_playwright

    url, exp_id = edge_sweep
    store = open_store(url)
    trials = store.list_trials(exp_id, state=list(ANALYSED_STATES))
    ranked = rank_configurations(trials, "test_accuracy", "max")
    assert any(c.n_diverged and c.n_diverged < c.n for c in ranked), "no seed diverged alone"
    values = [t.result["metrics"]["test_accuracy"] for t in trials if t.state.value == "COMPLETE"]
    assert len(set(values)) < len(values), "no trials tie"
    expected = [
        [c.params["width"], c.params["learning_rate"], c.mean, c.n, c.n_diverged, c.n_pruned]
        + [list(c.trial_ids), c.best_trial_id]
        for c in ranked
    ]
    app = create_app({"STORE_URL": url, "ALLOWED_HOSTS": "127.0.0.1"})
    try:
        with serving(app) as base, sync_playwright() as p, watched_page(p) as (page, errors):
            page.goto(base + f"/experiments/{exp_id}")
            api = f"/api/v1/experiments/{exp_id}/trials?limit=1000"
            assert page.evaluate(PAGE_RANKING, api) == expected
            best = page.request.get(base + f"/api/v1/experiments/{exp_id}").json()
            best = best["best_configuration"]
            assert best["best_trial_id"] == ranked[0].best_trial_id
            for _ in range(2):  # as first drawn, and after a reload
                page.wait_for_function(
                    "(id) => document.getElementById('best').dataset.trial === id",
                    arg=best["best_trial_id"],
                )
                shown = page.evaluate("document.getElementById('best').dataset.trials")
                assert shown == " ".join(best["trial_ids"])
                page.reload()
            page.goto(base + f"/experiments/new?around={exp_id}")
            sweep = yaml.safe_load(page.input_value("#spec_text"))
            assert ranked[0].params["learning_rate"] in sweep["training"]["learning_rate"]["grid"]
            assert errors == []
    finally:
        app.extensions["dnnframe"].shutdown()
        store.close()
