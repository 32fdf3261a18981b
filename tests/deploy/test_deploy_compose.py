"""docker-compose.yml and its deploy/ companions: schema-valid, locked down, consistent.

Everything here runs without a Docker engine (see conftest.py): ``docker compose config``
validates against the Compose Specification and resolves the model; the assertions then
read that resolved model, so they check what an engine would actually be given.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from deploy_support import (
    CI_FILE,
    CI_STACK_FILES,
    COMPOSE_FILE,
    ENV_EXAMPLE,
    EXPOSE_FILE,
    LOCAL_IMAGES_FILE,
    LOCAL_POSTGRES_FILE,
    MONGO_FILE,
    MONGO_SECRETS,
    POSTGRES_FILE,
    REPO,
    REQUIRED_SECRETS,
    STACK_FILES,
    WORKER_HOST_FILE,
    read_env_file,
    resolve,
    secret_files,
)

PUBLISHED = {"dashboard": 8000, "flower": 5555, "rabbitmq": 15672}
DNNFRAME_SERVICES = ("worker", "worker-gpu", "dashboard", "flower")
BACKENDS = ("rabbitmq", "mongo")
RABBITMQ_CONF = REPO / "deploy" / "rabbitmq" / "rabbitmq.conf"


@pytest.mark.parametrize("files", [STACK_FILES, [COMPOSE_FILE]], ids=["mongodb", "sqlite"])
def test_compose_file_validates_with_env_example(run_compose, files) -> None:
    proc = run_compose(files, ["--profile", "gpu", "config", "--quiet"], ENV_EXAMPLE)
    assert proc.returncode == 0, f"docker compose config rejected the file:\n{proc.stderr}"


def test_validation_catches_a_broken_file(run_compose, tmp_path: Path) -> None:
    # The check above is only worth something if the validator rejects schema errors.
    broken = yaml.safe_load(COMPOSE_FILE.read_text())
    broken["services"]["worker"]["restart"] = ["not", "a", "string"]
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken))
    proc = run_compose([path], ["config", "--quiet"], ENV_EXAMPLE)
    assert proc.returncode != 0 and "restart" in proc.stderr, proc.stderr


@pytest.mark.parametrize("secret", REQUIRED_SECRETS)
def test_secrets_have_no_default(run_compose, tmp_path: Path, secret: str) -> None:
    values = read_env_file(ENV_EXAMPLE)
    del values[secret]
    env_file = tmp_path / "missing.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    proc = run_compose(STACK_FILES, ["config", "--quiet"], env_file)
    assert proc.returncode != 0, f"compose started without {secret}: it must have no default"
    assert secret in proc.stderr, f"the error should name {secret}:\n{proc.stderr}"


def test_a_stack_without_mongodb_needs_no_mongo_secret(run_compose, tmp_path: Path) -> None:
    """docker-compose.yml alone (a SQLite file) and on local images in CI require no
    MONGO_* value; the PostgreSQL stack is checked in test_deploy_postgres.py."""
    values = {k: v for k, v in read_env_file(ENV_EXAMPLE).items() if k not in MONGO_SECRETS}
    env_file = tmp_path / "no-mongo.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    for files in ([COMPOSE_FILE], [COMPOSE_FILE, LOCAL_IMAGES_FILE, CI_FILE]):
        model = resolve(run_compose, files, env_file)
        assert "mongo" not in model["services"], files
        assert (
            secret_files(model, "worker")["DNNFRAME_STORE_URL"] == "sqlite:////data/dnnframe.db"
        ), files
    # the rest are still required there
    del values["RABBITMQ_PASSWORD"]
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    proc = run_compose([COMPOSE_FILE], ["config", "--quiet"], env_file)
    assert proc.returncode != 0 and "RABBITMQ_PASSWORD" in proc.stderr, proc.stderr


def _environment_items(node: object):
    """Every (key, value) of every environment mapping in a raw compose document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "environment" and isinstance(value, dict):
                yield from value.items()
            else:
                yield from _environment_items(value)
    elif isinstance(node, list):
        for item in node:
            yield from _environment_items(item)


