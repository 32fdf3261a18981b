"""Compiled-model caches: the per-process LRU bounded by bytes, and the per-host disk cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from dnnframe.engine.modelcache import ModelCache, default_max_bytes

pytestmark = pytest.mark.timeout(900)


class Blob:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes


def test_lru_evicts_least_recently_used_beyond_the_byte_bound():
    built = []

    def build(name, size):
        def make():
            built.append(name)
            return Blob(size)

        return make

    cache = ModelCache(max_bytes=250, size=lambda m: m.nbytes)
    a, hit = cache.get_or_build("a", build("a", 100))
    assert not hit
    cache.get_or_build("b", build("b", 100))
    assert cache.get_or_build("a", build("a", 100)) == (a, True)  # a is now the most recent
    cache.get_or_build("c", build("c", 100))  # 300 > 250: evicts b, the least recent
    assert "b" not in cache and "a" in cache and "c" in cache and cache.evictions == 1
    _, hit = cache.get_or_build("b", build("b", 100))
    assert not hit and built == ["a", "b", "c", "b"]
    big, _ = cache.get_or_build("big", build("big", 1000))  # larger than the bound: kept alone
    assert len(cache) == 1 and "big" in cache


def test_bound_from_the_environment(monkeypatch):
    monkeypatch.setenv("DNNFRAME_MODEL_CACHE_BYTES", "12345")
    assert default_max_bytes() == 12345
    monkeypatch.setenv("DNNFRAME_MODEL_CACHE_BYTES", "a lot")
    with pytest.raises(
        ValueError, match="DNNFRAME_MODEL_CACHE_BYTES: Input should be a valid integer"
    ):
        default_max_bytes()
    monkeypatch.delenv("DNNFRAME_MODEL_CACHE_BYTES")
    assert default_max_bytes() == 2**30


def test_engine_cache_evicts_compiled_models(monkeypatch):
    """With a bound below one model's size, training a second shape evicts the first."""
    from dnnframe.engine import packed, train

    monkeypatch.setattr(packed._CACHE, "max_bytes", 1)
    base = {
        "dataset": {"name": "iris"},
        "training": {"max_epochs": 1, "optimizer": "sgd"},
        "model": {"hidden_layers": 1, "width": 4, "activation": "relu"},
    }
    other = {**base, "model": {**base["model"], "activation": "tanh"}}
    train(base)
    assert train(base).environment["compile_cache_hit"]
    train(other)
    assert len(packed._CACHE) == 1
    assert not train(base).environment["compile_cache_hit"]


CHILD = textwrap.dedent("""
    import json, warnings
    warnings.simplefilter("ignore")
    from dnnframe.engine import train_pack
    cfg = {"dataset": {"name": "iris"}, "model": {"hidden_layers": 2, "width": 6, "activation": "relu"},
           "training": {"optimizer": "momentum", "max_epochs": 2, "learning_rate": 0.05}}
    results = train_pack([cfg, dict(cfg, seed=1)])
    print(json.dumps([{"env": r.environment, "metrics": r.metrics} for r in results]))
""")


def run_child(cache_dir, pytensor_flags: str = "") -> list[dict]:
    env = dict(os.environ, DNNFRAME_CACHE_DIR=str(cache_dir), PYTENSOR_FLAGS=pytensor_flags)
    env.pop("THEANO_FLAGS", None)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("flags, backend", [("", "c"), ("mode=JAX", "jax")])
def test_fresh_process_loads_the_compiled_pack_from_disk(tmp_path, flags, backend):
    first = run_child(tmp_path, flags)
    assert [r["env"]["disk_cache_hit"] for r in first] == [False, False]
    assert len(list(tmp_path.glob("packed-*.pkl"))) == 1
    xla = set((tmp_path / "jax").glob("*")) if backend == "jax" else set()
    assert bool(xla) == (backend == "jax")  # XLA's executables, small ones included
    second = run_child(tmp_path, flags)
    assert [r["env"]["disk_cache_hit"] for r in second] == [True, True]
    if backend == "jax":  # every program the second process ran was on disk already
        assert set((tmp_path / "jax").glob("*")) == xla
    assert {r["env"]["backend"] for r in first + second} == {backend}
    assert [r["metrics"] for r in second] == [r["metrics"] for r in first]


