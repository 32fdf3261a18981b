"""Layer designs: gradients against finite differences, layer norm against NumPy, batch
norm's training and evaluation modes, a depth-independent graph."""

from __future__ import annotations

import numpy as np
import pytest

from dnnframe.engine.blocks import NORM_EPS, LayerDesign

pytensor = pytest.importorskip("pytensor")
import pytensor.tensor as pt  # noqa: E402

from dnnframe.engine.layers import DenseLayer, DenseStackLayer  # noqa: E402

DESIGNS = {
    "identity": LayerDesign(residual="identity"),
    "rezero": LayerDesign(residual="rezero", learnable_scale=True),
    "scaled": LayerDesign(residual="scaled"),
    "skipinit": LayerDesign(residual="scaled", learnable_scale=True),
    "batch-post": LayerDesign(normalization="batch"),
    "layer-post": LayerDesign(normalization="layer"),
    "layer-pre-scaled": LayerDesign(residual="scaled", normalization="layer", norm_position="pre"),
    "batch-pre-rezero": LayerDesign(residual="rezero", learnable_scale=True,
                                    normalization="batch", norm_position="pre"),
}


def _perturb(layer, rng):
    # move every parameter off its initial value (a zero ReZero scale, unit gains) so each
    # gradient path carries signal
    for p in layer.params:
        v = p.get_value()
        p.set_value(v + 0.3 * rng.standard_normal(v.shape))


def _loss_and_grads(layer, x, deterministic=False):
    X = pt.matrix("X")
    out = layer.get_output(X, deterministic=deterministic)
    R = np.random.default_rng(7).standard_normal((x.shape[0], 5))
    loss = pt.sum(pt.tanh(out) * R)  # a non-linear read-out: second-order terms matter
    grads = pytensor.grad(loss, layer.params)
    return pytensor.function([X], [loss, *grads])


@pytest.mark.parametrize("name", list(DESIGNS))
@pytest.mark.parametrize("kind", ["stack", "dense"])
def test_gradients_match_finite_differences(name, kind):
    rng = np.random.default_rng(0)
    design = DESIGNS[name]
    if kind == "stack":
        layer = DenseStackLayer(5, "tanh", design=design)
        layer.initialise(rng, "glorot", n_layers=3, residual_scale=0.5)
    else:
        layer = DenseLayer(5, 5, "tanh", design=design)
        layer.initialise(rng, "glorot", residual_scale=0.5)
    _perturb(layer, rng)
    x = rng.standard_normal((6, 5))
    fn = _loss_and_grads(layer, x)
    _, *grads = fn(x)
    eps = 1e-6
    for p, g in zip(layer.params, grads):
        value = p.get_value()
        numeric = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            for sign in (1, -1):
                v = value.copy()
                v[i] += sign * eps
                p.set_value(v)
                numeric[i] += sign * float(fn(x)[0]) / (2 * eps)
        p.set_value(value)
        np.testing.assert_allclose(g, numeric, rtol=1e-5, atol=1e-7, err_msg=f"{name} {p.name}")