REQUIRED_REF = re.compile(r"^\$\{[A-Z_]+:\?[^}]*\}$")


@pytest.mark.parametrize("path", [COMPOSE_FILE, MONGO_FILE, WORKER_HOST_FILE])
def test_credentials_come_from_env_only(path: Path) -> None:
    raw = yaml.safe_load(path.read_text())
    if path == MONGO_FILE:
        env = raw["services"]["mongo"]["environment"]
        assert env["MONGO_INITDB_ROOT_USERNAME"].startswith("${MONGO_USER:?")
        assert raw["configs"]["mongo-password"]["content"].startswith("${MONGO_PASSWORD:?")
    for key, value in _environment_items(raw):
        if key.endswith("_FILE"):
            assert str(value).startswith("/run/secrets/"), f"{path.name}: {key}={value}"
        elif re.search(r"PASS|USER|AUTH", key):
            assert REQUIRED_REF.match(str(value)), f"{path.name}: {key} must be ${{VAR:?}}"
    # Credentials inside URLs (scheme://user:password@host) are required references too.
    for user, password in re.findall(r"://(\$\{[^}]*\}):(\$\{[^}]*\})@", path.read_text()):
        assert REQUIRED_REF.match(user) and REQUIRED_REF.match(password), (user, password)
    outside_refs = re.sub(r"\$\{[^}]*\}", "", path.read_text())
    literal = re.search(r"://[^$/\s]+:[^$/\s]+@", outside_refs)
    assert not literal, f"{path.name}: a literal credential {literal.group(0) if literal else ''}"


@pytest.mark.parametrize("env_choice", ["env-example", "secrets-only"])
def test_only_three_ports_published_on_localhost(
    run_compose, secrets_only_env, env_choice: str
) -> None:
    # "secrets-only" leaves DNNFRAME_PUBLISH_ADDRESS unset: the file's own default counts.
    env_file = ENV_EXAMPLE if env_choice == "env-example" else secrets_only_env
    model = resolve(run_compose, STACK_FILES, env_file)
    published = {name: svc.get("ports") or [] for name, svc in model["services"].items()}
    assert {n for n, p in published.items() if p} == set(PUBLISHED), published
    for name, target in PUBLISHED.items():
        [port] = published[name]
        assert port["target"] == target, (name, port)
        assert port.get("host_ip") == "127.0.0.1", f"{name} must bind 127.0.0.1 by default: {port}"
    for name, svc in model["services"].items():
        assert svc.get("network_mode") != "host", name
        assert not svc.get("expose"), f"{name}: only the stack's network may reach it"


@pytest.mark.parametrize("files", [STACK_FILES, [WORKER_HOST_FILE]], ids=["stack", "worker-host"])
def test_no_secret_in_what_docker_inspect_shows(
    run_compose, tmp_path: Path, files: list[Path]
) -> None:
    # Environment, command, healthcheck and labels are what `docker inspect` shows; the
    # secrets must reach the containers only as config files (copied in, not bind-mounted).
    env_file = tmp_path / "all.env"
    env_file.write_text(
        ENV_EXAMPLE.read_text() + "DNNFRAME_API_TOKEN=tok3n_value\n"
        "DNNFRAME_BROKER_URL=amqp://u:pw_broker@h:5672/\n"
        "DNNFRAME_STORE_URL=mongodb://u:pw_store@h:27017/x\n"
    )
    model = resolve(run_compose, files, env_file)
    values = read_env_file(env_file)
    secrets = [
        values[k]
        for k in (
            "RABBITMQ_PASSWORD",
            "MONGO_PASSWORD",
            "DNNFRAME_SECRET_KEY",
            "DNNFRAME_API_TOKEN",
        )
    ]
    secrets += [values["FLOWER_BASIC_AUTH"].split(":", 1)[1], "pw_broker", "pw_store"]
    for name, svc in model["services"].items():
        shown = yaml.safe_dump({k: v for k, v in svc.items() if k != "configs"})
        for secret in secrets:
            assert secret not in shown, f"{name}: a secret is visible to docker inspect"
        for config in svc.get("configs") or []:
            assert "file" not in model["configs"][config["source"]], "a bind mount shows its path"
    stack_files = {s: secret_files(model, s) for s in model["services"]}
    if files == STACK_FILES:  # remote workers need neither
        assert stack_files["dashboard"]["DNNFRAME_SECRET_KEY"] == values["DNNFRAME_SECRET_KEY"]
        assert stack_files["dashboard"]["DNNFRAME_API_TOKEN"].strip() == "tok3n_value"


