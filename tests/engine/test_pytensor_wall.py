"""The wall around PyTensor's internals: the version it was written for, the one explicit
configuration (nothing configures on import), and each override and patch applied once,
idempotent, with its effect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import warnings
from pathlib import Path

import pytest

from dnnframe.engine import pytensor_wall
from dnnframe.engine.pytensor_wall import PyTensorVersionWarning, version_problem

pytensor = pytest.importorskip("pytensor")
import pytensor.tensor as pt  # noqa: E402
from pytensor.compile import optdb  # noqa: E402
from pytensor.link.c import cmodule  # noqa: E402
from pytensor.scalar import add  # noqa: E402

from dnnframe.engine.pytensor_wall import internals  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "version, inside",
    [
        ("3.0.0", True),
        ("3.0.7", True),
        ("3.0.7+12.gabc", True),
        ("3.1.0", False),
        ("2.31.7", False),
        ("4.0.0", False),
        ("nightly", False),
    ],
)
def test_the_version_range_is_named_when_outside_it(version, inside):
    problem = version_problem(version)
    assert (problem is None) is inside
    if not inside:
        assert f"PyTensor {version} is installed" in problem and ">=3.0,<3.1" in problem


def test_the_installed_pytensor_is_one_the_wall_was_written_for():
    assert version_problem(pytensor.__version__) is None


def test_an_unknown_version_warns_once(monkeypatch):
    monkeypatch.setattr(pytensor, "__version__", "3.9.1")
    with pytest.warns(PyTensorVersionWarning, match=r"3\.9\.1 .*>=3\.0,<3\.1"):
        assert pytensor_wall.check_version() is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pytensor_wall.check_version() is not None  # said once is enough


def test_configure_runs_once():
    assert pytensor_wall.configured()
    assert pytensor_wall.configure() is pytensor_wall.configure()


def _fresh(script: str, **env: str) -> dict:
    """Run ``script`` in a fresh interpreter; it prints one JSON line."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    for name in ("PYTENSOR_FLAGS", "JAX_PLATFORMS"):
        full.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", textwrap.dedent(script)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_nothing_is_configured_on_import_and_training_configures_first():
    """Importing the package, the flags, the keys, the backend and the workers writes no
    variable that steers PyTensor or JAX, nor loads PyTensor; asking the engine for train_pack configures PyTensor
    before importing it (THEANO_FLAGS' floatX reaches it, and no module warns that it came
    first)."""
    got = _fresh(
        """
        import json, os, sys
        before = dict(os.environ)
        import dnnframe, dnnframe.cli, dnnframe.engine.backend, dnnframe.engine.graphkey
        import dnnframe.engine.pytensor_wall, dnnframe.executors.local_worker
        steering = ("PYTENSOR_FLAGS", "JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE")
        quiet = all(os.environ.get(k) == before.get(k) for k in steering) \
            and "pytensor" not in sys.modules
        from dnnframe.engine import train_pack
        import pytensor
        print(json.dumps({"quiet": quiet, "flags": os.environ.get("PYTENSOR_FLAGS", ""),
                          "floatX": pytensor.config.floatX, "mode": str(pytensor.config.mode)}))
    """,
        THEANO_FLAGS="floatX=float32",
    )
    assert got["quiet"]
    assert "floatX=float32" in got["flags"] and "mode=CVM" in got["flags"]
    assert (got["floatX"], got["mode"]) == ("float32", "CVM")


def test_an_engine_module_imported_before_configure_says_so():
    got = _fresh("""
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import dnnframe.engine.packgraph
        print(json.dumps([type(w.message).__name__ for w in caught]))
    """)
    assert "ConfigureFirstWarning" in got


def test_the_rewrite_positions_sit_between_the_passes_they_name():
    at = optdb.__position__
    pos = internals.POSITIONS
    assert at["stabilize"] < pos["after_stabilize"] == at["local_second_to_alloc"]
    assert pos["after_stabilize"] < pos["before_blas"] < at["BlasOpt"] < at["specialize"]
    assert at["specialize"] < pos["after_specialize"] < at["uncanonicalize"]
    assert at["elemwise_fusion"] < pos["after_fusion"] < at["inplace_elemwise"]


