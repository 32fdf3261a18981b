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
    # the Python backend: compiles in a fraction of the C backend's time, same symbolic gradient
    return pytensor.function([X], [loss, *grads], mode="FAST_COMPILE")


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


def test_layer_norm_matches_numpy():
    rng = np.random.default_rng(1)
    layer = DenseStackLayer(4, "relu", design=DESIGNS["layer-post"])
    layer.initialise(rng, "he", n_layers=2)
    _perturb(layer, rng)
    W, b, gain, shift = (p.get_value() for p in layer.params)
    x = rng.standard_normal((5, 4))
    X = pt.matrix("X")
    got = pytensor.function([X], layer.get_output(X))(x)
    h = x
    for k in range(2):
        z = h @ W[k] + b[k]
        z = (z - z.mean(axis=1, keepdims=True)) / np.sqrt(z.var(axis=1, keepdims=True) + NORM_EPS)
        h = np.maximum(z * gain[k] + shift[k], 0)
    np.testing.assert_allclose(got, h, rtol=1e-12, atol=1e-12)


def test_batch_norm_trains_on_batch_statistics_and_evaluates_on_running_ones():
    rng = np.random.default_rng(2)
    layer = DenseStackLayer(3, "linear", design=DESIGNS["batch-post"])
    layer.initialise(rng, "glorot", n_layers=2)
    W, b = layer.W.get_value(), layer.b.get_value()
    X = pt.matrix("X")
    evaluate = pytensor.function([X], layer.get_output(X, deterministic=True))
    train_out = layer.get_output(X, deterministic=False)
    step = pytensor.function([X], train_out, updates=layer.updates())
    x = 3.0 + 2.0 * rng.standard_normal((8, 3))

    # evaluation before any training: running mean 0 and variance 1, so a plain affine map
    np.testing.assert_allclose(evaluate(x), (x @ W[0] + b[0]) / np.sqrt(1 + NORM_EPS) @ W[1]
                               / np.sqrt(1 + NORM_EPS) + b[1] / np.sqrt(1 + NORM_EPS), rtol=1e-10)
    # training mode: every unit of every layer is standardised over the minibatch
    out = step(x)
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=0), 1, rtol=1e-3)  # v / (v + eps)
    # the step moved the running statistics a tenth of the way to the batch's
    z0 = x @ W[0] + b[0]
    mean, var = layer.stats
    np.testing.assert_allclose(mean.get_value()[0], 0.1 * z0.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(var.get_value()[0], 0.9 + 0.1 * z0.var(axis=0), rtol=1e-10)
    # after many steps on the same data evaluation agrees with training mode
    for _ in range(300):
        step(x)
    np.testing.assert_allclose(evaluate(x), out, atol=1e-6)
    # and a single row is evaluated on its own, not standardised against itself
    one = evaluate(x[:1])
    np.testing.assert_allclose(one, out[:1], atol=1e-6)


def test_dense_layer_batch_norm_updates_match_the_stack():
    rng = np.random.default_rng(3)
    dense = DenseLayer(3, 3, "tanh", design=DESIGNS["batch-pre-rezero"])
    dense.initialise(rng, "glorot", residual_scale=0.0)
    X = pt.matrix("X")
    step = pytensor.function([X], dense.get_output(X), updates=dense.updates())
    x = rng.standard_normal((6, 3))
    step(x)
    np.testing.assert_allclose(dense.stats[0].get_value(), 0.1 * x.mean(axis=0), rtol=1e-10)
