"""Every container command and healthcheck of docker-compose.yml runs here as a plain process.

No Docker engine exists where these tests run, so the commands the containers would run
are taken from the resolved compose model and started on this machine against the local
RabbitMQ (amqp://guest:guest@127.0.0.1:5672//) and a SQLite store in a temp folder. Only
what a container cannot do here changes: ports become free local ports, the bind address
127.0.0.1, the worker's queue and node name unique to the test (so it takes no message of
another test). The healthcheck commands then run exactly as compose would run them.

What the worker does with a trial, what the dashboard serves and how Flower shows workers
are tested by tests/tasks and tests/dashboard; here it is the wiring of the deployment.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from deploy_support import ENTRYPOINT, REPO, read_env_file, secret_files

BIN = Path(sys.executable).parent
LOCAL_BROKER = "amqp://guest:guest@127.0.0.1:5672//"


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def executable(word: str) -> str:
    """The console script a container command starts, from this environment's bin/."""
    path = BIN / word
    if not path.exists():
        pytest.fail(
            f"`{word}` (a compose command) is not installed in {BIN}: "
            "pip install -e '.[dev]' should provide it"
        )
    return str(path)


@pytest.fixture
def process_env(tmp_path: Path) -> dict[str, str]:
    """The container environment, pointed at this machine's broker and a temp store."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DNNFRAME_", "FLOWER_", "CELERY_"))
    }
    env.update(
        {
            "DNNFRAME_BROKER_URL": LOCAL_BROKER,
            "DNNFRAME_STORE_URL": f"sqlite:///{tmp_path / 'store.db'}",
            "DNNFRAME_DATA_DIR": str(tmp_path / "data"),
            "PYTHONPATH": str(REPO),
        }
    )
    return env


@contextlib.contextmanager
def running(
    cmd: list[str], env: dict[str, str], log: Path, stop_timeout: float = 20
) -> Iterator[subprocess.Popen]:
    """Start a long-running command; afterwards stop it as `docker stop` does (SIGTERM,
    then SIGKILL once ``stop_timeout`` has passed)."""
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def wait_until(check, proc: subprocess.Popen, log: Path, what: str, timeout: float = 300):
    """Poll ``check()`` until it is truthy; fail with the process log if it never is. The
    deadline only bounds a failure: gunicorn's master compresses every asset at brotli's best
    before its workers start when the disk holds no copy yet (8 s of one core quiet, past a
    minute on a loaded 2-core machine), so a start may take minutes there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        result = check()
        if result:
            return result
        time.sleep(0.5)
    pytest.fail(f"{what} not ready after {timeout} s:\n{log.read_text()[-3000:]}")


def run_healthcheck(
    test: list[str], env: dict[str, str], replace: dict[str, str]
) -> subprocess.CompletedProcess:
    """Run a compose healthcheck ``test`` as the engine would (CMD or CMD-SHELL)."""
    kind, *rest = test
    # `compose config` output keeps compose's $$ escape; the engine gets a single $.
    rest = [_replace(word.replace("$$", "$"), replace) for word in rest]
    if kind == "CMD-SHELL":
        # ... which the container's shell then expands; deploy/ holds the image's entrypoint.
        cmd = ["/bin/sh", "-c", rest[0]]
        env = {**env, "PATH": f"{BIN}:{ENTRYPOINT.parent}:{env.get('PATH', '')}"}
    else:
        cmd = [executable(rest[0]) if rest[0] != "python" else sys.executable] + rest[1:]
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=60)


def _replace(word: str, replace: dict[str, str]) -> str:
    for old, new in replace.items():
        word = word.replace(old, new)
    return word


def test_commands_use_installed_console_scripts(stack) -> None:
    for name in ("worker", "worker-gpu", "dashboard", "flower"):
        executable(stack["services"][name]["command"][0])


def secret_file_env(stack, service: str, tmp_path: Path) -> dict[str, str]:
    """The service's ``*_FILE`` variables, each pointing at a temp file holding what compose
    would copy into the container (the entrypoint reads them)."""
    env = {}
    for var, content in secret_files(stack, service).items():
        path = tmp_path / f"{service}-{var.lower()}"
        path.write_text(content)
        env[f"{var}_FILE"] = str(path)
    return env


def _queues(command: list[str]) -> set[str]:
    return {q for a in command if a.startswith("--queues=") for q in a[9:].split(",")}