def test_extend_mode_registers_in_order_and_excludes():
    from dnnframe.engine.flags import DEFAULT_MODE
    from dnnframe.engine.loops import CONTIGUOUS_LOOPS
    from dnnframe.engine.rewrites import SECOND_AS_ALLOC, SUM_AS_GEMV

    def names(mode):
        return [getattr(r, "name", None) or type(r).__name__ for r in mode.optimizer.data]

    plain = names(internals.extend_mode(DEFAULT_MODE, (), []))
    ours = names(
        internals.extend_mode(
            DEFAULT_MODE,
            ("ShapeOpt",),
            [
                (SECOND_AS_ALLOC, "after_stabilize"),
                (SUM_AS_GEMV, "before_blas"),
                (CONTIGUOUS_LOOPS, "after_fusion"),
            ],
        )
    )
    assert "ShapeOpt" in plain and "ShapeOpt" not in ours
    assert [
        n for n in ours if n in (SECOND_AS_ALLOC.name, SUM_AS_GEMV.name, CONTIGUOUS_LOOPS.name)
    ] == [SECOND_AS_ALLOC.name, SUM_AS_GEMV.name, CONTIGUOUS_LOOPS.name]
    at = ours.index
    assert at("stabilize") < at(SECOND_AS_ALLOC.name) < at(SUM_AS_GEMV.name) < at("BlasOpt")
    assert at("elemwise_fusion") < at(CONTIGUOUS_LOOPS.name) < at("inplace_elemwise")


class _Marked(internals.LoopElemwise):
    def wrap_loop(self, node, nodename, inames, onames, loop):
        return "/* wrapped by the subclass */\n" + loop


def test_the_loop_hook_wraps_pytensors_loop_and_nothing_else():
    x, y = pt.dvector("x"), pt.dvector("y")
    sub = {"fail": "{fail}"}
    plain = pt.elemwise.Elemwise(add).make_node(x, y)
    hooked = internals.LoopElemwise(add).make_node(x, y)
    marked = _Marked(add).make_node(x, y)
    code = plain.op.c_code(plain, "n", ["x", "y"], ["z"], sub)
    assert hooked.op.c_code(hooked, "n", ["x", "y"], ["z"], sub) == code
    wrapped = marked.op.c_code(marked, "n", ["x", "y"], ["z"], sub)
    assert "/* wrapped by the subclass */" in wrapped
    assert wrapped.replace("/* wrapped by the subclass */\n", "") == code
    assert marked.op.scalar_code(marked, "n", ["a", "b"], ["c"], sub).strip() == "c = a + b;"


def test_the_engines_elementwise_op_takes_the_hook():
    from dnnframe.engine.loops import ContiguousElemwise

    assert issubclass(ContiguousElemwise, internals.LoopElemwise)
    assert ContiguousElemwise._c_all is internals.LoopElemwise._c_all


def test_host_facts_fill_in_only_what_pytensor_lacks(monkeypatch):
    gcc = cmodule.GCC_compiler
    check = internals._gemv_check()
    monkeypatch.setattr(gcc, "march_flags", None)
    if check is not None:
        monkeypatch.setattr(check, "_force_init_beta", None)
    asked = []

    def read(fact):
        asked.append(fact)
        return {"march": ["-march=test"], "gemv-beta": True}[fact]

    internals.set_host_facts(read)
    assert gcc.march_flags == ["-march=test"]
    assert internals.host_facts() == {
        "march": ["-march=test"],
        "gemv-beta": True if check is not None else None,
    }
    asked.clear()
    internals.set_host_facts(read)  # known now: not read again, not replaced
    assert asked == [] and gcc.march_flags == ["-march=test"]


def test_a_host_fact_of_the_wrong_type_is_ignored(monkeypatch):
    monkeypatch.setattr(cmodule.GCC_compiler, "march_flags", None)
    internals.set_host_facts(lambda fact: "-march=native" if fact == "march" else 3)
    assert cmodule.GCC_compiler.march_flags is None


def test_the_ext_suffix_patch_is_the_stdlibs_and_applied_once(monkeypatch):
    monkeypatch.setattr(cmodule, "_get_ext_suffix", cmodule._get_ext_suffix)
    monkeypatch.setattr(internals, "_APPLIED", set())
    internals.use_stdlib_ext_suffix()
    patched = cmodule._get_ext_suffix
    assert patched() == sysconfig.get_config_var("EXT_SUFFIX")
    internals.use_stdlib_ext_suffix()
    assert cmodule._get_ext_suffix is patched
