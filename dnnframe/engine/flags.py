"""THEANO_FLAGS → PyTensor flags (applied before PyTensor is imported by
:func:`dnnframe.engine.pytensor_wall.configure`).

The paper's workflow is ``THEANO_FLAGS=device=gpu,floatX=float32 python ...``. PyTensor
reads only ``PYTENSOR_FLAGS`` (and silently accepts names it does not know), has no
``device`` flag and, since 3.0, compiles through numba by default (a first JIT of tens of
seconds to minutes and GBs of memory for our graphs). :func:`translate` translates:

=====================================  ==============================  ====================================
THEANO_FLAGS                           PyTensor                        note
=====================================  ==============================  ====================================
``floatX=float32|float64``             ``floatX``                      same meaning
``device=cpu`` (or unset)              (nothing)                       PyTensor's C backend on the CPU
``device=cuda|cudaN|gpu|gpuN``         ``mode=JAX``                    the JAX backend on GPU N (default 0);
                                                                       ``floatX`` defaults to float32; a GPU
                                                                       that cannot be used is an error, never
                                                                       a CPU run (:mod:`.backend`)
``device=<other>`` (``opencl0``, ...)  (nothing)                       an error: no such backend
``mode=JAX`` (no device)               ``mode=JAX``                    the JAX backend on the CPU
``init_gpu_device``, ``contexts``,     (nothing)                       **warning**: no such flag in PyTensor
``gpuarray.*``, ``dnn.*``, ``lib.*``,
``cuda.*``, ``nvcc.*``, ``pycuda.*``
``mode=FAST_RUN``                      ``mode=CVM``                    Theano's FAST_RUN was the C backend;
                                                                       PyTensor's FAST_RUN means numba (on a
                                                                       GPU: ``mode=JAX``)
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
``blas__ldflags`` is unset it links the BLAS :func:`~dnnframe.engine.blas.default_blas`
chooses (pip's PyTensor finds none on its own and warns in five lines); with none to link
it says so in one line.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from .blas import default_blas

DEFAULT_MODE = "CVM"
JAX_MODE = "JAX"
# Theano's spellings of an NVIDIA GPU: cuda, cuda0, cuda1, ... (gpuarray) and gpu, gpu0, ... (old backend)
_GPU_DEVICE = re.compile(r"(?:cuda|gpu)(\d*)", re.IGNORECASE)
_GPU_PREFIXES = ("gpuarray", "dnn", "lib", "cuda", "nvcc", "pycuda")
_GPU_FLAGS = {"init_gpu_device", "contexts", "force_device", "print_active_device"}


class FlagWarning(UserWarning):
    """A THEANO_FLAGS entry that PyTensor cannot honour (it was dropped or changed)."""


@dataclass
class FlagSettings:
    """The outcome of :func:`translate` (completed by
    :func:`~dnnframe.engine.pytensor_wall.configure`): what was asked, what PyTensor got, what was dropped."""

    theano_flags: str = ""
    pytensor_flags: dict[str, str] = field(default_factory=dict)
    requested_device: str = "cpu"
    device: str = "cpu"  # "cpu" or "cuda:N"
    mode: str = DEFAULT_MODE
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # why the requested device can never be used (an unknown device name); checked with the
    # GPU itself by backend.require(), so the message reaches the trial or the worker
    device_error: str | None = None
    # which BLAS the C code links (see blas.py): pypi, system, numpy, or configured by the user
    blas: str = "configured"

    @property
    def backend(self) -> str:
        """``"jax"`` when graphs compile through JAX (``mode=JAX``), else ``"c"``."""
        return "jax" if self.mode.upper() == JAX_MODE else "c"

    @property
    def gpu_index(self) -> int | None:
        """The GPU ordinal asked for, or None for the CPU."""
        return int(self.device.split(":")[1]) if self.device.startswith("cuda:") else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe view for a trial's environment (the BLAS by its name unless the user
        gave its flags: the chosen library's flags are long, and stored with every trial)."""
        shown = {
            k: v
            for k, v in self.pytensor_flags.items()
            if k != "blas__ldflags" or self.blas == "configured"
        }
        return {
            "theano_flags": self.theano_flags,
            "pytensor_flags": shown,
            "requested_device": self.requested_device,
            "device": self.device,
            "mode": self.mode,
            "backend": self.backend,
            "blas": self.blas,
            "dropped": list(self.dropped),
            "notes": list(self.notes),
        }


