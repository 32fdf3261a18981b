"""Static files and plotly.js: compressed once at the best level, named by their content hash
in the pages' URLs and cached a year under it, revalidated against an ETag otherwise."""

from __future__ import annotations

import gzip
import re
import time
from pathlib import Path

import brotli
import pytest

from dashboard import assets, plotly_bundle
from dashboard.assets import negotiate

STATIC = Path(assets.__file__).parent / "static"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory of the test's own, and no asset read before it."""
    monkeypatch.setenv("DNNFRAME_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(assets, "_assets", {})
    return tmp_path / "cache" / "assets"


def _versioned(html: str, name: str) -> str:
    found = re.search(rf'"(/static/{re.escape(name)}\?v=[0-9a-f]{{16}})"', html)
    assert found, f"{name} is not linked with its content hash"
    return found.group(1)


@pytest.mark.parametrize(
    ("header", "chosen"),
    [
        ("gzip, deflate, br, zstd", "br"),
        ("gzip", "gzip"),
        ("br;q=0, gzip", "gzip"),
        ("identity", None),
        ("", None),
        ("*", "br"),
        ("*;q=0", None),
        ("zstd", None),
        ("GZIP;q=0.5", "gzip"),
        ("br;q=oops, gzip", "gzip"),
    ],
)
def test_the_encoding_is_the_smallest_the_client_accepts(header, chosen):
    assert negotiate(header) == chosen


def test_pages_link_static_files_by_content_hash_and_those_are_cached_a_year(client, cache):
    html = client.get("/experiments/new").get_data(as_text=True)
    url = _versioned(html, "style.css")
    r = client.get(url, headers={"Accept-Encoding": "gzip, deflate, br, zstd"})
    assert r.status_code == 200 and r.headers["Content-Encoding"] == "br"
    assert brotli.decompress(r.data) == (STATIC / "style.css").read_bytes()
    cache_control = r.headers["Cache-Control"]
    assert "immutable" in cache_control and "max-age=31536000" in cache_control
    assert "public" in cache_control and "Accept-Encoding" in r.headers["Vary"]
    # compressed once at the best level, and kept on disk for the next process
    assert r.data == brotli.compress((STATIC / "style.css").read_bytes(), quality=11, lgwin=24)
    assert len(list(cache.glob("*.br"))) == 1


def test_a_file_asked_for_without_its_hash_is_revalidated_each_time(client, cache):
    for url in ("/static/experiment.js", "/static/experiment.js?v=0123456789abcdef"):
        r = client.get(url, headers={"Accept-Encoding": "gzip"})
        assert r.status_code == 200 and r.headers["Cache-Control"] == "no-cache"
        assert gzip.decompress(r.data) == (STATIC / "experiment.js").read_bytes()
        again = client.get(
            url, headers={"Accept-Encoding": "gzip", "If-None-Match": r.headers["ETag"]}
        )
        assert again.status_code == 304 and again.data == b""
    # the ETag names the encoding: a client that takes brotli does not get gzip's 304
    other = client.get(
        "/static/experiment.js",
        headers={"Accept-Encoding": "br", "If-None-Match": r.headers["ETag"]},
    )
    assert other.status_code == 200 and other.headers["Content-Encoding"] == "br"


def test_identity_is_the_file_itself(client, cache):
    r = client.get("/static/plotting.js", headers={"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in r.headers
    assert r.data == (STATIC / "plotting.js").read_bytes()
    assert r.mimetype == "text/javascript"


@pytest.mark.parametrize(
    "path", ["/static/../__init__.py", "/static/nope.js", "/static/%2e%2e/__init__.py"]
)
def test_nothing_outside_the_static_folder_is_served(client, cache, path):
    assert client.get(path).status_code == 404


def test_a_changed_file_gets_a_new_hash_in_the_pages(client, cache, tmp_path, monkeypatch):
    folder = tmp_path / "static"
    folder.mkdir()
    (folder / "style.css").write_text("body { color: red }")
    monkeypatch.setattr(assets, "STATIC", folder)
    first = _versioned(client.get("/experiments/new").get_data(as_text=True), "style.css")
    time.sleep(0.01)
    (folder / "style.css").write_text("body { color: blue }")
    second = _versioned(client.get("/experiments/new").get_data(as_text=True), "style.css")
    assert first != second
    assert (
        client.get(second, headers={"Accept-Encoding": "identity"}).data == b"body { color: blue }"
    )


def test_a_large_file_is_sent_quickly_compressed_until_its_best_copy_is_made(
    client, cache, monkeypatch
):
    monkeypatch.setattr(assets, "BACKGROUND_BYTES", 1000)
    data = (STATIC / "experiment-charts.js").read_bytes()
    version = assets.asset(STATIC / "experiment-charts.js").version
    url = f"/static/experiment-charts.js?v={version}"
    quick = client.get(url, headers={"Accept-Encoding": "br"})
    # a first request does not wait for the best copy: it gets a quick one, not to be kept
    assert brotli.decompress(quick.data) == data
    assert quick.headers["ETag"].endswith('.br.quick"')
    assert quick.headers["Cache-Control"] == "no-cache"
    deadline = time.monotonic() + 30
    while not list(cache.glob("*.br")):
        assert time.monotonic() < deadline, "the best copy was never made"
        time.sleep(0.05)
    while True:  # the copy is on disk; the thread marks it done just after
        best = client.get(url, headers={"Accept-Encoding": "br"})
        if not best.headers["ETag"].endswith('.quick"'):
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert brotli.decompress(best.data) == data and len(best.data) <= len(quick.data)
    assert "immutable" in best.headers["Cache-Control"]
    # another process finds the copy on disk
    monkeypatch.setattr(assets, "_assets", {})
    assert client.get(url, headers={"Accept-Encoding": "br"}).data == best.data


def test_plotly_is_linked_by_hash_and_loaded_deferred(client, store, cache):
    from dashboard_support import TINY_SPEC

    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    html = client.get(f"/experiments/{exp_id}").get_data(as_text=True)
    tag = re.search(r"<script[^>]*/vendor/plotly\.min\.js[^>]*>", html).group(0)
    assert " defer" in tag and 'id="plotly-js"' in tag
    version = assets.plotly_asset().version
    assert f"/vendor/plotly.min.js?v={version}" in tag
    # what that URL sends is the trimmed bundle (dashboard/plotly_bundle.py), not the file
    sent = client.get(f"/vendor/plotly.min.js?v={version}", headers={"Accept-Encoding": ""})
    assert sent.data == plotly_bundle.trim(assets.plotly_path().read_bytes())
    assert len(sent.data) < assets.plotly_path().stat().st_size


def test_precompress_makes_every_copy_once(cache, monkeypatch):
    monkeypatch.setattr(assets, "plotly_path", lambda: STATIC / "style.css")
    made = assets.precompress()
    assert STATIC / "experiment.js" in made
    files = {p.name for p in cache.iterdir()}
    assert len(files) == 2 * len({assets.asset(p).digest for p in made})
