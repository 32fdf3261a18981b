"""The pack's tanh through glibc's vector loops (``dnnframe.engine.mvec``): chosen where
NumPy's own loop is scalar, within 2 ulps of libm in float64 (1 in float32), libm's answer
for every special value, each value's result independent of where it sits in the array,
and a pack's results within rounding of NumPy's tanh's."""

from __future__ import annotations

import platform
import subprocess

import numpy as np
import pytest

from dnnframe.engine import mvec, train_pack

AVX2 = {"AVX2": True, "FMA3": True}


def test_the_choice_follows_the_cpu_and_numpy():
    assert mvec.why_not(AVX2, "x86_64", "Linux") is None
    assert "AVX2" in (mvec.why_not({"AVX2": True}, "x86_64", "Linux") or "")
    assert "x86-64" in (mvec.why_not(AVX2, "aarch64", "Linux") or "")
    assert "x86-64" in (mvec.why_not(AVX2, "x86_64", "Darwin") or "")
    assert mvec.numpy_is_simd({**AVX2, "AVX512_SKX": True})
    assert not mvec.numpy_is_simd(AVX2)
    # the process's own answer is one of these, and the environment's words say which
    features = mvec._features()
    kernel = mvec.vector_tanh(np.dtype(np.float64))
    chosen = kernel is not None and not mvec.numpy_is_simd(features)
    if chosen:
        assert mvec.describe() == "libmvec (AVX2)"
    else:
        assert mvec.describe().startswith("numpy (")


def _ulps(got: np.ndarray, want: np.ndarray) -> float:
    finite = np.isfinite(want) & (want != 0)
    return float((np.abs(got - want)[finite] / np.spacing(np.abs(want[finite]))).max())


def _values(dtype: type) -> np.ndarray:
    info = np.finfo(dtype)
    special = [0.0, -0.0, info.tiny, -info.tiny, info.smallest_subnormal, -info.smallest_subnormal]
    special += [1e-8, -1e-8, 0.5, 19.0, 20.0, 22.0, 710.0, info.max, -info.max]
    special += [np.inf, -np.inf, np.nan]
    rng = np.random.default_rng(0)
    return np.concatenate([np.linspace(-30, 30, 60_001), rng.normal(0, 3, 20_000), special]).astype(
        dtype
    )


