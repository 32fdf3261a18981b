"""The pack's class argmax: NumPy's answer for every row (first of tied maxima, first NaN),
on strided and transposed inputs, in both float types; and the pack's graphs use it."""

from __future__ import annotations

import numpy as np
import pytest

pytensor = pytest.importorskip("pytensor")
import pytensor.tensor as pt  # noqa: E402

from dnnframe.engine.argmax import ClassArgmax, class_argmax  # noqa: E402
from dnnframe.engine.flags import DEFAULT_MODE  # noqa: E402
from dnnframe.engine.rewrites import compile_mode  # noqa: E402

RNG = np.random.default_rng(0)


def _compiled(dtype: str):
    x = pt.tensor3("x", dtype=dtype)
    return pytensor.function([x], class_argmax(x), mode=compile_mode(DEFAULT_MODE))


def _hard_values(dtype: str) -> np.ndarray:
    """[K, C, B] with ties, NaNs (first, middle, last, several), infinities and -0.0."""
    x = RNG.integers(-2, 3, size=(7, 5, 33)).astype(dtype)  # small integers: many ties
    x[0, 0, :5] = np.nan
    x[1, 2, 3:9] = np.nan
    x[1, 4, 3:12] = np.nan
    x[2, 4, :] = np.nan
    x[3, 1, ::3] = np.inf
    x[3, 3, ::2] = -np.inf
    x[4] = -0.0
    x[4, 2, ::4] = 0.0
    x[5] = -np.inf
    return x


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_row_is_numpys_argmax(dtype):
    fn = _compiled(dtype)
    for x in (
        _hard_values(dtype),
        RNG.normal(size=(40, 3, 32)).astype(dtype),
        RNG.normal(size=(1, 1, 5)).astype(dtype),
        np.zeros((0, 3, 4), dtype),
        np.zeros((3, 2, 0), dtype),
    ):
        got = fn(x)
        assert got.dtype == np.int64 and got.shape == (x.shape[0], x.shape[2])
        np.testing.assert_array_equal(got, np.argmax(x, axis=1))


def test_strided_and_transposed_inputs():
    fn = _compiled("float64")
    base = _hard_values("float64")
    for x in (
        base[:, :, ::2],
        base[::2, ::-1, :],
        np.transpose(_hard_values("float64"), (2, 1, 0)),
        np.asfortranarray(base),
    ):
        np.testing.assert_array_equal(fn(x), np.argmax(x, axis=1))


def test_the_python_implementation_agrees():
    x = _hard_values("float64")
    out = [[None]]
    ClassArgmax().perform(None, [x], out)
    np.testing.assert_array_equal(out[0][0], np.argmax(x, axis=1))


def test_only_three_dimensional_floats():
    with pytest.raises(TypeError, match="3-D float"):
        class_argmax(pt.matrix("m"))
    with pytest.raises(TypeError, match="3-D float"):
        class_argmax(pt.tensor3("i", dtype="int64"))


@pytest.mark.parametrize(
    "dataset,loss", [("iris", "softmax_crossentropy"), ("diabetes", "squared_error")]
)
def test_the_packed_graphs_predict_with_it(dataset, loss, tmp_path, monkeypatch):
    """Training and evaluation, for classes and for a regression's targets alike."""
    monkeypatch.setenv("DNNFRAME_CACHE_DIR", str(tmp_path))
    from dnnframe.engine import packed, train_pack

    config = {
        "dataset": {"name": dataset},
        "seed": 0,
        "model": {"hidden_layers": 2, "width": 8, "activation": "tanh", "loss": loss},
        "training": {"optimizer": "sgd", "learning_rate": 0.01, "max_epochs": 1},
    }
    packed._CACHE.clear()  # then the one model in this process's cache is this trial's
    [result] = train_pack([config])
    assert result.status == "COMPLETE"
    [model] = packed._CACHE._items.values()
    for fn in (model.train_fn, model.eval_fn):
        ops = [type(node.op).__name__ for node in fn.maker.fgraph.toposort()]
        assert "ClassArgmax" in ops and "Argmax" not in ops, ops
