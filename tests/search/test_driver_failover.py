"""The driver service under ``dnnframe serve --production`` (real gunicorn, three web
workers, the local pool owned by the driver service): a tpe experiment submitted through
the REST API is driven by the service the gunicorn master runs; SIGKILL that process
mid-run and the master starts another, which takes the experiment's lease over once the
killed one's expires, rebuilds from the store and finishes the experiment.

Each driver logs its lease take and every ask with its wall time and pid; the test checks
from those records that two drivers never held the lease at once, that the killed one asked
nothing after its successor took over, and that no trial id was asked twice.

Trials train with ``dnnframe.testing.hooks:rate_train`` (accuracy ten times the learning
rate, three epochs of 0.3 s), so the run is slow enough to be killed half-way and its
objective is known.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from dnnframe.search.lease import driver_lease_name
from dnnframe.store import TrialState, open_store

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TOKEN = "failover-token"
SAMPLES = 12
SPEC = {
    "name": "failover-tpe",
    "dataset": {"name": "digits"},
    "model": {"hidden_layers": 1, "width": 16},
    "training": {"learning_rate": {"loguniform": [0.001, 0.1]}, "max_epochs": 3},
    "search": {
        "method": "tpe",
        "num_samples": SAMPLES,
        "random_seed": 11,
        "objective": {"metric": "test_accuracy"},
    },
}
LINE = re.compile(
    r"^(?P<t>\d+\.\d+) (?P<pid>\d+) \S+ \w+ experiment (?P<eid>[\w-]+): "
    r"(?:asked trial (?P<tid>[\w-]+)|took lease (?P<lease>\S+))",
    re.M,
)


def _wait(predicate, timeout: float, what: str, server=None) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            tail = f":\n{server.text()}" if server is not None else ""
            pytest.fail(f"timed out after {timeout}s waiting for {what}{tail}")
        time.sleep(0.1)


class Serve:
    """``dnnframe serve --production --web-workers 3`` in a session of its own."""

    def __init__(self, tmp_path: Path, url: str):
        self.log = tmp_path / "serve.log"
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            "DNNFRAME_API_TOKEN": TOKEN,
            "DNNFRAME_WORKERS": "2",
            "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:rate_train",
            "DNNFRAME_HOOK_EPOCHS": "3",
            "DNNFRAME_HOOK_EPOCH_SECONDS": "0.3",
            "DNNFRAME_DRIVER_LEASE_S": "4",
            "DNNFRAME_DATA_DIR": str(tmp_path / "data"),
            "TMPDIR": str(tmp_path),
        }
        for name in ("DNNFRAME_STORE_URL", "DNNFRAME_BROKER_URL", "WEB_CONCURRENCY"):
            env.pop(name, None)
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dnnframe.cli",
                    "serve",
                    "--production",
                    "--web-workers",
                    "3",
                    "--port",
                    "0",
                    "--store",
                    url,
                ],
                cwd=tmp_path,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        found: list[str] = []

        def listening() -> bool:
            if self.proc.poll() is not None:
                pytest.fail(f"serve exited with {self.proc.returncode}:\n{self.text()}")
            found[:] = re.findall(r"Listening at: http://127\.0\.0\.1:(\d+)", self.text(0))
            return len(re.findall(r"Booting worker with pid", self.text(0))) >= 3 and bool(found)

        _wait(listening, 90, "gunicorn's three workers", self)
        self.base = f"http://127.0.0.1:{found[0]}"

    def text(self, tail: int = 6000) -> str:
        text = self.log.read_text(errors="replace")
        return text[-tail:] if tail else text

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                pass
        try:  # anything left of the group (pool processes of the killed driver)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)


def test_a_killed_driver_service_is_replaced_and_no_trial_is_asked_twice(tmp_path):
    url = f"sqlite:///{tmp_path / 'failover.db'}"
    store = open_store(url)
    server = Serve(tmp_path, url)
    try:
        response = requests.post(
            server.base + "/api/v1/experiments",
            json=SPEC,
            timeout=30,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert response.status_code == 201, response.text
        eid = response.json()["id"]
        lease = driver_lease_name(eid)
        done = lambda: store.counts_by_state(eid)["COMPLETE"]  # noqa: E731
        _wait(
            lambda: done() >= 3 and store.get_lease(lease) is not None,
            120,
            "three trials of the first driver",
            server,
        )
        first = store.get_lease(lease).owner
        first_pid = int(first.rsplit(":", 1)[1])
        os.kill(first_pid, signal.SIGKILL)
        killed_at = time.time()
        assert len(store.list_trials(eid, fields=())) < SAMPLES, (
            "the first driver asked for every trial before the kill: nothing left to take over"
        )

        _wait(lambda: done() == SAMPLES, 180, f"{SAMPLES} COMPLETE trials after the kill", server)
        _wait(lambda: store.get_lease(lease) is None, 60, "the last driver to let go", server)
        body = requests.get(f"{server.base}/api/v1/experiments/{eid}", timeout=10).json()
        assert body["status"] == "COMPLETE"
        assert {k: v for k, v in body["counts"].items() if v} == {"COMPLETE": SAMPLES}
    finally:
        server.stop()
        log = server.text(0)
    trials = store.list_trials(eid)
    store.close()
    assert len(trials) == SAMPLES and {t.state for t in trials} == {TrialState.COMPLETE}

    events = [m.groupdict() for m in LINE.finditer(log) if m["eid"] == eid]
    takes = [(float(e["t"]), int(e["pid"])) for e in events if e["lease"] == lease]
    asks = [(float(e["t"]), int(e["pid"]), e["tid"]) for e in events if e["tid"]]
    # the first driver took the lease once; the one the master started after the kill took
    # it over only once the kill had happened (a live, renewing holder cannot lose it)
    assert takes[0][1] == first_pid and len({pid for _, pid in takes}) == len(takes) == 2, takes
    successor_took_at, successor = takes[1]
    assert successor != first_pid and successor_took_at > killed_at
    # every ask came from the driver holding the lease at that moment: the first one's all
    # before its successor took over, the successor's after
    assert {pid for _, pid, _ in asks} == {first_pid, successor}
    assert all(t < successor_took_at for t, pid, _ in asks if pid == first_pid)
    assert all(t >= successor_took_at for t, pid, _ in asks if pid == successor)
    # no trial asked twice across the drivers, and every stored trial was asked once
    asked = [tid for _, _, tid in asks]
    assert len(asked) == len(set(asked)) == SAMPLES, asked
    assert set(asked) == {t.id for t in trials}


def _parent(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^PPid:\s+(\d+)", status, re.M).group(1))


def test_without_a_broker_the_web_workers_share_the_driver_services_one_pool(tmp_path):
    """Trials of a grid experiment posted to three web workers are trained by the process
    pool of the driver service, not by a pool of whichever web worker took the request."""
    url = f"sqlite:///{tmp_path / 'pool.db'}"
    store = open_store(url)
    server = Serve(tmp_path, url)
    try:
        spec = {
            "name": "one-pool",
            "dataset": {"name": "digits"},
            "model": {"hidden_layers": 1, "width": 16},
            "training": {
                "learning_rate": {"grid": [0.001, 0.002, 0.005, 0.01, 0.02, 0.05]},
                "max_epochs": 3,
            },
        }
        ids = []
        for _ in range(3):  # the same spec again is a no-op; any web worker may answer
            response = requests.post(
                server.base + "/api/v1/experiments",
                json=spec,
                timeout=30,
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert response.status_code in (200, 201), response.text
            ids.append(response.json()["id"])
        eid = ids[0]
        assert set(ids) == {eid}
        _wait(
            lambda: store.counts_by_state(eid).get("COMPLETE", 0) == 6,
            120,
            "six COMPLETE trials",
            server,
        )
        web = {int(p) for p in re.findall(r"Booting worker with pid: (\d+)", server.text(0))}
        owners = {int(t.worker.rsplit(":", 1)[1]) for t in store.list_trials(eid)}
        parents = {_parent(pid) for pid in owners}
        assert len(owners) <= 2 and len(parents) == 1, (owners, parents)
        (pool_owner,) = parents
        assert pool_owner not in web
        cmdline = Path(f"/proc/{pool_owner}/cmdline").read_bytes().split(b"\0")
        assert b"drive" in cmdline and b"--supervise" not in cmdline, cmdline
        # and none of the web workers started processes of its own
        for pid in web:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            assert children == [], (pid, children)
    finally:
        server.stop()
        store.close()
