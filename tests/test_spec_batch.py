"""validate_many: a pack's configs validated once per document apart from the seed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dnnframe.spec.batch import validate_many
from dnnframe.spec.models import TrialConfig


def doc(seed, lr=0.01, **extra):
    return {
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": 2, "width": 8},
        "training": {"learning_rate": lr, "max_epochs": 3},
        "seed": seed,
        **extra,
    }


def test_equals_validating_each_document():
    docs = [doc(s, lr) for lr in (0.1, 0.01) for s in (0, 1, 7, 2**32 - 1)]
    got = validate_many(docs)
    assert got == [TrialConfig.model_validate(d) for d in docs]
    assert [c.seed for c in got] == [d["seed"] for d in docs]
    assert [c.model_dump(mode="json") for c in got] == [
        TrialConfig.model_validate(d).model_dump(mode="json") for d in docs
    ]


@pytest.mark.parametrize("seed", [-1, 2**32, True, 1.5, "3", None])
def test_an_unusual_seed_gets_what_validating_that_document_gives(seed):
    docs = [doc(0), doc(seed), doc(1)]
    got = validate_many(docs)
    assert got[0] == TrialConfig.model_validate(docs[0])
    assert got[2] == TrialConfig.model_validate(docs[2])
    try:
        expected = TrialConfig.model_validate(docs[1])
    except ValidationError as exc:
        assert isinstance(got[1], ValidationError) and str(got[1]) == str(exc)
    else:  # pydantic's lax mode takes True and "3"
        assert got[1] == expected


def test_a_bad_document_is_its_own_error_and_not_reused():
    docs = [doc(0, lr=-1.0), doc(1, lr=-1.0), doc(2), "not a dict", doc(3, surprise=1)]
    got = validate_many(docs)
    assert isinstance(got[0], ValidationError) and isinstance(got[1], ValidationError)
    assert got[2] == TrialConfig.model_validate(doc(2))
    assert isinstance(got[3], ValidationError) and isinstance(got[4], ValidationError)


def test_validates_each_distinct_rest_once(validations):
    docs = [doc(s, lr) for lr in (0.1, 0.01, 0.001) for s in range(100)]
    assert len(validate_many(docs)) == 300
    assert len(validations) == 3
