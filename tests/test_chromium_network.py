"""The browser tests' Chromium (dnnframe/testing/chromium.py) finishes a request that is in
flight while this machine's interfaces change; Debian's Chromium started as it is fails the
same request with net::ERR_NETWORK_CHANGED. The suite's other tests change the interfaces
while browser tests run (namespace hosts' veth pairs, Docker's bridges): a page then lost
the scripts it was loading and stayed half drawn."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from dnnframe.testing.chromium import ARGS, CHROMIUM, launch

WAIT_MS = 30_000
# Chromium's connections per host: the request after them waits in its socket pool, which is
# what a network change fails (a request already sent waits on for its answer)
PER_HOST = 6

# a page's fetches of /slow, each settling into window.outcomes[i]: "ok" or "failed"
FETCH_SLOW = """([who, n]) => {
    window.outcomes = [];
    for (let i = 0; i < n; i++) {
        // distinct URLs: Chromium's HTTP cache lets one request of a URL go at a time
        fetch('/slow?who=' + who + '&i=' + i).then(r => r.text()).then(
            () => { window.outcomes[i] = 'ok'; }, () => { window.outcomes[i] = 'failed'; });
    }
}"""
QUEUED_SETTLED = f"() => window.outcomes[{PER_HOST}] !== undefined"
ALL_SETTLED = f"() => window.outcomes.filter(o => o).length === {PER_HOST + 1}"


def test_a_blind_process_cannot_open_a_routing_netlink_socket_and_can_open_others():
    probe = (
        "import socket\n"
        "from dnnframe.testing.chromium import blind\n"
        "blind()\n"
        "try:\n"
        "    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)\n"
        "    print('route open')\n"
        "except PermissionError:\n"
        "    print('route refused')\n"
        "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 15).close()  # kobject uevents\n"
        "socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()\n"
        "print('others open')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split("\n")[:2] == ["route refused", "others open"], out


class _Slow(BaseHTTPRequestHandler):
    """``/`` is an empty page; ``/slow?who=…&i=…`` answers once the test releases it."""

    arrived: dict[str, int]
    changed: threading.Condition
    release: threading.Event

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        if url.path == "/slow":
            with self.changed:
                self.arrived[parse_qs(url.query)["who"][0]] += 1
                self.changed.notify_all()
            self.release.wait(WAIT_MS / 1000)
            body = b"done"
        else:
            body = b"<!doctype html><title>slow</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _server() -> Iterator[tuple[str, type[_Slow]]]:
    handler = type(
        "Handler",
        (_Slow,),
        {
            "arrived": {"plain": 0, "blind": 0},
            "changed": threading.Condition(),
            "release": threading.Event(),
        },
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler
    finally:
        handler.release.set()
        server.shutdown()
        thread.join(10)


@contextmanager
def _a_cable() -> Iterator[Callable[[], None]]:
    """A veth pair in this (the root) namespace, as a namespace host's cable is; yields a
    function that adds or removes its end's address, each a change Chromium is told of."""
    name = f"dfchr{uuid.uuid4().hex[:8]}"
    address = f"10.233.{64 + os.getpid() % 128}.1/30"
    present = [False]

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    def toggle() -> None:
        ip("addr", "del" if present[0] else "add", address, "dev", name)
        present[0] = not present[0]

    ip("link", "add", name, "type", "veth", "peer", "name", name + "p")
    try:
        ip("link", "set", name, "up")
        yield toggle
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True, timeout=30)


@pytest.mark.browser
@pytest.mark.netns
def test_a_queued_request_survives_interface_changes_in_the_tests_chromium():
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with _server() as (base, handler), sync_playwright() as p:
        plain = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        blind = launch(p)
        try:
            pages = {"plain": plain.new_page(), "blind": blind.new_page()}
            failures: dict[str, list[str]] = {who: [] for who in pages}
            for who, page in pages.items():
                page.on("requestfailed", lambda r, who=who: failures[who].append(r.failure))
                page.goto(base + "/")
                page.evaluate(FETCH_SLOW, [who, PER_HOST + 1])
            with handler.changed:  # every connection of both browsers is waiting on us
                assert handler.changed.wait_for(
                    lambda: min(handler.arrived.values()) >= PER_HOST, WAIT_MS / 1000
                ), handler.arrived
            with _a_cable() as toggle:
                # the unfiltered browser fails its queued request at a change it is told of
                # (changed again until it has: the last request may reach its pool late)
                deadline = time.monotonic() + WAIT_MS / 1000
                while True:
                    toggle()
                    try:
                        pages["plain"].wait_for_function(QUEUED_SETTLED, timeout=500)
                        break
                    except PlaywrightTimeout:
                        assert time.monotonic() < deadline, "plain Chromium failed nothing"
            assert pages["plain"].evaluate("() => window.outcomes")[PER_HOST] == "failed"
            assert failures["plain"] == ["net::ERR_NETWORK_CHANGED"], failures
            # the tests' browser was told of nothing: its queued request waited, and is answered
            assert failures["blind"] == []
            handler.release.set()
            pages["blind"].wait_for_function(ALL_SETTLED, timeout=WAIT_MS)
            assert pages["blind"].evaluate("() => window.outcomes") == ["ok"] * (PER_HOST + 1)
        finally:
            plain.close()
            blind.close()
