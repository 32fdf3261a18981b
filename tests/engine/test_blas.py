"""The C backend's BLAS: what each choice links, and a machine without the system's OpenBLAS
training on the wheel's with no BLAS warning."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dnnframe.engine import blas
from dnnframe.engine.flags import translate

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_choice_links_a_library_with_every_renamed_routine():
    flags = blas.choices()["pypi"]
    lib_dir = re.search(r"-L(\S+)", flags).group(1)
    assert "-lscipy_openblas" in flags.split()
    renames = dict(re.findall(r"-D(\w+)=(\w+)", flags))
    assert {"dgemm_", "sgemm_", "dgemv_", "sgemv_", "dger_", "ddot_"} <= set(renames)
    library = ctypes.CDLL(str(next(Path(lib_dir).glob("libscipy_openblas*.so*"))))
    for routine, target in renames.items():
        assert target == f"scipy_{routine}" and hasattr(library, target), routine


def test_the_default_is_the_first_offered_choice_and_a_users_choice_is_kept():
    offered = blas.choices()
    first = next(name for name in blas.PREFERENCE if name in offered)
    s = translate("")
    assert s.blas == first and s.pytensor_flags["blas__ldflags"] == offered[first]
    assert "blas__ldflags" not in s.to_dict()["pytensor_flags"]  # stored by its name
    s = translate("", "blas__ldflags=-lblas")
    assert s.blas == "configured" and s.to_dict()["pytensor_flags"]["blas__ldflags"] == "-lblas"


@pytest.mark.slow
def test_without_the_systems_openblas_a_worker_trains_on_the_wheels_with_no_warning():
    script = textwrap.dedent("""
        import ctypes.util, json, warnings
        real = ctypes.util.find_library
        ctypes.util.find_library = lambda name: None if "blas" in name else real(name)
        warnings.simplefilter("always")
        from dnnframe.engine import train
        result = train({"dataset": {"name": "iris"}, "seed": 0,
                        "model": {"hidden_layers": 2, "width": 4},
                        "training": {"max_epochs": 2, "batch_size": 32}})
        maps = open("/proc/self/maps").read()
        print(json.dumps({"status": result.status, "blas": result.environment["blas"],
                          "loaded": "scipy_openblas32/lib/libscipy_openblas" in maps,
                          "system": "libopenblas.so" in maps}))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTENSOR_FLAGS", None)
    env.pop("THEANO_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"status": "COMPLETE", "blas": "pypi", "loaded": True, "system": False}, out
    assert "BLAS" not in proc.stderr and "blas" not in proc.stderr.lower(), proc.stderr[-3000:]