PRELOADED_CHILD = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    from dnnframe.engine import diskcache, train_pack
    from pytensor.link.c import basic
    diskcache.preload()
    before = set(sys.modules)
    cfg = {"dataset": {"name": "iris"}, "model": {"hidden_layers": 2, "width": 6, "activation": "relu"},
           "training": {"optimizer": "momentum", "max_epochs": 2, "learning_rate": 0.05}}
    results = train_pack([cfg, dict(cfg, seed=1)])
    print(json.dumps({"setuptools": "setuptools" in before,
                      "index_read": basic.get_module_cache() is basic.get_module_cache(),
                      "linker_imports": sorted(m for m in set(sys.modules) - before
                                               if m.startswith("pytensor.link")),
                      "hits": [r.environment["disk_cache_hit"] for r in results],
                      "metrics": [r.metrics for r in results]}))
""")


@pytest.mark.slow
def test_a_preloaded_process_loads_from_disk_with_its_imports_done(tmp_path):
    first = run_child(tmp_path)
    env = dict(os.environ, DNNFRAME_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", PRELOADED_CHILD], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    child = json.loads(out.stdout.strip().splitlines()[-1])
    assert child["setuptools"] and child["index_read"]
    assert child["linker_imports"] == []  # the load imported nothing the preload had not
    assert child["hits"] == [True, True]
    assert child["metrics"] == [r["metrics"] for r in first]


GEMV_CHILD = textwrap.dedent("""
    import json, warnings
    warnings.simplefilter("ignore")
    from pytensor.link.c.cmodule import GCC_compiler
    from pytensor.tensor import blas_c
    from dnnframe.engine import train_pack
    checks, compile_tmp = [], GCC_compiler.try_compile_tmp
    def counted(*args, **kwargs):
        checks.append(kwargs.get("tmp_prefix"))
        return compile_tmp(*args, **kwargs)
    GCC_compiler.try_compile_tmp = counted
    cfg = {"dataset": {"name": "iris"}, "model": {"hidden_layers": 2, "width": 6, "activation": "relu"},
           "training": {"optimizer": "sgd", "max_epochs": 1, "learning_rate": 0.05}}
    [result] = train_pack([cfg])
    print(json.dumps({"checks": checks, "answer": blas_c.must_initialize_y_gemv._force_init_beta,
                      "status": result.status}))
""")


@pytest.mark.slow
def test_a_fresh_process_reuses_the_hosts_blas_check(tmp_path):
    """PyTensor compiles and runs a BLAS test program in each process that first builds or
    loads a graph with a gemv; its answer is kept per host, so later processes skip it."""
    from dnnframe.engine import diskcache

    # the facts live beside the models, in this test's own cache: no other process on the
    # host can answer in its place
    fact = tmp_path / diskcache._host_path("gemv-beta").name
    env = dict(os.environ, DNNFRAME_CACHE_DIR=str(tmp_path))
    children = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", GEMV_CHILD], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-3000:]
        children.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = children
    assert first["status"] == second["status"] == "COMPLETE"
    assert [c for c in first["checks"] if c == "check_beta_"] == ["check_beta_"]
    assert json.loads(fact.read_text()) is first["answer"]
    assert "check_beta_" not in second["checks"] and second["answer"] is first["answer"]


def test_unreadable_cache_file_is_rebuilt(tmp_path, monkeypatch):
    from dnnframe.engine import diskcache

    monkeypatch.setenv("DNNFRAME_CACHE_DIR", str(tmp_path))
    path = diskcache.cache_path("packed", ("some", "shape"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"truncated")
    with pytest.warns(UserWarning, match="unreadable"):
        model, hit = diskcache.load_or_build("packed", ("some", "shape"), lambda: {"built": True})
    assert model == {"built": True} and not hit
    assert diskcache.load_or_build("packed", ("some", "shape"), lambda: None) == (
        {"built": True},
        True,
    )
    assert not list(tmp_path.glob("*.tmp"))


WRITER = textwrap.dedent("""
    import sys
    from dnnframe.engine import diskcache
    for i in range(20):
        diskcache.store("packed", ("concurrent",), {"writer": sys.argv[1], "payload": list(range(20000))})
