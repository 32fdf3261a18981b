"""Cross-filtering: brushing the parallel coordinates filters the trial table and the other
charts, and the brushes live in the URL."""

from __future__ import annotations

import json

import pytest
import requests
from dashboard_support import watched_page

from dnnframe.store.base import TrialState

SPEC = {
    "name": "brushed",
    "dataset": {"name": "iris"},
    "model": {
        "hidden_layers": {"grid": [1, 2]},
        "width": 4,
        "activation": {"grid": ["relu", "tanh"]},
    },
    "training": {"max_epochs": 2, "learning_rate": {"grid": [0.001, 0.01, 0.1]}},
    "search": {"seeds": 1},
}


# what the parallel chart shows (parallel-chart.js keeps it on its element), and an axis
PARALLEL = "document.getElementById('chart-parallel').parallel"
AXIS = "#chart-parallel .parallel-axis[data-key=%s]"


def _rows(page) -> list[str]:
    return page.eval_on_selector_all("#trials tbody tr", "rs => rs.map(r => r.dataset.trial)")


def _brushes(page) -> dict:
    return json.loads(requests.utils.unquote(page.url.split("brush=")[1].split("&")[0]))


def _finished_sweep(quiet_server) -> tuple[str, str, dict[str, tuple[float, str]]]:
    """The server's base URL, a finished 12-trial experiment whose accuracy grows with the
    learning rate, and each trial's (learning rate, activation)."""
    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=SPEC, timeout=30).json()["id"]
    config = {}
    for t in store.list_trials(exp_id):
        config[t.id] = (t.config["training"]["learning_rate"], t.config["model"]["activation"])
        assert store.claim_trial(t.id, "w1")
        acc = 0.5 + 4 * t.config["training"]["learning_rate"]
        result = {"metrics": {"test_accuracy": acc, "test_loss": 1 - acc}, "epochs_run": 2}
        assert store.finish_trial(t.id, TrialState.COMPLETE, result=result, worker="w1")
    return base, exp_id, config


def _drag(page, key: str, start: float, end: float) -> None:
    """A real mouse drag along an axis, from and to fractions of its height from the top."""
    axis = page.locator(f"{AXIS % key} .parallel-hit")
    axis.scroll_into_view_if_needed()
    box = axis.bounding_box()
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + box["height"] * start)
    page.mouse.down()
    page.mouse.move(x, box["y"] + box["height"] * end, steps=5)
    page.mouse.up()