def test_celery_app_and_queues_exist(stack) -> None:
    from celery import Celery

    import tasks
    from tasks import config

    assert isinstance(tasks.app, Celery), "`celery -A tasks` needs tasks.app"
    assert config.PACK_TASK in tasks.app.tasks, "the worker would have nothing to run"
    assert stack["services"]["flower"]["command"][:4] == ["celery", "-A", "tasks", "flower"]
    for name, queue in (("worker", "default"), ("worker-gpu", "gpu")):
        command = stack["services"][name]["command"]
        assert command[:2] == ["dnnframe", "worker"], (name, command)
        assert _queues(command) == {queue}, command
        assert queue in config.QUEUES, f"{queue} is not in tasks.config.QUEUES"
    # Outside compose (a stock broker, consumer_timeout 30 min) the default must fit under it.
    assert config.DEFAULT_TASK_TIME_LIMIT < 30 * 60


@pytest.mark.parametrize("service", ["worker", "worker-gpu"])
def test_worker_command_parses(stack, service: str) -> None:
    from dnnframe.cli import cli

    command = stack["services"][service]["command"]
    worker = cli.commands["worker"]
    ctx = worker.make_context("worker", list(command[2:]))
    # Unknown options would be handed to celery (ignore_unknown_options): there must be none.
    assert ctx.params["celery_args"] == (), f"{command} has options `dnnframe worker` lacks"
    [concurrency] = [p for p in worker.params if p.name == "concurrency"]
    assert concurrency.envvar == "DNNFRAME_WORKERS", "compose sets the process count by env"
    with pytest.raises(click.exceptions.BadParameter):
        worker.make_context("worker", ["--concurrency=zero"])


def test_dashboard_command_is_gunicorn(stack, monkeypatch) -> None:
    from flask import Flask
    from gunicorn.config import Config

    command = stack["services"]["dashboard"]["command"]
    assert command[0] == "gunicorn", command
    config = Config()
    parsed = config.parser().parse_args(command[1:])
    assert parsed.bind == ["0.0.0.0:8000"], parsed
    # the dashboard's own settings: threaded workers, access log, graceful stop
    assert parsed.config == "python:dashboard.gunicorn_config", parsed
    # with a key set, importing the config writes no DNNFRAME_SECRET_KEY into this process
    # (later tests read the environment's settings)
    monkeypatch.setenv("DNNFRAME_SECRET_KEY", "test-key")
    settings = importlib.import_module("dashboard.gunicorn_config")
    assert settings.workers == 2 and settings.worker_class == "gthread", settings
    assert settings.accesslog == "-" and settings.graceful_timeout == 20
    [target] = parsed.args
    module, _, attribute = target.partition(":")
    assert isinstance(getattr(importlib.import_module(module), attribute), Flask), target


def test_dashboard_process_passes_its_healthcheck(stack, process_env, tmp_path: Path) -> None:
    svc = stack["services"]["dashboard"]
    port = str(free_port())
    cmd = [str(ENTRYPOINT), executable(svc["command"][0])] + [
        _replace(w, {"0.0.0.0": "127.0.0.1", "8000": port}) for w in svc["command"][1:]
    ]
    replace = {"127.0.0.1:8000": f"127.0.0.1:{port}"}
    # The secret key and the API token from files, as in the container.
    files = secret_file_env(stack, "dashboard", tmp_path)
    env = {
        **process_env,
        "DNNFRAME_SECRET_KEY_FILE": files["DNNFRAME_SECRET_KEY_FILE"],
        "DNNFRAME_API_TOKEN_FILE": files["DNNFRAME_API_TOKEN_FILE"],
    }
    log = tmp_path / "dashboard.log"
    with running(cmd, env, log) as proc:
        wait_until(
            lambda: (
                run_healthcheck(svc["healthcheck"]["test"], process_env, replace).returncode == 0
            ),
            proc,
            log,
            "dashboard",
        )
        # Served by gunicorn (its access log), not Flask's development server.
        wait_until(lambda: "GET /api/v1/health" in log.read_text(), proc, log, "access log")
        assert "development server" not in log.read_text()
        assert "Using worker: gthread" in log.read_text()  # DNNFRAME_WEB_THREADS threads
    # Once it is gone the same check fails: it really asks the server.
    down = run_healthcheck(svc["healthcheck"]["test"], process_env, replace)
    assert down.returncode != 0


