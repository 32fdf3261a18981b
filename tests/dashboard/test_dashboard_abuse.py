"""The web tier under abuse: where a sign-in may send the browser, what a finished experiment
accepts, how much of a bad value an error repeats, how fast tokens can be guessed, what the
public health check tells, and the headers the pages carry."""

from __future__ import annotations

import re
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from dashboard_support import TINY_SPEC

from dnnframe.store import TrialState


def _login_csrf(client) -> str:
    html = client.get("/login").get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


# --------------------------------------------------------------------------- sign-in redirects
@pytest.mark.parametrize(
    "next_url",
    [
        "/\t/evil.example/fake-login",  # browsers drop the tab: //evil.example
        "/\n/evil.example",
        "/\r\n/evil.example",
        "/ /evil.example",
        "//evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "/\\/evil.example",
        "https://evil.example/",
        "javascript:alert(1)",
        "http:/evil.example",
    ],
)
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
    r = client.post(
        "/login", data={"csrf_token": csrf, "token": "s3cret", "next": "/experiments/new?x=1"}
    )
    assert r.status_code == 303 and r.headers["Location"] == "/experiments/new?x=1"


# --------------------------------------------------------------------------- cancel
def _finish_all(store, exp_id: str) -> None:
    ids = [t.id for t in store.list_trials(exp_id)]
    store.claim_trials(ids, "w")
    store.finish_trials(
        [(tid, TrialState.COMPLETE, {"metrics": {}}, None) for tid in ids], worker="w"
    )


def test_cancel_refuses_a_finished_experiment_and_keeps_its_label(client, store, recorder):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    _finish_all(store, exp_id)
    r = client.post(f"/api/v1/experiments/{exp_id}/cancel")
    assert r.status_code == 409 and "nothing left to cancel" in r.json["message"]
    assert recorder.cancelled == []
    exp = client.get(f"/api/v1/experiments/{exp_id}").json
    assert exp["status"] == "COMPLETE" and exp["counts"]["COMPLETE"] == 4
    # the page's form is refused the same way
    csrf = re.search(
        r'name="csrf_token" value="([^"]+)"', client.get("/experiments/new").get_data(as_text=True)
    ).group(1)
    assert (
        client.post(f"/experiments/{exp_id}/cancel", data={"csrf_token": csrf}).status_code == 409
    )


def test_a_cancel_recorded_after_the_end_does_not_relabel_it(store):
    store.create_experiment("e", "e", {}, 2)
    store.create_trials("e", [("a", {}), ("b", {})])
    store.claim_trials(["a", "b"], "w")
    store.finish_trials(
        [("a", TrialState.COMPLETE, None, None), ("b", TrialState.FAILED, None, "boom")], worker="w"
    )
    store.cancel_experiment("e")  # say, from the command line
    assert store.get_experiment("e").status == "COMPLETE_WITH_FAILURES"


def test_cancel_button_only_while_there_is_work_and_it_asks_first(client, store):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    page = client.get(f"/experiments/{exp_id}").get_data(as_text=True)
    assert 'id="cancel"' in page and "data-confirm=" in page and "confirm.js" in page
    _finish_all(store, exp_id)
    page = client.get(f"/experiments/{exp_id}").get_data(as_text=True)
    assert 'id="cancel"' not in page


# --------------------------------------------------------------------------- short refusals
BIG = "Z" * 2_000_000
BIG_SPECS = [
    {"name": BIG, "dataset": "iris"},
    {"dataset": BIG},
    {"dataset": "iris", "model": {"width": BIG}},
    {"dataset": "iris", "model": {BIG: 1}},
    {"dataset": "iris", "model": {"activation": {"grid": ["relu", BIG]}}},
    {"dataset": "iris", "model": {"width": {"int_range": [BIG, 2]}}},
    {"dataset": {"name": "iris", "params": {BIG: 1}}},
    {"dataset": {"name": "csv", "upload": BIG, "label_column": "y"}},
    {"dataset": "iris", "search": {"seeds": BIG}},
    {"dataset": "iris", "description": "\x01" + BIG},
]


