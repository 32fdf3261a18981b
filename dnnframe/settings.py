"""Settings read from the environment: one story for the CLI, the workers, compose and the
dashboard (every variable is listed in docs/deploy.md). Each reader names the variable when
its value cannot be used."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from .exceptions import DnnframeError

DEFAULT_HEARTBEAT_TIMEOUT = 300.0
DEFAULT_MAX_ATTEMPTS = 3


class SettingsError(DnnframeError, ValueError):
    """An environment variable has a value that cannot be used."""


def env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from ``$name``, or ``default`` when unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds, but got {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise SettingsError(f"{name} must be > 0 seconds, but got {raw!r}")
    return value


def env_count(name: str, default: int) -> int:
    """A positive integer from ``$name``, or ``default`` when unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a positive integer, but got {raw!r}") from None
    if value < 1:
        raise SettingsError(f"{name} must be a positive integer, but got {raw!r}")
    return value


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def workers() -> int:
    """Training processes (``$DNNFRAME_WORKERS``, default one per core)."""
    return env_count("DNNFRAME_WORKERS", cpu_count())


def heartbeat_timeout() -> float:
    """Seconds without a heartbeat after which a RUNNING trial counts as abandoned and is
    requeued (``$DNNFRAME_HEARTBEAT_TIMEOUT``, default 300)."""
    return env_seconds("DNNFRAME_HEARTBEAT_TIMEOUT", DEFAULT_HEARTBEAT_TIMEOUT)


def max_attempts() -> int:
    """Deliveries of one trial before it is FAILED (``$DNNFRAME_MAX_ATTEMPTS``, default 3)."""
    return env_count("DNNFRAME_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)


def resolve_train_fn() -> Callable[..., object] | None:
    """The function named by ``$DNNFRAME_TRAIN_FN`` (``module:function``), or None.

    A testing/benchmark hook: workers train with it instead of the engine.

    Raises:
        SettingsError: the value is malformed or cannot be imported.
    """
    spec = os.environ.get("DNNFRAME_TRAIN_FN", "").strip()
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