def _get(url: str, auth: str | None = None) -> int:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_flower_process_requires_login_and_passes_its_healthcheck(
    stack, process_env, tmp_path: Path
) -> None:
    svc = stack["services"]["flower"]
    port = str(free_port())
    cmd = [str(ENTRYPOINT), executable("celery")] + [
        _replace(w, {"5555": port}) for w in svc["command"][1:]
    ]
    auth = read_env_file(REPO / ".env.example")["FLOWER_BASIC_AUTH"]
    # Flower reads its login from the environment, which the entrypoint fills from the
    # file compose copies in, as in the container.
    files = secret_file_env(stack, "flower", tmp_path)
    env = {**process_env, "FLOWER_BASIC_AUTH_FILE": files["FLOWER_BASIC_AUTH_FILE"]}
    assert Path(env["FLOWER_BASIC_AUTH_FILE"]).read_text() == auth
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "flower.log"
    # Flower 2 logs "shutting down" on SIGTERM but does not exit (its event thread keeps
    # it alive); `docker stop` kills it after the grace period, and so does this test.
    with running(cmd, env, log, stop_timeout=3) as proc:
        wait_until(lambda: _get(f"{base}/healthcheck") == 200, proc, log, "flower")
        hc = run_healthcheck(svc["healthcheck"]["test"], env, {"127.0.0.1:5555": base[7:]})
        assert hc.returncode == 0, hc.stderr
        assert _get(f"{base}/api/workers") == 401, "Flower's API must need the login"
        assert _get(f"{base}/api/workers", "admin:wrong") == 401
        assert _get(f"{base}/api/workers", auth) == 200
        assert _get(f"{base}/metrics") == 401, "Flower's metrics must need the login"
        assert _get(f"{base}/metrics", auth) == 200


@pytest.mark.slow
def test_worker_process_passes_its_healthcheck(stack, process_env, tmp_path: Path) -> None:
    svc = stack["services"]["worker"]
    tag = f"deploytest-{uuid.uuid4().hex[:10]}"
    # A queue nobody publishes to, so this worker takes no other test's trial.
    cmd = [executable("dnnframe")] + [
        f"--queues={tag}" if w.startswith("--queues=") else w for w in svc["command"][1:]
    ]
    cmd += ["--hostname", f"celery@{tag}", "--", "--without-mingle", "--without-gossip"]
    env = {**process_env, "HOSTNAME": tag}
    test = svc["healthcheck"]["test"]
    # The healthcheck gets the broker URL only from the file, through the entrypoint.
    url_file = tmp_path / "broker-url"
    url_file.write_text(LOCAL_BROKER + "\n")
    check_env = {k: v for k, v in env.items() if k != "DNNFRAME_BROKER_URL"}
    check_env["DNNFRAME_BROKER_URL_FILE"] = str(url_file)
    assert test[0] == "CMD-SHELL" and "celery@$$HOSTNAME" in test[1], test
    log = tmp_path / "worker.log"
    try:
        with running(cmd, env, log) as proc:
            wait_until(lambda: "ready" in log.read_text(), proc, log, "worker")
            hc = run_healthcheck(test, check_env, {})
            assert hc.returncode == 0, f"worker healthcheck failed:\n{hc.stdout}{hc.stderr}"
            # A shorter reply timeout only so the test does not wait 10 s for a silence.
            other = run_healthcheck(
                test, {**check_env, "HOSTNAME": tag + "-absent"}, {"--timeout 10": "--timeout 2"}
            )
            assert other.returncode != 0, "the healthcheck passed for an absent worker"
    finally:
        # The worker declared a durable queue for the test; leave the broker as it was.
        from kombu import Connection

        from dnnframe.executors.dispatch import with_retry_queues

        with Connection(LOCAL_BROKER, connect_timeout=5) as conn:
            for queue in with_retry_queues([tag]):  # the worker declared its retry queue too
                conn.default_channel.queue_delete(queue)


def test_rabbitmq_and_mongo_healthchecks_name_real_tools(stack) -> None:
    # The tools live in their images, not here; check the commands are the documented ones.
    assert stack["services"]["rabbitmq"]["healthcheck"]["test"][:2] == [
        "CMD",
        "rabbitmq-diagnostics",
    ]
    assert stack["services"]["mongo"]["healthcheck"]["test"][:2] == ["CMD", "mongosh"]
    if shutil.which("rabbitmq-diagnostics"):
        # The same check against this machine's broker, which .ci/run starts.
        proc = subprocess.run(
            stack["services"]["rabbitmq"]["healthcheck"]["test"][1:],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, f"rabbitmq-diagnostics ping failed:\n{proc.stderr}"
