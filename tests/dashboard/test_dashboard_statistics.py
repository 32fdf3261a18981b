"""Statistics that must not mislead, through the real API: diverged trials are counted and
the parameter that decided them named, and a best configuration tied on its mean says so."""

from __future__ import annotations

import math
import re

import pytest
import requests
from dashboard_support import artifacts_dir, watched_page

from dnnframe.store.base import TrialState

# the learning rate decides divergence: every trial at 1000 blows up
DIVERGING = {
    "name": "diverging",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2]}, "width": 4},
    "training": {"optimizer": "sgd", "max_epochs": 3, "learning_rate": {"grid": [0.05, 1000]}},
    "search": {"seeds": 2},
}
TIES = {
    "name": "ties",
    "dataset": {"name": "iris"},
    "model": {"activation": {"grid": ["relu", "tanh"]}, "width": 4},
    "training": {"max_epochs": 2, "learning_rate": {"grid": [0.01, 0.1]}},
    "search": {"seeds": 2},
}


def _contrast(fg: str, bg: str) -> float:
    """WCAG contrast ratio of two CSS ``rgb(r, g, b)`` colours."""

    def luminance(css: str) -> float:
        channels = [int(c) / 255 for c in re.findall(r"\d+", css)[:3]]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted([luminance(fg), luminance(bg)], reverse=True)
    return (high + 0.05) / (low + 0.05)


def _finish(store, trial_id, state, metrics, history=()):
    assert store.claim_trial(trial_id, "w1") is not None
    for row in history:
        assert store.append_metrics(trial_id, row, worker="w1")
    result = {"metrics": metrics, "epochs_run": len(history) or 3}
    assert store.finish_trial(trial_id, state, result=result, worker="w1")


def _diverging(client, store):
    exp_id = client.post("/api/v1/experiments", json=DIVERGING).json["id"]
    for t in store.list_trials(exp_id):
        if t.config["training"]["learning_rate"] == 1000:
            _finish(
                store,
                t.id,
                TrialState.DIVERGED,
                {"test_loss": float("nan")},
                [{"epoch": 1, "val_loss": 3e9}, {"epoch": 2, "val_loss": float("inf")}],
            )
        else:
            acc = 0.9 + 0.01 * t.config["model"]["hidden_layers"] + 0.001 * t.config["seed"]
            _finish(
                store,
                t.id,
                TrialState.COMPLETE,
                {"test_accuracy": acc, "test_loss": 1 - acc},
                [{"epoch": 1, "val_loss": 0.6}, {"epoch": 2, "val_loss": 0.4}],
            )
    return exp_id


def test_importance_counts_diverged_trials_as_the_worst_and_names_what_decided_them(client, store):
    exp_id = _diverging(client, store)
    for evaluator in ("ped_anova", "fanova"):
        body = client.get(f"/api/v1/experiments/{exp_id}/importance?evaluator={evaluator}").json
        # the four that diverged count as the worst accuracy (0): the rate decides, and ranks first
        assert body["n_trials"] == 8 and body["n_diverged"] == 4 and body["worst"] == 0.0
        assert body["params"] == ["hidden_layers", "learning_rate"]
        assert body["ranking"][0] == "learning_rate" and "seed" not in body["ranking"]
        assert body["diverged_at"] == {"learning_rate": [1000]}
        assert body["note"].endswith(
            "; 4 diverged trials count as the worst test_accuracy (0), "
            "and every trial diverged at learning_rate 1000"
        )
        # eight trials for two parameters: it says the answer is rough
        assert body["few_trials"] is True and body["note"].startswith(
            "rests on 8 trials for 2 parameters, fewer than 5 a parameter: a rough guide"
        )
    # an experiment where nothing diverged says nothing of it
    plain = client.post(
        "/api/v1/experiments",
        json={
            **DIVERGING,
            "name": "calm",
            "training": {"optimizer": "sgd", "max_epochs": 3, "learning_rate": 0.01},
        },
    ).json["id"]
    for t in store.list_trials(plain):
        _finish(store, t.id, TrialState.COMPLETE, {"test_accuracy": 0.9 + 0.01 * t.config["seed"]})
    body = client.get(f"/api/v1/experiments/{plain}/importance").json
    assert body["n_diverged"] == 0 and "diverged_at" not in body and "worst" not in body
    assert "diverged" not in body["note"]


