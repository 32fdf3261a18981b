"""Every place dnnframe reaches past PyTensor's public API, and every environment write that
steers PyTensor and JAX, in one package, checked against the PyTensor it was written for.

What lives here, and nowhere else (``tests/test_homes.py`` keeps it so). This module imports
PyTensor only inside :func:`configure`; :mod:`.internals` holds the rest and imports it:

* :func:`configure`: THEANO_FLAGS/PYTENSOR_FLAGS (translated by :mod:`~dnnframe.engine.flags`) written to
  ``PYTENSOR_FLAGS``, plus ``JAX_PLATFORMS`` for the JAX backend. One explicit call, made
  before the engine first imports PyTensor (``dnnframe.engine.train``/``train_pack`` make
  it on first use); no module does it when imported.
* :class:`~.internals.LoopElemwise`: the one override of ``Elemwise._c_all`` (private), through which
  :class:`~dnnframe.engine.loops.ContiguousElemwise` wraps the C loop.
* :func:`~.internals.extend_mode`: the engine's rewrites registered at positions in PyTensor's rewrite
  database, named here after the passes they go between (:data:`~.internals.POSITIONS`).
* The per-host facts PyTensor works out in every process (the ``-march`` flags on
  ``GCC_compiler``, the gemv check's ``_force_init_beta``) read and set, and
  ``cmodule._get_ext_suffix`` replaced by the standard library's answer.

Each patch is applied once and is idempotent. A PyTensor outside :data:`WRITTEN_FOR` gets a
:class:`PyTensorVersionWarning` naming the range: these internals may have moved.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any

from ..flags import FlagSettings, FlagWarning, translate

# the PyTensor releases these overrides were written and tested against: [low, high)
WRITTEN_FOR = ((3, 0), (3, 1))


class PyTensorVersionWarning(UserWarning):
    """The installed PyTensor is not one dnnframe's overrides of its internals were written for."""


class ConfigureFirstWarning(UserWarning):
    """An engine module was imported before :func:`configure`: PyTensor may have read its
    flags without THEANO_FLAGS' translation (the engine applies what it still can)."""


def version_problem(version: str) -> str | None:
    """Why ``version`` is outside :data:`WRITTEN_FOR`, or None when it is inside."""
    try:
        major_minor = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        major_minor = None
    (lo, hi) = WRITTEN_FOR
    if major_minor is not None and lo <= major_minor < hi:
        return None
    return (
        f"PyTensor {version} is installed, but dnnframe's overrides of PyTensor internals "
        f"(engine/pytensor_wall.py) were written for >={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}: "
        "compiled results may differ or fail; install a PyTensor in that range"
    )


def check_version() -> str | None:
    """Warn (once per process) when the installed PyTensor is outside :data:`WRITTEN_FOR`."""
    import pytensor

    problem = version_problem(pytensor.__version__)
    if problem is not None and pytensor.__version__ not in _CHECKED:
        warnings.warn(problem, PyTensorVersionWarning, stacklevel=2)
        _CHECKED.append(pytensor.__version__)
    return problem


_CHECKED: list[str] = []  # the versions already warned about
_SETTINGS: FlagSettings | None = None


def configure() -> FlagSettings:
    """Apply THEANO_FLAGS/PYTENSOR_FLAGS to PyTensor (once per process) and return the result.

    Call it before anything imports PyTensor: the flags are written to ``PYTENSOR_FLAGS``,
    which PyTensor reads when imported. If PyTensor is already imported, mutable flags are
    set on ``pytensor.config`` and the others are listed in the settings' notes.
    """
    global _SETTINGS
    if _SETTINGS is not None:
        return _SETTINGS
    settings = translate(os.environ.get("THEANO_FLAGS", ""), os.environ.get("PYTENSOR_FLAGS", ""))
    already = "pytensor" in sys.modules
    if not already:
        os.environ["PYTENSOR_FLAGS"] = ",".join(
            f"{k}={v}" for k, v in settings.pytensor_flags.items()
        )
    if settings.backend == "jax" and "jax" not in sys.modules:
        # mode=JAX alone means the CPU even where jax[cuda] is installed; a GPU means that
        # platform only, so a missing GPU is an error rather than JAX's silent CPU fallback
        os.environ.setdefault("JAX_PLATFORMS", "cuda" if settings.gpu_index is not None else "cpu")
        # JAX takes 75 % of a GPU's memory up front by default: a second worker process on
        # the same card would fail to start; grow as needed instead
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    # While it is imported, PyTensor logs at INFO each flag whose default it computes later
    # ("Suppressed KeyError in PyTensorConfigParser.add"): the normal case, six lines in
    # every worker, whose logging Celery sets to INFO. Its warnings and errors still show;
    # a level someone set on that logger is kept.
    config_log = logging.getLogger("pytensor.configparser")
    if config_log.level == logging.NOTSET:
        config_log.setLevel(logging.WARNING)
    if settings.blas == "numpy":
        warnings.warn(
            "no BLAS library for PyTensor's C code (the scipy-openblas32 wheel is not "
            "installed: pip install scipy-openblas32); products run through NumPy, "
            "slower on wide layers",
            FlagWarning,
            stacklevel=2,
        )
    import pytensor

    check_version()
    _apply_known_flags(pytensor.config, settings, already)
    settings.pytensor_flags["floatX"] = str(pytensor.config.floatX)
    _SETTINGS = settings
    return settings


def _apply_known_flags(config: Any, settings: FlagSettings, already: bool) -> None:
    # PyTensor accepts unknown names silently; its registry of flags is private
    known = config._config_var_dict
    for name, value in list(settings.pytensor_flags.items()):
        if name not in known:
            warnings.warn(
                f"flag {name}={value} (from THEANO_FLAGS/PYTENSOR_FLAGS) has no PyTensor "
                "equivalent and is ignored",
                FlagWarning,
                stacklevel=3,
            )
            settings.dropped.append(name)
            del settings.pytensor_flags[name]
        elif already and str(getattr(config, name)) != value:
            try:
                setattr(config, name, value)
            except Exception:  # immutable after import (compiledir, floatX in some versions)
                settings.notes.append(
                    f"{name}={value} could not be applied: PyTensor was imported "
                    "before dnnframe.engine.pytensor_wall.configure()"
                )


def configured() -> bool:
    """Whether :func:`configure` has run in this process."""
    return _SETTINGS is not None


def _reset_for_tests() -> None:
    """Forget the cached settings (tests call :func:`~.flags.translate` directly instead)."""
    global _SETTINGS
    _SETTINGS = None
