"""What a trial's record says about where it trained: versions, host, flags, backend and
device, and the process's memory."""

from __future__ import annotations

import os
import platform
import resource
from typing import Any

import numpy as np
import pytensor

from . import mvec
from .backend import describe
from .flags import JAX_MODE
from .pytensor_wall import configure


def environment(cached: bool) -> dict[str, Any]:
    """The environment of a result; ``cached``: the compiled graph came from this process."""
    import dnnframe

    flags = configure()
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pytensor": pytensor.__version__,
        "dnnframe": getattr(dnnframe, "__version__", None),
        "host": platform.node(),
        "platform": platform.platform(),
        "pid": os.getpid(),
        "floatX": str(pytensor.config.floatX),
        "mode": flags.mode,
        "blas": flags.blas,
        # how the C backend's pack computes tanh (results differ by a few ulps between them)
        "vector_math": "xla" if flags.mode == JAX_MODE else mvec.describe(),
        "flags": flags.to_dict(),
        "requested_device": flags.requested_device,
        **describe(),  # backend, device, device_name (+ jax, jaxlib, cuda)
        "compile_cache_hit": cached,
        # this process's peak resident memory so far (Linux reports KiB): what a worker needs
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def notes() -> list[str]:
    """What the flags mapping had to say (dropped GPU-only flags and the like)."""
    return list(configure().notes)
