"""dnnframe's settings: one typed object read from ``DNNFRAME_*`` environment variables.

The CLI, the local executor, the Celery workers and the dashboard all read their settings
here. :func:`get` reads the environment on each call (a command or a test may change it
between calls), and builds new settings when a ``DNNFRAME_*`` variable changed. A command that starts a server passes its settings on explicitly: the
dashboard's ``create_app(settings=...)``, and :func:`child_environ` for a child process;
it never writes its own environment. Each field's description is what its variable means,
written nowhere else: the settings reference (docs/reference/settings.md) is generated
from them, and the deployment guide says what the compose stack sets.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .exceptions import DnnframeError

if TYPE_CHECKING:
    from .runner.train_fns import PackTrainFn

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


def _setting(default: Any, meaning: str, *, unset: str | None = None, **rules: Any) -> Any:
    """A setting's default and ``meaning`` (markdown; a link is relative to docs/), and for
    one whose default is None, what leaving it unset does (``unset``), when that is not a
    value this model can hold (the reference prints it in the default's place)."""
    return Field(
        default, description=meaning, **rules, json_schema_extra={"unset": unset} if unset else None
    )


class Settings(BaseSettings):
    """Every ``DNNFRAME_*`` setting, typed. An unset or empty variable takes the default."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True
    )

    broker_url: str | None = _setting(
        None,
        "RabbitMQ for Celery; when set, the dashboard and `dnnframe run` submit through "
        "it (`dnnframe run --local` overrides)",
        unset="a local process pool (`dnnframe worker`: `amqp://guest:guest@127.0.0.1:5672//`)",
    )
    store_url: str | None = _setting(
        None,
        "where experiments, trials and metrics live: `sqlite:///path.db`, "
        "`mongodb://…`, `postgresql://…` (see [A PostgreSQL store]"
        "(deploy.md#a-postgresql-store)), `mongomock://` (tests), `memory://` (the "
        "in-memory reference backend: tests and one-process use only, never shared across "
        "processes; `dnnframe run` and `dnnframe worker` refuse it)",
        unset="`sqlite:///dnnframe.db`",
    )
    workers: int | None = _setting(
        None,
        "training processes of `dnnframe run`, and of each `dnnframe worker`",
        unset="the cores this process may use",
    )
    heartbeat_timeout: float = _setting(
        300.0, "seconds: a RUNNING trial silent this long is requeued"
    )
    max_attempts: int = _setting(3, "deliveries of one trial before it is FAILED")
    task_time_limit: float = _setting(
        1680.0,
        "seconds: the hard time limit of one Celery task (one pack of trials); a soft "
        "limit a minute earlier (10 % earlier for short limits) lets its trials record why "
        "they stopped; must stay below RabbitMQ's `consumer_timeout` (30 min in a stock "
        "RabbitMQ), for a worker acknowledges a pack's message only when the pack is over",
    )
    train_fn: str | None = _setting(
        None,
        "test hook, never set in production: `module:function` naming a pack train "
        "function (`train(configs, on_epoch) -> results`) trained instead of the engine. "
        "Only functions of the `dnnframe.testing` package are accepted "
        "(`dnnframe/testing/hooks.py`, whose own knobs are `DNNFRAME_HOOK_*` variables); "
        "anything else is refused at start",
    )
    pack_size: int | None = _setting(
        None,
        "trials per pack (trials sharing one compiled graph, trained as one unit of "
        "work); `1` is one trial per task. Automatic: as many as a memory budget allows, but "
        "never fewer packs than worker processes when there are enough trials, and about two "
        "packs per process with several (packs of different graphs differ in cost); with a "
        "broker, the processes are those consuming the queue at submit. `dnnframe run "
        "--pack-size` and the spec's `search.pack_size` win over it",
        unset="automatic",
    )
    api_token: str | None = _setting(
        None,
        "bearer token the REST API's write endpoints require; set it before publishing "
        "the dashboard beyond 127.0.0.1",
    )
    secret_key: str | None = _setting(
        None,
        "signs the dashboard's session (CSRF); set it whenever more than one server "
        "process serves the dashboard (gunicorn runs two that must share it)",
        unset="random per start",
    )
    flower_url: str | None = _setting(
        None, "link the dashboard shows to Flower (as your browser reaches it)"
    )
    rabbitmq_ui_url: str | None = _setting(
        None, "link the dashboard shows to RabbitMQ's management UI (as your browser reaches it)"
    )
    allowed_hosts: str | None = _setting(
        None,
        "`Host` headers the dashboard answers (comma list, `*` for any); others get 400 "
        "(DNS rebinding)",
        unset="the bound address, `127.0.0.1`, `localhost`, `::1` (and the machine's names "
        "when bound to every interface)",
    )
    bind_host: str | None = _setting(
        None,
        "the address the dashboard listens on, added to the allowed hosts; `dnnframe "
        "serve` and the gunicorn configuration set it",
    )
    data_dir: str = _setting(
        "dnnframe-data",
        "uploaded CSV datasets (`uploads/<id>.csv`), relative to the "
        "working directory unless absolute",
    )
    cache_dir: str | None = _setting(
        None,
        "compiled packed models kept per host, so a fresh worker loads a known graph "
        "instead of building it",
        unset="`<PyTensor compiledir>/dnnframe`",
    )
    model_cache_bytes: int = _setting(
        2**30,
        "bytes: the bound of a worker's in-memory cache of compiled models (least "
        "recently used evicted first)",
        ge=0,
    )
    mongo_timeout_s: float = _setting(5.0, "seconds: the MongoDB store's server-selection timeout")
    driver_lease_s: float = _setting(
        30.0,
        "seconds: time to live of a search driver's lease in the store (renewed every "
        "third of it): how long after a driver process dies another takes its tpe/cmaes "
        "experiments over (see [Search drivers](deploy.md#search-drivers)); also of the "
        "recovery lease of a server without a broker",
    )
    web_threads: int = _setting(
        4,
        "threads per gunicorn worker of the dashboard (`WEB_CONCURRENCY` sets the "
        "workers, default 2)",
    )
    trusted_proxies: int = _setting(
        0,
        "reverse proxies in front of the dashboard whose `X-Forwarded-For`/`-Proto`/"
        "`-Host`/`-Port` headers are believed (werkzeug's `ProxyFix`, that many hops). Behind "
        "one proxy set `1`: the token-guess throttle then counts per client instead of one "
        "count for everyone the proxy forwards; `0` ignores the headers, so a client cannot "
        "pick its own address",
        ge=0,
        le=8,
    )
    token_guess_storage: str = _setting(
        "memory://",
        "where wrong API tokens are counted (`DNNFRAME_TOKEN_GUESS_LIMIT` per "
        "client, then 429 with `Retry-After`): `memory://` per dashboard process, so each "
        "gunicorn worker allows the limit; a `limits` storage URI such as "
        "`redis://redis:6379/0` counts once for every process and host that names it "
        "(`pip install 'dnnframe[redis]'`)",
    )
    # The dashboard's limits: their defaults are here, the one place (dashboard.DEFAULTS
    # holds only its keys that are no setting).
    max_trials: int = _setting(
        10_000, "sweeps larger than this are refused (400) before anything is stored"
    )
    max_dataset_cells: int = _setting(
        20_000_000, "rows × features of a generated dataset a web request may ask for"
    )
    max_content_length: int = _setting(
        8 * 1024 * 1024,
        "bytes: the largest request body the dashboard reads (specs and CSV uploads)",
    )
    max_upload_bytes: int | None = _setting(
        None, "bytes: the largest CSV upload", unset="`DNNFRAME_MAX_CONTENT_LENGTH`"
    )
    event_streams: int = _setting(
        16,
        "live-update streams (server-sent events) one dashboard process serves at "
        "once; each holds a thread, so gunicorn gets this many threads more; past it a page "
        "is refused (503) and polls instead",
        ge=0,
    )
    celery_inspect_timeout: float = _setting(
        1.0, "seconds the dashboard's health and worker pages wait for Celery workers to answer"
    )
    token_guess_limit: str = _setting(
        "10 per minute",
        "wrong API tokens one client may send (at the sign-in page or as a "
        "bearer token) before it must wait (a `limits` rate string)",
    )

    @field_validator(
        "workers",
        "max_attempts",
        "pack_size",
        "web_threads",
        "max_trials",
        "max_dataset_cells",
        "max_content_length",
        "max_upload_bytes",
        mode="before",
    )
    @classmethod
    def _positive_count(cls, raw: object, info: ValidationInfo) -> object:
        # field_name is None only in a model validator
        return _count(info.field_name, raw)  # type: ignore[arg-type]

    @field_validator(
        "heartbeat_timeout",
        "task_time_limit",
        "mongo_timeout_s",
        "celery_inspect_timeout",
        "driver_lease_s",
        mode="before",
    )
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
        """Every setting the dashboard takes, under its config key, set or default (so a
        dashboard default is written only here)."""
        keys = (
            "broker_url",
            "store_url",
            "workers",
            "api_token",
            "secret_key",
            "flower_url",
            "rabbitmq_ui_url",
            "allowed_hosts",
            "bind_host",
            "trusted_proxies",
            "token_guess_storage",
            "max_trials",
            "max_dataset_cells",
            "max_content_length",
            "max_upload_bytes",
            "event_streams",
            "celery_inspect_timeout",
            "token_guess_limit",
        )
        return {k.upper(): getattr(self, k) for k in keys}

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


def child_environ(
    values: Mapping[str, str | None] | None = None,
    base: Mapping[str, str] | None = None,
    **settings: str | None,
) -> dict[str, str]:
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


# The package whose functions DNNFRAME_TRAIN_FN may name; named, never imported here.
TEST_HOOKS_PACKAGE = "dnnframe.testing"


def _in_test_hooks(module_name: str) -> bool:
    return module_name == TEST_HOOKS_PACKAGE or module_name.startswith(TEST_HOOKS_PACKAGE + ".")


def resolve_train_fn(spec: str | None = None) -> PackTrainFn | None:
    """The pack train function named by ``spec`` (default ``$DNNFRAME_TRAIN_FN``,
    ``module:function``).

    A test hook: workers train with it instead of the engine. Only functions defined in the
    ``dnnframe.testing`` package are accepted, so the seam cannot swap production training
    for arbitrary code.

    Raises:
        SettingsError: the value is malformed, names a function outside ``dnnframe.testing``,
            or cannot be imported.
    """
    spec = (spec if spec is not None else get().train_fn or "").strip()
    if not spec:
        return None
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SettingsError(
            f"DNNFRAME_TRAIN_FN must look like 'package.module:function', but got {spec!r}"
        )
    refused = SettingsError(
        f"DNNFRAME_TRAIN_FN={spec!r} is refused: it is a test hook and may only name a "
        f"function defined in the {TEST_HOOKS_PACKAGE} package; unset it to train with "
        "the engine"
    )
    if not _in_test_hooks(module_name):
        raise refused  # checked before importing, so nothing outside the package runs
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise SettingsError(f"DNNFRAME_TRAIN_FN={spec!r} cannot be imported: {exc}") from exc
    if not callable(fn):
        raise SettingsError(f"DNNFRAME_TRAIN_FN={spec!r} is not callable")
    if not _in_test_hooks(getattr(fn, "__module__", None) or ""):
        raise refused  # a name the testing package imported from elsewhere
    return fn
