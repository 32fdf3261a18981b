"""Datasets: every registered loader, deterministic splits, CSV validation, fingerprints."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from dnnframe.datasets import (
    REGISTRY,
    DatasetConfig,
    dataset_fingerprint,
    list_datasets,
    load_dataset,
    parse_csv,
    validate_csv_bytes,
)
from dnnframe.exceptions import DatasetError

SHIPPED = {"digits": (64, 10), "iris": (4, 3), "wine": (13, 3), "breast_cancer": (30, 2)}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_datasets_load_and_split(name):
    data = load_dataset(DatasetConfig(name=name))
    n_features, n_classes = SHIPPED[name]
    assert (data.n_features, data.n_classes, data.task) == (n_features, n_classes, "classification")
    total = len(data.X_train) + len(data.X_val) + len(data.X_test)
    assert abs(len(data.X_test) - 0.2 * total) <= 1 and abs(len(data.X_val) - 0.1 * total) <= 1
    # standardised with training statistics only
    assert np.allclose(data.X_train.mean(axis=0), 0, atol=1e-9)
    assert set(np.unique(data.y_train)) == set(range(n_classes))
    with pytest.raises(ValueError):
        data.X_train[0, 0] = 1.0  # shared between trials: read-only


@pytest.mark.parametrize(
    ("name", "params", "n_features", "n_classes"),
    [
        ("moons", {"n_samples": 300, "noise": 0.1}, 2, 2),
        ("circles", {"n_samples": 300}, 2, 2),
        ("spirals", {"n_samples": 301, "n_classes": 3}, 2, 3),
        (
            "classification",
            {"n_samples": 200, "n_features": 8, "n_informative": 4, "n_classes": 4},
            8,
            4,
        ),
        ("mnist1d", {"num_samples": 400}, 40, 10),
    ],
)
def test_generated_datasets(name, params, n_features, n_classes):
    data = load_dataset(DatasetConfig(name=name, params=params))
    assert data.n_features == n_features and data.n_classes == n_classes
    n = params.get("n_samples", params.get("num_samples"))
    assert len(data.X_train) + len(data.X_val) + len(data.X_test) == n


def test_regression_datasets_standardise_targets():
    data = load_dataset(DatasetConfig(name="diabetes"), loss="squared_error")
    assert data.task == "regression" and data.n_classes is None and data.n_outputs == 1
    assert abs(data.y_train.mean()) < 1e-9 and abs(data.y_train.std() - 1) < 1e-9
    reg = load_dataset(
        DatasetConfig(name="regression", params={"n_samples": 100}), loss="squared_error"
    )
    assert reg.y_train.dtype == np.float64


def test_split_is_deterministic_across_processes_and_depends_on_split_seed():
    cfg = DatasetConfig(name="wine", split_seed=5)
    data = load_dataset(cfg)
    code = (
        "import json,sys,hashlib; from dnnframe.datasets import load_dataset, DatasetConfig;"
        "d = load_dataset(DatasetConfig.model_validate(json.loads(sys.argv[1])));"
        "print(hashlib.sha256(d.X_train.tobytes() + d.y_test.tobytes()).hexdigest())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(cfg.model_dump())],
        capture_output=True,
        text=True,
        check=True,
    )
    import hashlib

    assert (
        out.stdout.strip()
        == hashlib.sha256(data.X_train.tobytes() + data.y_test.tobytes()).hexdigest()
    )
    other = load_dataset(DatasetConfig(name="wine", split_seed=6))
    assert not np.array_equal(other.X_test, data.X_test)


def test_stratified_split_keeps_every_class_in_test():
    data = load_dataset(DatasetConfig(name="iris", test_fraction=0.2, validation_fraction=0.1))
    assert np.bincount(data.y_test).tolist() == [10, 10, 10]


def test_fingerprint_is_content_based(tmp_path):
    a = dataset_fingerprint(DatasetConfig(name="moons", params={"n_samples": 100}))
    assert a == dataset_fingerprint(DatasetConfig(name="moons", params={"n_samples": 100}))
    assert a != dataset_fingerprint(DatasetConfig(name="moons", params={"n_samples": 101}))
    f = tmp_path / "d.csv"
    f.write_text("x1,x2,label\n1,2,a\n3,4,b\n")
    cfg = DatasetConfig(name="csv", path=str(f), label_column="label")
    before = dataset_fingerprint(cfg)
    f.write_text("x1,x2,label\n1,2,a\n3,5,b\n")
    assert dataset_fingerprint(cfg) != before


def test_csv_dataset_end_to_end(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["f1,species,f2"] + [
        f"{rng.normal():.4f},{'cat' if i % 2 else 'dog'},{rng.normal():.4f}" for i in range(60)
    ]
    f = tmp_path / "pets.csv"
    f.write_text("\n".join(rows) + "\n")
    data = load_dataset(DatasetConfig(name="csv", path=str(f), label_column="species"))
    assert data.n_features == 2 and data.n_classes == 2
    assert len(data.X_train) + len(data.X_val) + len(data.X_test) == 60


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a,b\n1,x\n", "label column 'y' is not in the CSV header"),
        ("a,y\n1,0\nfoo,1\n", "row 3, column 'a': feature values must be numeric, but got 'foo'"),
        ("a,y\n1,0\n2\n", "row 3 has 1 fields"),
        ("a,y\n", "at least one data row"),
        ("y\n1\n", "at least one feature column"),
        ("a,a,y\n1,2,3\n", "duplicate column names"),
        ("a,y\nnan,1\n", "must be finite"),
        ("a,y\n1," + "9" * 200_000 + "\n", "CSV cannot be parsed: field larger than field limit"),
    ],
)
def test_csv_errors_name_row_and_column(text, fragment):
    with pytest.raises(DatasetError) as info:
        parse_csv(text.encode(), "y")
    assert fragment in str(info.value)


def test_missing_csv_and_unknown_upload(tmp_path, monkeypatch):
    monkeypatch.setenv("DNNFRAME_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(DatasetConfig(name="csv", path=str(tmp_path / "nope.csv"), label_column="y"))
    with pytest.raises(DatasetError, match="uploaded dataset 'abcdef0123' not found"):
        load_dataset(DatasetConfig(name="csv", upload="abcdef0123", label_column="y"))


def test_list_datasets_covers_registry():
    names = {d["name"] for d in list_datasets()}
    assert names == {*REGISTRY, "csv"}
    moons = next(d for d in list_datasets() if d["name"] == "moons")
    assert "noise" in moons["params"]


def test_cache_follows_a_csv_edited_in_place(tmp_path):
    # a long-lived worker must train on the file as it is now, as the trial id (content
    # fingerprint) says, not on what it cached for the same path earlier
    f = tmp_path / "d.csv"
    f.write_text("x,y\n" + "".join(f"{i},{i % 2}\n" for i in range(20)))
    cfg = DatasetConfig(name="csv", path=str(f), label_column="y", standardize=False)
    before = load_dataset(cfg)
    assert load_dataset(cfg) is before  # unchanged content: served from the cache
    f.write_text("x,y\n" + "".join(f"{100 + i},{i % 2}\n" for i in range(20)))
    after = load_dataset(cfg)
    assert after.fingerprint == dataset_fingerprint(cfg) != before.fingerprint
    assert after.X_train.min() >= 100 and before.X_train.max() < 20


def test_dataset_errors_are_wrapped_once(monkeypatch):
    monkeypatch.setitem(sys.modules, "mnist1d", None)  # the optional extra is not installed
    monkeypatch.setitem(sys.modules, "mnist1d.data", None)
    with pytest.raises(DatasetError) as info:
        load_dataset(DatasetConfig(name="mnist1d", params={"num_samples": 321}))
    assert (
        str(info.value)
        == "dataset 'mnist1d' needs the optional extra: pip install 'dnnframe[mnist1d]'"
    )


def test_generator_rule_errors_name_the_dataset_once():
    cfg = DatasetConfig(
        name="classification", params={"n_features": 2, "n_informative": 2, "n_redundant": 1}
    )
    with pytest.raises(DatasetError) as info:
        load_dataset(cfg)
    assert str(info.value) == (
        "dataset 'classification': n_informative + n_redundant <= n_features must hold, "
        "but got 2 + 1 > 2"
    )


@pytest.mark.parametrize(
    ("text", "label", "field", "fragment"),
    [
        (b"", None, "file", "CSV file is empty"),
        (b"\xff\xfe", None, "file", "UTF-8"),
        (b"a,b\n", None, "file", "at least one data row"),
        (b"a\n1\n", None, "file", "at least one feature column"),
        (b"a,b\n1,2\n3\n", None, "file", "row 3 has 1 fields"),
        (b"a,b,c\nx,y,1\n", None, "file", "'a', 'b' are not"),
        (b"a,b\n1,2\n", "c", "label_column", "label column 'c' is not in the CSV header"),
        (b"a,b\nx,1\n", "b", "file", "row 2, column 'a': feature values must be numeric"),
    ],
)
def test_validate_csv_bytes_names_field_and_rule(text, label, field, fragment):
    with pytest.raises(DatasetError) as info:
        validate_csv_bytes(text, label)
    assert info.value.field == field and fragment in str(info.value)


def test_validate_csv_bytes_summarises_a_good_file():
    summary = validate_csv_bytes(b"f1,kind,f2\n1,cat,2\n3,dog,4\n\n")
    assert (summary.header, summary.rows, summary.label_candidates) == (
        ["f1", "kind", "f2"],
        2,
        ["kind"],
    )
    numeric = validate_csv_bytes(b"a,b\n1,2\n")
    assert numeric.label_candidates == ["a", "b"]
    chosen = validate_csv_bytes(b"a,b\n1,x\n", label_column="b")
    assert (chosen.rows, chosen.label_candidates) == (1, ["b"])
    with pytest.raises(DatasetError, match="more than the limit of 4"):
        validate_csv_bytes(b"a,b\n1,2\n", max_bytes=4)
