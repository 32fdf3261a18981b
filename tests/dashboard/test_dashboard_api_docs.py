"""The API reference page (/api/docs): Swagger UI from the installed package's files, under
the dashboard's Content-Security-Policy, linked from every page's navigation."""

from __future__ import annotations

import re

import pytest
from dashboard_support import serving, watched_page

from dashboard.api_docs import ASSETS
from dashboard.openapi import openapi_document


def test_the_page_loads_its_files_from_this_site_and_its_script_has_the_nonce(client):
    r = client.get("/api/docs/")
    assert r.status_code == 200 and r.mimetype == "text/html"
    html = r.get_data(as_text=True)
    nonce = re.search(r"'nonce-([^']+)'", r.headers["Content-Security-Policy"])[1]
    assert f'<script nonce="{nonce}">' in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    # nothing from another host (a "#..." is the skip link's place on this page)
    assert all(s.startswith(("/", "#")) for s in sources), sources
    assert '"/api/v1/openapi.json"' in html
    for name in ASSETS:
        asset = client.get(f"/api/docs/{name}")
        assert asset.status_code == 200 and asset.data, name


def test_only_the_listed_files_are_served(client):
    for name in ("LICENSE", "VERSION", "oauth2-redirect.html", "..%2f__init__.py"):
        assert client.get(f"/api/docs/{name}").status_code == 404, name


def test_the_navigation_links_the_api_reference(client):
    assert 'href="/api/docs/">API</a>' in client.get("/").get_data(as_text=True)


@pytest.mark.browser
def test_swagger_ui_shows_every_operation_under_the_policy(make_app):
    from playwright.sync_api import sync_playwright

    app = make_app()
    operations = sum(len(ops) for ops in openapi_document(app)["paths"].values())
    with serving(app) as base, sync_playwright() as p, watched_page(p) as (page, errors):
        page.goto(base + "/api/docs/")
        page.wait_for_function(
            f"() => document.querySelectorAll('.opblock').length === {operations}", timeout=30_000
        )
        assert page.evaluate("window.__blocked") == []
        assert errors == []
