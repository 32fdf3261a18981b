"""dnnframe's settings: one typed object read from ``DNNFRAME_*`` environment variables.

The CLI, the local executor, the Celery workers and the dashboard all read their settings
here. :func:`get` reads the environment on each call (a command or a test may change it
between calls), and builds new settings when a ``DNNFRAME_*`` variable changed. A command that starts a server passes its settings on explicitly: the
dashboard's ``create_app(settings=...)``, and :func:`child_environ` for a child process;
it never writes its own environment. Every variable is listed once, in docs/deploy.md.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .exceptions import DnnframeError

if TYPE_CHECKING:
    from .engine.result import TrialResult

ENV_PREFIX = "DNNFRAME_"


class SettingsError(DnnframeError, ValueError):
    """An environment variable has a value that cannot be used."""


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _count(name: str, raw: object) -> object:
    if raw is None or isinstance(raw, int):
        return raw
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{ENV_PREFIX}{name.upper()} must be a positive integer, but got {raw!r}")
    return value


def _seconds(name: str, raw: object) -> object:
    if raw is None or isinstance(raw, (int, float)):
        return raw
    var = f"{ENV_PREFIX}{name.upper()}"
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ValueError(f"{var} must be a number of seconds, but got {raw!r}") from None
    if not value > 0 or math.isinf(value):
        raise ValueError(f"{var} must be > 0 seconds, but got {raw!r}")
    return value


class Settings(BaseSettings):
    """Every ``DNNFRAME_*`` setting, typed. An unset or empty variable takes the default."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True,
                                      extra="ignore", frozen=True)

    broker_url: str | None = None
    store_url: str | None = None
    workers: int | None = None
    heartbeat_timeout: float = 300.0
    max_attempts: int = 3
    task_time_limit: float = 1680.0
    train_fn: str | None = None
    pack_size: int | None = None
    api_token: str | None = None
    secret_key: str | None = None
    flower_url: str | None = None
    rabbitmq_ui_url: str | None = None
    allowed_hosts: str | None = None
    bind_host: str | None = None
    data_dir: str = "dnnframe-data"
    cache_dir: str | None = None
    model_cache_bytes: int = Field(2**30, ge=0)
    mongo_timeout_s: float = 5.0
    driver_lease_s: float = 30.0
    web_threads: int = 4
    trusted_proxies: int = Field(0, ge=0, le=8)
    token_guess_storage: str = "memory://"
    # Dashboard limits; unset, the dashboard's own defaults apply (dashboard.DEFAULTS).
    max_trials: int | None = None
    max_dataset_cells: int | None = None
    max_content_length: int | None = None
    max_upload_bytes: int | None = None
    event_streams: int | None = Field(None, ge=0)
    celery_inspect_timeout: float | None = None
    token_guess_limit: str | None = None

    @field_validator("workers", "max_attempts", "pack_size", "web_threads", "max_trials",
                     "max_dataset_cells", "max_content_length", "max_upload_bytes",
                     mode="before")
    @classmethod
    def _positive_count(cls, raw: object, info: ValidationInfo) -> object:
        # field_name is None only in a model validator
        return _count(info.field_name, raw)  # type: ignore[arg-type]

    @field_validator("heartbeat_timeout", "task_time_limit", "mongo_timeout_s",
                     "celery_inspect_timeout", "driver_lease_s", mode="before")
    @classmethod
    def _positive_seconds(cls, raw: object, info: ValidationInfo) -> object:
        return _seconds(info.field_name, raw)  # type: ignore[arg-type]  # as above

    @property
    def worker_count(self) -> int:
        """Training processes: ``workers`` if set, else the cores this process may use."""
        return self.workers or _cpu_count()

    @property
    def task_time_limits(self) -> tuple[float, float]:
        """(soft, hard) time limit of one Celery task; the soft limit fires a minute earlier
        (10 % earlier for short limits) so the trial can record why it stopped."""
        hard = self.task_time_limit
        return hard - min(60.0, hard * 0.1), hard

    def dashboard_config(self) -> dict[str, object]:
        """The settings the dashboard takes, under its config keys (only those set)."""
        keys = ("broker_url", "store_url", "workers", "api_token", "secret_key", "flower_url",
                "rabbitmq_ui_url", "allowed_hosts", "bind_host", "trusted_proxies",
                "token_guess_storage", "max_trials", "max_dataset_cells", "max_content_length",
                "max_upload_bytes", "event_streams", "celery_inspect_timeout",
                "token_guess_limit")
        return {k.upper(): getattr(self, k) for k in keys if k in self.model_fields_set}

    def replace(self, **values: object) -> Settings:
        """A copy with ``values`` set (validated like the environment's); a None value
        leaves that setting as it is."""
        given = {k: v for k, v in values.items() if v is not None}
        unknown = sorted(set(given) - set(type(self).model_fields))
        if unknown:
            raise SettingsError(f"no such setting: {', '.join(unknown)}")
        try:
            return type(self).model_validate({**self.model_dump(exclude_unset=True), **given})
        except ValidationError as exc:
            raise _settings_error(exc) from None


