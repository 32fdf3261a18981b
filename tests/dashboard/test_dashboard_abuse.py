"""The web tier under abuse: where a sign-in may send the browser, what a finished experiment
accepts, how much of a bad value an error repeats, how fast tokens can be guessed, what the
public health check tells, and the headers the pages carry."""

from __future__ import annotations

import re

import pytest


def _login_csrf(client) -> str:
    html = client.get("/login").get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


# --------------------------------------------------------------------------- sign-in redirects
@pytest.mark.parametrize("next_url", [
    "/\t/evil.example/fake-login",   # browsers drop the tab: //evil.example
    "/\n/evil.example", "/\r\n/evil.example", "/ /evil.example",
    "//evil.example", "/\\evil.example", "\\\\evil.example", "/\\/evil.example",
    "https://evil.example/", "javascript:alert(1)", "http:/evil.example",
])
def test_sign_in_never_sends_the_browser_to_another_site(make_app, next_url):
    client = make_app(API_TOKEN="s3cret").test_client()
    csrf = _login_csrf(client)
    r = client.post("/login", data={"csrf_token": csrf, "token": "s3cret", "next": next_url})
    assert r.status_code == 303 and r.headers["Location"] == "/"
    # the form carries no such target either
    page = client.get("/login", query_string={"next": next_url}).get_data(as_text=True)
    assert "evil.example" not in page


def test_sign_in_goes_back_to_the_page_that_asked(make_app):
    client = make_app(API_TOKEN="s3cret").test_client()
    csrf = _login_csrf(client)
    r = client.post("/login", data={"csrf_token": csrf, "token": "s3cret",
                                    "next": "/experiments/new?x=1"})
    assert r.status_code == 303 and r.headers["Location"] == "/experiments/new?x=1"
