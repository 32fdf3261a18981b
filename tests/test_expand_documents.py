"""expand_documents: one validation per configuration, the same trials as expand_with_ids."""

from __future__ import annotations

import pytest

from dnnframe.spec import expand_documents, expand_with_ids, parse_spec
from dnnframe.spec.models import TrialConfig

SPECS = [
    # the paper sweep: seeds as a count
    {
        "name": "paper",
        "dataset": {"name": "iris"},
        "model": {
            "hidden_layers": {"grid": [1, 2]},
            "width": 16,
            "activation": {"grid": ["tanh", "relu"]},
        },
        "training": {"learning_rate": {"grid": [0.001, 0.1]}, "max_epochs": 2},
        "search": {"seeds": 5},
    },
    # explicit seeds, large ones, later layer-design options, a dataset grid
    {
        "name": "mixed",
        "dataset": {"name": {"grid": ["iris", "wine"]}},
        "model": {
            "hidden_layers": 2,
            "width": 8,
            "residual": "identity",
            "normalization": {"grid": ["none", "layer"]},
        },
        "training": {
            "optimizer": "adam",
            "learning_rate": 0.01,
            "max_epochs": 3,
            "lr_schedule": {"grid": ["none", "cosine"]},
            "grad_clip": 1.5,
        },
        "search": {"seeds": [0, 7, 2**32 - 1, 123456789]},
    },
    # sampled spaces: draws repeat per seed
    {
        "name": "random",
        "dataset": {"name": "iris"},
        "model": {"width": {"grid": [4, 8]}},
        "training": {"learning_rate": {"loguniform": [0.0001, 0.1]}, "max_epochs": 2},
        "search": {"method": "random", "num_samples": 3, "seeds": 2},
    },
    # a space over the whole training section with ASHA's max_epochs
    {
        "name": "asha",
        "dataset": {"name": "iris"},
        "training": {
            "grid": [
                {"optimizer": "sgd", "learning_rate": 0.1},
                {"optimizer": "adam", "learning_rate": 0.01},
            ]
        },
        "search": {"method": "asha", "num_samples": 2, "seeds": 2, "max_epochs": 9},
    },
]


@pytest.mark.parametrize("raw", SPECS, ids=[s["name"] for s in SPECS])
def test_same_trials_ids_and_documents_as_validating_each(raw):
    spec = parse_spec(raw)
    fast = list(expand_documents(spec))
    slow = list(expand_with_ids(spec))
    assert [tid for tid, _ in fast] == [tid for tid, _ in slow]
    assert [doc for _, doc in fast] == [cfg.model_dump(mode="json") for _, cfg in slow]
    # each document is a valid config of its own (nothing the shortcut skipped is wrong)
    for _, doc in fast:
        assert TrialConfig.model_validate(doc).model_dump(mode="json") == doc


def test_validates_once_per_configuration(validations):
    spec = parse_spec({**SPECS[0], "search": {"seeds": 50}})
    validations.clear()  # parsing checked the combinations
    docs = list(expand_documents(spec))
    assert len(docs) == 8 * 50
    assert len(validations) == 8
