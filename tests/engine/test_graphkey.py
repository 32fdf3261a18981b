"""The graph key: exactly what the packed compiled function depends on, nothing else."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dnnframe.engine import graph_key
from dnnframe.engine.graphkey import graph_key_fields

BASE = {"dataset": {"name": "iris"},
        "model": {"hidden_layers": 2, "width": 16, "activation": "tanh"},
        "training": {"optimizer": "sgd", "learning_rate": 0.1, "batch_size": 32, "max_epochs": 20}}


def variant(**changes) -> dict:
    doc = {k: dict(v) if isinstance(v, dict) else v for k, v in BASE.items()}
    for path, value in changes.items():
        section, _, name = path.partition("__")
        if name:
            doc[section][name] = value
        else:
            doc[section] = value
    return doc


def test_fields_are_literal(monkeypatch):
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    monkeypatch.delenv("THEANO_FLAGS", raising=False)
    assert graph_key_fields(BASE) == {
        "v": "2",
        "dataset": {"name": "iris", "params": {}, "path": None, "upload": None, "label_column": None,
                    "test_fraction": 0.2, "validation_fraction": 0.1, "standardize": True,
                    "split_seed": 0},
        "widths": [16, 16], "activation": "tanh", "residual": "none", "normalization": "none",
        "norm_position": "post", "dropout": False, "grad_clip": False, "single_trial": False,
        "loss": "softmax_crossentropy", "optimizer": "sgd", "batch_size": 32, "dtype": "float64",
    }
    assert graph_key(BASE).startswith("iris-16x16-tanh-sgd-b32-float64-")


def test_run_time_values_share_one_key():
    """20 trials differing in seed, learning rate, momentum, L2, dropout rate, init,
    epochs and early stopping get one key."""
    configs = []
    for i in range(20):
        configs.append(variant(
            seed=i,
            training__learning_rate=10.0 ** -(1 + i % 5), training__momentum=0.5 + i / 100,
            training__l2=i * 1e-4, training__max_epochs=5 + i,
            training__early_stopping=None if i % 2 else {"patience": 1 + i},
            model__init=["glorot", "he", "lecun", "orthogonal"][i % 4],
        ))
    assert len({graph_key(c) for c in configs}) == 1
    # a dropout rate is a run-time value once dropout is on
    assert graph_key(variant(model__dropout=0.1)) == graph_key(variant(model__dropout=0.5))


@pytest.mark.parametrize("change", [
    {"dataset": {"name": "wine"}},
    {"dataset": {"name": "iris", "split_seed": 1}},
    {"model__hidden_layers": 3},
    {"model__width": 32},
    {"model__width": [16, 8]},
    {"model__activation": "relu"},
    {"model__residual": True},
    {"model__residual": "rezero"},
    {"model__normalization": "layer"},
    {"training__grad_clip": 1.0},
    {"model__dropout": 0.2},
    {"model__loss": "squared_error"},
    {"training__optimizer": "adam"},
    {"training__batch_size": 16},
])
def test_graph_changes_change_the_key(change):
    assert graph_key(variant(**change)) != graph_key(BASE)


def test_dtype_follows_the_flags(monkeypatch):
    monkeypatch.setenv("THEANO_FLAGS", "floatX=float32,device=cpu")
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    assert graph_key_fields(BASE)["dtype"] == "float32"
    monkeypatch.setenv("PYTENSOR_FLAGS", "floatX=float64")
    assert graph_key_fields(BASE)["dtype"] == "float64"


def test_typed_and_dict_configs_agree():
    from dnnframe.spec import TrialConfig

    assert graph_key(TrialConfig.model_validate(BASE)) == graph_key(BASE)


def test_importing_the_engine_does_not_load_pytensor():
    code = ("import sys, dnnframe.engine as e; e.graph_key({'dataset': {'name': 'iris'}}); "
            "print('pytensor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_options_the_packed_graph_lacks_are_named():
    from dnnframe.engine import packed_unsupported

    assert packed_unsupported(BASE) == []
    assert packed_unsupported(variant(model__residual=True)) == []
    assert packed_unsupported(variant(
        model__residual="rezero", model__normalization="batch", training__grad_clip=1.0,
        training__lr_schedule="cosine")) == [
        "model.normalization=batch", "model.residual=rezero", "training.grad_clip",
        "training.lr_schedule"]
    assert graph_key_fields(variant(training__lr_schedule={"warmup_epochs": 2}))["single_trial"]