@pytest.mark.browser
def test_brushing_the_parallel_coordinates_filters_the_table_and_charts(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, exp_id, config = _finished_sweep(quiet_server)
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        # a brush in the URL: the learning rate between 0.005 and 0.5
        brush = json.dumps({"learning_rate": {"ranges": [[0.005, 0.5]]}})
        page.goto(base + f"/experiments/{exp_id}?" + f"brush={requests.utils.quote(brush)}")
        expect(page.locator("#trials tbody tr")).to_have_count(8)
        assert {config[t][0] for t in _rows(page)} == {0.01, 0.1}
        expect(page.locator("#brushed")).to_contain_text("Showing 8 of 12 trials")
        # every chart, the parallel coordinates (drawn last on a first load) included
        expect(page.locator("body[data-charts=drawn]")).to_have_count(1)
        slices = page.evaluate("document.getElementById('chart-slice').data")
        assert all(len(s["x"]) == 8 for s in slices)
        # the parallel chart draws every trial, with the brush on the rate's (log) axis, and
        # the brush's box on that axis
        parallel = page.evaluate(PARALLEL)
        rate = next(d for d in parallel["dimensions"] if d["label"].startswith("learning"))
        assert len(rate["values"]) == 12 and len(parallel["ids"]) == 12
        assert rate["brush"] == [[pytest.approx(-2.30103), pytest.approx(-0.30103)]]
        expect(page.locator(f"{AXIS % 'learning_rate'} .parallel-brush")).to_have_count(1)
        # the reader drags along the activation axis: a brush over relu
        _drag(page, "activation", 0.97, 0.85)  # relu is the axis's bottom value
        expect(page.locator("#trials tbody tr")).to_have_count(4)
        assert {config[t] for t in _rows(page)} == {(0.01, "relu"), (0.1, "relu")}
        assert _brushes(page) == {
            "learning_rate": {"ranges": [[pytest.approx(0.005), pytest.approx(0.5)]]},
            "activation": {"values": ["relu"]},
        }
        # a drag inside the brush moves it: up to tanh, the axis's top value
        _drag(page, "activation", 0.99, 0.02)
        page.wait_for_function("() => decodeURIComponent(location.search).includes('tanh')")
        assert _brushes(page)["activation"] == {"values": ["tanh"]}
        expect(page.locator("#trials tbody tr")).to_have_count(4)
        assert {config[t] for t in _rows(page)} == {(0.01, "tanh"), (0.1, "tanh")}
        # a reload keeps the brushes; "show every trial" lets them go
        page.reload()
        expect(page.locator("#trials tbody tr")).to_have_count(4)
        expect(page.locator(f"{AXIS % 'activation'} .parallel-brush")).to_have_count(1)
        page.click("#clear-brush")
        expect(page.locator("#trials tbody tr")).to_have_count(12)
        expect(page.locator("#brushed")).to_be_hidden()
        assert "brush=" not in page.url
        assert all("brush" not in d for d in page.evaluate(PARALLEL)["dimensions"])
        expect(page.locator("#chart-parallel .parallel-brush")).to_have_count(0)
        # a click on an axis (no drag) clears its brush alone
        _drag(page, "activation", 0.97, 0.85)
        expect(page.locator("#trials tbody tr")).to_have_count(6)
        _drag(page, "activation", 0.5, 0.5)
        expect(page.locator("#trials tbody tr")).to_have_count(12)
        assert "brush=" not in page.url
        assert errors == []


@pytest.mark.browser
def test_the_parallel_coordinates_answer_the_keyboard_and_name_and_open_a_trial(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, exp_id, config = _finished_sweep(quiet_server)
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}")
        expect(page.locator("body[data-charts=drawn]")).to_have_count(1)
        # drawn on a 2D canvas: no WebGL context, whose shaders a GPU-less browser compiles slowly
        assert page.evaluate("""() => { const c = document.querySelector('#chart-parallel canvas');
            return c.getContext('webgl') === null && c.getContext('2d') !== null; }""")
        # an axis takes the focus: the arrow keys step a brush through its values
        page.focus(AXIS % "learning_rate")
        page.keyboard.press("ArrowUp")  # from the bottom: the smallest rate
        expect(page.locator("#trials tbody tr")).to_have_count(4)
        assert {config[t][0] for t in _rows(page)} == {0.001}
        page.keyboard.press("ArrowUp")  # the next: halfway (in log terms) to its neighbours
        page.wait_for_function("() => decodeURIComponent(location.search).includes('0.0316')")
        expect(page.locator("#trials tbody tr")).to_have_count(4)
        assert {config[t][0] for t in _rows(page)} == {0.01}
        # the focus stays on the axis through the redraw; Escape clears its brush
        assert page.evaluate("document.activeElement.dataset.key") == "learning_rate"
        page.keyboard.press("Escape")
        expect(page.locator("#trials tbody tr")).to_have_count(12)
        assert "brush=" not in page.url
        # hovering a line names its trial; clicking it opens the trial's page
        svg = page.locator("#chart-parallel .parallel-svg")
        box = svg.bounding_box()
        axes = page.eval_on_selector_all(
            "#chart-parallel .parallel-axis > line:first-child",
            "ls => ls.map(l => +l.getAttribute('x1'))",
        )
        found = None
        for y in range(0, int(box["height"]), 2):
            page.mouse.move(box["x"] + (axes[0] + axes[1]) / 2, box["y"] + y)
            found = page.get_attribute("#chart-parallel", "data-hovered")
            if found:
                break
        assert found in config
        expect(page.locator("#chart-parallel .parallel-tip")).to_contain_text(f"trial {found}")
        page.mouse.down()
        page.mouse.up()
        page.wait_for_url(f"**/trials/{found}")
        assert errors == []


@pytest.mark.browser
def test_column_filters_narrow_the_table_and_charts_with_the_brush_and_survive_a_reload(
    quiet_server,
):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=SPEC, timeout=30).json()["id"]
    config = {}
    for t in store.list_trials(exp_id):
        config[t.id] = (
            t.config["training"]["learning_rate"],
            t.config["model"]["activation"],
            t.config["model"]["hidden_layers"],
        )
        assert store.claim_trial(t.id, "w1")
        acc = 0.5 + 4 * t.config["training"]["learning_rate"]
        result = {"metrics": {"test_accuracy": acc, "test_loss": 1 - acc}, "epochs_run": 2}
        assert store.finish_trial(t.id, TrialState.COMPLETE, result=result, worker="w1")
    slice_sizes = "document.getElementById('chart-slice').data.map(s => s.x.length)"
    with (
        sync_playwright() as p,
        watched_page(p, viewport={"width": 1280, "height": 1100}) as (page, errors),
    ):
        page.goto(base + f"/experiments/{exp_id}")
        expect(page.locator("#trials tbody tr")).to_have_count(12)
        expect(page.locator("#chart-slice.drawn")).to_have_count(1)
        rate = page.get_by_label("Filter learning rate")
        expect(rate).to_have_attribute("placeholder", "a..b")
        # each filter sits under its own column's header, in one row
        placed = page.evaluate("""() => [...document.querySelectorAll('#trials thead tr')[1]
            .querySelectorAll('input')].map((input, i) => {
              const cell = input.getBoundingClientRect();
              const head = document.querySelectorAll('#trials thead tr')[0].children[i]
                .getBoundingClientRect();
              return [Math.round(cell.top), cell.left >= head.left - 1 && cell.right <= head.right + 1];
            })""")
        assert len({top for top, _ in placed}) == 1 and all(inside for _, inside in placed), placed
        # a range on a number column: the table and the charts keep the trials inside it
        rate.fill("0.005..0.5")
        expect(page.locator("#trials tbody tr")).to_have_count(8)
        assert {config[t][0] for t in _rows(page)} == {0.01, 0.1}
        expect(page.locator("#brushed")).to_contain_text("Showing 8 of 12 trials")
        expect(page.locator("#brushed")).to_contain_text("learning rate 0.005..0.5")
        page.wait_for_function(f"{slice_sizes}.every(n => n === 8)")
        # text on a text column: "=relu" is the value itself; it adds to the range
        page.get_by_label("Filter activation").fill("=relu")
        expect(page.locator("#trials tbody tr")).to_have_count(4)
        page.wait_for_function(f"{slice_sizes}.every(n => n === 4)")
        assert {config[t][:2] for t in _rows(page)} == {(0.01, "relu"), (0.1, "relu")}
        # the filters combine with a brush (here one on depth) through the same test
        brush = json.dumps({"hidden_layers": {"ranges": [[2, 2]]}})
        filters = json.loads(requests.utils.unquote(page.url.split("filter=")[1].split("&")[0]))
        assert filters == {"learning_rate": "0.005..0.5", "activation": "=relu"}
        page.goto(page.url + f"&brush={requests.utils.quote(brush)}")
        expect(page.locator("#trials tbody tr")).to_have_count(2)
        assert {config[t] for t in _rows(page)} == {(0.01, "relu", 2), (0.1, "relu", 2)}
        # a reload keeps them, in the inputs too
        page.reload()
        expect(page.locator("#trials tbody tr")).to_have_count(2)
        expect(page.get_by_label("Filter learning rate")).to_have_value("0.005..0.5")
        expect(page.get_by_label("Filter activation")).to_have_value("=relu")
        page.wait_for_function(f"{slice_sizes}.every(n => n === 2)")
        # text that is no range on a number column says so rather than showing nothing quietly
        page.get_by_label("Filter hidden layers").fill("deep")
        expect(page.get_by_label("Filter hidden layers")).to_have_attribute("aria-invalid", "true")
        # "show every trial" lets every filter go, the inputs emptied
        page.click("#clear-brush")
        expect(page.locator("#trials tbody tr")).to_have_count(12)
        expect(page.get_by_label("Filter activation")).to_have_value("")
        assert "filter=" not in page.url and "brush=" not in page.url
        page.wait_for_function(f"{slice_sizes}.every(n => n === 12)")
        assert errors == []