def test_importance_names_the_seed_as_the_noise_floor_and_what_sits_below_it(client, store):
    spec = {
        "name": "noise",
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": {"grid": [1, 2, 3]}, "width": {"grid": [4, 8]}},
        "training": {"max_epochs": 2, "learning_rate": {"grid": [0.001, 0.01, 0.1]}},
        "search": {"seeds": 3},
    }
    exp_id = client.post("/api/v1/experiments", json=spec).json["id"]
    for t in store.list_trials(exp_id):
        lr, seed = t.config["training"]["learning_rate"], t.config["seed"]
        # the rate decides; the seed moves it a little; depth and width not at all
        _finish(
            store,
            t.id,
            TrialState.COMPLETE,
            {"test_accuracy": {0.001: 0.4, 0.01: 0.6, 0.1: 0.9}[lr] + 0.02 * seed},
        )
    body = client.get(f"/api/v1/experiments/{exp_id}/importance").json
    assert body["n_trials"] == 54 and body["few_trials"] is False and "note" not in body
    # the seed is fitted, as the noise floor, and never ranked as a parameter
    assert body["ranking"][0] == "learning_rate" and "seed" not in body["ranking"]
    assert "seed" not in body["importances"] and "seed" not in body["params"]
    assert body["noise_floor"] > 0
    assert sorted(body["below_noise"]) == ["hidden_layers", "width"]
    assert sum(body["importances"].values()) + body["noise_floor"] == pytest.approx(1)


def test_diverged_trials_come_back_as_diverged_not_as_numbers(client, store):
    exp_id = _diverging(client, store)
    trials = client.get(f"/api/v1/experiments/{exp_id}/trials?history=1&state=DIVERGED").json
    assert len(trials["trials"]) == 4
    for t in trials["trials"]:
        # non-finite values are no JSON numbers: null, with the state saying why
        assert t["state"] == "DIVERGED" and t["metrics"].get("test_loss") is None
        assert [h["val_loss"] for h in t["history"]] == [3e9, None]
    assert client.get(f"/api/v1/experiments/{exp_id}").json["counts"]["DIVERGED"] == 4


def test_the_best_configuration_is_ranked_by_its_mean_and_reports_ties(client, store):
    exp_id = client.post("/api/v1/experiments", json=TIES).json["id"]
    scores = {
        ("relu", 0.1): [0.95, 0.97],
        ("tanh", 0.1): [0.96, 0.96],
        ("relu", 0.01): [0.99, 0.5],
        ("tanh", 0.01): [0.96],
    }
    ids: dict[tuple, list[str]] = {}
    for t in store.list_trials(exp_id):
        key = (t.config["model"]["activation"], t.config["training"]["learning_rate"])
        ids.setdefault(key, []).append(t.id)
        taken = scores[key]
        seed = t.config["seed"]
        if seed < len(taken):
            _finish(store, t.id, TrialState.COMPLETE, {"test_accuracy": taken[seed]})
        else:
            _finish(store, t.id, TrialState.DIVERGED, {})
    best = client.get(f"/api/v1/experiments/{exp_id}").json["best_configuration"]
    # two configurations share the mean 0.96: a smaller spread breaks it
    assert (best["params"]["activation"], best["params"]["learning_rate"]) == ("tanh", 0.1)
    assert "seed" not in best["params"]
    assert best["n"] == 2 and best["sd"] == 0.0 and abs(best["mean"] - 0.96) < 1e-12
    assert best["trial_ids"] == sorted(ids[("tanh", 0.1)])
    assert best["n_configurations"] == 4
    assert (best["n_diverged"], best["n_pruned"]) == (0, 0)
    # tanh at 0.01 scored 0.96 too, but its other seed diverged: it counts as 0 there
    ties = [(c["params"]["activation"], c["params"]["learning_rate"], c["n"]) for c in best["ties"]]
    assert ties == [("relu", 0.1, 2)]
    # the same answer however often it is asked
    assert client.get(f"/api/v1/experiments/{exp_id}").json["best_configuration"] == best