@pytest.mark.parametrize("body", BIG_SPECS, ids=range(len(BIG_SPECS)))
def test_a_refusal_quotes_a_huge_value_briefly(client, body):
    r = client.post("/api/v1/validate", json=body)
    assert r.status_code == 400
    assert len(r.data) < 2000, r.data[:3000]
    assert "Z" * 41 not in r.get_data(as_text=True)


def test_query_parameters_and_form_fields_are_quoted_briefly(client):
    for query in ("offset=" + "9" * 100_000, "limit=" + "x" * 100_000):
        r = client.get("/api/v1/experiments?" + query)
        assert r.status_code == 400 and len(r.data) < 1000
    csrf = re.search(
        r'name="csrf_token" value="([^"]+)"', client.get("/experiments/new").get_data(as_text=True)
    ).group(1)
    r = client.post(
        "/experiments/new",
        data={
            "csrf_token": csrf,
            "name": "n",
            "dataset": "iris",
            "width": "W" * 1_000_000,
            "seeds": "S" * 1_000_000,
        },
    )
    page = r.get_data(as_text=True)
    assert r.status_code == 400
    # the form keeps what was typed (once, in its field), the messages quote it briefly
    assert page.count("W" * 1_000_000) == 1 and page.count("S" * 1_000_000) == 1
    assert len(page) < 2_000_000 + 50_000


def test_the_analysis_views_quote_a_huge_value_briefly(client):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    huge = "Z" * 100_000
    for path in (
        f"/api/v1/experiments?status={huge}",
        f"/api/v1/experiments/{exp_id}/importance?mode={huge}",
        f"/api/v1/experiments/{exp_id}/importance?evaluator={huge}",
        f"/api/v1/experiments/{exp_id}/spec?format={huge}",
    ):
        r = client.get(path)
        assert r.status_code == 400 and "Z" * 41 not in r.get_data(as_text=True), path[:80]
    csrf = re.search(
        r'name="csrf_token" value="([^"]+)"', client.get("/experiments/new").get_data(as_text=True)
    ).group(1)
    r = client.delete(
        f"/api/v1/experiments/{exp_id}?confirm={huge}", headers={"X-CSRF-Token": csrf}
    )
    assert r.status_code == 400 and "Z" * 41 not in r.get_data(as_text=True)


# --------------------------------------------------------------------------- token guessing
A, B = {"REMOTE_ADDR": "192.0.2.1"}, {"REMOTE_ADDR": "192.0.2.2"}


def _bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_wrong_bearer_tokens_are_throttled_per_client(make_app):
    client = make_app(API_TOKEN="s3cret", TOKEN_GUESS_LIMIT="5 per minute").test_client()
    for i in range(5):
        r = client.post(
            "/api/v1/validate", json=TINY_SPEC, headers=_bearer(f"guess{i}"), environ_overrides=A
        )
        assert r.status_code == 401
    r = client.post(
        "/api/v1/validate", json=TINY_SPEC, headers=_bearer("guess5"), environ_overrides=A
    )
    assert r.status_code == 429 and 0 < int(r.headers["Retry-After"]) <= 60
    assert "too many wrong API tokens" in r.json["message"]
    # the guesser gets nothing more, not even with the right token...
    r = client.post(
        "/api/v1/validate", json=TINY_SPEC, headers=_bearer("s3cret"), environ_overrides=A
    )
    assert r.status_code == 429
    # ...while the holder of the token on another client is not locked out
    r = client.post(
        "/api/v1/validate", json=TINY_SPEC, headers=_bearer("s3cret"), environ_overrides=B
    )
    assert r.status_code == 200


