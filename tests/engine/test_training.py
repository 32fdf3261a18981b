"""Engine correctness: gradients, accuracy, parity with scikit-learn, determinism, lifecycle.

Compiles are the slow part (the C backend builds its ops once per machine, then caches
them); tests reuse a few graph shapes so most trials hit the per-process compiled cache.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dnnframe.datasets import load_dataset
from dnnframe.engine.graphkey import UNROLL_MIN_PACK
from dnnframe.spec import TrialConfig

pytestmark = pytest.mark.timeout(900)


def make_config(dataset="iris", seed=0, **sections) -> TrialConfig:
    model = {"hidden_layers": 1, "width": 16, "activation": "relu", **sections.pop("model", {})}
    training = {
        "optimizer": "adam",
        "learning_rate": 0.01,
        "batch_size": 32,
        "max_epochs": 3,
        **sections.pop("training", {}),
    }
    ds = dataset if isinstance(dataset, dict) else {"name": dataset}
    return TrialConfig.model_validate(
        {"dataset": ds, "model": model, "training": training, "seed": seed}
    )


def comparable(result) -> dict:
    """A result without the parts that legitimately differ between runs (times, pid)."""
    d = result.to_dict()
    d.pop("timings")
    d.pop("environment")
    d.pop("pack")
    for h in d["history"]:
        h.pop("seconds")
    return d


@pytest.fixture(scope="module")
def engine():
    from dnnframe.engine import packed

    return packed


# --------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("layout", ["unrolled", "scanned"])
def test_gradients_match_finite_differences(layout):
    """One SGD step of the compiled training function equals p - lr * numerical gradient,
    for each of two members (each member's gradient is its own).

    The net has three residual hidden layers of width 5 and the output layer: unrolled (as
    the C backend builds a run that short in a big pack), and as a dense layer and a scanned stack of 2
    (as a longer run is split; 2 keeps the check small), so the gradient through ``scan``
    is checked too.
    """
    import pytensor

    from dnnframe.engine.blocks import LayerDesign
    from dnnframe.engine.packgraph import PackedModel, PackShape, segments_for
    from dnnframe.engine.pytensor_wall import configure
    from dnnframe.engine.segments import Segment

    assert pytensor.config.floatX == "float64", "the gradient check needs float64"
    segments, counts = segments_for(4, [5, 5, 5], pack_size=UNROLL_MIN_PACK)
    assert (
        segments == (Segment.dense(4, 5), Segment.dense(5, 5), Segment.dense(5, 5)) and counts == ()
    )
    if layout == "scanned":
        segments, counts = (Segment.dense(4, 5), Segment.stack(5)), (2,)
    shape = PackShape(
        n_features=4,
        n_outputs=3,
        segments=segments,
        activation="tanh",
        design=LayerDesign(residual="identity"),
        dropout=False,
        grad_clip=False,
        loss="softmax_crossentropy",
        classification=True,
        optimizer="sgd",
        dtype="float64",
        mode=configure().mode,
        shared_input=True,
    )
    model = PackedModel(shape)
    rng = np.random.default_rng(4)
    # non-zero biases too, so every path carries gradient
    network = [
        rng.normal(scale=0.5, size=(2, *v.shape))
        for v in model.initial_network(rng, "glorot", 1.0, counts)
    ]
    lr = 0.1
    model.load(
        network,
        {
            "learning_rate": [lr, lr],
            "momentum": [0, 0],
            "l2": [0, 0],
            "grad_clip": [1, 1],
            "dropout_scale": [1, 1],
        },
    )
    X = rng.normal(size=(6, 4))
    y = np.array([0, 1, 2, 0, 1, 2])

    def loss() -> np.ndarray:
        return model.eval_fn(X, y)[0] / len(X)

    before = [v.copy() for v in model.export_state()[: len(model.params)]]
    numeric = []
    eps = 1e-6
    for p, value in zip(model.params, before):
        g = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            v = value.copy()
            v[i] += eps
            p.set_value(v)
            up = loss()[i[0]]
            v[i] -= 2 * eps
            p.set_value(v)
            down = loss()[i[0]]
            g[i] = (up - down) / (2 * eps)
        p.set_value(value)
        numeric.append(g)
    model.train_fn(X, y)
    for p, value, g in zip(model.params, before, numeric):
        analytic = (value - p.get_value()) / lr
        np.testing.assert_allclose(analytic, g, rtol=1e-5, atol=1e-7, err_msg=p.name)


# --------------------------------------------------------------------------- accuracy
def test_digits_reaches_95_percent():
    from dnnframe.engine import train

    config = make_config(
        "digits",
        model={"width": 64},
        training={"learning_rate": 1e-3, "max_epochs": 30, "batch_size": 32},
    )
    result = train(config)
    assert result.status == "COMPLETE"
    assert result.metrics["test_accuracy"] >= 0.95, result.metrics
    assert result.epochs_run == 30 and len(result.history) == 30
    assert result.n_params == 64 * 64 + 64 + 64 * 10 + 10
    assert set(result.timings) >= {"data", "compile", "train", "total"}
    json.dumps(result.to_dict(), allow_nan=False)


@pytest.mark.parametrize("dataset", ["digits", "breast_cancer"])
def test_accuracy_close_to_sklearn_mlp(dataset):
    """Same architecture, optimiser, batch size, epochs, no L2: within a few points."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    from dnnframe.engine import train

    epochs, width, lr, batch = 20, 32, 1e-3, 32
    config = make_config(
        dataset,
        model={"width": width},
        training={"learning_rate": lr, "max_epochs": epochs, "batch_size": batch},
    )
    ours = [train(config.model_copy(update={"seed": s})).metrics["test_accuracy"] for s in range(3)]
    data = load_dataset(config.dataset)
    theirs = []
    for s in range(3):
        clf = MLPClassifier(
            hidden_layer_sizes=(width,),
            activation="relu",
            solver="adam",
            learning_rate_init=lr,
            batch_size=batch,
            max_iter=epochs,
            alpha=0.0,
            shuffle=True,
            random_state=s,
            tol=0.0,
            n_iter_no_change=epochs + 1,
        )
        with pytest.warns(ConvergenceWarning):
            clf.fit(data.X_train, data.y_train)
        theirs.append(clf.score(data.X_test, data.y_test))
    assert abs(np.mean(ours) - np.mean(theirs)) <= 0.03, (ours, theirs)


# --------------------------------------------------------------------------- determinism
def test_same_seed_is_bit_identical_even_after_recompiling(engine):
    from dnnframe.engine import train

    config = make_config(model={"hidden_layers": 3, "dropout": 0.2}, seed=7)
    first = train(config)
    second = train(config)  # cached compiled functions, re-initialised state
    assert second.environment["compile_cache_hit"] is True
    engine.clear_cache()
    third = train(config)  # freshly compiled
    assert third.environment["compile_cache_hit"] is False
    assert comparable(first) == comparable(second) == comparable(third)
    other = train(config.model_copy(update={"seed": 8}))
    assert comparable(other)["history"] != comparable(first)["history"]


# --------------------------------------------------------------------------- lifecycle
def test_a_loss_that_explodes_is_divergence_and_the_bound_is_configurable():
    """SGD at a huge rate can keep its loss finite but astronomically large: that is
    divergence too, unless the spec turns the bound off (then only NaN/inf counts)."""
    from dnnframe.engine import train

    training = {"optimizer": "sgd", "learning_rate": 1000.0, "max_epochs": 4}
    config = make_config(model={"activation": "relu"}, training=training)
    result = train(config)
    assert result.status == "DIVERGED", result.history
    last = result.history[-1]
    assert last["train_loss"] is not None and last["train_loss"] > 1e4  # finite, but exploded
    unbounded = train(
        make_config(model={"activation": "relu"}, training={**training, "divergence_factor": None})
    )
    assert unbounded.status == "COMPLETE" and unbounded.epochs_run == 4
    assert unbounded.metrics["train_loss"] > 1e4


def test_huge_learning_rate_diverges_without_crashing():
    from dnnframe.engine import train

    config = make_config(training={"optimizer": "sgd", "learning_rate": 1e10, "max_epochs": 10})
    result = train(config)
    assert result.status == "DIVERGED"
    assert 1 <= result.diverged_epoch <= 10 and result.epochs_run == result.diverged_epoch
    last = result.to_dict()["history"][-1]
    # the NaN that ended it, or a loss past the divergence bound
    assert last["train_loss"] is None or last["val_loss"] is None or last["train_loss"] > 1e4
    json.dumps(result.to_dict(), allow_nan=False)  # NaNs become null


def test_on_epoch_true_cancels():
    from dnnframe.engine import train

    seen = []

    def on_epoch(epoch, metrics):
        seen.append((epoch, metrics))
        return epoch == 2

    result = train(make_config(training={"max_epochs": 10}), on_epoch=on_epoch)
    assert result.status == "CANCELLED" and result.epochs_run == 2
    assert [e for e, _ in seen] == [1, 2]
    assert set(seen[0][1]) == {
        "epoch",
        "train_loss",
        "train_accuracy",
        "val_loss",
        "val_accuracy",
        "seconds",
    }
    assert result.metrics["test_accuracy"] is not None


def test_early_stopping_restores_the_best_epoch():
    from dnnframe.engine import train

    # min_delta so large that nothing after epoch 1 counts as an improvement
    es = {"metric": "val_loss", "patience": 2, "min_delta": 1e6}
    result = train(make_config(training={"max_epochs": 10, "early_stopping": es}))
    assert result.stopped_early and result.epochs_run == 3 and result.best_epoch == 1
    assert result.metrics["val_loss"] == pytest.approx(result.history[0]["val_loss"], rel=1e-12)


@pytest.mark.slow
def test_regression_without_validation_split_and_squared_error_classification():
    from dnnframe.engine import train

    es = {"metric": "val_accuracy", "patience": 50}
    config = make_config(
        {"name": "diabetes", "validation_fraction": 0.0},
        model={"loss": "squared_error"},
        training={"early_stopping": es},
    )
    result = train(config)
    assert result.status == "COMPLETE"
    assert result.metrics["test_accuracy"] is None and result.metrics["val_loss"] is None
    assert result.metrics["test_loss"] < 1.5  # standardised targets: 1.0 is predicting the mean
    assert any("train_loss" in note for note in result.notes)
    onehot = train(make_config(model={"loss": "squared_error"}, training={"max_epochs": 20}))
    assert onehot.metrics["test_accuracy"] > 0.8


def test_deep_stack_trains_and_shares_the_compiled_graph():
    """300 layers: no RecursionError; then depth 5 (the shallowest a scanned stack serves)
    reuses the same compiled functions."""
    from dnnframe.engine import train

    deep = train(
        make_config(
            model={"hidden_layers": 300, "width": 8, "init": "orthogonal", "activation": "tanh"},
            training={"max_epochs": 1},
        )
    )
    assert deep.status == "COMPLETE" and np.isfinite(deep.metrics["test_loss"])
    assert deep.n_params == 4 * 8 + 8 + 299 * (8 * 8 + 8) + 8 * 3 + 3
    shallow = train(
        make_config(
            model={"hidden_layers": 5, "width": 8, "init": "orthogonal", "activation": "tanh"},
            training={"max_epochs": 1},
        )
    )
    assert shallow.environment["compile_cache_hit"] is True


@pytest.mark.slow
def test_width_list_builds_dense_and_stacked_segments():
    from dnnframe.engine import train
    from dnnframe.engine.packgraph import segments_for
    from dnnframe.engine.segments import Segment

    dense, stack = Segment.dense, Segment.stack
    # under the C backend a big pack unrolls a run of up to four layers, a longer one is a
    # layer and a stack of the rest; a small pack scans every run (a run of one is a layer
    # and a stack of 0 layers); JAX's static depths unroll a run of one only
    widths = [8] * 6 + [6, 6] + [3]
    assert segments_for(4, widths, pack_size=UNROLL_MIN_PACK) == (
        (dense(4, 8), stack(8), dense(8, 6), dense(6, 6), dense(6, 3)),
        (5,),
    )
    assert segments_for(4, widths) == (
        (dense(4, 8), stack(8), dense(8, 6), stack(6), dense(6, 3), stack(3)),
        (5, 1, 0),
    )
    assert segments_for(4, widths, static=True) == (
        (dense(4, 8), stack(8), dense(8, 6), stack(6), dense(6, 3)),
        (5, 1),
    )
    result = train(
        make_config(
            model={"hidden_layers": 9, "width": widths, "residual": True},
            training={"max_epochs": 2},
        )
    )
    assert result.status == "COMPLETE"
    assert result.n_params == (4 * 8 + 8) + 5 * 72 + (8 * 6 + 6) + 42 + (6 * 3 + 3) + (3 * 3 + 3)


@pytest.mark.parametrize(
    "setting",
    [
        *[
            ("activation", a)
            for a in ["relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "linear"]
        ],
        *[("init", i) for i in ["glorot", "he", "lecun", "orthogonal"]],
        *[("optimizer", o) for o in ["sgd", "momentum", "nesterov", "adam", "rmsprop"]],
    ],
)
def test_every_activation_init_and_optimizer_runs(setting):
    from dnnframe.engine import train

    key, value = setting
    model = {"hidden_layers": 3, "width": 8, "dropout": 0.1, "residual": True}
    training = {"max_epochs": 1, "learning_rate": 0.01}
    (training if key == "optimizer" else model)[key] = value
    result = train(make_config(model=model, training=training))
    assert result.status == "COMPLETE", (setting, result.metrics)
    assert np.isfinite(result.metrics["train_loss"])


def test_no_hidden_layers_from_a_config_dict():
    """Depth 0 is logistic regression; a stored config dict is accepted as well."""
    from dnnframe.engine import train

    result = train(
        {
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 0},
            "training": {"max_epochs": 30, "learning_rate": 0.05},
        }
    )
    assert result.status == "COMPLETE" and result.n_params == 4 * 3 + 3
    assert result.metrics["test_accuracy"] >= 0.8


@pytest.mark.slow
def test_a_well_conditioned_deep_stack_learns():
    """Depth 100 learns when the network allows it (tanh + orthogonal init keeps signals
    alive), so chance accuracy of deep relu stacks is a property of the net, not the engine."""
    from dnnframe.engine import train

    result = train(
        make_config(
            "digits",
            model={"hidden_layers": 100, "width": 32, "activation": "tanh", "init": "orthogonal"},
            training={"learning_rate": 1e-3, "max_epochs": 10, "batch_size": 64},
        )
    )
    assert result.metrics["test_accuracy"] >= 0.8, result.metrics
