"""A Docker engine for the tests that build the images and run the stack.

The engine is Debian's ``docker.io`` started by .ci/run (no registry is reachable here, so
base images are built from Debian packages by deploy/build-base-image.sh). Images are built
by deploy/build-images.sh, an operator's command, which also picks the docker CLI: the
first on PATH that builds with BuildKit (Debian's 20.10 CLI has it built in, a newer CLI
needs the buildx plugin, which Debian bookworm does not package).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from deploy_support import REPO

# The tags the stack test builds (kept between runs: they are the build cache).
PROJECT_IMAGE = "dnnframe:ci"
RABBITMQ_IMAGE = "dnnframe-rabbitmq:bookworm"
POSTGRES_IMAGE = "dnnframe-postgres:bookworm"
# Marks what the tests build, so their dangling leftovers can be pruned without touching
# anyone else's images.
BUILD_LABEL = "org.dnnframe.built-by=tests-deploy"
BUILD_SCRIPT = REPO / "deploy" / "build-images.sh"


@functools.cache
def docker_cli() -> str | None:
    """The docker CLI deploy/build-images.sh builds with; else PATH's (which can still run
    containers, and the build then fails naming what to install)."""
    proc = subprocess.run(
        [str(BUILD_SCRIPT), "--check"], capture_output=True, text=True, timeout=60
    )
    return proc.stdout.strip() if proc.returncode == 0 else shutil.which("docker")


def engine_unavailable_reason() -> str | None:
    """Why no Docker engine answers, or None when one does."""
    docker = docker_cli()
    if docker is None:
        return "no docker CLI: install Debian's docker.io and start dockerd (.ci/run does both)"
    try:
        proc = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 30 s"
    if proc.returncode != 0:
        return (
            f"no Docker engine answers (`docker info`: {proc.stderr.strip()[-300:]}); "
            ".ci/run starts dockerd and logs to /var/log/dnnframe-ci/dockerd.log"
        )
    return None


def docker(
    *args: str, timeout: float = 120, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the docker CLI; a failure raises with its output."""
    proc = subprocess.run(
        [docker_cli() or "docker", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"docker {' '.join(args)} failed ({proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def build_images() -> None:
    """The project, RabbitMQ and PostgreSQL images, built by deploy/build-images.sh as an
    operator builds them (on the official base where it can be pulled, else on the stand-in
    it builds from Debian packages); the engine's cache makes a rebuild quick."""
    env = {
        **os.environ,
        "DNNFRAME_IMAGE": PROJECT_IMAGE,
        "DNNFRAME_RABBITMQ_IMAGE": RABBITMQ_IMAGE,
        "DNNFRAME_POSTGRES_IMAGE": POSTGRES_IMAGE,
        "DNNFRAME_BUILD_LABEL": BUILD_LABEL,
    }
    env.pop("PYTHON_IMAGE", None)
    env.pop("DNNFRAME_EXTRAS", None)
    proc = subprocess.run(
        [str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=2400, env=env
    )
    assert proc.returncode == 0, (
        f"deploy/build-images.sh failed ({proc.returncode}):\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )


def prune_dangling() -> None:
    """Remove the untagged images earlier builds of these tests left behind."""
    docker(
        "image",
        "prune",
        "--force",
        "--filter",
        "dangling=true",
        "--filter",
        f"label={BUILD_LABEL}",
        check=False,
        timeout=120,
    )