def test_wrong_tokens_at_sign_in_are_throttled_per_client(make_app):
    app = make_app(API_TOKEN="s3cret", TOKEN_GUESS_LIMIT="3 per minute")
    guesser, holder = app.test_client(), app.test_client()
    csrf = _login_csrf(guesser)
    for i in range(3):
        r = guesser.post("/login", data={"csrf_token": csrf, "token": f"g{i}"}, environ_overrides=A)
        assert r.status_code == 401
    r = guesser.post("/login", data={"csrf_token": csrf, "token": "s3cret"}, environ_overrides=A)
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    # a bearer guess from the same client is refused too: one count per client
    r = guesser.post(
        "/api/v1/validate", json=TINY_SPEC, headers=_bearer("s3cret"), environ_overrides=A
    )
    assert r.status_code == 429
    csrf = _login_csrf(holder)
    r = holder.post("/login", data={"csrf_token": csrf, "token": "s3cret"}, environ_overrides=B)
    assert r.status_code == 303


def _guess(client, environ, headers=None):
    return client.post(
        "/api/v1/validate",
        json=TINY_SPEC,
        headers={**_bearer("wrong"), **(headers or {})},
        environ_overrides=environ,
    )


def test_behind_a_trusted_proxy_clients_are_told_apart_by_forwarded_for(make_app):
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    client = make_app(
        API_TOKEN="s3cret", TOKEN_GUESS_LIMIT="2 per minute", TRUSTED_PROXIES=1
    ).test_client()
    guesser = {"X-Forwarded-For": "203.0.113.9"}
    assert [_guess(client, proxy, guesser).status_code for _ in range(3)] == [401, 401, 429]
    # another client behind the same proxy is not locked out with the guesser
    r = client.post(
        "/api/v1/validate",
        json=TINY_SPEC,
        headers={**_bearer("s3cret"), "X-Forwarded-For": "203.0.113.10"},
        environ_overrides=proxy,
    )
    assert r.status_code == 200


def test_without_trusted_proxies_a_forwarded_for_header_changes_nothing(make_app):
    client = make_app(API_TOKEN="s3cret", TOKEN_GUESS_LIMIT="2 per minute").test_client()
    # a guesser that invents a new address for each guess is still one client
    codes = [_guess(client, A, {"X-Forwarded-For": f"203.0.113.{i}"}).status_code for i in range(3)]
    assert codes == [401, 401, 429]


@pytest.fixture
def redis_url(tmp_path) -> Iterator[str]:
    """A Redis server of this test only (Debian's redis-server; .ci/run installs it), on a
    free port with no persistence; stopped afterwards."""
    import redis

    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("no redis-server here: install Debian's redis-server (.ci/run does this)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url, socket_timeout=2)
        deadline = time.monotonic() + 30
        while True:  # a deadline poll: the server takes connections once it has bound
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"redis-server on port {port} did not start (exit code {proc.poll()})"
                    )
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_shared_guess_storage_counts_every_process_together(make_app, redis_url):
    url = redis_url
    # two apps stand for two gunicorn processes; a fresh address per run keeps runs apart
    client = {"REMOTE_ADDR": f"198.18.{secrets.randbelow(250)}.{secrets.randbelow(250) + 1}"}
    config = {
        "API_TOKEN": "s3cret",
        "TOKEN_GUESS_LIMIT": "3 per minute",
        "TOKEN_GUESS_STORAGE": url,
    }
    first, second = make_app(**config).test_client(), make_app(**config).test_client()
    codes = [_guess(c, client).status_code for c in (first, second, first, second)]
    assert codes == [401, 401, 401, 429]


def test_an_unknown_guess_storage_is_a_settings_error_naming_it(make_app):
    from dnnframe.settings import SettingsError

    with pytest.raises(
        SettingsError, match="DNNFRAME_TOKEN_GUESS_STORAGE='bogus://x': unknown storage scheme"
    ):
        make_app(TOKEN_GUESS_STORAGE="bogus://x")


# --------------------------------------------------------------------------- public health
REMOTE = {"REMOTE_ADDR": "198.51.100.7"}


