"""deploy/build-images.sh picks a docker CLI that can build the image, or says in one line
what to install.

The CLIs here are stand-ins (shell scripts answering ``--version``, ``buildx version`` and
``info`` as the real ones do), so each kind of host can be had on one machine; the real
build runs in test_deploy_stack.py, through the same script.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from deploy_support import REPO

SCRIPT = REPO / "deploy" / "build-images.sh"


def fake_docker(folder: Path, version: str, buildx: bool) -> Path:
    """A `docker` in ``folder`` that reports ``version`` and has the buildx plugin or not."""
    folder.mkdir(parents=True)
    cli = folder / "docker"
    plugin = (
        '  echo "github.com/docker/buildx v0.14.1"; exit 0'
        if buildx
        else '  echo "docker: unknown command: docker buildx" >&2; exit 1'
    )
    cli.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo "Docker version {version}, build 0123456" ;;
  buildx)
{plugin} ;;
  info) exit 0 ;;
  *) echo "fake docker: $*" >&2; exit 2 ;;
esac
""")
    cli.chmod(0o755)
    return cli


def run(*args: str, path: list[Path], docker: Path | None = None) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.pathsep.join([*map(str, path), "/usr/bin", "/bin"]),
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    if docker is not None:
        env["DOCKER"] = str(docker)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def test_a_newer_cli_without_buildx_is_passed_over_for_one_that_builds(tmp_path: Path) -> None:
    # the host of the report: Docker 28's CLI first on PATH, no buildx; Debian's 20.10 after it
    newer = fake_docker(tmp_path / "local", "28.2.2", buildx=False)
    debian = fake_docker(tmp_path / "debian", "20.10.24+dfsg1", buildx=False)
    proc = run("--check", path=[newer.parent, debian.parent])
    assert (proc.returncode, proc.stdout.strip()) == (0, str(debian)), proc.stderr


def test_a_newer_cli_with_buildx_is_used(tmp_path: Path) -> None:
    newer = fake_docker(tmp_path / "local", "28.2.2", buildx=True)
    debian = fake_docker(tmp_path / "debian", "20.10.24+dfsg1", buildx=False)
    proc = run("--check", path=[newer.parent, debian.parent])
    assert (proc.returncode, proc.stdout.strip()) == (0, str(newer)), proc.stderr


def test_without_a_cli_that_builds_it_says_in_one_line_what_to_install(tmp_path: Path) -> None:
    newer = fake_docker(tmp_path / "local", "28.2.2", buildx=False)
    for args in (["--check"], []):
        proc = run(*args, path=[newer.parent], docker=newer)
        assert proc.returncode == 1 and not proc.stdout, proc
        [line] = proc.stderr.splitlines()
        assert f"{newer} (28.2.2, no buildx)" in line, line
        assert "install docker-buildx-plugin" in line and "docker.io" in line, line


def test_an_unknown_image_is_named(tmp_path: Path) -> None:
    debian = fake_docker(tmp_path / "debian", "20.10.24+dfsg1", buildx=False)
    proc = run("dnnframe", "mongo", path=[debian.parent])
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "deploy/build-images.sh: unknown argument 'mongo': name "
        "images (dnnframe, rabbitmq, postgres) or --check"
    )
