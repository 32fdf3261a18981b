"""Notes in real headless Chromium: written on an experiment page and on a trial page, seen
after a reload and from another browser; a save made meanwhile elsewhere is reported, not
overwritten; whatever a note holds is shown as text (no script or handler of it runs);
and a page following its trial live never throws away a note being typed."""

from __future__ import annotations

import pytest
from dashboard_support import TINY_SPEC, serving, watched_page

from dnnframe.store import TrialState

pytestmark = pytest.mark.browser

EXPERIMENT_NOTE = (
    "# Baseline\nwidth 4 is **enough** here, see https://example.org/runs.\n\n"
    "- depth 2 overfits\n- seed `1` diverged"
)
TRIAL_NOTE = "Curve flattens after epoch 1.\nRerun with **lr 0.005**?"
# what the note view shows of them, read by _shown
SHOWN_EXPERIMENT = {
    "headings": ["Baseline"],
    "strong": ["enough"],
    "items": ["depth 2 overfits", "seed 1 diverged"],
    "code": ["1"],
    "links": ["https://example.org/runs"],
}
SHOWN_TRIAL = {"headings": [], "strong": ["lr 0.005"], "items": [], "code": [], "links": []}
ATTACK = (
    '<script>window.__pwned = "script"</script>\n'
    "<img src=x onerror=\"window.__pwned = 'img'\">\n"
    '**<b onmouseover="window.__pwned = 1">bold</b>** `<svg onload="window.__pwned = 2">`\n'
    "- [link](javascript:window.__pwned=3) javascript:alert(1)\n"
    'https://example.org/"><img src=y onerror="window.__pwned = 4">'
)


@pytest.fixture
def served(make_app):
    app = make_app()
    with serving(app) as base:
        yield base, app


def _submitted(app) -> tuple[str, list[str]]:
    client, store = app.test_client(), app.extensions["dnnframe"].store
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    return exp_id, [t.id for t in store.list_trials(exp_id)]


def _finish(store, trial_id: str, accuracy: float = 0.8) -> None:
    if store.get_trial(trial_id).state is TrialState.QUEUED:
        store.claim_trial(trial_id, "w")
    history = [{"epoch": 1, "train_loss": 0.9, "val_loss": 1.0, "val_accuracy": accuracy}]
    store.append_metrics_many({trial_id: history}, worker="w")
    assert store.finish_trial(
        trial_id,
        TrialState.COMPLETE,
        worker="w",
        result={
            "status": "COMPLETE",
            "history": history,
            "epochs_run": 1,
            "n_params": 40,
            "metrics": {"test_accuracy": accuracy, "test_loss": 0.5},
            "timings": {"data": 0.0, "compile": 0.1, "train": 0.2, "total": 0.3},
        },
    )


def _state(page, state: str) -> None:
    page.wait_for_function("(s) => document.getElementById('notes').dataset.state === s", arg=state)


def _write(page, text: str) -> None:
    page.click("#note-edit")
    page.fill("#note-text", text)
    page.click("#note-save")
    _state(page, "saved")


def _shown(page) -> dict:
    """What the note view shows, once notes.js has drawn it."""
    page.wait_for_function("() => !document.querySelector('#note-view .hint')")
    return page.evaluate("""() => {
        const all = (s) => Array.from(document.querySelectorAll('#note-view ' + s))
            .map(e => e.textContent);
        return {headings: all('h3, h4, h5'), strong: all('strong'), items: all('li'),
                code: all('code'), links: all('a')};
    }""")


