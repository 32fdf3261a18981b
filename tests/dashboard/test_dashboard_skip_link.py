"""The skip link: on every page the first Tab reaches it, it shows while it has focus, and
Enter moves focus to the page's main content (past the navigation and the chart toolbars)."""

from __future__ import annotations

import pytest
import requests
from dashboard_support import TINY_SPEC, watched_page

PAGES = ["/", "/experiments/new", "/api/docs"]
FOCUSABLE_IN_MAIN = """() => document.querySelector(
    'main :is(a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"]))')"""


@pytest.mark.browser
def test_the_first_tab_reaches_a_skip_link_that_moves_focus_to_the_content(quiet_server):
    from playwright.sync_api import expect, sync_playwright

    base, store = quiet_server
    exp_id = requests.post(base + "/api/v1/experiments", json=TINY_SPEC, timeout=30).json()["id"]
    trial_id = store.list_trials(exp_id)[0].id
    other = {**TINY_SPEC, "name": "other", "model": {"hidden_layers": 3, "width": 4}}
    other_id = requests.post(base + "/api/v1/experiments", json=other, timeout=30).json()["id"]
    with sync_playwright() as p, watched_page(p) as (page, errors):
        for path in [
            *PAGES,
            f"/experiments/{exp_id}",
            f"/trials/{trial_id}",
            f"/compare?ids={exp_id},{other_id}",
        ]:
            page.goto(base + path)
            link = page.locator("a.skip-link")
            expect(link).to_have_count(1)
            assert not link.is_visible() or link.bounding_box()["y"] < 0, path
            page.keyboard.press("Tab")
            expect(link).to_be_focused()
            box = link.bounding_box()
            assert box is not None and box["y"] >= 0 and box["height"] > 0, path
            # what a Tab from the content reaches is drawn by script on some pages (the
            # API document's operations, the charts): wait for it before judging the Tab
            page.wait_for_function(FOCUSABLE_IN_MAIN)
            page.keyboard.press("Enter")
            main = page.locator(link.get_attribute("href"))
            expect(main).to_have_js_property("tagName", "MAIN")
            expect(main).to_be_focused()
            # the next Tab goes on from the content, not back to the navigation
            page.keyboard.press("Tab")
            inside = page.evaluate(
                "document.querySelector('main').contains(document.activeElement)"
            )
            assert inside, path
        assert errors == []