def gpu_index(device: str | None) -> int | None:
    """The GPU ordinal a Theano ``device`` value names (``cuda``/``gpu`` → 0, ``cuda1`` → 1),
    or None when it names no NVIDIA GPU (``cpu``, unset, ``opencl0``)."""
    match = _GPU_DEVICE.fullmatch((device or "").strip())
    if match is None:
        return None
    return int(match.group(1) or 0)


def parse_flags(text: str, *, warn: bool = True) -> dict[str, str]:
    """Parse ``a=1,b.c=2`` into an ordered dict (a name given twice: the last value); bare
    words (with a :class:`FlagWarning` unless ``warn`` is false) and blanks are skipped."""
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            if warn:
                warnings.warn(
                    f"THEANO_FLAGS entry {item!r} has no '=value' and is ignored",
                    FlagWarning,
                    stacklevel=3,
                )
            continue
        out[key.strip()] = value.strip()
    return out


def translate(
    theano_flags: str, pytensor_flags: str = "", *, warn: bool = True, blas: bool = True
) -> FlagSettings:
    """Translate THEANO_FLAGS (merged under PYTENSOR_FLAGS) without touching the process.

    ``device`` may come from either variable (PYTENSOR_FLAGS wins). A GPU device selects
    ``mode=JAX`` (a different mode or linker is dropped with a :class:`FlagWarning`) and
    float32 unless floatX is given. Warns for GPU-only Theano flags (unless ``warn`` is
    false). Names PyTensor does not know are detected later, by
    :func:`~dnnframe.engine.pytensor_wall.configure`, against PyTensor's own registry.
    ``blas=False`` chooses no BLAS (``blas__ldflags`` stays as given): for a reader of the
    mode and floatX alone, such as the compile key, which must not probe the machine's
    libraries.
    """
    settings = FlagSettings(theano_flags=theano_flags)
    out: dict[str, str] = {}
    device = None
    for key, value in parse_flags(theano_flags, warn=warn).items():
        name = key.replace(".", "__")
        if name == "device":
            device = value
            continue
        if name in _GPU_FLAGS or name.split("__")[0] in _GPU_PREFIXES:
            if warn:
                warnings.warn(
                    f"THEANO_FLAGS {key}={value} has no PyTensor equivalent and is ignored",
                    FlagWarning,
                    stacklevel=3,
                )
            settings.dropped.append(key)
            continue
        if name == "mode" and value.upper() == "FAST_RUN":
            value = DEFAULT_MODE  # Theano's FAST_RUN = optimised graph on the C backend
        out[name] = value
    # PYTENSOR_FLAGS set by the user win over translated Theano ones
    out.update({k.replace(".", "__"): v for k, v in parse_flags(pytensor_flags, warn=warn).items()})
    device = out.pop("device", device)
    if device is not None:
        _apply_device(settings, out, device.strip(), warn)
    if "blas__ldflags" in out:
        settings.blas = "configured"
    elif blas:
        settings.blas, out["blas__ldflags"] = default_blas()
    else:
        settings.blas = "not chosen"
    if out.get("mode", "").upper() == JAX_MODE:
        out["mode"] = JAX_MODE
    if "mode" in out:
        settings.mode = out["mode"]
    elif "linker" in out:
        settings.mode = "FAST_RUN"  # PyTensor's FAST_RUN follows the linker flag
    else:
        out["mode"] = DEFAULT_MODE
    settings.pytensor_flags = out
    return settings


def _apply_device(settings: FlagSettings, out: dict[str, str], device: str, warn: bool) -> None:
    """Set the backend for ``device=``: the C backend for cpu, JAX for an NVIDIA GPU."""
    settings.requested_device = device
    if device.lower() == "cpu" or not device:
        return
    index = gpu_index(device)
    if index is None:
        settings.device_error = (
            f"device={device} cannot be used: dnnframe trains on device=cpu "
            "or an NVIDIA GPU (device=cuda, cudaN, gpu, gpuN)"
        )
        return
    settings.device = f"cuda:{index}"
    for name in ("mode", "linker"):
        value = out.pop(name, None)
        if value is not None and value.upper() not in (JAX_MODE, "FAST_RUN", DEFAULT_MODE):
            if warn:
                warnings.warn(
                    f"{name}={value} is ignored: device={device} trains through mode=JAX",
                    FlagWarning,
                    stacklevel=4,
                )
            settings.dropped.append(name)
    out["mode"] = JAX_MODE
    out.setdefault("floatX", "float32")  # as Theano on a GPU: float64 is slow there