@pytest.mark.slow
def test_notes_are_seen_after_a_reload_and_from_another_browser(served):
    from playwright.sync_api import expect, sync_playwright

    base, app = served
    store = app.extensions["dnnframe"].store
    exp_id, trial_ids = _submitted(app)
    for tid in trial_ids:
        _finish(store, tid)
    experiment, trial = base + f"/experiments/{exp_id}", base + f"/trials/{trial_ids[0]}"
    with sync_playwright() as p, watched_page(p) as (page, errors):
        page.goto(experiment)
        expect(page.locator("#note-view")).to_have_text("No notes yet.")
        _write(page, EXPERIMENT_NOTE)
        assert _shown(page) == SHOWN_EXPERIMENT
        page.reload()
        assert _shown(page) == SHOWN_EXPERIMENT
        page.goto(trial)
        _write(page, TRIAL_NOTE)
        page.reload()
        assert _shown(page) == SHOWN_TRIAL
        assert page.evaluate("document.querySelector('#note-view p').innerText") == (
            "Curve flattens after epoch 1.\nRerun with lr 0.005?"
        )

        # another browser (no cookie or storage shared) sees both ...
        other = page.context.browser.new_context().new_page()
        other.goto(experiment)
        assert _shown(other) == SHOWN_EXPERIMENT
        other.goto(trial)
        assert _shown(other) == SHOWN_TRIAL
        # ... and when both edit the trial's note, the later save is refused, its text kept
        page.click("#note-edit")
        other.click("#note-edit")
        page.fill("#note-text", "from the first browser")
        page.click("#note-save")
        _state(page, "saved")
        other.fill("#note-text", "from the second browser")
        other.click("#note-save")
        _state(other, "error")
        expect(other.locator("#note-status")).to_contain_text("changed elsewhere")
        assert other.input_value("#note-text") == "from the second browser"
        assert store.trial_note(trial_ids[0]).text == "from the first browser"
        other.click("#note-save")  # now "Save anyway": knowingly over the other
        _state(other, "saved")
        page.reload()
        expect(page.locator("#note-view")).to_have_text("from the second browser")
        assert errors == [] and page.evaluate("window.__blocked") == []
    assert store.experiment_note(exp_id).text == EXPERIMENT_NOTE


@pytest.mark.slow
def test_a_note_is_shown_as_text_whatever_it_holds(served):
    from playwright.sync_api import sync_playwright

    base, app = served
    store = app.extensions["dnnframe"].store
    exp_id, trial_ids = _submitted(app)
    store.set_experiment_note(exp_id, ATTACK)  # saved by some client of the API
    with sync_playwright() as p, watched_page(p) as (page, errors):
        page.goto(base + f"/trials/{trial_ids[0]}")
        _write(page, ATTACK)  # typed into the page itself, shown from the save's answer
        pages = [page.evaluate("() => document.getElementById('note-view').innerText")]
        for path in (f"/experiments/{exp_id}", f"/trials/{trial_ids[0]}"):
            page.goto(base + path)
            page.wait_for_function("() => !document.querySelector('#note-view .hint')")
            pages.append(page.evaluate("() => document.getElementById('note-view').innerText"))
            found = page.evaluate("""() => ({
                pwned: window.__pwned === undefined ? null : String(window.__pwned),
                elements: document.querySelectorAll('#note-view script, #note-view img, '
                    + '#note-view svg, #note-view b, #note-view [onerror], #note-view [onload], '
                    + '#note-view [onmouseover]').length,
                hrefs: Array.from(document.querySelectorAll('#note-view a')).map(a => a.href),
                scripts: document.scripts.length})""")
            assert found["pwned"] is None and found["elements"] == 0, (path, found)
            assert found["hrefs"] == ["https://example.org/"], (path, found)
        for shown in pages:
            for text in (
                '<script>window.__pwned = "script"</script>',
                "<img src=x onerror=\"window.__pwned = 'img'\">",
                "[link](javascript:window.__pwned=3) javascript:alert(1)",
                '"><img src=y onerror="window.__pwned = 4">',
            ):
                assert text in shown, (text, shown)
        assert page.evaluate("window.__pwned") is None
        # nothing of the note even tried to run (the page policy would have reported it)
        assert page.evaluate("window.__blocked") == [] and errors == []


@pytest.mark.slow
def test_a_live_page_keeps_a_note_being_typed(served):
    from playwright.sync_api import expect, sync_playwright

    base, app = served
    store = app.extensions["dnnframe"].store
    exp_id, trial_ids = _submitted(app)
    running, other = trial_ids[0], trial_ids[1]
    store.claim_trial(running, "w")
    typed = "Watching this one:\nloss drops fast"
    with sync_playwright() as p, watched_page(p) as (page, errors):
        # the experiment page redraws its table and charts as trials change
        page.goto(base + f"/experiments/{exp_id}")
        page.click("#note-edit")
        page.fill("#note-text", typed)
        _finish(store, other)
        expect(page.locator(f"#trials tbody tr[data-trial='{other}']")).to_have_attribute(
            "data-state", "COMPLETE"
        )
        assert page.input_value("#note-text") == typed and page.is_visible("#note-form")
        page.click("#note-save")
        _state(page, "saved")
        expect(page.locator("#note-view")).to_contain_text("loss drops fast")

        # the trial page reloads for the results once its trial is over: not while typing
        page.goto(base + f"/trials/{running}")
        page.click("#note-edit")
        page.fill("#note-text", typed)
        store.append_metrics(running, {"epoch": 1, "train_loss": 0.9, "val_loss": 1.0}, worker="w")
        page.wait_for_function("() => document.body.dataset.epochs === '1'")
        assert page.input_value("#note-text") == typed
        _finish(store, running)
        page.wait_for_function(
            """() => document.getElementById('state').textContent === 'COMPLETE'
            && document.getElementById('notes').dataset.waiting === '1'""",
        )
        assert page.input_value("#note-text") == typed
        expect(page.locator("#note-status")).to_contain_text("The trial is over")
        with page.expect_navigation():
            page.click("#note-save")  # saved, then the page reloads for the results
        expect(page.locator("#final-metrics tr")).to_have_count(2)
        assert page.evaluate("document.querySelector('#note-view p').innerText") == typed
        assert errors == []
    assert store.trial_note(running).text == typed