# The last settings read, with the DNNFRAME_* variables they were read from: building
# Settings took 1.4 ms (every source of pydantic-settings), and a worker asks for it per pack.
_last: tuple[tuple[tuple[str, str], ...], Settings] | None = None


def get() -> Settings:
    """The settings as the environment says now.

    Raises:
        SettingsError: a variable has a value that cannot be used; the message names it.
    """
    global _last
    ours = tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)))
    last = _last
    if last is not None and last[0] == ours:
        return last[1]  # (frozen: safe to share)
    try:
        settings = Settings()
    except ValidationError as exc:
        raise _settings_error(exc) from None
    _last = (ours, settings)
    return settings


def _settings_error(exc: ValidationError) -> SettingsError:
    err = exc.errors()[0]
    message = str(err.get("ctx", {}).get("error") or err["msg"])
    if not message.startswith(ENV_PREFIX):
        field = str(err["loc"][0]) if err["loc"] else "?"
        message = f"{ENV_PREFIX}{field.upper()}: {message}, but got {err.get('input')!r}"
    return SettingsError(message)


def child_environ(values: Mapping[str, str | None] | None = None,
                  base: Mapping[str, str] | None = None, **settings: str | None) -> dict[str, str]:
    """The environment of a child process: ``base`` (default this process's), plus
    ``DNNFRAME_<NAME>`` for each of ``settings`` and the variables in ``values`` (a None value
    leaves the variable as it is). This process's own environment is never changed.

    Raises:
        SettingsError: a name that is no setting.
    """
    env = dict(os.environ if base is None else base)
    unknown = sorted(set(settings) - set(Settings.model_fields))
    if unknown:
        raise SettingsError(f"no such setting: {', '.join(unknown)}")
    env.update({f"{ENV_PREFIX}{k.upper()}": str(v) for k, v in settings.items() if v is not None})
    env.update({k: v for k, v in (values or {}).items() if v is not None})
    return env


def resolve_train_fn(spec: str | None = None) -> Callable[..., TrialResult] | None:
    """The function named by ``spec`` (default ``$DNNFRAME_TRAIN_FN``, ``module:function``).

    A testing/benchmark hook: workers train with it instead of the engine.

    Raises:
        SettingsError: the value is malformed or cannot be imported.
    """
    spec = (spec if spec is not None else get().train_fn or "").strip()
    if not spec:
        return None
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SettingsError(
            f"DNNFRAME_TRAIN_FN must look like 'package.module:function', but got {spec!r}")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise SettingsError(f"DNNFRAME_TRAIN_FN={spec!r} cannot be imported: {exc}") from exc
    if not callable(fn):
        raise SettingsError(f"DNNFRAME_TRAIN_FN={spec!r} is not callable")
    return fn
