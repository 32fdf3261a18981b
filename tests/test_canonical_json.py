"""canonical_json: the one text every id and cache key is a hash of. Its bytes are pinned
here with literals, because a change would give every stored trial a new id."""

from __future__ import annotations

import pytest

from dnnframe.engine import compile_key, pack_key
from dnnframe.jsonsafe import canonical_json
from dnnframe.spec import ExperimentSpec, TrialConfig, models, trial_id

SPEC = {
    "name": "pin-é",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": 2, "width": 16, "activation": "tanh"},
    "training": {"optimizer": "sgd", "learning_rate": 0.1, "batch_size": 32, "max_epochs": 20},
}
CONFIG = {k: v for k, v in SPEC.items() if k != "name"}


def test_text_is_sorted_compact_and_ascii():
    assert (
        canonical_json({"b": [1, 2.5, None], "a": "é", "c": {"z": True, "y": "x"}})
        == '{"a":"\\u00e9","b":[1,2.5,null],"c":{"y":"x","z":true}}'
    )


@pytest.mark.parametrize("value", [float("nan"), {"x": float("inf")}])
def test_non_finite_numbers_are_refused(value):
    with pytest.raises(ValueError, match="JSON"):
        canonical_json(value)


def test_spec_models_use_the_one_function():
    assert models.canonical_json is canonical_json


def test_stored_ids_and_keys_keep_their_values(monkeypatch):
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    monkeypatch.delenv("THEANO_FLAGS", raising=False)
    assert ExperimentSpec.model_validate(SPEC).experiment_id == "exp-438b66fcc3b354c8"
    assert (
        trial_id(TrialConfig.model_validate(CONFIG), "iris-abc", "1")
        == "t-66df483b07ef70fc9a326c85"
    )
    assert compile_key(CONFIG) == "iris-wxstack-tanh-sgd-float64-8a6dd7b55562994f"
    assert compile_key(CONFIG, 256) == "iris-wxw-tanh-sgd-float64-3758878aadce6947"  # a big pack
    assert pack_key(CONFIG) == "iris-16x2-b32-tanh-sgd-float64-aaf0c061b934034c"
