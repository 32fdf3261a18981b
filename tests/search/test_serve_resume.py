"""``dnnframe serve`` as a real process: a tpe experiment whose server (and with it the
driver service it runs) is killed mid-way is resumed by the driver service of the next
server once the killed one's lease expires (one process, or gunicorn), and completes to
exactly ``num_samples``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from dnnframe.store import TrialState, open_store

REPO = Path(__file__).resolve().parents[2]
TOKEN = "resume-token"
SPEC = {
    "name": "resumed-tpe",
    "dataset": {"name": "iris"},
    "model": {"width": 8},
    "training": {"learning_rate": {"loguniform": [0.001, 0.1]}, "max_epochs": 2},
    "search": {"method": "tpe", "num_samples": 8, "random_seed": 5},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


class Server:
    """``dnnframe serve`` in its own session (so the local pool dies with it)."""

    def __init__(self, tmp_path: Path, url: str, port: int, n: int, extra: tuple[str, ...] = ()):
        self.base = f"http://127.0.0.1:{port}"
        self.log = tmp_path / f"serve-{n}.log"
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "DNNFRAME_API_TOKEN": TOKEN,
            "DNNFRAME_WORKERS": "1",
            "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:sleepy_train",
            "DNNFRAME_HOOK_EPOCHS": "2",
            "DNNFRAME_HOOK_EPOCH_SECONDS": "0.2",
            "DNNFRAME_DATA_DIR": str(tmp_path / "data"),
            "TMPDIR": str(tmp_path),
            "DNNFRAME_DRIVER_LEASE_S": "3",
        }
        env.pop("DNNFRAME_STORE_URL", None)
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dnnframe.cli",
                    "serve",
                    "--store",
                    url,
                    "--port",
                    str(port),
                    *extra,
                ],
                cwd=tmp_path,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait(self._up, 60, f"the server on {self.base}:\n{self.text()}")

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"the server exited with {self.proc.returncode}:\n{self.text()}")
        try:
            return requests.get(self.base + "/api/v1/experiments", timeout=2).ok
        except requests.ConnectionError:
            return False

    def text(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL the server and its pool, as a dying machine would."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


@pytest.mark.parametrize(
    "restart", [(), ("--production", "--web-workers", "2")], ids=["werkzeug", "gunicorn"]
)
def test_a_killed_server_resumes_its_tpe_driver_on_restart(tmp_path, restart):
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    port = _free_port()
    store = open_store(url)
    first = Server(tmp_path, url, port, 1)
    try:
        response = requests.post(
            first.base + "/api/v1/experiments",
            json=SPEC,
            timeout=30,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert response.status_code == 201, response.text
        eid = response.json()["id"]
        done = lambda: store.counts_by_state(eid).get("COMPLETE", 0)  # noqa: E731
        _wait(lambda: done() >= 2, 120, "two trials of the first server")
    finally:
        first.kill()
    stored = len(store.list_trials(eid))
    assert stored < 8, "the driver finished before the kill: nothing left to resume"

    second = Server(tmp_path, url, port, 2, restart)  # its driver service resumes it
    try:
        _wait(lambda: done() == 8, 180, f"8 COMPLETE trials after the restart:\n{second.text()}")
        body = requests.get(f"{second.base}/api/v1/experiments/{eid}", timeout=10).json()
        assert {k: v for k, v in body["counts"].items() if v} == {"COMPLETE": 8}
        assert body["status"] == "COMPLETE"
    finally:
        second.kill()
    trials = store.list_trials(eid)
    assert len(trials) == 8 and {t.state for t in trials} == {TrialState.COMPLETE}
    assert len({t.config["training"]["learning_rate"] for t in trials}) == 8
    store.close()
