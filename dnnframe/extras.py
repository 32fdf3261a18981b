"""Optional dependency groups (pyproject.toml's extras) and the one check made before using one.

A core install (``pip install dnnframe``) trains sweeps on this machine with a SQLite store;
the servers and the model-based samplers come with extras: ``web`` (the dashboard),
``celery`` (workers over a broker), ``mongo`` (the MongoDB store), ``search`` (Optuna's TPE
and CMA-ES). Code that needs one imports it through :func:`require`, so a missing extra is
one line naming the ``pip install`` that fixes it, not a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .exceptions import DnnframeError

# How a message names the package a module comes from (its import name otherwise).
_PACKAGE_NAMES = {"flask": "Flask", "celery": "Celery", "pymongo": "PyMongo", "optuna": "Optuna"}


class MissingExtraError(DnnframeError, ImportError):
    """A feature needs an optional dependency group that is not installed.

    ``extra`` names the group (``web``, ``celery``, ...); the message says what needs it and
    the ``pip install`` that adds it.
    """

    def __init__(self, message: str, extra: str):
        super().__init__(message)
        self.extra = extra


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'dnnframe[EXTRA]'``."""
    return f"pip install 'dnnframe[{extra}]'"


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` (from the optional group ``extra``) for ``what`` and return it.

    Raises:
        MissingExtraError: ``module`` (or a package it needs) is not installed; the message
            reads "WHAT needs PACKAGE: pip install 'dnnframe[EXTRA]'".
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        package = _PACKAGE_NAMES.get(module, module)
        raise MissingExtraError(f"{what} needs {package}: {install_hint(extra)}", extra) from exc
