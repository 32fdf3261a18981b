"""Helpers shared by the dashboard tests."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dnnframe.executors import Executor
from dnnframe.testing.chromium import launch, log_failed_requests

# Collects what the browser blocked, from before any page script runs.
WATCH_POLICY = """
window.__blocked = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__blocked.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


def artifacts_dir() -> Path:
    """Where browser tests leave their screenshots (DNNFRAME_TEST_ARTIFACTS)."""
    path = Path(os.environ.get("DNNFRAME_TEST_ARTIFACTS", "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def browser(playwright):
    """Headless Debian Chromium through Playwright, blind to the machine's interface changes
    (dnnframe/testing/chromium.py; a test marked ``browser`` skips, naming the package, when
    it is missing: tests/tiers.py)."""
    return launch(playwright)


@contextlib.contextmanager
def watched_page(playwright, **page_args) -> Iterator[tuple[Any, list[str]]]:  # noqa: ANN001
    """A page of a new headless Chromium that records its uncaught script errors (the list
    yielded with it) and what its Content-Security-Policy blocked (``window.__blocked``);
    the browser closes after."""
    b = browser(playwright)
    try:
        page = b.new_page(**page_args)
        page.add_init_script(WATCH_POLICY)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        log_failed_requests(page)
        yield page, errors
    finally:
        b.close()


class RecordingExecutor(Executor):
    """Records what the API hands to the executor, and runs nothing.

    The API tests check *what* the app submits and cancels; training for real is the job of
    the browser test (a real LocalExecutor) and of the executor's own tests.
    """

    def __init__(self) -> None:
        self.submitted: list[list[str]] = []
        self.cancelled: list[str] = []
        self._lock = threading.Lock()

    def submit(self, packs: list[list[str]], compile_keys: list[str] | None = None) -> None:
        with self._lock:
            self.submitted.append([tid for pack in packs for tid in pack])

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def cancel(self, experiment_id: str) -> int:
        with self._lock:
            self.cancelled.append(experiment_id)
        return 0

    def shutdown(self, wait: bool = True) -> None:
        pass


TINY_SPEC = {
    "name": "tiny",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2]}, "width": 4},
    "training": {"max_epochs": 2, "batch_size": 32, "learning_rate": 0.01},
    "search": {"seeds": 2},
}


@contextlib.contextmanager
def serving(app) -> Iterator[str]:
    """``app`` on a real threaded HTTP server on a free local port: yields its base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def read_events(response) -> queue.Queue:
    """Parsed events of a streamed response, read by a thread (so waits can be bounded)."""
    out: queue.Queue = queue.Queue()

    def read() -> None:
        buffer = ""
        for chunk in response.response:
            buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                out.put(block)
        out.put(None)  # the stream ended

    threading.Thread(target=read, daemon=True).start()
    return out


def next_event(events: queue.Queue, timeout: float = 20.0) -> str:
    """The next event (keep-alive comments skipped), waiting at most ``timeout`` in all;
    "" once the stream ended."""
    deadline = time.monotonic() + timeout
    while True:
        block = events.get(timeout=max(0.0, deadline - time.monotonic()))
        if block is None:
            return ""
        if block.startswith("event:"):
            return block


# each trace a page drew: the type its script asked for, and the type plotly.js drew it as
# (a type plotly.js has not registered is drawn as a scatter, silently)
_TRACE_TYPES = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap((gd) =>
    (gd._fullData || []).map((t) => [(t._input && t._input.type) || 'scatter', t.type]))"""


def drawn_trace_types(page) -> set[str]:  # noqa: ANN001
    """The trace types the page's charts drew, each checked to be registered in the
    plotly.js the dashboard serves (dashboard/plotly_bundle.py's TRACES)."""
    from dashboard.plotly_bundle import TRACES

    pairs = page.evaluate(_TRACE_TYPES)
    unregistered = {asked for asked, drawn in pairs if asked != drawn or asked not in TRACES}
    assert not unregistered, f"trace types plotly.js does not register here: {unregistered}"
    return {asked for asked, _ in pairs}


# what a page had loaded and when (ms from its navigation), for a wait that failed
_LOADED = """() => ({
    ready: document.readyState,
    live: document.body ? document.body.dataset.live || null : null,
    resources: performance.getEntriesByType('resource').map((e) =>
        [e.name.split('/').pop().split('?')[0], Math.round(e.startTime), Math.round(e.responseEnd)]),
})"""


def wait_until(page, expression: str) -> None:  # noqa: ANN001
    """``page.wait_for_function(expression)`` (the suite's 30 s), failing with what the page
    had loaded by then: a page under CI's load has been seen to stop loading its scripts."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(expression)
    except PlaywrightTimeout as exc:
        raise AssertionError(
            f"{expression} never held; the page: {page.evaluate(_LOADED)}"
        ) from exc
