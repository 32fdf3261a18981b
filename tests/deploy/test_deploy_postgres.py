"""deploy/compose.postgres.yml: the stack with PostgreSQL as its store, resolved by
``docker compose config`` (no engine needed; the stack itself is not started here)."""

from __future__ import annotations

import re
from pathlib import Path

from deploy_support import (
    CI_STACK_FILES,
    COMPOSE_FILE,
    ENV_EXAMPLE,
    MONGO_SECRETS,
    POSTGRES_FILE,
    read_env_file,
    resolve,
    secret_files,
)

PG_ENV = {"POSTGRES_USER": "dnnframe", "POSTGRES_PASSWORD": "pg-secret-123"}


def _model(run_compose, env: dict[str, str] = PG_ENV) -> dict:
    return resolve(run_compose, [COMPOSE_FILE, POSTGRES_FILE], ENV_EXAMPLE, extra_env=env)


def test_the_store_is_postgresql_and_mongodb_is_not_started(run_compose) -> None:
    model = _model(run_compose)
    services = model["services"]
    assert "mongo" not in services
    for name in ("worker", "worker-gpu", "dashboard"):  # Flower reads no store
        assert (
            secret_files(model, name)["DNNFRAME_STORE_URL"]
            == "postgresql://dnnframe:pg-secret-123@postgres:5432/dnnframe"
        ), name
    assert "DNNFRAME_STORE_URL" not in secret_files(model, "flower")
    for name in ("worker", "worker-gpu", "dashboard"):
        assert {dep: c["condition"] for dep, c in services[name]["depends_on"].items()} == {
            "rabbitmq": "service_healthy",
            "postgres": "service_healthy",
        }, name


def test_postgres_is_pinned_checked_and_gets_its_password_as_a_file(run_compose) -> None:
    model = _model(run_compose)
    pg = model["services"]["postgres"]
    assert re.fullmatch(r"postgres:\d+\.\d+-bookworm", pg["image"])
    assert pg["restart"] == "unless-stopped"
    assert pg["healthcheck"]["test"][0] == "CMD-SHELL"
    assert "pg_isready" in pg["healthcheck"]["test"][1]
    assert secret_files(model, "postgres") == {"POSTGRES_PASSWORD": "pg-secret-123"}
    assert not pg.get("ports"), "the database is reachable on the stack's network only"
    shown = str({k: v for k, v in pg.items() if k != "configs"})
    assert "pg-secret-123" not in shown
    for name, svc in model["services"].items():
        assert "pg-secret-123" not in str(svc.get("environment")), name
        assert "pg-secret-123" not in str(svc.get("command")), name


def test_the_postgres_stack_needs_no_mongo_secret(run_compose, tmp_path: Path) -> None:
    values = {k: v for k, v in read_env_file(ENV_EXAMPLE).items() if k not in MONGO_SECRETS}
    env_file = tmp_path / "no-mongo.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    for files in ([COMPOSE_FILE, POSTGRES_FILE], CI_STACK_FILES):
        model = resolve(run_compose, files, env_file, extra_env=PG_ENV)
        assert secret_files(model, "worker")["DNNFRAME_STORE_URL"].startswith("postgresql://")


def test_the_postgres_secrets_have_no_default(run_compose, tmp_path: Path) -> None:
    for missing in PG_ENV:
        env = {k: v for k, v in PG_ENV.items() if k != missing}
        proc = run_compose([COMPOSE_FILE, POSTGRES_FILE], ["config"], ENV_EXAMPLE, env)
        assert proc.returncode != 0 and f"set {missing} in .env" in proc.stderr, proc.stderr


def test_the_ci_stack_runs_on_postgresql_built_from_debian(run_compose) -> None:
    # what tests/deploy/test_deploy_stack.py starts: the registry-less production stack
    # (deploy/compose.local-postgres.yml: the image built from Debian's packages, as the
    # official one cannot be pulled there), confined by the CI override
    model = resolve(run_compose, CI_STACK_FILES, ENV_EXAMPLE, extra_env=PG_ENV, profiles=())
    pg = model["services"]["postgres"]
    assert pg["image"] == "dnnframe-postgres:bookworm" and pg["pull_policy"] == "never"
    assert not pg.get("ports")
    assert model["networks"]["default"]["internal"] is True
    assert secret_files(model, "worker")["DNNFRAME_STORE_URL"].startswith("postgresql://")
    # the production health check, timings and all
    assert pg["healthcheck"] == _model(run_compose)["services"]["postgres"]["healthcheck"]
    assert "mongo" not in model["services"]