@pytest.mark.browser
def test_the_page_shows_diverged_trials_ties_and_best_so_far_in_finishing_order(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=DIVERGING, timeout=30).json()["id"]
    ids = {t.id for t in store.list_trials(exp_id)}
    for t in sorted(store.list_trials(exp_id), key=lambda t: t.id):
        if t.config["training"]["learning_rate"] == 1000:
            _finish(
                store,
                t.id,
                TrialState.DIVERGED,
                {"test_loss": float("nan")},
                [{"epoch": 1, "val_loss": 3e9}, {"epoch": 2, "val_loss": float("inf")}],
            )
        else:  # both depths score 0.94 and 0.96 on their two seeds: a tie
            acc = 0.94 + 0.02 * t.config["seed"]
            _finish(
                store,
                t.id,
                TrialState.COMPLETE,
                {"test_accuracy": acc, "test_loss": 1 - acc},
                [{"epoch": 1, "val_loss": 0.6}, {"epoch": 2, "val_loss": 0.4}],
            )
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}")
        # the best is one of two configurations tied on the mean, and says so
        expect(page.locator("#best")).to_contain_text("tied on the mean with 1 other configuration")
        assert page.evaluate("document.getElementById('best').dataset.ties") == "1"
        for chart in (
            "chart-accuracy",
            "chart-best",
            "chart-curves",
            "chart-importance",
            "chart-contour",
        ):
            expect(page.locator(f"#{chart}.drawn")).to_have_count(1)
        layout = "(id) => document.getElementById(id).layout"
        data = "(id) => document.getElementById(id).data"
        title = "(id) => document.getElementById(id).layout.title.text.replaceAll('<br>', ' ')"
        # accuracy against depth by rate: the diverged trials are the rate-1000 line, ✕ at the
        # worst accuracy (0), counted at each depth
        assert "4 diverged, ✕ at the worst" in page.evaluate(title, "chart-accuracy")
        lines = {t["name"]: t for t in page.evaluate(data, "chart-accuracy")}
        assert sorted(lines) == ["learning rate 0.05", "learning rate 1000"]
        lost = lines["learning rate 1000"]
        assert lost["x"] == [1, 2] and lost["y"] == [0, 0]
        assert lost["marker"]["symbol"] == ["x-thin-open"] * 2
        assert lost["text"] == ["2 trial(s), 2 diverged: counted as 0, the worst"] * 2
        # the learning rate's slice has the four that diverged at 1000, ✕ at the worst
        lr_slice = next(
            t for t in page.evaluate(data, "chart-slice") if t["name"] == "learning rate"
        )
        at_1000 = [
            (y, m)
            for x, y, m in zip(
                lr_slice["x"], lr_slice["y"], lr_slice["marker"]["symbol"], strict=True
            )
            if x == 1000
        ]
        assert at_1000 == [(0, "x-thin-open")] * 4 and len(lr_slice["x"]) == 8
        # best so far over the 8 trials in finishing order, the diverged ones ✕ at the worst
        best = {t["name"]: t for t in page.evaluate(data, "chart-best")}
        assert sorted(
            best["completed trial"]["x"] + best["diverged trial (the worst)"]["x"]
        ) == list(range(1, 9))
        assert best["diverged trial (the worst)"]["y"] == [0] * 4
        assert best["best so far"]["x"] == best["completed trial"]["x"]
        # curves: the diverged ones (3e9) do not stretch the axis of those that trained
        curves = page.evaluate(layout, "chart-curves")
        assert curves["yaxis"]["range"][1] < 1
        # importance counts the diverged trials as the worst, so the rate ranks first, and
        # says it rests on few trials
        importance_title = page.evaluate(title, "chart-importance")
        assert (
            "8 trials" in importance_title
            and "4 diverged, counted as the worst (0)" in importance_title
        )
        assert "too few: a rough guide" in importance_title
        # the seed is no bar: it is the noise floor, a dashed line
        bars = page.evaluate(data, "chart-importance")[0]
        assert bars["y"] == ["hidden layers", "learning rate"]
        api = requests.get(base + f"/api/v1/experiments/{exp_id}/importance", timeout=30).json()
        floor = page.evaluate(layout, "chart-importance")["shapes"][0]
        assert floor["x0"] == api["noise_floor"]
        # the contour is drawn over the rate and the depth, the rate's 1000 among its cells
        heat = page.evaluate(data, "chart-contour")[0]
        assert "1000" in heat["x"] + heat["y"]
        # each chart has a text alternative: what it shows, and how much
        for chart in ("chart-accuracy", "chart-best", "chart-slice", "chart-parallel"):
            described = page.locator(f"#{chart}")
            # the parallel coordinates are a figure: their axes inside take the focus
            expect(described).to_have_attribute(
                "role", "figure" if chart == "chart-parallel" else "img"
            )
            assert " values" in described.get_attribute("aria-label")
        assert "8 trials over 3 axes" in page.get_attribute("#chart-parallel", "aria-label")
        assert page.get_attribute("#chart-best", "aria-label").startswith(
            "Highest test accuracy so far (4 diverged, ✕ at the worst): 12 values in 3 series"
        )
        # every state's badge reads at 4.5:1 or more (WCAG AA for its 11 px text)
        for name, fg, bg in page.evaluate("""() => {
            const v = JSON.parse(document.getElementById('dnnframe-vocabulary').textContent);
            const names = Object.values(v.states).concat(['COMPLETE_WITH_FAILURES']);
            return names.map(n => {
                const el = document.createElement('span');
                el.className = 'state state-' + n;
                el.textContent = n;
                document.body.appendChild(el);
                const style = getComputedStyle(el);
                return [n, style.color, style.backgroundColor];
            }); }"""):
            assert _contrast(fg, bg) >= 4.5, (name, fg, bg, _contrast(fg, bg))
        page.screenshot(path=str(artifacts_dir() / "dashboard-diverged.png"), full_page=True)
        # a slice's point is a trial: clicking it opens the trial's page
        point = page.locator("#chart-slice .scatterlayer .point").first
        point.scroll_into_view_if_needed()
        box = point.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_url("**/trials/t-*")
        assert page.url.rsplit("/", 1)[1] in ids
        assert errors == []