@pytest.mark.parametrize(("dtype", "max_ulp"), [(np.float64, 2), (np.float32, 1)])
def test_the_vector_tanh_is_libms_within_its_ulps(dtype, max_ulp):
    x = _values(dtype)
    fn = mvec.vector_tanh(np.dtype(dtype))
    if fn is None:  # this machine cannot run it: the pack's tanh is NumPy's, exactly
        assert np.array_equal(mvec.tanh(x), np.tanh(x), equal_nan=True)
        assert mvec.describe().startswith("numpy (")
        return
    got, want = fn(x), np.tanh(x)
    assert got.dtype == want.dtype == dtype
    assert _ulps(got, want) <= max_ulp
    # infinities, NaN, signed zeros, subnormals, and saturation far out (libm reaches 1 a
    # little sooner, near 19: one ulp below 1 there is within the bound above)
    exact = ~np.isfinite(x) | (np.abs(x) < 1e-30) | (np.abs(x) >= 22)
    assert np.array_equal(got[exact], want[exact], equal_nan=True)
    assert np.array_equal(np.signbit(got[exact]), np.signbit(want[exact]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_values_result_does_not_depend_on_its_neighbours(dtype):
    fn = mvec.vector_tanh(np.dtype(dtype)) or np.tanh
    x = np.random.default_rng(1).normal(0, 2, 1_000).astype(dtype)
    whole = fn(x)
    for start in range(9):  # every alignment, every tail length
        for n in (0, 1, 2, 3, 5, 7, 8, 9, 17):
            part = fn(x[start : start + n])
            assert part.shape == (n,)
            assert np.array_equal(part, whole[start : start + n])
    assert np.array_equal(fn(x[::3]), whole[::3])  # strided input is copied first
    frozen = x.copy()
    frozen.flags.writeable = False  # a read-only input too
    assert np.array_equal(fn(frozen), whole) and np.array_equal(fn(x[:0]), whole[:0])
    grid = x.reshape(25, 40)
    assert np.array_equal(fn(grid.T), whole.reshape(25, 40).T)
    # the op's entry: libmvec's loop where it is chosen, NumPy's own where NumPy's is SIMD
    # (AVX-512) even though libmvec's could run
    chosen = fn if mvec._chosen() else np.tanh
    assert np.array_equal(mvec.tanh(grid.T), chosen(grid.T))


def _tanh_pack() -> list[dict]:
    return [
        {
            "dataset": {"name": "iris"},
            "seed": i,
            "model": {"hidden_layers": 2, "width": 16, "activation": "tanh"},
            "training": {
                "optimizer": "sgd",
                "learning_rate": (0.001, 0.01, 0.1)[i % 3],
                "batch_size": 32,
                "max_epochs": 20,
                "early_stopping": None,
            },
        }
        for i in range(6)
    ]


def test_a_pack_trains_to_numpys_results_within_rounding(monkeypatch):
    pack = _tanh_pack()
    vector = train_pack(pack)
    monkeypatch.setattr(mvec, "enabled", False)
    scalar = train_pack(pack)
    assert scalar[0].environment["vector_math"] == "numpy (switched off)"
    monkeypatch.setattr(mvec, "enabled", True)
    how = vector[0].environment["vector_math"]
    assert how == mvec.describe()
    # a few ulps per tanh, over 20 epochs of well-behaved SGD: far inside 1e-9
    rel = 1e-9 if how.startswith("libmvec") else 0
    for a, b in zip(vector, scalar):
        assert a.history is not None and b.history is not None
        for name, value in b.metrics.items():
            assert a.metrics[name] == pytest.approx(value, rel=rel, abs=0), name
        for ea, eb in zip(a.history, b.history):
            assert ea["train_loss"] == pytest.approx(eb["train_loss"], rel=rel, abs=0)


@pytest.fixture
def uncached():
    """mvec's per-process answers worked out again, before and after the test."""

    def clear() -> None:
        for fn in (mvec._built, mvec._chosen, mvec.vector_tanh):
            fn.cache_clear()

    clear()
    yield
    clear()


def test_a_failed_build_leaves_numpys_tanh_and_says_why(monkeypatch, tmp_path, uncached):
    def fail(path, cxx):
        raise subprocess.CalledProcessError(1, [cxx, "-shared"], stderr=b"no immintrin.h")

    monkeypatch.setattr(mvec, "_library_path", lambda: ("g++", tmp_path / "mvec.so"))
    monkeypatch.setattr(mvec, "_build", fail)
    x = np.linspace(-5, 5, 1001)
    assert np.array_equal(mvec.tanh(x), np.tanh(x))
    assert mvec.vector_tanh(np.dtype(np.float64)) is None
    runnable = mvec.why_not(mvec._features(), platform.machine(), platform.system()) is None
    if runnable and mvec._libmvec() and not mvec.numpy_is_simd(mvec._features()):
        assert mvec.describe().startswith("numpy (libmvec's tanh could not be built (")
    else:  # not even tried here: the reason is the CPU's or NumPy's
        assert mvec.describe().startswith("numpy (")


def test_the_library_is_built_once_where_it_is_missing(monkeypatch, tmp_path, uncached):
    if mvec.why_not(mvec._features(), platform.machine(), platform.system()) or not mvec._libmvec():
        assert mvec.vector_tanh(np.dtype(np.float64)) is None
        return
    built = []
    real = mvec._build
    monkeypatch.setattr(mvec, "_library_path", lambda: ("g++", tmp_path / "lib" / "mvec.so"))
    monkeypatch.setattr(mvec, "_build", lambda path, cxx: built.append(path) or real(path, cxx))
    fn = mvec.vector_tanh(np.dtype(np.float64))
    assert fn is not None and built == [tmp_path / "lib" / "mvec.so"]
    assert sorted(p.name for p in (tmp_path / "lib").iterdir()) == ["mvec.so"]  # no leftovers
    x = np.linspace(-3, 3, 11)
    assert _ulps(fn(x), np.tanh(x)) <= 2
    mvec._built.cache_clear()
    mvec.vector_tanh.cache_clear()
    assert mvec.vector_tanh(np.dtype(np.float64)) is not None and len(built) == 1
