"""glibc's vector math library (libmvec) for the pack's tanh where NumPy's loop is scalar.

NumPy evaluates tanh with its own SIMD loops only on CPUs with AVX-512 (its ``AVX512_SKX``
dispatch target); on the AVX2 machines most laptops and cloud hosts are (AMD Zen, Intel's
client cores) float64 tanh calls libm one element at a time. On a Zen 3 core that measured
13.7 ns per element against 4.6 for libmvec's AVX2 loop (float32: 2.6 against 1.5), and
tanh was then most of a tanh pack's compiled time. glibc ships those loops since 2.35.

This module builds a two-function library that calls them (once per machine and source,
in PyTensor's compile directory, with the C++ compiler PyTensor uses) and calls it through
ctypes. Each value's result is that of one vector call (a short tail is padded to a whole
vector), so a member's numbers never depend on its neighbours in the pack. Against libm
the results differ by at most 2 units in the last place in float64, 1 in float32; infinities,
NaN, signed zeros and subnormals come out as libm's. Where NumPy has its own SIMD tanh, or
the CPU, libmvec or the compiler is missing, nothing changes: NumPy's tanh is used, and a
trial's environment says which (``vector_math``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import hashlib
import importlib
import logging
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

# the library's source: one loop per float type over whole vectors, the tail copied into a
# zero-padded vector so every value goes through the same vector routine
SOURCE = r"""
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

extern "C" {
__m256d _ZGVdN4v_tanh(__m256d);
__m256 _ZGVdN8v_tanhf(__m256);

__attribute__((target("avx2,fma")))
void dnnframe_tanh_f64(const double *x, double *y, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(y + i, _ZGVdN4v_tanh(_mm256_loadu_pd(x + i)));
    if (i < n) {
        double in[4] = {0, 0, 0, 0}, out[4];
        memcpy(in, x + i, (n - i) * sizeof(double));
        _mm256_storeu_pd(out, _ZGVdN4v_tanh(_mm256_loadu_pd(in)));
        memcpy(y + i, out, (n - i) * sizeof(double));
    }
}

__attribute__((target("avx2,fma")))
void dnnframe_tanh_f32(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _ZGVdN8v_tanhf(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float in[8] = {0, 0, 0, 0, 0, 0, 0, 0}, out[8];
        memcpy(in, x + i, (n - i) * sizeof(float));
        _mm256_storeu_ps(out, _ZGVdN8v_tanhf(_mm256_loadu_ps(in)));
        memcpy(y + i, out, (n - i) * sizeof(float));
    }
}
}
"""

_SYMBOLS = {np.dtype(np.float64): "dnnframe_tanh_f64", np.dtype(np.float32): "dnnframe_tanh_f32"}
_ARGTYPES: list[type[ctypes.c_void_p] | type[ctypes.c_size_t]] = [
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_size_t,
]

# Switched off by benchmarks that measure NumPy's tanh beside this one, before first use.
enabled = True


def why_not(features: dict[str, bool], machine: str, system: str) -> str | None:
    """Why libmvec's AVX2 tanh cannot run on a CPU with NumPy's ``features``, or None."""
    if system != "Linux" or machine not in ("x86_64", "AMD64"):
        return f"not an x86-64 Linux ({system} {machine})"
    if not (features.get("AVX2") and features.get("FMA3")):
        return "no AVX2 and FMA on this CPU"
    return None


def numpy_is_simd(features: dict[str, bool]) -> bool:
    """Whether NumPy's own tanh loops are vectorised on this CPU (its AVX-512 dispatch)."""
    return bool(features.get("AVX512_SKX"))


def _features() -> dict[str, bool]:
    # what np.show_runtime() reads; the module moved in NumPy 2
    for name in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        with contextlib.suppress(ImportError):
            return dict(importlib.import_module(name).__cpu_features__)
    return {}  # pragma: no cover


def _libmvec() -> str | None:
    """The loaded libmvec's name when it has the AVX2 tanh loops (glibc 2.35 and later)."""
    name = ctypes.util.find_library("mvec")
    if not name:
        return None
    try:
        lib = ctypes.CDLL(name)
        lib["_ZGVdN4v_tanh"], lib["_ZGVdN8v_tanhf"]
    except (OSError, AttributeError):
        return None
    return name


