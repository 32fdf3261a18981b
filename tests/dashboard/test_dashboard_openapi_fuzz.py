"""Schemathesis against /api/v1/openapi.json: generated requests never cause a server error.

Each operation of the document is one test, fed ``MAX_EXAMPLES`` generated requests
(schemathesis' pytest loader is driven by hand: its lazy-fixture path does not run on this
pytest). The operations that take a spec are also fed specs with keys the format does not
know, spelt with the characters paths are made of (``-``, ``[``, ``.``) and beyond ASCII,
at every level: the schema's own examples rarely spell a key like that.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from dashboard.openapi import openapi_document

MAX_EXAMPLES = 25
OPERATIONS = [(path, method) for path, ops in openapi_document()["paths"].items() for method in ops]


@pytest.mark.parametrize(
    "path, method", OPERATIONS, ids=[f"{m.upper()} {p}" for p, m in OPERATIONS]
)
def test_no_server_errors(make_app, path, method):
    app = make_app()
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
    operation = schema[path][method]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case):
        case.call_and_validate(checks=[not_a_server_error])

    check()


SPEC_OPERATIONS = [(path, method) for path, method in OPERATIONS
                   if path in ("/validate", "/experiments") and method == "post"]
ODD_KEYS = st.text(alphabet=st.sampled_from("a-_[].0 é€\u200b'\""), min_size=1, max_size=6)
SPEC_LEVELS = (None, "model", "training", "dataset", "search")


@st.composite
def specs_with_odd_keys(draw) -> tuple[dict, tuple]:
    spec = {"name": "odd", "dataset": {"name": "iris"}, "model": {"width": 4},
            "training": {"max_epochs": 1}, "search": {"seeds": 1}}
    level = draw(st.sampled_from(SPEC_LEVELS))
    key = draw(ODD_KEYS)
    section = spec if level is None else spec[level]
    section[key] = draw(st.one_of(st.integers(), st.text(max_size=3), st.just({"grid": [1]})))
    return spec, (key,) if level is None else (level, key)


@pytest.mark.parametrize(
    "path, method", SPEC_OPERATIONS, ids=[f"{m.upper()} {p}" for p, m in SPEC_OPERATIONS]
)
def test_unknown_keys_of_any_spelling_are_refused_by_name(make_app, path, method):
    assert SPEC_OPERATIONS, "the document no longer has the spec operations"
    app = make_app()
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
    operation = schema[path][method]

    @given(drawn=specs_with_odd_keys())
    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(drawn):
        spec, at = drawn
        response = operation.Case(body=spec, media_type="application/json").call_and_validate(
            checks=[not_a_server_error])
        if at[-1] not in {"name", "width", "max_epochs", "seeds", "dataset", "model",
                          "training", "search", "description"}:
            assert response.status_code == 400, response.text
            # named where it is, the key as written (unprintable characters escaped)
            paths = [e["path"] for e in response.json()["errors"]]
            spelt = (at[-1], repr(at[-1])[1:-1])
            assert any(p.startswith(at[0] if len(at) == 2 else "") and
                       any(k in p for k in spelt) for p in paths), paths

    check()
