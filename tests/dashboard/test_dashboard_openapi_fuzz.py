"""Schemathesis against /api/v1/openapi.json: generated requests never cause a server error.

Each operation of the document is one test, fed ``MAX_EXAMPLES`` generated requests
(schemathesis' pytest loader is driven by hand: its lazy-fixture path does not run on this
pytest).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
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
