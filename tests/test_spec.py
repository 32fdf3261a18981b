"""Specs: every search-space type, expansion order and counts, ids, and every bad input."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from dnnframe.exceptions import SpecError
from dnnframe.spec import (
    TrialConfig,
    count_trials,
    expand,
    expand_with_ids,
    load_spec,
    parse_spec,
    parse_spec_text,
    spec_json_schema,
    trial_id,
)


def spec(**sections):
    doc = {"dataset": {"name": "iris"}}
    doc.update(sections)
    return doc


def errors_of(doc) -> list[dict[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    return info.value.errors


def paths_of(doc) -> list[str]:
    return [e["path"] for e in errors_of(doc)]


# --------------------------------------------------------------------------- spaces
def test_plain_values_give_one_trial():
    s = parse_spec(spec(model={"hidden_layers": 3, "width": 16}))
    assert count_trials(s) == 1
    [config] = list(expand(s))
    assert config.model.hidden_layers == 3 and config.model.widths == [16, 16, 16]


def test_grid_choice_int_range_are_crossed_in_sorted_path_order():
    s = parse_spec(
        spec(
            model={
                "hidden_layers": {"int_range": [1, 5, 2]},
                "activation": {"choice": ["relu", "tanh"]},
            },
            training={"optimizer": {"grid": ["sgd", "adam"]}},
            search={"seeds": [7, 9]},
        )
    )
    got = [
        (c.model.activation, c.model.hidden_layers, c.training.optimizer, c.seed) for c in expand(s)
    ]
    assert count_trials(s) == len(got) == 3 * 2 * 2 * 2
    # model.activation < model.hidden_layers < training.optimizer; the last varies fastest
    assert got[:5] == [
        ("relu", 1, "sgd", 7),
        ("relu", 1, "sgd", 9),
        ("relu", 1, "adam", 7),
        ("relu", 1, "adam", 9),
        ("relu", 3, "sgd", 7),
    ]
    assert got[-1] == ("tanh", 5, "adam", 9)


def test_key_order_changes_neither_the_experiment_nor_its_trials():
    a = {
        "dataset": "iris",
        "model": {"dropout": {"uniform": [0, 0.5]}, "width": {"choice": [4, 8, 16]}},
        "search": {"method": "random", "num_samples": 3},
    }
    b = {
        "search": a["search"],
        "model": {"width": {"choice": [4, 8, 16]}, "dropout": {"uniform": [0, 0.5]}},
        "dataset": "iris",
    }
    sa, sb = parse_spec(a), parse_spec(b)
    assert sa.experiment_id == sb.experiment_id
    assert [c.model_dump() for c in expand(sa)] == [c.model_dump() for c in expand(sb)]


def test_int_range_includes_end_on_step_and_defaults_step_1():
    s = parse_spec(spec(model={"hidden_layers": {"int_range": [2, 4]}}))
    assert [c.model.hidden_layers for c in expand(s)] == [2, 3, 4]
    s = parse_spec(spec(model={"hidden_layers": {"int_range": [0, 9, 3]}}))
    assert [c.model.hidden_layers for c in expand(s)] == [0, 3, 6, 9]


def test_random_search_samples_within_bounds_deterministically():
    doc = spec(
        model={"hidden_layers": {"grid": [1, 2]}, "dropout": {"uniform": [0.0, 0.5]}},
        training={
            "learning_rate": {"loguniform": [1e-4, 1e-1]},
            "optimizer": {"choice": ["sgd", "adam"]},
        },
        search={"method": "random", "num_samples": 25, "seeds": 2, "random_seed": 3},
    )
    s = parse_spec(doc)
    configs = list(expand(s))
    assert count_trials(s) == len(configs) == 2 * 25 * 2
    assert all(0.0 <= c.model.dropout <= 0.5 for c in configs)
    assert all(1e-4 <= c.training.learning_rate <= 1e-1 for c in configs)
    assert {c.training.optimizer for c in configs} == {"sgd", "adam"}
    # seeds repeat the same sample
    assert configs[0].training.learning_rate == configs[1].training.learning_rate
    assert configs[0].seed == 0 and configs[1].seed == 1
    # log scale: about half the samples below the geometric midpoint 10**-2.5
    low = sum(c.training.learning_rate < 10**-2.5 for c in configs[::2])
    assert 10 <= low <= 40
    again = [c.model_dump() for c in expand(parse_spec(doc))]
    assert again == [c.model_dump() for c in configs]
    other = [
        c.model_dump()
        for c in expand(parse_spec({**doc, "search": {**doc["search"], "random_seed": 4}}))
    ]
    assert other != again


def test_spaces_inside_dataset_params_and_width_lists():
    s = parse_spec(
        {
            "dataset": {
                "name": "moons",
                "params": {"noise": {"grid": [0.1, 0.3]}, "n_samples": 200},
            },
            "model": {"hidden_layers": 2, "width": {"grid": [[8, 4], [16, 16]]}},
        }
    )
    got = [(c.dataset.params["noise"], c.model.widths) for c in expand(s)]
    assert got == [(0.1, [8, 4]), (0.1, [16, 16]), (0.3, [8, 4]), (0.3, [16, 16])]


def test_dataset_shorthand_and_grid_over_datasets():
    s = parse_spec({"dataset": "wine"})
    assert next(expand(s)).dataset.name == "wine"
    s = parse_spec({"dataset": {"name": {"grid": ["iris", "wine", "digits"]}}})
    assert [c.dataset.name for c in expand(s)] == ["iris", "wine", "digits"]


def test_count_matches_expand_for_large_grid_without_expanding():
    s = parse_spec(
        spec(
            model={
                "hidden_layers": {"int_range": [0, 2000]},
                "width": {"grid": list(range(1, 41))},
            },
            search={"seeds": 2, "max_trials": 1_000_000},
        )
    )
    assert count_trials(s) == 2001 * 40 * 2


def test_huge_int_range_is_refused_without_allocating():
    errs = errors_of(spec(model={"width": {"int_range": [1, 10**12]}}))
    assert errs[0] == {
        "path": "model.width.int_range",
        "message": "int_range has 1000000000000 values, more than the limit of 10000000",
    }
    errs = errors_of(spec(model={"hidden_layers": {"int_range": [0, 10**20]}}))  # past 2**63
    assert errs[0]["path"] == "model.hidden_layers.int_range"
    errs = errors_of(spec(model={"width": {"int_range": [1, 20000]}}))
    assert errs[0]["path"] == "model.width.int_range[1]"
    assert "less than or equal to 16384" in errs[0]["message"]
    errs = errors_of(
        spec(model={"hidden_layers": {"int_range": [0, 2000]}, "width": {"int_range": [1, 16384]}})
    )
    assert "more than the cap" in errs[0]["message"]


def test_cap_refuses_large_sweeps_before_anything_is_stored():
    doc = spec(model={"hidden_layers": {"int_range": [0, 2000]}, "width": {"int_range": [1, 100]}})
    errs = errors_of(doc)
    assert errs[0]["path"] == "search"
    assert "200100 trials" in errs[0]["message"] and "100000" in errs[0]["message"]
    small_cap = spec(model={"hidden_layers": {"grid": [1, 2, 3]}}, search={"max_trials": 2})
    assert "cap of 2" in errors_of(small_cap)[0]["message"]


# --------------------------------------------------------------------------- ids
def test_trial_id_is_stable_and_sensitive():
    config = TrialConfig.model_validate(
        {"dataset": {"name": "iris"}, "model": {"hidden_layers": 2}, "seed": 1}
    )
    a = trial_id(config, "fp", "1")
    assert a == trial_id(TrialConfig.model_validate(json.loads(config.canonical_json())), "fp", "1")
    assert a != trial_id(config, "fp2", "1")
    assert a != trial_id(config, "fp", "2")
    assert a != trial_id(config.model_copy(update={"seed": 2}), "fp", "1")
    changed = TrialConfig.model_validate(
        {
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 2},
            "training": {"learning_rate": 0.0011},
            "seed": 1,
        }
    )
    assert a != trial_id(changed, "fp", "1")


def test_trial_ids_equal_across_processes():
    doc = spec(
        model={"hidden_layers": {"grid": [1, 2]}, "dropout": {"uniform": [0, 0.3]}},
        search={"method": "random", "num_samples": 3, "seeds": 2},
    )
    here = [tid for tid, _ in expand_with_ids(parse_spec(doc))]
    code = (
        "import json,sys; from dnnframe.spec import parse_spec, expand_with_ids; "
        "print(json.dumps([t for t, _ in expand_with_ids(parse_spec(json.loads(sys.argv[1])))]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(doc)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert json.loads(out.stdout) == here
    assert len(set(here)) == len(here) == 12


def test_known_trial_id_is_pinned():
    # Pinned so an accidental change of hashing (key order, float format) is caught: ids are
    # stored, and a changed id would retrain every finished trial.
    config = TrialConfig.model_validate({"dataset": {"name": "iris"}, "seed": 0})
    assert trial_id(config, "iris-abc", "1") == "t-93ac6eba2438ecf0492e3aaf"
    assert config.canonical_json().startswith('{"dataset":{"label_column":null,"name":"iris"')


def test_experiment_id_is_stable_for_same_spec():
    a = parse_spec(spec(model={"hidden_layers": {"grid": [1, 2]}}))
    b = parse_spec(json.loads(json.dumps(spec(model={"hidden_layers": {"grid": [1, 2]}}))))
    assert a.experiment_id == b.experiment_id
    assert (
        a.experiment_id != parse_spec(spec(model={"hidden_layers": {"grid": [1, 3]}})).experiment_id
    )


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("doc", "path", "fragment"),
    [
        (spec(modle={}), "modle", "unknown key"),
        (spec(model={"hidden_layer": 2}), "model.hidden_layer", "unknown key"),
        (spec(model={"hidden_layers": "many"}), "model.hidden_layers", "valid integer"),
        (spec(model={"hidden_layers": -1}), "model.hidden_layers", "greater than or equal to 0"),
        (spec(model={"hidden_layers": 2001}), "model.hidden_layers", "less than or equal to 2000"),
        (spec(model={"activation": "swish"}), "model.activation", "'swish'"),
        (
            spec(model={"activation": {"grid": ["relu", "tanh", "bogus"]}}),
            "model.activation.grid[2]",
            "'bogus'",
        ),
        (
            spec(model={"hidden_layers": {"grid": []}}),
            "model.hidden_layers.grid",
            "at least one value",
        ),
        (
            spec(model={"hidden_layers": {"choice": []}}),
            "model.hidden_layers.choice",
            "at least one value",
        ),
        (
            spec(model={"hidden_layers": {"int_range": [5, 1]}}),
            "model.hidden_layers.int_range",
            "low <= high must hold, but got low=5, high=1",
        ),
        (
            spec(model={"hidden_layers": {"int_range": [1, 5, 0]}}),
            "model.hidden_layers.int_range[2]",
            "step must be > 0",
        ),
        (
            spec(model={"hidden_layers": {"int_range": [1.5, 5]}}),
            "model.hidden_layers.int_range",
            "integers",
        ),
        (
            spec(
                training={"learning_rate": {"loguniform": [0.1, 0.01]}}, search={"method": "random"}
            ),
            "training.learning_rate.loguniform",
            "low <= high must hold",
        ),
        (
            spec(training={"learning_rate": {"loguniform": [0, 0.1]}}, search={"method": "random"}),
            "training.learning_rate.loguniform",
            "low > 0",
        ),
        (
            spec(training={"learning_rate": {"uniform": [0.1, 0.2]}}),
            "training.learning_rate.uniform",
            "needs search.method: random",
        ),
        (spec(training={"learning_rate": float("nan")}), "training.learning_rate", "finite"),
        (spec(training={"learning_rate": float("inf")}), "training.learning_rate", "finite"),
        (
            spec(training={"learning_rate": {"grid": [0.1, float("inf")]}}),
            "training.learning_rate.grid[1]",
            "finite",
        ),
        (spec(training={"learning_rate": -0.1}), "training.learning_rate", "greater than 0"),
        (spec(training={"optimizer": "adagrad"}), "training.optimizer", "'adagrad'"),
        (spec(training={"batch_size": 0}), "training.batch_size", "greater than or equal to 1"),
        (
            spec(training={"early_stopping": {"metric": "val_loss", "patience": 0}}),
            "training.early_stopping.patience",
            "greater than or equal to 1",
        ),
        ({"dataset": {"name": "mnist"}}, "dataset", "unknown dataset 'mnist'"),
        (
            {"dataset": {"name": {"grid": ["iris", "nope"]}}},
            "dataset.name.grid[1]",
            "unknown dataset 'nope'",
        ),
        ({"dataset": {"name": "moons", "params": {"noize": 0.1}}}, "dataset", "params.noize"),
        ({"dataset": {"name": "csv", "path": "x.csv"}}, "dataset", "label_column"),
        (
            {"dataset": {"name": "diabetes"}},
            "",
            "regression task and needs model.loss: squared_error",
        ),
        (
            spec(model={"hidden_layers": 2, "width": [4, 4, 4]}),
            "model",
            "one entry per hidden layer",
        ),
        (spec(model={"dropout": 1.0}), "model.dropout", "less than 1"),
        (
            spec(model={"hidden_layers": 2000, "width": 16384}),
            "model",
            "more than the limit of 50,000,000",
        ),
        (
            spec(model={"hidden_layers": {"grid": [2, 500]}, "width": 4096}),
            "model.hidden_layers.grid[1]",
            "weights",
        ),
        # rules broken only by a combination of values, each fine alone
        (
            spec(model={"hidden_layers": {"grid": [1, 2000]}, "width": {"grid": [4, 16384]}}),
            "model",
            "for the combination model.hidden_layers=2000, model.width=16384",
        ),
        (
            {
                "dataset": {
                    "name": "iris",
                    "test_fraction": {"grid": [0.2, 0.6]},
                    "validation_fraction": {"grid": [0.1, 0.35]},
                }
            },
            "dataset",
            "must be < 0.9",
        ),
        (
            spec(model={"hidden_layers": {"uniform": [1, 3]}}, search={"method": "random"}),
            "model.hidden_layers.uniform",
            "valid integer",
        ),
        (
            {"dataset": {"name": "csv", "path": "a\x00b.csv", "label_column": "y"}},
            "dataset.path",
            "control characters",
        ),
        (spec(search={"method": "bayes"}), "search.method", "'bayes'"),
        (spec(search={"seeds": []}), "search.seeds", "must not be empty"),
        (spec(search={"seeds": 0}), "search.seeds", "greater than or equal to 1"),
        (
            spec(model={"hidden_layers": {"grid": [1, {"grid": [2]}]}}),
            "model.hidden_layers.grid[1]",
            "cannot be nested",
        ),
        (
            spec(model={"activation": {"grid": ["relu", "lambda x: x"]}}),
            "model.activation.grid[1]",
            "'lambda x: x'",
        ),
        (spec(name="line\nbreak"), "name", "control characters"),
    ],
)
def test_bad_input_names_path_and_rule(doc, path, fragment):
    errs = errors_of(doc)
    matching = [e for e in errs if e["path"] == path]
    assert matching, f"no error at {path!r}: {errs}"
    assert any(fragment in e["message"] for e in matching), matching


def test_every_error_is_reported_at_once():
    errs = errors_of(
        spec(model={"hidden_layers": -1, "activation": "nope"}, training={"optimizer": "x"})
    )
    assert {e["path"] for e in errs} >= {
        "model.hidden_layers",
        "model.activation",
        "training.optimizer",
    }


def test_not_a_mapping():
    assert errors_of([1, 2])[0]["message"].startswith("a spec must be a mapping")


def test_yaml_python_tags_are_refused(tmp_path):
    bad = tmp_path / "evil.yaml"
    bad.write_text("dataset: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(SpecError) as info:
        load_spec(bad)
    assert str(bad) in str(info.value) and "not valid YAML" in str(info.value)


def test_load_spec_names_file_and_key(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("dataset: iris\nmodel:\n  activation: {grid: [relu, nope]}\n")
    with pytest.raises(SpecError) as info:
        load_spec(f)
    assert f"{f}: model.activation.grid[1]:" in str(info.value)
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "missing.yaml")
    assert str(info.value) == f"{tmp_path / 'missing.yaml'}: spec file not found"
    (tmp_path / "broken.yaml").write_text("dataset: [iris\n")
    with pytest.raises(SpecError, match="line 2"):
        load_spec(tmp_path / "broken.yaml")


def test_json_schema_exports():
    schema = spec_json_schema()
    assert schema["title"] == "ExperimentSpec"
    assert "ModelConfig" in schema["$defs"]
    act = schema["$defs"]["ModelConfig"]["properties"]["activation"]
    assert "selu" in json.dumps(act)
    json.dumps(schema)  # plain JSON


def test_example_specs_are_valid():
    from pathlib import Path

    files = sorted(Path(__file__).resolve().parents[1].glob("experiments/**/*.yaml"))
    assert files, "experiments/ has no example specs"
    for f in files:
        assert count_trials(load_spec(f)) >= 1


def test_regression_defaults_objective_to_test_loss_and_refuses_accuracy():
    s = parse_spec({"dataset": "diabetes", "model": {"loss": "squared_error"}})
    assert (s.search.objective.metric, s.search.objective.mode) == ("test_loss", "min")
    assert s.experiment_id == parse_spec(s.to_dict()).experiment_id
    errs = errors_of(
        {
            "dataset": "diabetes",
            "model": {"loss": "squared_error"},
            "search": {"objective": {"metric": "test_accuracy"}},
        }
    )
    assert errs[0]["path"] == "search.objective.metric" and "no accuracy" in errs[0]["message"]
    # squared error on a classification dataset still has an accuracy
    assert (
        parse_spec({"dataset": "iris", "model": {"loss": "squared_error"}}).search.objective.metric
        == "test_accuracy"
    )


def test_csv_path_in_a_spec_file_is_relative_to_the_file_and_must_exist(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.csv").write_text("x,y\n1,a\n2,b\n")
    f = tmp_path / "data" / "spec.yaml"
    f.write_text("dataset: {name: csv, path: d.csv, label_column: y}\n")
    monkeypatch.chdir(tmp_path)  # not the spec's folder
    s = load_spec(f)
    assert s.dataset["path"] == str(tmp_path / "data" / "d.csv")
    f.write_text("dataset: {name: csv, path: {grid: [d.csv, missing.csv]}, label_column: y}\n")
    with pytest.raises(SpecError) as info:
        load_spec(f)
    assert info.value.errors == [
        {
            "path": "dataset.path",
            "message": f"CSV file not found: {tmp_path / 'data' / 'missing.csv'}",
        }
    ]


def test_deeply_nested_documents_are_refused_cleanly():
    deep: object = 1
    for _ in range(5000):  # deeper than Python's recursion limit
        deep = [deep]
    errs = errors_of({"dataset": "iris", "model": {"width": {"grid": [deep]}}})
    assert errs[0]["path"] == "" and "nested more than 32 levels" in errs[0]["message"]


# --------------------------------------------------------------------------- free text
@pytest.mark.parametrize(
    "text",
    ["compile time vs depth", "eval(x) of import lambda", "${HOME} `ls`", "__init__ vs open(file)"],
)
def test_names_and_descriptions_are_text_not_code(text):
    s = parse_spec(spec(name=text, description=text + "\nsecond line"))
    assert (s.name, s.description) == (text, text + "\nsecond line")


# --------------------------------------------------------------------------- unknown keys
def test_misspelt_key_holding_a_space_is_reported_once_with_a_suggestion():
    errs = errors_of(spec(model={"hiden_layers": {"grid": [1, 2, 4]}}))
    assert errs == [
        {
            "path": "model.hiden_layers",
            "message": "unknown key (not part of the spec format); did you mean 'hidden_layers'?",
        }
    ]


@pytest.mark.parametrize(
    ("doc", "path", "suggestion"),
    [
        ({**spec(), "modle": {}}, "modle", "'model'"),
        (spec(model={"activaton": "relu"}), "model.activaton", "'activation'"),
        (
            spec(training={"early_stopping": {"patiense": 3}}),
            "training.early_stopping.patiense",
            "'patience'",
        ),
        (
            spec(training={"early_stopping": {"grid": [{"patience": 3}, {"patiense": 3}]}}),
            "training.early_stopping.grid[1].patiense",
            "'patience'",
        ),
        (spec(search={"num_sample": 3}), "search.num_sample", "'num_samples'"),
        (
            {"dataset": {"name": "iris", "lable_column": "y"}},
            "dataset.lable_column",
            "'label_column'",
        ),
    ],
)
def test_every_unknown_key_suggests_the_closest_known_one(doc, path, suggestion):
    errs = [e for e in errors_of(doc) if e["path"] == path]
    assert len(errs) == 1, errors_of(doc)
    assert (
        errs[0]["message"]
        == f"unknown key (not part of the spec format); did you mean {suggestion}?"
    )


def test_unknown_key_with_nothing_close_has_no_suggestion():
    errs = errors_of(spec(model={"zzzz": 1}))
    assert errs == [{"path": "model.zzzz", "message": "unknown key (not part of the spec format)"}]


@pytest.mark.parametrize(
    "doc, path, suggestion",
    [
        ({"dataset": "iris", "a-b": 1}, "a-b", None),
        ({"dataset": "iris", "x-note": 1}, "x-note", None),
        ({"dataset": "iris", "a[0]": 1}, "['a[0]']", None),
        ({"dataset": "iris", "a.b": 1}, "['a.b']", None),
        ({"dataset": "iris", "wïdth": 1}, "wïdth", None),
        (spec(model={"drop-out": 0.1}), "model.drop-out", "'dropout'"),
        (spec(model={"width[1]": 8}), "model['width[1]']", "'width'"),
        (
            spec(training={"early_stopping": {"pa-tience": 3}}),
            "training.early_stopping.pa-tience",
            "'patience'",
        ),
    ],
)
def test_unknown_keys_spelt_like_paths_are_named_where_they_are(doc, path, suggestion):
    errs = [e for e in errors_of(doc) if e["path"] == path]
    assert len(errs) == 1, errors_of(doc)
    assert errs[0]["message"] == "unknown key (not part of the spec format)" + (
        f"; did you mean {suggestion}?" if suggestion else ""
    )


def test_validate_names_an_odd_key_of_a_yaml_file(tmp_path):
    f = tmp_path / "noted.yaml"
    f.write_text("dataset: iris\nx-note: 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "dnnframe.cli", "validate", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{f}: x-note: unknown key" in done.stderr


def test_an_invalid_top_level_field_hides_no_other_error():
    doc = spec(
        model={"activation": "nope", "width": -1, "hidden_layers": {"grid": [1, "x"]}},
        training={"optimizer": "x", "learning_rate": -1},
        search={"seeds": "many"},
    )
    doc["name"] = "n" * 300
    assert {e["path"] for e in errors_of(doc)} == {
        "name",
        "search.seeds",
        "model.activation",
        "model.width",
        "model.hidden_layers.grid[1]",
        "training.optimizer",
        "training.learning_rate",
    }


def test_a_field_set_aside_adds_no_error_of_its_own():
    # the objective is set aside; its default (accuracy) must not be blamed on a regression
    doc = {
        "dataset": "diabetes",
        "model": {"loss": "squared_error"},
        "search": {"objective": {"metric": "bogus"}},
    }
    assert [e["path"] for e in errors_of(doc)] == ["search.objective.metric"]


def test_a_json_spec_is_read_by_the_json_parser(tmp_path, monkeypatch):
    import yaml

    def no_yaml(*args, **kwargs):
        raise AssertionError("a JSON document went to the YAML parser")

    grid = tmp_path / "grid.json"
    grid.write_text(
        json.dumps(
            {
                "dataset": "iris",
                "learning_rate_note": 1e-3,
                "model": {"width": {"grid": list(range(1, 600_001))}},
            }
        )
    )
    monkeypatch.setattr(yaml, "load", no_yaml)
    data = parse_spec_text(grid.read_text())
    assert data["learning_rate_note"] == 0.001 and len(data["model"]["width"]["grid"]) == 600_000
    monkeypatch.undo()
    with pytest.raises(SpecError) as info:
        load_spec(grid)
    assert [e["path"] for e in info.value.errors] == ["learning_rate_note", "search"]
    assert "600000 trials, more than the cap of 100000" in str(info.value)
    # YAML in flow style is still YAML
    assert parse_spec_text("{dataset: iris}") == {"dataset": "iris"}


def test_unknown_dataset_and_param_suggest_close_names():
    errs = errors_of({"dataset": "mnist"})
    assert errs[0]["path"] == "dataset" and "did you mean 'mnist1d'?" in errs[0]["message"]
    errs = errors_of({"dataset": {"name": "moons", "params": {"noize": 0.1}}})
    assert errs[0]["message"] == "params.noize: unknown parameter; did you mean 'noise'?"


# --------------------------------------------------------------------------- bounded cost
def test_over_cap_grid_is_refused_before_its_values_are_checked(monkeypatch):
    # 600,000 values, each invalid: refused by the cap, so no value is looked at (what that
    # costs against the grid's size is bench/validation.py's to measure)
    from dnnframe.spec import validate

    looked_at = []
    for step in (
        "_check_listed_values",
        "_check_plain_values",
        "_check_space_values",
        "_check_combinations",
    ):
        monkeypatch.setattr(validate, step, lambda *args, _step=step: looked_at.append(_step))
    doc = spec(model={"width": {"grid": [-1] * 600_000}})
    errs = errors_of(doc)
    assert looked_at == []
    assert errs == [
        {
            "path": "search",
            "message": "the sweep has 600000 trials, more than the cap of "
            "100000 (search.max_trials); narrow the spaces or raise the cap",
        }
    ]
    # under a higher cap the same grid does reach them (stubbed here, so it goes through)
    parse_spec({**doc, "search": {"max_trials": 1_000_000}})
    assert looked_at == [
        "_check_listed_values",
        "_check_plain_values",
        "_check_space_values",
        "_check_combinations",
    ]


def test_error_listing_is_capped_at_twenty_with_the_rest_counted():
    doc = spec(model={"width": {"grid": [8, *range(-2000, 0)]}})
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    exc = info.value
    assert exc.n_errors == 2000
    assert len(exc.errors) == 21
    assert exc.errors[0]["path"] == "model.width.grid[1]"
    assert exc.errors[19]["path"] == "model.width.grid[20]"
    assert exc.errors[20] == {"path": "", "message": "… and 1980 more"}
    # passed on (a caller adding its own problems), the count stays right
    again = SpecError([{"path": "dataset.path", "message": "not accepted"}, *exc.errors])
    assert again.n_errors == 2001 and again.errors[-1]["message"] == "… and 1981 more"
    lines = str(exc).splitlines()
    assert len(lines) == 21 and lines[-1] == "… and 1980 more"


def test_large_valid_grid_is_accepted_and_counted():
    s = parse_spec(spec(model={"width": {"grid": list(range(1, 16001))}}))
    assert count_trials(s) == 16000
    assert [c.model.width for c in itertools.islice(expand(s), 3)] == [1, 2, 3]


def test_continuous_probe_inside_integer_bounds_is_not_whole():
    # [1, 3] sampled gives floats such as 1.74: an integer field must refuse the space even
    # though both bounds are whole numbers
    errs = errors_of(
        spec(training={"batch_size": {"uniform": [2, 4]}}, search={"method": "random"})
    )
    assert (
        errs[0]["path"] == "training.batch_size.uniform" and "valid integer" in errs[0]["message"]
    )


def test_listed_values_are_bounded_even_under_a_raised_cap():
    doc = spec(
        model={"width": {"grid": list(range(1, 16001))}, "activation": {"choice": ["relu"] * 5000}},
        search={"method": "random", "max_trials": 10_000_000},
    )
    errs = errors_of(doc)
    assert errs == [
        {
            "path": "",
            "message": "the spec lists 21000 values in grid and choice spaces, "
            "more than the limit of 20000; use int_range for long integer sweeps",
        }
    ]
    # an int_range of any length is checked at its ends
    ok = parse_spec(
        spec(
            model={"hidden_layers": {"int_range": [0, 2000]}},
            training={"batch_size": {"int_range": [1, 4000]}},
            search={"max_trials": 10_000_000},
        )
    )
    assert count_trials(ok) == 2001 * 4000


@pytest.mark.parametrize("yaml_value", ["!!binary /w==", "!!set {a, b}", "2020-01-01"])
def test_yaml_values_that_are_not_json_are_refused(tmp_path, yaml_value):
    f = tmp_path / "s.yaml"
    f.write_text(f"dataset: iris\nmodel:\n  width: {{grid: [4, {yaml_value}]}}\n")
    with pytest.raises(SpecError) as info:
        load_spec(f)
    assert info.value.errors[0]["path"] == "model.width.grid[1]"
    assert "must be plain JSON" in info.value.errors[0]["message"]


# --------------------------------------------------------------------------- layer designs
def test_residual_true_and_false_keep_their_meaning():
    def residual_of(value):
        return TrialConfig.model_validate(
            {"dataset": {"name": "iris"}, "model": {"residual": value}}
        ).model.residual

    assert residual_of(True) == "identity"
    assert residual_of(False) == "none"
    assert residual_of("rezero") == "rezero"


def test_trial_ids_of_configs_without_the_new_options_are_unchanged():
    # ids computed by the spec format before normalisation, scaled residuals, clipping,
    # schedules and the divergence bound existed (engine version 1): options at their
    # defaults leave a config's text, and so its id under one engine version, unchanged
    for model, old_id in (
        ({"hidden_layers": 3, "width": 8, "residual": True}, "t-3e38a6b8c3348e8ec996131f"),
        ({"hidden_layers": 3, "width": 8}, "t-ff276c6d9df28e9cf8674495"),
        (
            {"hidden_layers": 3, "width": 8, "residual": "none", "normalization": "none"},
            "t-ff276c6d9df28e9cf8674495",
        ),
    ):
        config = TrialConfig.model_validate(
            {"dataset": {"name": "iris"}, "model": model, "seed": 1}
        )
        assert trial_id(config, "fp", engine_version="1") == old_id
    new = TrialConfig.model_validate(
        {
            "dataset": {"name": "iris"},
            "seed": 1,
            "model": {"hidden_layers": 3, "width": 8, "residual": "rezero"},
        }
    )
    assert trial_id(new, "fp", engine_version="1") not in (
        "t-3e38a6b8c3348e8ec996131f",
        "t-ff276c6d9df28e9cf8674495",
    )


def test_design_options_expand_as_grids():
    doc = spec(
        model={
            "residual": {"grid": ["identity", "rezero", "scaled"]},
            "normalization": {"grid": ["none", "layer"]},
        },
        training={
            "grad_clip": 1.0,
            "lr_schedule": {"kind": "cosine", "warmup_epochs": {"grid": [0, 2]}},
        },
    )
    trials = list(expand(parse_spec(doc)))
    assert len(trials) == 12
    assert {
        (t.model.residual, t.model.normalization, t.training.lr_schedule.warmup_epochs)
        for t in trials
    } == set(itertools.product(["identity", "rezero", "scaled"], ["none", "layer"], [0, 2]))
    assert parse_spec(spec(training={"lr_schedule": "step"})).training["lr_schedule"] == "step"


@pytest.mark.parametrize(
    "model, training, path, fragment",
    [
        ({"residual": "skip"}, {}, "model.residual", "'none', 'identity', 'rezero' or 'scaled'"),
        ({"normalization": "group"}, {}, "model.normalization", "'none', 'batch' or 'layer'"),
        ({"norm_position": "pre"}, {}, "model", "norm_position: pre needs a normalization"),
        (
            {"residual_learnable": True, "residual": "identity"},
            {},
            "model",
            "residual_learnable applies to residual: scaled only",
        ),
        ({}, {"grad_clip": 0}, "training.grad_clip", "greater than 0"),
        ({}, {"lr_schedule": "linear"}, "training.lr_schedule.kind", "'none', 'cosine' or 'step'"),
        (
            {},
            {"lr_schedule": {"kind": "step", "step_factor": 2}},
            "training.lr_schedule.step_factor",
            "less than or equal to 1",
        ),
    ],
)
def test_bad_design_options_name_the_field(model, training, path, fragment):
    errors = errors_of(spec(model=model, training=training))
    assert any(e["path"] == path and fragment in e["message"] for e in errors), errors


def test_lr_schedule_factors():
    from dnnframe.spec import LrSchedule

    cosine = LrSchedule(kind="cosine", warmup_epochs=2)
    assert [round(cosine.factor(e, 6), 4) for e in range(1, 7)] == [
        0.3333,
        0.6667,
        1.0,
        0.8536,
        0.5,
        0.1464,
    ]
    step = LrSchedule(kind="step", step_epochs=2, step_factor=0.5)
    assert [step.factor(e, 10) for e in range(1, 6)] == [1.0, 1.0, 0.5, 0.5, 0.25]
    assert LrSchedule().factor(7, 10) == 1.0


def test_json_schema_lists_the_design_options():
    schema = spec_json_schema()
    model = schema["$defs"]["ModelConfig"]["properties"]
    assert "rezero" in json.dumps(model["residual"])
    assert "layer" in json.dumps(model["normalization"])
    training = schema["$defs"]["TrainingConfig"]["properties"]
    assert "grad_clip" in training and "lr_schedule" in training
    assert "cosine" in json.dumps(schema["$defs"]["LrSchedule"])


# --------------------------------------------------------------------------- JSON Schema
AGREEMENT = [
    # (document, accepted by the server) — the schema must say the same
    ({"dataset": {"name": "iris"}, "model": {"hidden_layers": {"grid": [1, 2]}}}, True),
    ({"dataset": {}}, False),
    ({"dataset": "iris", "model": {"residual": True}}, True),
    ({"dataset": "iris", "training": {"lr_schedule": "cosine"}}, True),
    (
        {"dataset": "iris", "training": {"lr_schedule": {"grid": ["cosine", {"kind": "step"}]}}},
        True,
    ),
    ({"dataset": {"name": "moons", "params": {"n_samples": {"grid": [100, 200]}}}}, True),
    ({"dataset": {"name": "moons", "params": {"grid": [{}]}}}, False),
    ({"dataset": "iris", "model": {"grid": [{"width": 4}, {"width": 8}]}}, True),
    ({"dataset": "iris", "model": {"width": {"int_range": [4, 16, 4]}}}, True),
    ({"dataset": "iris", "model": {"activation": "swish"}}, False),
    ({"dataset": "iris", "model": {"hidden_layers": 2001}}, False),
    ({"dataset": "nosuch"}, False),
    ({"dataset": "iris", "name": "a\nb"}, False),
    ({"dataset": "iris", "description": "a\nb"}, True),
    ({"dataset": "iris", "training": {"learning_rate": "0.1"}}, False),
    ({"dataset": "iris", "model": {"hidden_layers": True}}, False),
    ({"dataset": "iris", "model": {"hidden_layers": 2.0}}, True),
    ({"dataset": "iris", "training": {"early_stopping": {"patience": {"grid": [1, 2]}}}}, True),
    ({"dataset": "iris", "model": {"surprise": 1}}, False),
    ({"dataset": {"name": "csv", "upload": "not-an-id", "label_column": "y"}}, False),
    ({"dataset": {"name": "iris", "upload": ""}}, True),
]


@pytest.mark.parametrize("doc, accepted", AGREEMENT, ids=[json.dumps(d) for d, _ in AGREEMENT])
def test_the_json_schema_accepts_what_json_specs_pass(doc, accepted):
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    validator = jsonschema_rs.Draft202012Validator(spec_json_schema(server_files=False))
    assert validator.is_valid(doc) is accepted
    if accepted:
        parse_spec(doc, json_types=True)
    else:
        with pytest.raises(SpecError):
            parse_spec(doc, json_types=True)


def test_json_types_refuse_what_a_file_may_spell_as_text():
    doc = spec(training={"learning_rate": "1e-3"}, model={"hidden_layers": True})
    parse_spec(doc)  # YAML reads 1e-3 as a string: files stay lax
    with pytest.raises(SpecError) as info:
        parse_spec(doc, json_types=True)
    assert {e["path"] for e in info.value.errors} == {
        "training.learning_rate",
        "model.hidden_layers",
    }
    # 2.0 is an integer in JSON; the spec keeps what was written, so its id is the same
    whole = spec(model={"hidden_layers": 2.0, "width": {"int_range": [4.0, 8]}})
    assert parse_spec(whole, json_types=True).experiment_id == parse_spec(whole).experiment_id


def test_web_json_schema_leaves_out_server_files():
    assert "path" in spec_json_schema()["$defs"]["DatasetConfig"]["properties"]
    assert (
        "path" not in spec_json_schema(server_files=False)["$defs"]["DatasetConfig"]["properties"]
    )


def test_a_space_over_the_whole_training_section_takes_search_max_epochs():
    doc = spec(
        training={"grid": [{"max_epochs": 3}, {"learning_rate": 0.1}]}, search={"max_epochs": 7}
    )
    assert [t.training.max_epochs for t in expand(parse_spec(doc))] == [7, 7]
