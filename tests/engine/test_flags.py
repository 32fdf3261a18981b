"""THEANO_FLAGS → PyTensor flags mapping, float32 training, and a cheap package import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dnnframe.engine.flags import DEFAULT_MODE, FlagWarning, parse_flags, translate

ROOT = Path(__file__).resolve().parents[2]


def test_parse_flags_splits_pairs():
    assert parse_flags("floatX=float32, mode=FAST_RUN,,") == {
        "floatX": "float32",
        "mode": "FAST_RUN",
    }


def test_translate_maps_theano_names_and_defaults_to_the_c_backend():
    s = translate(
        "floatX=float32,mode=FAST_RUN,blas.ldflags=-lblas,compiledir=/tmp/cc,exception_verbosity=high"
    )
    assert s.pytensor_flags["floatX"] == "float32"
    assert s.pytensor_flags["mode"] == DEFAULT_MODE == "CVM"  # Theano's FAST_RUN was C, not numba
    assert s.pytensor_flags["blas__ldflags"] == "-lblas"  # a user's BLAS choice is kept
    assert s.pytensor_flags["compiledir"] == "/tmp/cc"
    assert s.pytensor_flags["exception_verbosity"] == "high"
    assert translate("").pytensor_flags["mode"] == "CVM"
    assert translate("mode=FAST_COMPILE").mode == "FAST_COMPILE"


def test_linker_alone_selects_fast_run_with_that_linker():
    s = translate("linker=py")
    assert (
        s.pytensor_flags == {**s.pytensor_flags, "linker": "py"} and "mode" not in s.pytensor_flags
    )
    assert s.mode == "FAST_RUN"


def test_pytensor_flags_win_and_openblas_is_added_when_installed():
    import ctypes.util

    s = translate("floatX=float32,mode=FAST_COMPILE", "floatX=float64")
    assert s.pytensor_flags["floatX"] == "float64" and s.pytensor_flags["mode"] == "FAST_COMPILE"
    assert ctypes.util.find_library("openblas"), (
        "libopenblas is missing: install Debian's libopenblas-dev"
    )
    assert s.pytensor_flags["blas__ldflags"] == "-lopenblas"


def test_gpu_only_flags_warn_and_are_dropped():
    with pytest.warns(FlagWarning) as record:
        s = translate("device=cpu,gpuarray.preallocate=0.9,floatX=float32")
    assert any(
        "gpuarray.preallocate=0.9 has no PyTensor equivalent" in str(w.message) for w in record
    )
    assert s.requested_device == "cpu" and s.device == "cpu"
    assert s.dropped == ["gpuarray.preallocate"]
    assert "device" not in s.pytensor_flags and "gpuarray__preallocate" not in s.pytensor_flags


def test_importing_pytensor_through_the_flags_logs_nothing_at_info():
    """A worker logs at INFO (Celery's default): PyTensor's import, through
    :func:`configure`, adds no line of its own there, and its config warnings still show."""
    script = textwrap.dedent("""
        import logging
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
        from dnnframe.engine.pytensor_wall import configure
        configure()
        logging.getLogger("pytensor.configparser").warning("still shown")
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTENSOR_FLAGS", None)
    env.pop("THEANO_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [line for line in proc.stderr.splitlines() if "pytensor" in line] == [
        "WARNING pytensor.configparser still shown"
    ], proc.stderr[-3000:]


def test_theano_flags_in_a_fresh_process_train_in_float32():
    """The real path: THEANO_FLAGS set before anything imports PyTensor."""
    script = textwrap.dedent("""
        import json, sys, warnings
        warnings.simplefilter("always")
        import dnnframe.engine as engine
        assert "pytensor" not in sys.modules, "importing dnnframe.engine must not import PyTensor"
        from dnnframe.spec import TrialConfig
        cfg = TrialConfig.model_validate({"dataset": {"name": "iris"},
            "model": {"hidden_layers": 3, "width": 8, "dropout": 0.1},
            "training": {"max_epochs": 2, "learning_rate": 0.01}})
        result = engine.train(cfg)
        import pytensor
        print(json.dumps({"result": result.to_dict(), "floatX": pytensor.config.floatX,
                          "mode": str(pytensor.config.mode)}))
    """)
    env = {
        **os.environ,
        "THEANO_FLAGS": "floatX=float32,device=cpu,no_such_flag=1",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("PYTENSOR_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "flag no_such_flag=1 (from THEANO_FLAGS/PYTENSOR_FLAGS) has no PyTensor equivalent"
        in proc.stderr
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["floatX"] == "float32" and out["mode"] == "CVM"
    result = out["result"]
    assert result["status"] == "COMPLETE" and result["metrics"]["test_loss"] is not None
    env_info = result["environment"]
    assert env_info["floatX"] == "float32"
    assert env_info["requested_device"] == "cpu" and env_info["device"] == "cpu"
    assert env_info["backend"] == "c" and env_info["device_name"]
    assert "no_such_flag" in env_info["flags"]["dropped"]