# twelve learning rates over four decades: a log axis, and more values than the parallel
# coordinates label one by one
RATES = [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1, 2e-1, 5e-1]
LR_SWEEP = {
    "name": "rates",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2]}, "width": 4},
    "training": {"max_epochs": 2, "learning_rate": {"grid": RATES}},
    "search": {"seeds": 2},
}


@pytest.mark.browser
def test_chart_choices_survive_a_reload_and_charts_respect_direction_bounds_and_log(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=LR_SWEEP, timeout=30).json()["id"]
    for t in store.list_trials(exp_id):
        lr, depth = t.config["training"]["learning_rate"], t.config["model"]["hidden_layers"]
        # seeds 1.0 and 0.9 at the best rate: mean 0.95 ± 0.07 would reach past 1
        acc = 1.0 - 0.1 * t.config["seed"] if lr == 1e-2 else 0.5 + 0.01 * depth + lr / 10
        _finish(store, t.id, TrialState.COMPLETE, {"test_accuracy": acc, "test_loss": 1 - acc})
    url = base + f"/experiments/{exp_id}"
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(url + "?x=learning_rate&group=hidden_layers&y=test_loss&log_y=1")
        # the choices in the URL are the page's
        expect(page.locator("#x-param")).to_have_value("learning_rate")
        expect(page.locator("#group-by")).to_have_value("hidden_layers")
        expect(page.locator("#y-metric")).to_have_value("test_loss")
        assert page.is_checked("#log-y")
        for chart in ("chart-accuracy", "chart-contour", "chart-parallel"):
            expect(page.locator(f"#{chart}.drawn")).to_have_count(1)
        layout = "(id) => document.getElementById(id).layout"
        data = "(id) => document.getElementById(id).data"
        # a loss's heatmap and parallel coordinates make the lowest (best) value bright
        assert page.evaluate(data, "chart-contour")[0]["reversescale"] is True
        parallel = page.evaluate("document.getElementById('chart-parallel').parallel")
        assert parallel["colour"]["reversescale"] is True
        # the learning rate's log axes are labelled with real values, a tick a decade
        lr_dim = next(d for d in parallel["dimensions"] if d["label"].startswith("learning"))
        assert lr_dim["ticktext"] == ["0.0001", "0.001", "0.01", "0.1", "1"]
        x_axis = page.evaluate(layout, "chart-accuracy")["xaxis"]
        assert (x_axis["type"], x_axis["dtick"], x_axis["tickformat"]) == ("log", 1, "~g")
        # a new choice goes into the URL, and a reload keeps it
        page.select_option("#y-metric", "test_accuracy")
        page.uncheck("#log-y")
        assert "y=test_accuracy" in page.url and "log_y" not in page.url
        # an accuracy's ± sd stops at 1 (and at 0)
        for trace in page.evaluate(data, "chart-accuracy"):
            for mean, plus, minus in zip(
                trace["y"], trace["error_y"]["array"], trace["error_y"]["arrayminus"]
            ):
                assert mean + plus <= 1 + 1e-12 and mean - minus >= -1e-12
        assert page.evaluate(data, "chart-contour")[0]["reversescale"] is False
        # the table sorts from the keyboard, says its order, and keeps it in the URL
        header = page.locator("#trials th[data-key=learning_rate]")
        header.locator("button").focus()
        page.keyboard.press("Enter")  # numbers sort descending first
        expect(header).to_have_attribute("aria-sort", "descending")
        first_rate = "document.querySelector('#trials tbody tr').dataset.trial"
        assert "sort=learning_rate" in page.url and "desc=1" in page.url
        top = page.evaluate(first_rate)
        assert store.get_trial(top).config["training"]["learning_rate"] == RATES[-1]
        page.keyboard.press("Space")
        expect(header).to_have_attribute("aria-sort", "ascending")
        assert "desc" not in page.url
        page.reload()
        expect(page.locator("#y-metric")).to_have_value("test_accuracy")
        expect(page.locator("#group-by")).to_have_value("hidden_layers")
        assert not page.is_checked("#log-y")
        expect(page.locator("#trials th[data-key=learning_rate]")).to_have_attribute(
            "aria-sort", "ascending"
        )
        expect(page.locator("#trials th[data-key=state]")).to_have_attribute("aria-sort", "none")
        assert (
            store.get_trial(page.evaluate(first_rate)).config["training"]["learning_rate"]
            == RATES[0]
        )
        assert errors == []