# The secret files each service uses; it gets those and no others.
SECRETS_USED = {
    "worker": {"DNNFRAME_BROKER_URL", "DNNFRAME_STORE_URL"},
    "worker-gpu": {"DNNFRAME_BROKER_URL", "DNNFRAME_STORE_URL"},
    "dashboard": {
        "DNNFRAME_BROKER_URL",
        "DNNFRAME_STORE_URL",
        "DNNFRAME_API_TOKEN",
        "DNNFRAME_SECRET_KEY",
    },
    "flower": {"DNNFRAME_BROKER_URL", "FLOWER_BASIC_AUTH", "FLOWER_BROKER_API"},
}


def test_each_service_gets_only_the_secret_files_it_uses(stack) -> None:
    for name, used in SECRETS_USED.items():
        assert set(secret_files(stack, name)) == used, name
        targets = {c["target"] for c in stack["services"][name].get("configs") or []}
        assert len(targets) == len(used), f"{name} gets config files it does not read"


def test_publish_address_is_configurable(run_compose) -> None:
    model = resolve(
        run_compose, STACK_FILES, ENV_EXAMPLE, extra_env={"DNNFRAME_PUBLISH_ADDRESS": "10.1.2.3"}
    )
    for name in PUBLISHED:
        assert model["services"][name]["ports"][0]["host_ip"] == "10.1.2.3"