def _build(path: Path, cxx: str) -> None:
    """Compile :data:`SOURCE` to ``path``, atomically (workers may build at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        src, out = Path(tmp, "mvec.cpp"), Path(tmp, path.name)
        src.write_text(SOURCE)
        cmd = [cxx, "-O2", "-fPIC", "-shared", str(src), "-o", str(out), "-lmvec", "-lm"]
        subprocess.run(cmd, check=True, capture_output=True, timeout=300)
        os.replace(out, path)


def _library_path() -> tuple[str, Path]:
    """The compiler and where the library it builds lives: beside PyTensor's own compiled
    modules (a directory per platform and CPU), not in DNNFRAME_CACHE_DIR, so a process
    with a fresh graph cache needs no rebuild."""
    import pytensor

    cxx = str(pytensor.config.cxx or "")
    digest = hashlib.sha256(f"{SOURCE}{cxx}{platform.machine()}".encode()).hexdigest()[:16]
    return cxx, Path(pytensor.config.compiledir) / "dnnframe" / f"mvec-{digest}.so"


@functools.lru_cache(maxsize=1)
def _built() -> tuple[ctypes.CDLL | None, str]:
    """The library built and loaded, or None and why not."""
    reason = why_not(_features(), platform.machine(), platform.system())
    if reason is None and not _libmvec():
        reason = "no libmvec with AVX2 tanh (glibc < 2.35)"
    if reason is not None:
        return None, reason
    cxx, path = _library_path()
    try:
        if not path.exists():
            if not cxx:
                raise OSError("no C++ compiler (pytensor.config.cxx is empty)")
            _build(path, cxx)
        lib = ctypes.CDLL(str(path))
        for symbol in _SYMBOLS.values():
            lib[symbol]  # both present, or AttributeError now
    except (OSError, AttributeError, subprocess.SubprocessError) as exc:
        log.info("libmvec's tanh could not be built (%s); NumPy's tanh is used", exc)
        return None, f"libmvec's tanh could not be built ({exc})"
    return lib, "libmvec (AVX2)"


@functools.lru_cache(maxsize=4)
def vector_tanh(dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray] | None:
    """libmvec's tanh loop for ``dtype`` on this machine, chosen or not (None where it
    cannot run, or for a float type it has no loop for)."""
    lib = _built()[0]
    if lib is None or np.dtype(dtype) not in _SYMBOLS:
        return None
    fn = lib[_SYMBOLS[np.dtype(dtype)]]  # a new function object: its own argument types
    fn.argtypes, fn.restype = _ARGTYPES, None

    def tanh(x: np.ndarray) -> np.ndarray:
        if not (x.flags.c_contiguous and x.flags.writeable):
            x = x.copy(order="C")
        out = np.empty_like(x)
        # a ctypes view of each buffer gives its address in under a microsecond, where
        # ndarray.ctypes takes about 1.5: in a deep stack of small arrays that was the call
        fn(_address(x), _address(out), x.size)
        return out

    return tanh


def _address(a: np.ndarray) -> int:
    # ndarray has the buffer protocol; NumPy's stubs do not declare __buffer__
    return ctypes.addressof(ctypes.c_char.from_buffer(a)) if a.size else 0  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1)
def _chosen() -> bool:
    return not numpy_is_simd(_features()) and _built()[0] is not None


def describe() -> str:
    """How the pack's tanh is computed in this process, for a trial's environment."""
    if not enabled:
        return "numpy (switched off)"
    if numpy_is_simd(_features()):
        return "numpy (its own SIMD tanh, AVX-512)"
    lib, why = _built()
    return why if lib is not None else f"numpy ({why})"


def tanh(x: np.ndarray) -> np.ndarray:
    """``np.tanh(x)``, through libmvec's vector loop where this machine should use it."""
    x = np.asarray(x)
    kernel = vector_tanh(x.dtype) if enabled and _chosen() else None
    return kernel(x) if kernel is not None else np.tanh(x)
