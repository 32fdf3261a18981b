"""A Docker engine for the tests that build the images and run the stack.

The engine is Debian's ``docker.io`` started by .ci/run (no registry is reachable here, so
base images are built from Debian packages by deploy/build-base-image.sh). Images are built
with BuildKit through the docker CLI that has it built in: Debian's 20.10 CLI does, a newer
CLI needs the buildx plugin, which Debian bookworm does not package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from deploy_support import REPO

# The tags the stack test builds (kept between runs: they are the build cache).
BASE_IMAGE = "dnnframe-base:3.11-bookworm"
OFFICIAL_BASE = "python:3.11-slim-bookworm"
PROJECT_IMAGE = "dnnframe:ci"
RABBITMQ_IMAGE = "dnnframe-rabbitmq:bookworm"
POSTGRES_IMAGE = "dnnframe-postgres:bookworm"
# Marks what the tests build, so their dangling leftovers can be pruned without touching
# anyone else's images.
BUILD_LABEL = "org.dnnframe.built-by=tests-deploy"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def docker_cli() -> str | None:
    """The docker CLI to use: Debian's (BuildKit built in) where installed, else PATH's."""
    debian = Path("/usr/bin/docker")
    if debian.exists():
        return str(debian)
    return shutil.which("docker")


def engine_unavailable_reason() -> str | None:
    """Why no Docker engine answers, or None when one does."""
    docker = docker_cli()
    if docker is None:
        return ("no docker CLI: install Debian's docker.io and start dockerd "
                "(.ci/run does both)")
    try:
        proc = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 30 s"
    if proc.returncode != 0:
        return (f"no Docker engine answers (`docker info`: {proc.stderr.strip()[-300:]}); "
                ".ci/run starts dockerd and logs to /var/log/dnnframe-ci/dockerd.log")
    return None


def docker(*args: str, timeout: float = 120, check: bool = True,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the docker CLI; a failure raises with its output."""
    proc = subprocess.run([docker_cli() or "docker", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def image_exists(tag: str) -> bool:
    """Whether the engine holds an image of that name."""
    return docker("image", "inspect", tag, check=False, timeout=30).returncode == 0


def base_image() -> str:
    """The image the Dockerfile is built FROM: the official one when it is here or can be
    pulled, else the Debian-built stand-in (built once, then reused)."""
    if image_exists(OFFICIAL_BASE) or docker("pull", OFFICIAL_BASE, check=False,
                                             timeout=120).returncode == 0:
        return OFFICIAL_BASE
    proc = subprocess.run([str(REPO / "deploy" / "build-base-image.sh"), BASE_IMAGE],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "DOCKER": docker_cli() or "docker"})
    assert proc.returncode == 0, (f"deploy/build-base-image.sh failed:\n{proc.stdout[-3000:]}"
                                  f"\n{proc.stderr[-3000:]}")
    return BASE_IMAGE


def build(tag: str, context: Path, base: str, base_arg: str, timeout: float = 900) -> None:
    """Build an image with BuildKit on the host network (for apt and PyPI), passing the
    host's CA bundle as a build secret (pip may need it behind a proxy; it is not stored)."""
    args = ["build", "--network", "host", "--label", BUILD_LABEL, "--build-arg",
            f"{base_arg}={base}", "-t", tag]
    if HOST_CA_BUNDLE.exists():
        args += ["--secret", f"id=ca-certificates,src={HOST_CA_BUNDLE}"]
    docker(*args, str(context), timeout=timeout, env={**os.environ, "DOCKER_BUILDKIT": "1"})


def prune_dangling() -> None:
    """Remove the untagged images earlier builds of these tests left behind."""
    docker("image", "prune", "--force", "--filter", "dangling=true", "--filter",
           f"label={BUILD_LABEL}", check=False, timeout=120)
