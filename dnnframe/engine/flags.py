"""THEANO_FLAGS → PyTensor flags, applied before PyTensor is imported.

The paper's workflow is ``THEANO_FLAGS=device=gpu,floatX=float32 python ...``. PyTensor
reads only ``PYTENSOR_FLAGS`` (and silently accepts names it does not know), has no
``device`` flag and, since 3.0, compiles through numba by default (a first JIT of tens of
seconds to minutes and GBs of memory for our graphs). :func:`configure` translates:

=====================================  ==============================  ====================================
THEANO_FLAGS                           PyTensor                        note
=====================================  ==============================  ====================================
``floatX=float32|float64``             ``floatX``                      same meaning
``device=cpu``                         (nothing)                       CPU is the only device
``device=cuda*|gpu*|opencl*``          (nothing)                       **warning**; runs on the CPU and the
                                                                       trial's environment records it
``init_gpu_device``, ``contexts``,     (nothing)                       **warning**: no GPU backend
``gpuarray.*``, ``dnn.*``, ``lib.*``,
``cuda.*``, ``nvcc.*``, ``pycuda.*``
``mode=FAST_RUN``                      ``mode=CVM``                    Theano's FAST_RUN was the C backend;
                                                                       PyTensor's FAST_RUN means numba
``mode=<other>``                       ``mode=<other>``                FAST_COMPILE, NUMBA, C, CVM, ...
``linker=…``                           ``linker=…``                    cvm, c, py, vm, c|py, numba, ...
``compiledir``, ``base_compiledir``,   same name                       where compiled C modules are cached
``compiledir_format``
``a.b=…`` (any other)                  ``a__b=…``                      passed through when PyTensor knows
                                                                       the name (``optimizer``,
                                                                       ``exception_verbosity``,
                                                                       ``blas.ldflags``, ``openmp``,
                                                                       ``gcc.cxxflags``, ``allow_gc``, ...)
a name PyTensor does not know          (dropped)                       **warning** naming the flag
=====================================  ==============================  ====================================

Values already in ``PYTENSOR_FLAGS`` win over translated THEANO_FLAGS. When neither sets
``mode`` nor ``linker`` the engine compiles with ``CVM`` (PyTensor's C backend), and when
``blas__ldflags`` is unset and libopenblas is installed it adds ``blas__ldflags=-lopenblas``
(pip's PyTensor finds no BLAS on its own and falls back to slow paths).
"""

from __future__ import annotations

import ctypes.util
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MODE = "CVM"
_GPU_PREFIXES = ("gpuarray", "dnn", "lib", "cuda", "nvcc", "pycuda")
_GPU_FLAGS = {"init_gpu_device", "contexts", "force_device", "print_active_device"}


class FlagWarning(UserWarning):
    """A THEANO_FLAGS entry that PyTensor cannot honour (it was dropped or changed)."""


@dataclass
class FlagSettings:
    """The outcome of :func:`configure`: what was asked, what PyTensor got, what was dropped."""

    theano_flags: str = ""
    pytensor_flags: dict[str, str] = field(default_factory=dict)
    requested_device: str = "cpu"
    device: str = "cpu"
    mode: str = DEFAULT_MODE
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe view for a trial's environment."""
        return {"theano_flags": self.theano_flags, "pytensor_flags": dict(self.pytensor_flags),
                "requested_device": self.requested_device, "device": self.device,
                "mode": self.mode, "dropped": list(self.dropped), "notes": list(self.notes)}


def parse_flags(text: str) -> dict[str, str]:
    """Parse ``a=1,b.c=2`` into an ordered dict; bare words and blanks are skipped."""
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            warnings.warn(f"THEANO_FLAGS entry {item!r} has no '=value' and is ignored", FlagWarning, stacklevel=3)
            continue
        out[key.strip()] = value.strip()
    return out


def translate(theano_flags: str, pytensor_flags: str = "") -> FlagSettings:
    """Translate THEANO_FLAGS (merged under PYTENSOR_FLAGS) without touching the process.

    Warns (:class:`FlagWarning`) for GPU devices and GPU-only flags. Names PyTensor does
    not know are detected later, by :func:`configure`, against PyTensor's own registry.
    """
    settings = FlagSettings(theano_flags=theano_flags)
    out: dict[str, str] = {}
    for key, value in parse_flags(theano_flags).items():
        name = key.replace(".", "__")
        if name == "device":
            settings.requested_device = value
            if value.lower() != "cpu":
                msg = (f"THEANO_FLAGS device={value}: PyTensor has no GPU backend for this engine; "
                       "training runs on the CPU (recorded in the trial's environment)")
                warnings.warn(msg, FlagWarning, stacklevel=3)
                settings.notes.append(msg)
            continue
        if name in _GPU_FLAGS or name.split("__")[0] in _GPU_PREFIXES:
            warnings.warn(f"THEANO_FLAGS {key}={value} has no PyTensor equivalent (no GPU backend) and is ignored",
                          FlagWarning, stacklevel=3)
            settings.dropped.append(key)
            continue
        if name == "mode" and value.upper() == "FAST_RUN":
            value = DEFAULT_MODE  # Theano's FAST_RUN = optimised graph on the C backend
        out[name] = value
    # PYTENSOR_FLAGS set by the user win over translated Theano ones
    out.update({k.replace(".", "__"): v for k, v in parse_flags(pytensor_flags).items()})
    if "blas__ldflags" not in out and ctypes.util.find_library("openblas"):
        out["blas__ldflags"] = "-lopenblas"
    if "mode" in out:
        settings.mode = out["mode"]
    elif "linker" in out:
        settings.mode = "FAST_RUN"  # PyTensor's FAST_RUN follows the linker flag
    else:
        out["mode"] = DEFAULT_MODE
    settings.pytensor_flags = out
    return settings


_SETTINGS: FlagSettings | None = None


def configure() -> FlagSettings:
    """Apply THEANO_FLAGS/PYTENSOR_FLAGS to PyTensor (once per process) and return the result.

    Must run before ``import pytensor`` to take full effect; if PyTensor is already
    imported, mutable flags are set on ``pytensor.config`` and the others are reported.
    """
    global _SETTINGS
    if _SETTINGS is not None:
        return _SETTINGS
    settings = translate(os.environ.get("THEANO_FLAGS", ""), os.environ.get("PYTENSOR_FLAGS", ""))
    already = "pytensor" in sys.modules
    if not already:
        os.environ["PYTENSOR_FLAGS"] = ",".join(f"{k}={v}" for k, v in settings.pytensor_flags.items())
    import pytensor

    known = pytensor.config._config_var_dict
    for name, value in list(settings.pytensor_flags.items()):
        if name not in known:
            warnings.warn(f"flag {name}={value} (from THEANO_FLAGS/PYTENSOR_FLAGS) has no PyTensor "
                          "equivalent and is ignored", FlagWarning, stacklevel=2)
            settings.dropped.append(name)
            del settings.pytensor_flags[name]
        elif already and str(getattr(pytensor.config, name)) != value:
            try:
                setattr(pytensor.config, name, value)
            except Exception:  # immutable after import (compiledir, floatX in some versions)
                settings.notes.append(f"{name}={value} could not be applied: PyTensor was imported first")
    settings.pytensor_flags["floatX"] = str(pytensor.config.floatX)
    _SETTINGS = settings
    return settings


def _reset_for_tests() -> None:
    """Forget the cached settings (tests call :func:`translate` directly instead)."""
    global _SETTINGS
    _SETTINGS = None
