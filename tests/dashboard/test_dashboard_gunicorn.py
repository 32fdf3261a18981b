"""The production server for real: gunicorn with two worker processes on a free port.

A browser session obtained from one worker must be valid on the other (one session key for
all workers), and SIGTERM must let a request in flight finish before the server exits 0.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret"


class Gunicorn:
    """A gunicorn process whose output lines are read into a queue as they come."""

    def __init__(self, env: dict[str, str], command: list[str] | None = None):
        self.proc = subprocess.Popen(
            command
            or [
                sys.executable,
                "-m",
                "gunicorn",
                "--config",
                "python:dashboard.gunicorn_config",
                "--bind",
                "127.0.0.1:0",
                "--workers",
                "2",
                "dashboard.wsgi:app",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line)
        self.lines.put("")  # end of output

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The first line from now on that matches ``pattern``."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"no line matching {pattern!r}:\n{''.join(self.output)}"
                ) from None
            if line == "":
                raise AssertionError(f"gunicorn ended before {pattern!r}:\n{''.join(self.output)}")
            match = re.search(pattern, line)
            if match:
                return match

    def served_by(self, request_line: str) -> int:
        """The pid of the worker whose access log line shows ``request_line`` next."""
        return int(self.wait_for(re.escape(request_line) + r".* pid=<(\d+)>").group(1))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DNNFRAME_SECRET_KEY",
            "DNNFRAME_ALLOWED_HOSTS",
            "DNNFRAME_BIND_HOST",
            "DNNFRAME_BROKER_URL",
            "GUNICORN_CMD_ARGS",
            "WEB_CONCURRENCY",
        )
    }
    env.update(
        {"DNNFRAME_STORE_URL": f"sqlite:///{tmp_path / 'web.db'}", "DNNFRAME_API_TOKEN": TOKEN}
    )
    return env


@pytest.fixture
def gunicorn(tmp_path, data_dir):
    server = Gunicorn(_env(tmp_path))
    try:
        yield server
    finally:
        server.stop()


FORM = {
    "dataset": "iris",
    "hidden_layers": "1-2",
    "width": "4",
    "activation": "relu",
    "optimizer": "adam",
    "learning_rate": "0.01",
    "epochs": "2",
    "seeds": "1",
}


def _fresh(session: requests.Session) -> requests.Session:
    # a new connection for every request, so the kernel may hand it to either worker
    session.headers["Connection"] = "close"
    return session


def test_two_workers_share_sessions_and_sigterm_finishes_the_request_in_flight(gunicorn):
    port = int(gunicorn.wait_for(r"Listening at: http://127\.0\.0\.1:(\d+)").group(1))
    workers = {int(gunicorn.wait_for(r"Booting worker with pid: (\d+)").group(1)) for _ in range(2)}
    base = f"http://127.0.0.1:{port}"
    browser = _fresh(requests.Session())

    # sign in: the session cookie (CSRF token + signed-in mark) comes from one worker
    html = browser.get(base + "/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    gunicorn.served_by("GET /login")
    r = browser.post(
        base + "/login",
        data={"csrf_token": csrf, "token": TOKEN, "next": "/"},
        allow_redirects=False,
    )
    assert r.status_code == 303
    signed_in_by = gunicorn.served_by("POST /login")

    # the form's validation needs that session; keep asking until the other worker answered
    answered_by: dict[int, int] = {}
    for _ in range(200):
        r = browser.post(base + "/api/v1/validate", data=FORM, headers={"X-CSRF-Token": csrf})
        pid = gunicorn.served_by("POST /api/v1/validate")
        assert r.status_code == 200, (pid, r.text)
        answered_by[pid] = answered_by.get(pid, 0) + 1
        if set(answered_by) == workers:
            break
    assert set(answered_by) == workers, answered_by
    assert set(answered_by) - {signed_in_by}  # a worker that did not sign us in accepted it

    # a foreign Host is refused by the real server too (DNS rebinding)
    r = requests.get(base + "/api/v1/health", headers={"Host": f"evil.example:{port}"})
    assert r.status_code == 400 and "evil.example" in r.json()["message"]

    # SIGTERM while a request is in flight: it still gets its answer, then the server exits 0
    body = json.dumps(
        {"name": "graceful", "dataset": {"name": "iris"}, "model": {"hidden_layers": 1, "width": 4}}
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            (
                f"POST /api/v1/validate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
        )
        # a worker thread has parsed the headers and waits for the body: the request is in flight
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue")
        gunicorn.proc.send_signal(signal.SIGTERM)
        gunicorn.wait_for(r"Handling signal: term")
        sock.sendall(body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["n_trials"] == 1
    assert gunicorn.proc.wait(60) == 0
    gunicorn.wait_for(r"Shutting down: Master")
    log = "".join(gunicorn.output)
    for pid in workers:
        assert f"Worker exiting (pid: {pid})" in log


def test_dnnframe_serve_production_runs_gunicorn(tmp_path, data_dir):
    dnnframe = Path(sys.executable).with_name("dnnframe")
    server = Gunicorn(
        _env(tmp_path),
        [str(dnnframe), "serve", "--production", "--web-workers", "1", "--port", "0"],
    )
    try:
        port = int(server.wait_for(r"Listening at: http://127\.0\.0\.1:(\d+)").group(1))
        server.wait_for(r"Booting worker with pid")
        assert (
            requests.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=30).json()["status"]
            == "ok"
        )
        server.wait_for(r'"GET /api/v1/health HTTP/1.1" 200')  # the access log, on stdout
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(60) == 0
    finally:
        server.stop()