def test_every_service_has_a_healthcheck_and_restart_policy(stack) -> None:
    for name, svc in stack["services"].items():
        test = (svc.get("healthcheck") or {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name} has no healthcheck"
        assert svc.get("restart") in ("unless-stopped", "always", "on-failure"), name


def test_dependencies_wait_for_healthy_services(stack) -> None:
    services = stack["services"]
    for name in ("worker", "worker-gpu", "dashboard"):
        assert set(services[name]["depends_on"]) == set(BACKENDS), name
    assert set(services["flower"]["depends_on"]) == {"rabbitmq"}
    for name, svc in services.items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert cond["condition"] == "service_healthy", (name, dep)
            assert "healthcheck" in services[dep], f"{name} waits on {dep}, which has no check"


def test_worker_is_scalable(stack) -> None:
    for name in ("worker", "worker-gpu"):
        svc = stack["services"][name]
        assert "container_name" not in svc, f"{name}: container_name forbids --scale"
        assert not svc.get("ports"), f"{name}: published ports forbid --scale"
    # The process count comes from the environment (`dnnframe worker` reads DNNFRAME_WORKERS).
    assert stack["services"]["worker"]["environment"]["DNNFRAME_WORKERS"] == "1"
    assert not any(a.startswith("--concurrency") for a in stack["services"]["worker"]["command"])
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    assert "--concurrency=${DNNFRAME_GPU_WORKERS:-1}" in raw["services"]["worker-gpu"]["command"]


def test_gpu_profile(run_compose, stack) -> None:
    gpu = stack["services"]["worker-gpu"]
    assert gpu["profiles"] == ["gpu"]
    assert "device=cuda" in gpu["environment"]["THEANO_FLAGS"].split(",")
    assert "--queues=gpu" in gpu["command"]
    # The GPU image (JAX's CUDA build) and one GPU, for this service only.
    assert gpu["image"] == "dnnframe:gpu"
    assert gpu["build"]["args"]["DNNFRAME_EXTRAS"] == "all,monitoring,gpu"
    [device] = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert device["count"] == 1
    for name, svc in stack["services"].items():
        assert name == "worker-gpu" or "deploy" not in svc, f"{name} reserves a GPU"
    # Without the profile the GPU worker is not part of the stack.
    plain = resolve(run_compose, STACK_FILES, ENV_EXAMPLE, profiles=())
    assert "worker-gpu" not in plain["services"]


def test_one_configuration_story(stack) -> None:
    services = stack["services"]
    base = {k: v for k, v in services["worker"]["environment"].items() if k != "THEANO_FLAGS"}
    assert {
        "DNNFRAME_BROKER_URL_FILE",
        "DNNFRAME_STORE_URL_FILE",
        "DNNFRAME_DATA_DIR",
        "DNNFRAME_TASK_TIME_LIMIT",
        "DNNFRAME_HEARTBEAT_TIMEOUT",
    } <= set(base)
    files = secret_files(stack, "worker")
    for name in DNNFRAME_SERVICES:
        env = services[name]["environment"]
        same = {
            k: v for k, v in env.items() if k.startswith("DNNFRAME_") and not k.endswith("_FILE")
        }
        assert same == {k: v for k, v in base.items() if not k.endswith("_FILE")}, (
            f"{name} sees different DNNFRAME_* settings than the worker"
        )
        if name != "worker-gpu":  # the same Dockerfile with JAX's CUDA build added
            assert services[name]["image"] == services["worker"]["image"], name
        shared = {k: v for k, v in secret_files(stack, name).items() if k in files}
        assert shared == {k: files[k] for k in shared}, name  # the same broker and store
    assert files["DNNFRAME_BROKER_URL"].startswith("amqp://")
    assert "@rabbitmq:5672" in files["DNNFRAME_BROKER_URL"]
    assert files["DNNFRAME_STORE_URL"].startswith("mongodb://")
    assert "@mongo:27017/" in files["DNNFRAME_STORE_URL"]


def test_every_dnnframe_variable_in_env_example_reaches_the_containers(stack) -> None:
    compose_only = {
        "DNNFRAME_PUBLISH_ADDRESS",
        "DNNFRAME_DASHBOARD_PORT",
        "DNNFRAME_FLOWER_PORT",
        "DNNFRAME_RABBITMQ_UI_PORT",
        "DNNFRAME_IMAGE",
        "DNNFRAME_GPU_WORKERS",
        "DNNFRAME_GPU_THEANO_FLAGS",
        "DNNFRAME_GPU_IMAGE",
    }
    env = stack["services"]["dashboard"]["environment"]
    files = secret_files(stack, "dashboard")
    for key in read_env_file(ENV_EXAMPLE):
        if key.startswith("DNNFRAME_") and key not in compose_only:
            assert key in env or key in files, f".env.example sets {key} but no container gets it"


def test_volumes_for_compile_cache_and_data(stack) -> None:
    services = stack["services"]
    for name in DNNFRAME_SERVICES:
        mounts = {v["target"]: v for v in services[name]["volumes"]}
        assert mounts["/cache/pytensor"]["type"] == "volume", name
        assert mounts["/data"]["source"] == "dnnframe-data", name
        assert services[name]["environment"]["DNNFRAME_DATA_DIR"] == "/data"
    assert mongo_volume(services["mongo"]) == "mongo-data"


def mongo_volume(svc: dict) -> str:
    """The named volume holding MongoDB's data files."""
    [mount] = [v for v in svc["volumes"] if v["target"] == "/data/db"]
    assert mount["type"] == "volume"
    return mount["source"]


def _consumer_timeout_ms() -> int:
    match = re.search(r"^consumer_timeout\s*=\s*(\d+)\s*$", RABBITMQ_CONF.read_text(), re.M)
    assert match, f"{RABBITMQ_CONF} sets no consumer_timeout"
    return int(match.group(1))


def test_rabbitmq_config_is_mounted_and_outlasts_the_task_time_limit(stack) -> None:
    rabbit = stack["services"]["rabbitmq"]
    mounts = {Path(v["source"]).resolve(): v for v in rabbit["volumes"] if v["type"] == "bind"}
    conf = mounts[RABBITMQ_CONF.resolve()]
    assert conf["target"].startswith("/etc/rabbitmq/conf.d/") and conf["read_only"]
    plugins = mounts[(REPO / "deploy" / "rabbitmq" / "enabled_plugins").resolve()]
    assert plugins["target"] == "/etc/rabbitmq/enabled_plugins"
    assert "rabbitmq_management" in Path(plugins["source"]).read_text()
    assert rabbit["image"].startswith("rabbitmq:") and "management" in rabbit["image"]
    conf_d = [c["target"] for c in rabbit["configs"]]
    assert conf_d == ["/etc/rabbitmq/conf.d/20-default-user.conf"], conf_d
    user_conf = stack["configs"][rabbit["configs"][0]["source"]]["content"]
    env = read_env_file(ENV_EXAMPLE)
    assert f"default_pass = {env['RABBITMQ_PASSWORD']}" in user_conf.splitlines()

    raw = COMPOSE_FILE.read_text()
    compose_default = int(re.search(r"DNNFRAME_TASK_TIME_LIMIT:-(\d+)", raw).group(1))
    limits = {
        "docker-compose.yml default": compose_default,
        ".env.example": int(read_env_file(ENV_EXAMPLE)["DNNFRAME_TASK_TIME_LIMIT"]),
        "resolved": int(stack["services"]["worker"]["environment"]["DNNFRAME_TASK_TIME_LIMIT"]),
    }
    timeout_ms = _consumer_timeout_ms()
    for where, seconds in limits.items():
        assert timeout_ms > seconds * 1000, (
            f"consumer_timeout {timeout_ms} ms must exceed the task time limit ({where}: "
            f"{seconds} s), or RabbitMQ closes the channel of a long trial"
        )


def test_backend_images_are_pinned(stack) -> None:
    # A floating tag (rabbitmq:3-management, mongo:7) changes under the stack on a pull.
    assert re.fullmatch(
        r"rabbitmq:\d+\.\d+\.\d+-management", stack["services"]["rabbitmq"]["image"]
    )
    assert re.fullmatch(r"mongo:\d+\.\d+\.\d+", stack["services"]["mongo"]["image"])


@pytest.mark.parametrize(
    "files",
    [CI_STACK_FILES, (COMPOSE_FILE, LOCAL_IMAGES_FILE, CI_FILE)],
    ids=["postgresql", "sqlite"],
)
def test_ci_override_keeps_everything_on_the_machine_and_changes_nothing_else(
    run_compose, files
) -> None:
    """CI runs the registry-less production stack with deploy/compose.ci.yml last: an
    internal network and nothing published, everything else (health checks included) as
    an operator runs it."""
    env = {"POSTGRES_USER": "dnnframe", "POSTGRES_PASSWORD": "pg-secret-123"}
    model = resolve(run_compose, files, ENV_EXAMPLE, profiles=(), extra_env=env)
    local = resolve(
        run_compose, [f for f in files if f != CI_FILE], ENV_EXAMPLE, profiles=(), extra_env=env
    )
    assert "mongo" not in model["services"]
    assert model["networks"]["default"]["internal"] is True
    assert set(model["services"]) == set(local["services"])
    for name, svc in model["services"].items():
        assert not svc.get("ports"), f"{name} publishes {svc['ports']} in CI"
        assert svc.get("network_mode") in (None, "default"), name
        assert set(svc.get("networks") or {"default": None}) == {"default"}, name
        assert svc.get("pull_policy") == "never", f"{name} would try a registry"
        assert {k: v for k, v in svc.items() if k != "ports"} == {
            k: v for k, v in local["services"][name].items() if k != "ports"
        }, name
    assert model["services"]["rabbitmq"]["image"] == "dnnframe-rabbitmq:bookworm"


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_registry_less_stack_is_the_production_stack_on_local_images(
    run_compose, tmp_path: Path, store: str
) -> None:
    """deploy/compose.local-images.yml (and, for PostgreSQL, compose.local-postgres.yml)
    pull nothing and change nothing else: the stack's health checks, restart policies,
    published ports and network; no MongoDB, so no MONGO_* secret."""
    values = {k: v for k, v in read_env_file(ENV_EXAMPLE).items() if k not in MONGO_SECRETS}
    values.update(POSTGRES_USER="dnnframe", POSTGRES_PASSWORD="pg-secret-123")
    env_file = tmp_path / "local.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    base = [COMPOSE_FILE] + ([POSTGRES_FILE] if store == "postgresql" else [])
    local = base + [LOCAL_IMAGES_FILE] + ([LOCAL_POSTGRES_FILE] if store == "postgresql" else [])
    production = resolve(run_compose, base, env_file)
    model = resolve(run_compose, local, env_file)
    assert (
        set(model["services"]) == set(production["services"]) and "mongo" not in model["services"]
    )
    assert model["name"] == production["name"] == "dnnframe"
    assert not model["networks"]["default"].get("internal")
    for name, svc in model["services"].items():
        assert svc.get("pull_policy") == "never", f"{name} would try a registry"
        here = production["services"][name]
        for key in ("healthcheck", "restart", "ports", "command", "depends_on", "configs"):
            assert svc.get(key) == here.get(key), (name, key)
    images = {name: svc["image"] for name, svc in model["services"].items()}
    assert images["rabbitmq"] == "dnnframe-rabbitmq:bookworm"
    assert images["worker"] == images["dashboard"] == images["flower"] == "dnnframe:latest"
    if store == "postgresql":
        assert images["postgres"] == "dnnframe-postgres:bookworm"
        assert secret_files(model, "worker")["DNNFRAME_STORE_URL"].startswith("postgresql://")
    else:
        assert secret_files(model, "worker")["DNNFRAME_STORE_URL"] == "sqlite:////data/dnnframe.db"


def test_ci_look_override_publishes_the_three_uis_on_localhost(run_compose) -> None:
    look = REPO / "deploy" / "compose.ci-look.yml"
    model = resolve(
        run_compose, [COMPOSE_FILE, LOCAL_IMAGES_FILE, CI_FILE, look], ENV_EXAMPLE, profiles=()
    )
    published = {
        name: [(p["host_ip"], p["published"], p["target"]) for p in svc["ports"]]
        for name, svc in model["services"].items()
        if svc.get("ports")
    }
    assert published == {
        "rabbitmq": [("127.0.0.1", "15672", 15672)],
        "dashboard": [("127.0.0.1", "8000", 8000)],
        "flower": [("127.0.0.1", "5555", 5555)],
    }
    assert not model["networks"]["look"].get("internal")
    assert model["networks"]["default"]["internal"] is True
    for name in ("worker",):  # the workers stay on the internal network only
        assert set(model["services"][name].get("networks") or {"default": None}) == {"default"}


def test_worker_host_file_mirrors_the_stack(run_compose, stack, tmp_path: Path) -> None:
    env_file = tmp_path / "worker.env"
    env_file.write_text(
        "DNNFRAME_BROKER_URL=amqp://u:p@main-host:5672/\n"
        "DNNFRAME_STORE_URL=mongodb://u:p@main-host:27017/dnnframe\n"
    )
    remote = resolve(run_compose, [WORKER_HOST_FILE], env_file)
    assert set(remote["services"]) == {"worker", "worker-gpu"}
    for name in ("worker", "worker-gpu"):
        here, there = stack["services"][name], remote["services"][name]
        assert there["command"] == here["command"], name
        assert there["healthcheck"]["test"] == here["healthcheck"]["test"], name
        assert there["environment"]["THEANO_FLAGS"] == here["environment"]["THEANO_FLAGS"]
        assert secret_files(remote, name)["DNNFRAME_BROKER_URL"] == "amqp://u:p@main-host:5672/"
        assert "deploy" not in there, f"{name}: no GPU reservation until the CUDA image exists"
        assert not there.get("ports") and "container_name" not in there
        for key in (
            "DNNFRAME_TASK_TIME_LIMIT",
            "DNNFRAME_HEARTBEAT_TIMEOUT",
            "DNNFRAME_DATA_DIR",
            "DNNFRAME_MAX_ATTEMPTS",
            "DNNFRAME_WORKERS",
        ):
            assert there["environment"][key] == here["environment"][key], (name, key)
    assert Path(remote["services"]["worker"]["build"]["context"]).resolve() == REPO
    # Without the broker and store URLs the remote workers refuse to start.
    proc = run_compose([WORKER_HOST_FILE], ["config", "--quiet"], None)
    # (compose names whichever missing variable it meets first; its order is not fixed)
    assert proc.returncode != 0 and (
        "DNNFRAME_BROKER_URL" in proc.stderr or "DNNFRAME_STORE_URL" in proc.stderr
    ), proc.stderr


def test_backends_are_exposed_only_on_request(run_compose) -> None:
    proc = run_compose([*STACK_FILES, EXPOSE_FILE], ["config", "--quiet"], ENV_EXAMPLE)
    assert proc.returncode != 0 and "DNNFRAME_BACKEND_ADDRESS" in proc.stderr, proc.stderr
    model = resolve(
        run_compose,
        [*STACK_FILES, EXPOSE_FILE],
        ENV_EXAMPLE,
        extra_env={"DNNFRAME_BACKEND_ADDRESS": "10.0.0.5"},
    )
    ports = {
        n: {(p["host_ip"], p["target"]) for p in s.get("ports") or []}
        for n, s in model["services"].items()
    }
    assert ports["rabbitmq"] == {("127.0.0.1", 15672), ("10.0.0.5", 5672)}
    assert ports["mongo"] == {("10.0.0.5", 27017)}


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for entry in (".env", ".venv", ".git", "*.db"):
        assert entry in ignored, f".dockerignore must exclude {entry}"


def test_every_setting_is_documented() -> None:
    """docs/deploy.md's tables name every DNNFRAME_* variable the code or .env.example uses."""
    docs = (REPO / "docs" / "deploy.md").read_text()
    used: set[str] = set()
    for package in ("dnnframe", "tasks", "dashboard"):
        for source in (REPO / package).rglob("*.py"):
            used.update(re.findall(r"\b(DNNFRAME_[A-Z][A-Z0-9_]*[A-Z0-9])\b", source.read_text()))
    used.update(read_env_file(ENV_EXAMPLE))
    for compose_file in (
        COMPOSE_FILE,
        MONGO_FILE,
        WORKER_HOST_FILE,
        EXPOSE_FILE,
        CI_FILE,
        LOCAL_IMAGES_FILE,
        LOCAL_POSTGRES_FILE,
    ):
        lines = [x for x in compose_file.read_text().splitlines() if not x.strip().startswith("#")]
        used.update(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", "\n".join(lines)))
    wildcards = re.findall(r"`(DNNFRAME_[A-Z_]+)_\*`", docs)
    missing = sorted(
        v
        for v in used
        if f"`{v}`" not in docs
        and not v.startswith("DNNFRAME_TEST_")
        and not any(v.startswith(w + "_") for w in wildcards)
    )
    assert not missing, f"docs/deploy.md does not document {missing}"