ASHA = {
    "name": "asha-sampled",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 3]}, "width": 4},
    "training": {"max_epochs": 3, "learning_rate": {"loguniform": [1e-4, 1e-1]}},
    "search": {"method": "asha", "num_samples": 12, "seeds": 1, "min_epochs": 1, "eta": 3},
}


@pytest.mark.browser
def test_a_sampled_rate_is_binned_in_the_contour_and_pruned_trials_stay_visible(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=ASHA, timeout=30).json()["id"]
    trials = sorted(store.list_trials(exp_id), key=lambda t: t.id)
    assert len({t.config["training"]["learning_rate"] for t in trials}) == 24
    for i, t in enumerate(trials):
        lr, depth = t.config["training"]["learning_rate"], t.config["model"]["hidden_layers"]
        acc = 0.6 + 0.05 * math.log10(lr) + 0.1 * depth
        epochs = 1 if i % 2 else 3  # every other trial stopped at the first rung
        _finish(
            store,
            t.id,
            TrialState.PRUNED if i % 2 else TrialState.COMPLETE,
            {"test_accuracy": acc, "test_loss": 1 - acc},
            [{"epoch": e, "val_accuracy": acc} for e in range(1, epochs + 1)],
        )
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}?mode=trials")
        for chart in ("chart-curves", "chart-contour"):
            expect(page.locator(f"#{chart}.drawn")).to_have_count(1)
        # every pruned trial's one point is drawn with a marker, not as an invisible line
        curves = page.evaluate("document.getElementById('chart-curves').data")
        pruned = [c for c in curves if c["meta"] == "PRUNED"]
        assert len(pruned) == 12 and all("markers" in c["mode"] for c in pruned)
        # 24 distinct learning rates fall into at most 8 log bins, not 24 columns
        heat = page.evaluate("document.getElementById('chart-contour').data[0]")
        layout = page.evaluate("document.getElementById('chart-contour').layout")
        axis = "x" if "learning" in layout["xaxis"]["title"]["text"] else "y"
        assert len(heat[axis]) <= 8 and all("–" in label for label in heat[axis])
        # every trial counts: the complete ones and the pruned ones, at the value they stopped at
        assert sum(sum(row) for row in heat["customdata"]) == 24
        assert errors == []


def test_a_finished_experiments_charts_do_not_wait_for_a_first_trial(client, store):
    exp_id = _diverging(client, store)
    html = client.get(f"/experiments/{exp_id}").get_data(as_text=True)
    # until the page's script has read the trials its charts say they are loading
    assert "Waiting for the first trial" not in html and "Loading the trials…" in html


def test_an_empty_integer_query_parameter_is_refused_by_name(client, store):
    """The document says integer: "limit=" is no integer, as "+5" is not (a form's empty
    field)."""
    exp_id = client.post("/api/v1/experiments", json=TIES).json["id"]
    for url, name in [
        ("/api/v1/experiments?limit=", "limit"),
        (f"/api/v1/experiments/{exp_id}/trials?offset=", "offset"),
        (f"/api/v1/experiments/{exp_id}/events?since=", "since"),
    ]:
        r = client.get(url)
        assert r.status_code == 400 and r.json["errors"][0]["path"] == name, (url, r.json)
        assert f"query parameter {name} must be an integer, but got ''" in r.json["message"]