""")


def test_concurrent_writers_leave_one_complete_file(tmp_path, monkeypatch):
    env = dict(os.environ, DNNFRAME_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(i)], env=env) for i in range(4)]
    assert [p.wait(timeout=600) for p in procs] == [0, 0, 0, 0]
    from dnnframe.engine import diskcache

    monkeypatch.setenv("DNNFRAME_CACHE_DIR", str(tmp_path))
    value = diskcache.load("packed", ("concurrent",))
    assert value["writer"] in {"0", "1", "2", "3"} and value["payload"] == list(range(20000))
    assert len(list(tmp_path.glob("*.pkl"))) == 1 and not list(tmp_path.glob("*.tmp"))


HEAP_CHILD = textwrap.dedent("""
    import gc, json, sys, weakref
    from dnnframe.engine import heap
    from dnnframe.engine.modelcache import ModelCache

    class Model:  # a cyclic structure, as compiled graphs are
        def __init__(self, nbytes):
            self.nbytes, self.me = nbytes, self

    out = {"before": gc.get_freeze_count()}
    cache = ModelCache(max_bytes=150, size=lambda m: m.nbytes)
    cache.get_or_build("off", lambda: Model(10))
    out["library_caller"] = gc.get_freeze_count()  # not opted in: nothing frozen
    heap.enable()
    out["enabled"] = gc.get_freeze_count()
    a, _ = cache.get_or_build("a", lambda: Model(100))
    dead = weakref.ref(a)
    out["frozen_with_a"] = gc.get_freeze_count()
    out["gen2_sees_a"] = any(o is a for o in gc.get_objects())  # frozen ones are not listed
    del a
    cache.get_or_build("b", lambda: Model(100))  # evicts "a" (and "off")
    out["a_reclaimed"] = dead() is None
    heap.disable()
    out["after_disable"] = gc.get_freeze_count()
    print(json.dumps(out))
""")


def test_worker_heap_is_frozen_after_builds_and_dropped_models_are_reclaimed():
    """Opted-in processes freeze their long-lived objects after each build (the collector's
    full passes skip them) and still reclaim the cycles of a model the cache evicts."""
    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", HEAP_CHILD], check=True, capture_output=True, text=True
        ).stdout
    )
    assert out["before"] == 0 and out["library_caller"] == 0
    assert out["enabled"] > 1000  # the imports
    assert out["frozen_with_a"] > 1000 and not out["gen2_sees_a"]  # a is frozen
    assert out["a_reclaimed"]
    assert out["after_disable"] == 0


HEAP_YOUNG_CHILD = textwrap.dedent("""
    import gc, json, weakref
    from dnnframe.engine import heap
    from dnnframe.engine.modelcache import ModelCache

    class Model:  # a cyclic structure, as compiled graphs are
        def __init__(self, nbytes):
            self.nbytes, self.me = nbytes, self

    heap.enable()
    old = Model(0)
    old_ref = weakref.ref(old)
    heap.settle()  # old is frozen now
    del old  # cyclic garbage among the frozen objects
    junk_refs = []

    def build():  # a build leaves cyclic garbage of its own, as graph rewriting does
        junk = Model(0)
        junk_refs.append(weakref.ref(junk))
        return Model(100)

    cache = ModelCache(max_bytes=150, size=lambda m: m.nbytes)
    cache.get_or_build("a", build)
    out = {"build_garbage_reclaimed": junk_refs[0]() is None,
           "frozen_garbage_still_frozen": old_ref() is not None}
    cache.get_or_build("b", lambda: Model(100))  # evicts "a": a full pass
    out["frozen_garbage_reclaimed_on_eviction"] = old_ref() is None
    print(json.dumps(out))
""")


def test_worker_heap_settles_a_build_without_a_full_pass_until_a_model_is_dropped():
    """After a build only the objects made since the last freeze are collected (the build's
    garbage goes, the frozen heap of earlier models is not walked again); an eviction
    collects everything, so what died among the frozen objects is reclaimed then."""
    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", HEAP_YOUNG_CHILD], check=True, capture_output=True, text=True
        ).stdout
    )
    assert out == {
        "build_garbage_reclaimed": True,
        "frozen_garbage_still_frozen": True,
        "frozen_garbage_reclaimed_on_eviction": True,
    }


MALLOC_CHILD = textwrap.dedent("""
    import json, resource
    import numpy as np
    from dnnframe.engine import heap

    def faults_per_step(steps=50):
        # a compiled step's pattern: a few 1 MB intermediates made, then all freed
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(steps):
            arrays = [np.ones(1 << 17) for _ in range(4)]
            del arrays
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps

    faults_per_step()
    default = faults_per_step()
    heap.enable()
    faults_per_step()
    print(json.dumps({"default": default, "kept": faults_per_step()}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_worker_processes_reuse_freed_memory_instead_of_faulting_it_in_again():
    """Freed intermediates are reused: no fresh page faults per step once a worker opts in
    (glibc's default returned them to the kernel, about 1,000 faults per step here)."""
    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", MALLOC_CHILD], check=True, capture_output=True, text=True
        ).stdout
    )
    assert out["kept"] < 5, out
    assert out["default"] > 10 * max(out["kept"], 1), out
