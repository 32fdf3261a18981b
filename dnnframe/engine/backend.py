"""The backend and device this process trains on, checked before anything is compiled.

:mod:`.flags` decides from THEANO_FLAGS/PYTENSOR_FLAGS which backend was asked for:
PyTensor's C backend on the CPU, or its JAX backend (``mode=JAX``) on the CPU or on an
NVIDIA GPU (``device=cuda``). :func:`require` makes sure the asked-for device exists and
points JAX at it; when a GPU was asked for and cannot be used (no GPU, jax without CUDA
support, a GPU ordinal out of range) it raises :class:`DeviceUnavailableError` with a
one-line reason: a GPU request never trains on the CPU. :func:`describe` is what a trial's
environment records about it.

JAX is imported only for the JAX backend.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
import subprocess
import sys
import warnings
from typing import Any

from ..exceptions import ExplainedError
from .flags import FlagSettings
from .pytensor_wall import configure


class DeviceUnavailableError(ExplainedError, RuntimeError):
    """The device THEANO_FLAGS/PYTENSOR_FLAGS asked for cannot be used in this process."""


def _has_cuda_plugin() -> bool:
    # jax[cuda12] (or cuda13) installs a PJRT plugin module; plain `pip install jax` has none
    if importlib.util.find_spec("jax_plugins") is None:
        return False
    return any(importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") is not None for v in (12, 13))


def _gpu_device(settings: FlagSettings):
    """The jax Device for the requested GPU, or DeviceUnavailableError saying why not."""
    asked = f"device={settings.requested_device}"
    try:
        import jax
    except ImportError:
        raise DeviceUnavailableError(
            f"{asked} needs JAX with CUDA support, but jax is not installed "
            "(pip install 'dnnframe[gpu]')"
        ) from None
    if not _has_cuda_plugin():
        raise DeviceUnavailableError(
            f"{asked} but this jax has no CUDA support (the jax[cuda12] plugin is not "
            "installed: pip install 'dnnframe[gpu]')"
        )
    try:
        gpus = jax.devices("cuda")
    except Exception as exc:  # no driver, no GPU, or JAX_PLATFORMS excludes cuda
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeviceUnavailableError(
            f"{asked} but JAX finds no usable CUDA GPU ({reason}); install 'dnnframe[gpu]' on a "
            "machine with an NVIDIA GPU and driver, or use device=cpu"
        ) from None
    index = settings.gpu_index or 0
    if index >= len(gpus):
        raise DeviceUnavailableError(
            f"{asked} but JAX sees {len(gpus)} CUDA GPU(s) (ordinals 0..{len(gpus) - 1})"
        )
    return gpus[index]


@functools.lru_cache(maxsize=1)
def require() -> Any:
    """Check the configured device (once per process) and return the jax Device that
    trains, or None for the C backend. Raises :class:`DeviceUnavailableError`."""
    settings = configure()
    if settings.device_error:
        raise DeviceUnavailableError(settings.device_error)
    if settings.backend != "jax":
        return None
    # the linker's notice that it copies shared generators: seed_random_state handles that
    warnings.filterwarnings(
        "ignore", message="The RandomType SharedVariables", category=UserWarning
    )
    # shape checks that XLA makes itself on static shapes
    warnings.filterwarnings("ignore", message="Skipping Assert", category=UserWarning)
    device = _gpu_device(settings) if settings.gpu_index is not None else None
    import jax

    device = device or jax.devices("cpu")[0]
    jax.config.update("jax_default_device", device)
    # XLA compiles each train step per input shape (seconds for a deep scan's gradient):
    # keep the executables on disk per host, beside PyTensor's compiled C modules
    from .diskcache import cache_dir

    jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "jax"))
    # every executable, not only those over JAX's default second: a pack's programs are
    # many small ones (about 130 for the parity cases, 2 MB), which together were most of a
    # restarted process's compile time
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return device


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def describe() -> dict[str, Any]:
    """What a trial's environment records: backend, device (``cpu``/``cuda:N``), the
    device's name and, for JAX, the jax, jaxlib and CUDA versions."""
    settings = configure()
    device = require()
    info: dict[str, Any] = {"backend": settings.backend, "device": settings.device}
    if device is None:
        info["device_name"] = _cpu_name()
        return info
    import jax
    import jaxlib

    info["device_name"] = device.device_kind if device.platform != "cpu" else _cpu_name()
    info["jax"] = jax.__version__
    info["jaxlib"] = jaxlib.__version__
    # the CUDA runtime XLA was built against, as its client reports it ("cuda 12080")
    version = getattr(device.client, "platform_version", None) if device.platform == "gpu" else None
    info["cuda"] = str(version) if version else None
    return info


def probe(env: dict[str, str] | None = None, timeout_s: float = 300.0) -> str | None:
    """Check the device in a fresh process with ``env`` (default: this one's); return the
    one-line reason it cannot be used, or None when it can.

    A worker checks before it forks its pool: CUDA cannot be initialised in a parent that
    then forks, so the check runs in a child of its own.
    """
    code = (
        "import sys\nfrom dnnframe.engine.backend import DeviceUnavailableError, require\n"
        "try:\n    require()\nexcept DeviceUnavailableError as exc:\n"
        "    print(exc, file=sys.stderr)\n    sys.exit(3)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            env=env if env is not None else dict(os.environ),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"the device check did not finish within {timeout_s:.0f} s"
    if proc.returncode == 0:
        return None
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"the device check exited with status {proc.returncode}"


def seed_random_state(fn: Any, seed: int) -> None:
    """Seed the random generators of ``fn``, a function compiled with ``mode=JAX``.

    PyTensor's JAX linker trains with its own copy of each shared generator (a JAX key
    held in the function's input storage), so setting the shared variable no longer reaches
    the function; this sets the copy, so a cached graph replays exactly for the same seed.
    """
    import numpy as np
    from pytensor.link.jax.dispatch import jax_typify
    from pytensor.tensor.random.type import RandomType

    for container in fn.input_storage:
        if isinstance(container.type, RandomType):
            container.storage[0] = jax_typify(np.random.default_rng(seed))