def test_a_saved_note_reaches_other_open_pages_live_without_clobbering_typing(served):
    from playwright.sync_api import expect, sync_playwright

    base, app = served
    store = app.extensions["dnnframe"].store
    exp_id, trial_ids = _submitted(app)
    store.claim_trial(trial_ids[0], "w")  # running: both pages follow it live
    experiment = base + f"/experiments/{exp_id}"
    live = "() => document.body.dataset.live === 'stream'"
    with sync_playwright() as p, watched_page(p) as (page, errors):
        other = page.context.browser.new_context().new_page()  # another browser's page
        for each in (page, other):
            each.goto(experiment)
            each.wait_for_function(live)
        _write(page, "first finding")
        expect(other.locator("#note-view")).to_have_text("first finding")
        # the other page is typing when a second save arrives: its text stays as typed
        other.click("#note-edit")
        other.fill("#note-text", "typing here")
        page.click("#note-edit")
        page.fill("#note-text", "second finding")
        page.click("#note-save")
        _state(page, "saved")
        other.wait_for_function("() => document.getElementById('notes').dataset.incoming === '2'")
        assert other.input_value("#note-text") == "typing here" and other.is_visible("#note-form")
        expect(other.locator("#note-status")).to_contain_text("changed elsewhere")
        other.fill("#note-text", "first finding")  # back to what it opened: cancel asks nothing
        other.click("#note-cancel")
        expect(other.locator("#note-view")).to_have_text("second finding")

        # a running trial's note, on two of its pages (each follows the trial live)
        trial = base + f"/trials/{trial_ids[0]}"
        for each in (page, other):
            each.goto(trial)
            each.wait_for_function(live)
        _write(page, "trial finding")
        expect(other.locator("#note-view")).to_have_text("trial finding")
        _write(page, "trial finding, again")
        expect(other.locator("#note-view")).to_have_text("trial finding, again")
        assert errors == []
    assert store.experiment_note(exp_id).text == "second finding"
    assert store.trial_note(trial_ids[0]).text == "trial finding, again"


def test_pages_of_a_finished_experiment_see_a_saved_note_without_a_reload(served):
    """A finished experiment's pages hold no live stream: another tab of the browser learns of
    a save at once, another browser's page when it is brought back into view."""
    from playwright.sync_api import expect, sync_playwright

    base, app = served
    store = app.extensions["dnnframe"].store
    exp_id, trial_ids = _submitted(app)
    for tid in trial_ids:
        _finish(store, tid)
    with sync_playwright() as p, watched_page(p) as (first, errors):
        mine = first.context.browser.new_context()
        page, tab = mine.new_page(), mine.new_page()  # two tabs of one browser
        other = first.context.browser.new_context().new_page()  # another person's browser
        for each in (page, tab, other):
            each.on("pageerror", lambda exc: errors.append(str(exc)))
        for url in (f"/experiments/{exp_id}", f"/trials/{trial_ids[0]}"):
            for each in (page, tab, other):
                each.goto(base + url)
                expect(each.locator("#note-view")).to_have_text("No notes yet.")
            assert page.evaluate("document.body.dataset.live") != "stream"
            _write(page, f"finding on {url}")
            expect(tab.locator("#note-view")).to_have_text(f"finding on {url}")
            expect(other.locator("#note-view")).to_have_text("No notes yet.")
            other.evaluate("() => document.dispatchEvent(new Event('visibilitychange'))")
            expect(other.locator("#note-view")).to_have_text(f"finding on {url}")
        assert errors == []
