"""Packed layers and their designs: gradients against finite differences, layer norm against
NumPy, batch norm's training and evaluation modes per member, a depth-independent graph."""

from __future__ import annotations

import numpy as np
import pytest

from dnnframe.engine.blocks import NORM_EPS, LayerDesign

pytensor = pytest.importorskip("pytensor")
import pytensor.tensor as pt  # noqa: E402

from dnnframe.engine.layers import ACTIVATIONS, DenseLayer, StackLayer  # noqa: E402

DESIGNS = {
    "identity": LayerDesign(residual="identity"),
    "rezero": LayerDesign(residual="rezero", learnable_scale=True),
    "scaled": LayerDesign(residual="scaled"),
    "skipinit": LayerDesign(residual="scaled", learnable_scale=True),
    "batch-post": LayerDesign(normalization="batch"),
    "layer-post": LayerDesign(normalization="layer"),
    "layer-pre-scaled": LayerDesign(residual="scaled", normalization="layer", norm_position="pre"),
    "batch-pre-rezero": LayerDesign(
        residual="rezero", learnable_scale=True, normalization="batch", norm_position="pre"
    ),
}
K = 2  # members: every check runs on a pack, so member values must not mix


def make(
    kind: str,
    design: LayerDesign,
    width: int = 5,
    act: str = "tanh",
    n_layers: int = 3,
    seed: int = 0,
):
    """A layer of ``kind`` with ``K`` members, each drawn independently and moved off its
    initial values (a zero ReZero scale, unit gains) so each gradient path carries signal."""
    rng = np.random.default_rng(seed)
    if kind == "stack":
        layer = StackLayer(width, ACTIVATIONS[act], design, "float64", "s")
        members = [layer.initial_values(rng, "glorot", 0.5, n_layers) for _ in range(K)]
    else:
        layer = DenseLayer(width, width, ACTIVATIONS[act], design, "float64", "d")
        members = [layer.initial_values(rng, "glorot", 0.5) for _ in range(K)]
    for var, parts in zip(layer.shared.values(), zip(*members)):
        value = np.stack(parts)
        if var in layer.params:
            value = value + 0.3 * rng.standard_normal(value.shape)
        var.set_value(value)
    return layer


def forward(layer, deterministic=False):
    H = pt.tensor3("H")
    out, updates = layer.forward(H, None, deterministic)
    return H, out, updates


@pytest.mark.parametrize("name", list(DESIGNS))
@pytest.mark.parametrize("kind", ["stack", "dense"])
def test_gradients_match_finite_differences(name, kind):
    layer = make(kind, DESIGNS[name])
    H, out, _ = forward(layer)
    R = np.random.default_rng(7).standard_normal((K, 5, 6))
    loss = pt.sum(pt.tanh(out) * R)  # a non-linear read-out: second-order terms matter
    grads = pytensor.grad(loss, layer.params)
    # the Python backend: compiles in a fraction of the C backend's time, same symbolic gradient
    fn = pytensor.function([H], [loss, *grads], mode="FAST_COMPILE")
    x = np.random.default_rng(1).standard_normal((K, 5, 6))
    _, *analytic = fn(x)
    eps = 1e-6
    for p, g in zip(layer.params, analytic):
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


def test_layer_norm_matches_numpy_per_member():
    layer = make("stack", DESIGNS["layer-post"], width=4, act="relu", n_layers=2, seed=1)
    W, b, gain, shift = (layer.shared[k].get_value() for k in ("W", "b", "gain", "shift"))
    x = np.random.default_rng(2).standard_normal((K, 4, 5))  # [members, units, rows]
    H, out, _ = forward(layer)
    got = pytensor.function([H], out)(x)
    for k in range(K):
        h = x[k].T  # rows x units
        for layer_i in range(2):
            z = h @ W[k, layer_i].T + b[k, layer_i]  # W is stored [n_out, n_in]
            z = (z - z.mean(axis=1, keepdims=True)) / np.sqrt(
                z.var(axis=1, keepdims=True) + NORM_EPS
            )
            h = np.maximum(z * gain[k, layer_i] + shift[k, layer_i], 0)
        np.testing.assert_allclose(got[k], h.T, rtol=1e-12, atol=1e-12)


def test_batch_norm_trains_on_each_members_batch_statistics_and_evaluates_on_running_ones():
    layer = make("stack", DESIGNS["batch-post"], width=3, act="linear", n_layers=2, seed=2)
    mean, var = layer.stats
    layer.shared["gain"].set_value(np.ones((K, 2, 3)))
    layer.shared["shift"].set_value(np.zeros((K, 2, 3)))
    mean.set_value(np.zeros((K, 2, 3)))
    var.set_value(np.ones((K, 2, 3)))
    W, b = layer.shared["W"].get_value(), layer.shared["b"].get_value()
    H, train_out, updates = forward(layer, deterministic=False)
    step = pytensor.function([H], train_out, updates=updates)
    eval_out, _ = layer.forward(H, None, True)
    evaluate = pytensor.function([H], eval_out)
    rng = np.random.default_rng(3)
    x = np.stack(
        [3.0 + 2.0 * rng.standard_normal((3, 8)), -1.0 + 0.5 * rng.standard_normal((3, 8))]
    )

    out = step(x)
    # training mode: every unit of every layer is standardised over its member's minibatch
    np.testing.assert_allclose(out.mean(axis=2), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=2), 1, rtol=1e-3)  # v / (v + eps)
    for k in range(K):  # the step moved each member's running statistics towards its own batch's
        z0 = W[k, 0] @ x[k] + b[k, 0][:, None]
        np.testing.assert_allclose(mean.get_value()[k, 0], 0.1 * z0.mean(axis=1), rtol=1e-10)
        np.testing.assert_allclose(var.get_value()[k, 0], 0.9 + 0.1 * z0.var(axis=1), rtol=1e-10)
    for _ in range(300):  # after many steps on the same data evaluation agrees with training
        step(x)
    np.testing.assert_allclose(evaluate(x), out, atol=1e-6)
    # and a single row is evaluated on its own, not standardised against itself
    np.testing.assert_allclose(evaluate(x[:, :, :1]), out[:, :, :1], atol=1e-6)


def test_a_stack_graph_serves_every_depth():
    """The number of layers is the shared values' shape: one compiled function, any depth."""
    layer = make("stack", DESIGNS["identity"], width=3, n_layers=2)
    H, out, _ = forward(layer)
    fn = pytensor.function([H], out)
    x = np.random.default_rng(4).standard_normal((K, 3, 4))
    two = fn(x)
    W, b = layer.shared["W"].get_value(), layer.shared["b"].get_value()
    layer.shared["W"].set_value(np.concatenate([W, W], axis=1))
    layer.shared["b"].set_value(np.concatenate([b, b], axis=1))
    assert not np.allclose(fn(x), two)
    layer.shared["W"].set_value(W[:, :1].copy())
    layer.shared["b"].set_value(b[:, :1].copy())
    h = x
    for k in range(K):
        np.testing.assert_allclose(
            fn(x)[k], h[k] + np.tanh(W[k, 0] @ h[k] + b[k, 0][:, None]), rtol=1e-12
        )
