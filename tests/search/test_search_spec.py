"""The search section's adaptive fields: what is accepted and what each refusal says."""

from __future__ import annotations

import pytest

from dnnframe.exceptions import SpecError
from dnnframe.executors.packing import resolve_pack_size
from dnnframe.spec import count_trials, expand, parse_spec

BASE = {
    "dataset": "iris",
    "model": {"width": 8},
    "training": {"learning_rate": {"loguniform": [0.001, 0.1]}},
}


def _spec(**search):
    return parse_spec({**BASE, "search": search})


def test_pack_size_from_the_spec():
    assert resolve_pack_size(_spec(method="random", pack_size=4)) == 4
    assert resolve_pack_size(_spec(method="random", pack_size=4), 2) == 2
    with pytest.raises(SpecError, match="search.pack_size"):
        _spec(method="random", pack_size=0)


def test_asha_samples_like_random_and_sets_max_epochs():
    spec = _spec(method="asha", num_samples=5, max_epochs=27)
    assert count_trials(spec) == 5
    configs = list(expand(spec))
    assert [c.training.max_epochs for c in configs] == [27] * 5
    assert spec.search.prunes and spec.search.eta == 3 and spec.search.min_epochs == 1
    assert spec.search.rung_metric == "val_accuracy"


def test_tpe_counts_num_samples_in_all():
    raw = {
        **BASE,
        "model": {"width": {"grid": [8, 16]}},
        "search": {"method": "tpe", "num_samples": 7, "seeds": [5]},
    }
    assert count_trials(parse_spec(raw)) == 7
    assert [c.seed for c in expand(parse_spec(raw))] == [5] * 7


@pytest.mark.parametrize(
    "search, training, path, words",
    [
        (
            {"method": "asha", "min_epochs": 5, "max_epochs": 5},
            {},
            "search",
            "min_epochs < max_epochs must hold for ASHA, but got min_epochs=5, max_epochs=5",
        ),
        (
            {"method": "asha", "min_epochs": 20},
            {},
            "search.min_epochs",
            "min_epochs < max_epochs must hold for ASHA, but got min_epochs=20, max_epochs=20",
        ),
        (
            {"method": "asha", "max_epochs": 9},
            {"max_epochs": 10},
            "search.max_epochs",
            "search.max_epochs (9) and training.max_epochs (10) differ",
        ),
        (
            {"method": "asha"},
            {"max_epochs": {"grid": [3, 9]}},
            "training.max_epochs",
            "must not be a search space",
        ),
        (
            {"method": "tpe", "pruner": "asha", "objective": {"metric": "train_seconds"}},
            {},
            "search",
            "'train_seconds' is not",
        ),
        ({"method": "asha", "eta": 1}, {}, "search.eta", "greater than or equal to 2"),
        (
            {"method": "tpe", "seeds": 2},
            {},
            "search",
            "method tpe trains each proposed configuration once; seeds must be 1",
        ),
    ],
)
def test_refusals_name_the_field_and_the_rule(search, training, path, words):
    with pytest.raises(SpecError) as info:
        parse_spec({**BASE, "training": {**BASE["training"], **training}, "search": search})
    assert any(e["path"] == path and words in e["message"] for e in info.value.errors), (
        info.value.errors
    )