@pytest.fixture
def store_down(make_app, monkeypatch):
    """A dashboard whose MongoDB store refuses connections (a port nothing listens on)."""
    monkeypatch.setenv("DNNFRAME_MONGO_TIMEOUT_S", "0.2")
    return make_app(STORE_URL="mongodb://dnn:pw-s3cret@127.0.0.1:1/results", API_TOKEN="s3cret")


@pytest.mark.parametrize("path", ["/api/v1/health", "/api/v1/experiments", "/"])
def test_an_outage_tells_the_public_a_state_word_only(store_down, path, caplog):
    r = store_down.test_client().get(path, environ_overrides=REMOTE)
    text = r.get_data(as_text=True)
    assert r.status_code == 503 and "the result store is unavailable" in text
    for internal in ("mongodb://", "127.0.0.1:1", "results", "Topology", "pw-s3cret", "***"):
        assert internal not in text, internal
    # the details are in the log, for whoever runs the server
    assert "mongodb://dnn:***@127.0.0.1:1/results" in caplog.text


def test_the_token_holder_reads_what_is_wrong(store_down):
    r = store_down.test_client().get(
        "/api/v1/health", environ_overrides=REMOTE, headers={"Authorization": "Bearer s3cret"}
    )
    assert r.status_code == 503
    assert "mongodb://dnn:***@127.0.0.1:1/results" in r.json["message"]
    assert "pw-s3cret" not in r.get_data(as_text=True)
    # a wrong token reads nothing more than the public, and counts as a guess
    r = store_down.test_client().get(
        "/api/v1/health", environ_overrides=REMOTE, headers={"Authorization": "Bearer nope"}
    )
    assert r.status_code == 503 and "mongodb://" not in r.json["message"]


# --------------------------------------------------------------------------- the server's cap
def test_a_sweep_over_the_servers_cap_is_not_told_to_raise_it(client):
    body = {"dataset": "iris", "model": {"width": {"grid": list(range(1, 600_001))}}}
    r = client.post("/api/v1/validate", json=body)
    assert r.status_code == 400
    (error,) = r.json["errors"]
    assert error == {
        "path": "search",
        "message": "the sweep has 600000 trials, more than "
        "this server accepts (10000); narrow the search spaces or use fewer seeds",
    }


def test_the_form_preview_shows_the_cap_that_applies(client, app):
    csrf = re.search(
        r'name="csrf_token" value="([^"]+)"', client.get("/experiments/new").get_data(as_text=True)
    ).group(1)
    form = {
        "csrf_token": csrf,
        "name": "n",
        "dataset": "iris",
        "hidden_layers": "1",
        "width": "4",
        "activation": "relu",
        "optimizer": "adam",
        "learning_rate": "0.01",
        "epochs": "1",
        "batch_size": "32",
        "seeds": "1",
    }
    r = client.post("/api/v1/validate", data=form, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200, r.json
    assert r.json["spec"]["search"]["max_trials"] == app.config["MAX_TRIALS"] == 10_000


# --------------------------------------------------------------------------- page headers
def test_pages_carry_a_content_security_policy_with_a_fresh_nonce(client):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    nonces = set()
    for path in ("/", "/experiments/new", f"/experiments/{exp_id}", "/login"):
        r = client.get(path)
        policy = r.headers["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "object-src 'none'" in policy
        assert "frame-ancestors 'none'" in policy and "base-uri 'none'" in policy
        nonce = re.search(r"'nonce-([^']+)'", policy).group(1)
        nonces.add(nonce)
        # every inline script carries it; no other script is inline
        html = r.get_data(as_text=True)
        for tag in re.findall(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", html):
            assert f'nonce="{nonce}"' in tag, tag
        assert "'unsafe-eval'" not in policy  # no page builds code from strings
    assert len(nonces) == 4
    assert "Content-Security-Policy" not in client.get("/api/v1/experiments").headers
