"""The chaos run's workload, all through the REST API: grid sweeps, an ASHA and a TPE
experiment on iris (tiny networks, three epochs), one grid cancelled midway and resubmitted
(which resumes it), one cancelled for good, one resubmitted unchanged, then waves of small
grids and ASHA experiments while the faults go on; and readers polling
the API throughout. Every request is recorded (when, what, status, latency, error) for the
checker: during faults the API must answer 2xx, 4xx or 503 with a reason, within a bound.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import requests

from .deploy import TOKEN

EPOCHS = 3
#: A request not answered within this many seconds is a hang.
REQUEST_TIMEOUT_S = 15.0
_MODEL = {"hidden_layers": 1, "width": 4, "activation": "relu"}
_TRAINING = {
    "optimizer": "adam",
    "learning_rate": 0.01,
    "batch_size": 32,
    "max_epochs": EPOCHS,
    "early_stopping": None,
}


def specs(seed: int, waves: int = 0) -> dict[str, dict[str, Any]]:
    """The experiments, by role; the seed varies the samplers of ASHA and TPE. ``waves``
    small experiments (``wave1``...: grids, every other one ASHA) are submitted one after
    another while the faults go on."""

    def spec(name: str, model: dict, training: dict, search: dict) -> dict[str, Any]:
        return {
            "name": name,
            "dataset": {"name": "iris"},
            "model": {**_MODEL, **model},
            "training": {**_TRAINING, **training},
            "search": search,
        }

    rate = {"loguniform": [0.001, 0.1]}

    def asha(name: str, samples: int, random_seed: int) -> dict[str, Any]:
        return spec(
            name,
            {},
            {"learning_rate": rate},
            {
                "method": "asha",
                "num_samples": samples,
                "seeds": 1,
                "random_seed": random_seed,
                "min_epochs": 1,
                "eta": 3,
                "objective": {"metric": "val_accuracy", "mode": "max"},
            },
        )

    # every other wave is an ASHA experiment, so rungs are judged while faults go on
    waved = {
        f"wave{i}": asha(f"chaos-asha-wave{i}", 6, seed + i)
        if i % 2 == 0
        else spec(
            f"chaos-wave{i}",
            {"width": {"grid": [3, 5]}},
            {"learning_rate": 0.01 + i / 1000},
            {"seeds": 2},
        )
        for i in range(1, waves + 1)
    }
    return {
        **waved,
        "grid": spec(
            "chaos-grid",
            {"hidden_layers": {"grid": [1, 2]}, "width": {"grid": [4, 8]}},
            {},
            {"seeds": 2},
        ),
        "resumed": spec(
            "chaos-resumed", {"activation": {"grid": ["relu", "tanh", "sigmoid"]}}, {}, {"seeds": 4}
        ),
        "cancelled": spec("chaos-cancelled", {"width": {"grid": [4, 6, 8]}}, {}, {"seeds": 4}),
        "asha": asha("chaos-asha", 9, seed),
        "tpe": spec(
            "chaos-tpe",
            {},
            {"learning_rate": rate},
            {
                "method": "tpe",
                "num_samples": 8,
                "random_seed": seed,
                "objective": {"metric": "val_accuracy", "mode": "max"},
            },
        ),
    }


@dataclass
class Call:
    t: float  # monotonic time the request was sent
    method: str
    path: str
    status: int | None  # None: no answer (refused, reset or timed out)
    latency: float
    error: str | None = None  # the exception, or a 503's missing reason


class Api:
    """A REST client that records every request; never raises for a failed one."""

    def __init__(self, base_url: str):
        self.base = base_url
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._session = requests.Session()

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response | None:
        t = time.monotonic()
        headers = {"Authorization": f"Bearer {TOKEN}"} if method != "GET" else {}
        response, error = None, None
        try:
            response = requests.request(
                method, self.base + path, headers=headers, timeout=REQUEST_TIMEOUT_S, **kwargs
            )
        except requests.RequestException as exc:
            error = f"{type(exc).__name__}: {exc}"
        status = response.status_code if response is not None else None
        if response is not None and status == 503 and not _reason(response):
            error = f"503 without a reason: {response.text[:200]}"
        with self._lock:
            self.calls.append(Call(t, method, path, status, time.monotonic() - t, error))
        return response


def _reason(response: requests.Response) -> str:
    try:
        return str(response.json().get("message") or "")
    except ValueError:
        return ""


class Workload:
    """Submits, cancels and resubmits on a seeded timeline over ``seconds``, and polls the
    API until :meth:`stop`. ``ids`` maps each role to its experiment id once accepted."""

    def __init__(self, api: Api, seed: int, seconds: float):
        self.api, self.seconds = api, seconds
        # a wave every 20 s or so keeps trials running while the faults go on
        self.waves = max(1, int(seconds * 0.7 / 20))
        self.specs = specs(seed, self.waves)
        self.rng = random.Random(seed)
        self.ids: dict[str, str] = {}
        self.stopped = threading.Event()
        self._threads = [
            threading.Thread(target=self._steps, daemon=True, name="chaos-steps"),
            threading.Thread(target=self._reader, daemon=True, name="chaos-read"),
        ]

    def start(self, t0: float) -> Workload:
        self.t0 = t0
        for th in self._threads:
            th.start()
        return self

    def join_steps(self, timeout: float) -> None:
        """Wait until every submission and cancel of the timeline has been made."""
        self._threads[0].join(timeout)

    def stop(self) -> None:
        self.stopped.set()
        for th in self._threads:
            th.join(REQUEST_TIMEOUT_S * 4)

    def _until(self, fraction: float) -> bool:
        """Wait until ``fraction`` of the run; False when stopped first."""
        return not self.stopped.wait(max(0.0, self.t0 + fraction * self.seconds - time.monotonic()))

    def _persist(self, method: str, path: str, **kwargs: Any) -> requests.Response | None:
        """Send until an answer other than 503 or no answer comes (faults end)."""
        while not self.stopped.is_set():
            r = self.api.request(method, path, **kwargs)
            if r is not None and r.status_code != 503:
                return r
            self.stopped.wait(1.0)
        return None

    def _submit(self, role: str) -> None:
        r = self._persist("POST", "/api/v1/experiments", json=self.specs[role])
        if r is not None and r.status_code in (200, 201):
            self.ids[role] = r.json()["id"]

    def _steps(self) -> None:
        for role in ("grid", "asha", "tpe"):
            self._submit(role)
        # two grids cancelled while they run (a few seconds after their submission), one of
        # them resumed later
        if not self._until(self.rng.uniform(0.1, 0.25)):
            return
        for role in ("resumed", "cancelled"):
            self._submit(role)
        if self.stopped.wait(self.rng.uniform(1.0, 4.0)):
            return
        for role in ("resumed", "cancelled"):
            if role in self.ids:
                self._persist("POST", f"/api/v1/experiments/{self.ids[role]}/cancel")
        if not self._until(self.rng.uniform(0.35, 0.5)):
            return
        self._submit("resumed")
        self._submit("grid")  # the same spec again: the same experiment, nothing new
        for i in range(1, self.waves + 1):
            if not self._until(0.45 + 0.25 * i / self.waves):
                return
            self._submit(f"wave{i}")

    def _reader(self) -> None:
        paths = ["/api/v1/experiments", "/api/v1/health"]
        while not self.stopped.wait(0.5):
            for eid in list(self.ids.values()):
                paths.append(f"/api/v1/experiments/{eid}/trials?limit=5")
            self.api.request("GET", self.rng.choice(paths))
            if self.rng.random() < 0.1:
                self.api.request("GET", "/api/v1/workers")
            del paths[2:]
