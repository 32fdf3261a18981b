"""json_safe and json_copy: strict JSON copies of results (NaN and inf become null)."""

from __future__ import annotations

import enum
import json
import math

import numpy as np
import pytest

from dnnframe.engine.result import TrialResult
from dnnframe.jsonsafe import dumps, json_copy, json_safe


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, None, True, "x"], "b": {"c": (1, 2)}},  # plain: the fast path
        {
            "loss": float("nan"),
            "acc": [float("inf"), -float("inf"), 0.5],
        },  # non-finite: the slow one
        {"n": np.int64(3), "x": np.float32(0.25), "arr": np.arange(3), "c": Colour.RED},
    ],
)
def test_json_copy_equals_json_safe_and_shares_nothing(value):
    copy = json_copy(value)
    assert copy == json_safe(value)
    assert dumps(copy) == dumps(json_safe(value))
    if isinstance(value.get("a"), list):
        copy["a"].append("changed")
        assert value["a"] == [1, 2.5, None, True, "x"]


def test_a_results_dict_is_strict_json_and_independent_of_the_result():
    history = [{"epoch": 1, "val_loss": float("nan")}, {"epoch": 2, "val_loss": 0.5}]
    result = TrialResult(
        status="DIVERGED",
        metrics={"test_loss": math.inf},
        history=history,
        timings={"total": 1.0},
        n_params=3,
        environment={"host": "h"},
        diverged_epoch=1,
        pack={"size": 2, "index": 0, "wall_seconds": 2.0},
    )
    data = result.to_dict()
    assert data["metrics"] == {"test_loss": None}
    assert data["history"] == [{"epoch": 1, "val_loss": None}, {"epoch": 2, "val_loss": 0.5}]
    assert data["diverged_epoch"] == 1 and data["notes"] == []
    data["history"][1]["val_loss"] = 9.0
    assert result.history[1]["val_loss"] == 0.5
    assert set(data) == {
        "status",
        "metrics",
        "history",
        "timings",
        "n_params",
        "environment",
        "diverged_epoch",
        "stopped_early",
        "epochs_run",
        "best_epoch",
        "notes",
        "pack",
    }
    data["pack"]["size"] = 9
    assert result.pack == {"size": 2, "index": 0, "wall_seconds": 2.0}


@pytest.mark.parametrize(
    "odd", [float("inf"), -math.inf, np.float64("nan"), True, [1, 2], {"nested": 1}]
)
def test_a_plain_history_copied_quickly_equals_the_json_round_trip(odd):
    plain = [
        {"epoch": k, "train_loss": 1.0 / k, "val_accuracy": None, "note": "x"} for k in range(1, 4)
    ]
    result = TrialResult(
        status="COMPLETE", metrics={}, history=plain, timings={}, n_params=1, environment={}
    )
    data = result.to_dict()
    assert data["history"] == json_copy(plain)
    assert all(a is not b for a, b in zip(data["history"], plain))
    # any other value (not finite, not a plain scalar) takes the whole round trip
    odd_history = [*plain, {"epoch": 4, "train_loss": odd}]
    result = TrialResult(
        status="COMPLETE", metrics={}, history=odd_history, timings={}, n_params=1, environment={}
    )
    assert result.to_dict()["history"] == json_copy(odd_history)


def test_what_orjson_refuses_takes_the_standard_librarys_way():
    """Integers beyond 64 bits stay exact, non-string keys are spelled as JSON spells them."""
    big = {"n": 2**70 + 1, "nested": [{"x": -(2**65) - 3}]}
    assert json.loads(dumps(big)) == big and json_copy(big) == big
    assert json.loads(dumps({1: "a", "b": float("nan")})) == {"1": "a", "b": None}
    assert json_copy({True: 1, None: [2.5]}) == {"true": 1, "null": [2.5]}
    with pytest.raises(TypeError, match="set"):
        dumps({"s": {1, 2}})


def test_loads_reads_what_orjson_refuses_as_the_standard_library_does():
    from dnnframe.jsonsafe import loads

    assert loads('{"a": [1, 2.5, null, "x"]}') == {"a": [1, 2.5, None, "x"]}
    assert loads(str(2**70)) == 2**70  # beyond 64 bits
    assert math.isnan(loads("NaN"))  # a literal another program may have written
    with pytest.raises(ValueError):
        loads("{not json")
