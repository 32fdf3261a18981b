"""Which BLAS the C backend's compiled code calls, chosen without any system package.

PyTensor's C ops call the Fortran BLAS symbols (``dgemm_``, ``sgemv_``, ...) of the library
``blas__ldflags`` links; pip's PyTensor finds none by itself, warns in five lines and runs
its products through NumPy from Python. Three libraries can serve:

* ``pypi``: OpenBLAS from the ``scipy-openblas32`` wheel, a dependency of dnnframe, so the
  README's ``pip install`` is all a machine needs. Its symbols carry a ``scipy_`` prefix,
  so the flags map each routine PyTensor's code calls onto the prefixed one with a
  ``-D`` define (``blas__ldflags``'s other flags reach every BLAS op's compile and
  PyTensor's own BLAS checks);
* ``system``: the distribution's OpenBLAS (``libopenblas-dev``), when installed;
* ``numpy``: no library linked: PyTensor's fallback through NumPy (whose wheels carry their
  own OpenBLAS), product by product from Python.

``python bench/blas.py`` measures them side by side; :data:`PREFERENCE` is the order that
measurement chose. dnnframe's flags say which it linked (``blas`` in a trial's environment). This module imports neither PyTensor nor NumPy.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
from pathlib import Path

# The BLAS routines PyTensor's C code calls (tensor/blas*.py and its C sources).
_ROUTINES = ("gemm", "gemv", "ger", "dot", "axpy", "scal", "copy", "swap")
# The order choices are preferred in when none is configured. Measured side by side
# (bench/blas.py, CPU time, one thread): the paper workload ran at 790 / 749 / 716 trials/s
# on pypi / system / numpy, an epoch at width 128 x depth 100 took 0.68 / 0.55 / 0.60 s: the
# system's library when installed, else the wheel's (no warning, C code for every product).
PREFERENCE = ("system", "pypi", "numpy")


def _pypi_flags() -> str | None:
    """``blas__ldflags`` for the scipy-openblas32 wheel, or None when it is not installed."""
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    if not any(lib.glob("libscipy_openblas*.so*")):
        return None
    renames = " ".join(f"-D{p}{r}_=scipy_{p}{r}_" for r in _ROUTINES for p in "sd")
    return f"-L{lib} -lscipy_openblas {renames}"


def choices() -> dict[str, str]:
    """Each BLAS this machine offers, by name, as ``blas__ldflags`` (see the module doc)."""
    out = {}
    pypi = _pypi_flags()
    if pypi is not None:
        out["pypi"] = pypi
    if ctypes.util.find_library("openblas"):
        out["system"] = "-lopenblas"
    out["numpy"] = ""
    return out


def default_blas() -> tuple[str, str]:
    """The BLAS to link when the user set none, the first of :data:`PREFERENCE` this
    machine offers: ``(its name, blas__ldflags)``."""
    offered = choices()
    name = next(name for name in PREFERENCE if name in offered)
    return name, offered[name]
