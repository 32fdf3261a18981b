"""Schemathesis against /api/v1/openapi.json: the document says exactly what the server does.

The runs use schemathesis' own engine (what ``schemathesis run --checks all`` runs) in process
over WSGI, with every check, the examples, coverage, fuzzing and stateful phases, and a fixed
seed and example count so a run is the same every time. The stateful phase follows the
document's links from ``POST /experiments`` to the operations taking the new id.

A few operations refuse some schema-valid requests by design, for rules over several values
that a JSON Schema cannot hold (each listed in :data:`REFUSED_ACROSS_VALUES`); for the spec
operations the check :func:`spec_refusals_are_across_values` then still fails any refusal of
a single value the document allows. The operations that take a spec are also fed specs with
keys the format does not know, spelt with the characters paths are made of (``-``, ``[``,
``.``) and beyond ASCII, at every level.
"""

from __future__ import annotations

import pytest
import schemathesis
from dashboard_support import serving
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import Failure
from schemathesis.engine import events, from_schema

MAX_EXAMPLES = 20
TOKEN = "contract-test-token"
SPEC_OPERATIONS = ("createExperiment", "validate")
SPEC_LABELS = ("POST /experiments", "POST /validate")
# operationId → why a schema-valid request may still be answered 400
REFUSED_ACROSS_VALUES = {
    "createExperiment": "the spec's rules over several values (the schema's description)",
    "validate": "the same, and the sweep form's fields, which are free text",
    "uploadDataset": "the file must be a CSV with a numeric label column",
    "listTrials": "since pages in change order: no sort but seq, no order=desc",
    "deleteExperiment": "confirm must repeat the experiment's id",
}
# Messages of a rule on one value (pydantic's and the spec's own), which the document states.
SINGLE_VALUE_MESSAGES = (
    "Input should",
    "Field required",
    "String should",
    "List should",
    "Extra inputs",
    "unknown key",
    "must not contain control characters",
)


@schemathesis.check
def spec_refusals_are_across_values(ctx, response, case):
    """A 400 to a schema-valid spec names only rules over several values."""
    meta = case.meta
    if (
        response.status_code != 400
        or meta is None
        or not meta.generation.mode.is_positive
        or case.operation.label not in SPEC_LABELS
        or case.media_type != "application/json"
    ):
        return None
    single = [
        e
        for e in response.json().get("errors", [])
        if e["message"].startswith(SINGLE_VALUE_MESSAGES)
    ]
    if single:
        raise Failure(
            operation=case.operation.label,
            title="Schema-valid value refused",
            message=f"the document allows what the server refuses: {single}",
        )
    return None


def _config(*, token: str | None, phases: str, operations: str = "") -> SchemathesisConfig:
    auth = f'[auth.openapi.bearer]\nbearer = "{token}"\n' if token else ""
    enabled = "\n".join(
        f"{p}.enabled = {str(p in phases.split(',')).lower()}"
        for p in ("examples", "coverage", "fuzzing", "stateful")
    )
    refused = "\n".join(
        f'[[operations]]\ninclude-operation-id = "{op}"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409", "429"]\n'
        for op in REFUSED_ACROSS_VALUES
    )
    # identity: schemathesis' WSGI transport hands the body over as the app sent it, and
    # the checks would read a compressed answer (which a real client decodes) as garbage
    return SchemathesisConfig.from_str(f"""
seed = 1
workers = 1
headers = {{ "Accept-Encoding" = "identity" }}
max-stream-events = 1
request-timeout = 10
{auth}
[generation]
max-examples = {MAX_EXAMPLES}
deterministic = true
[phases]
{enabled}
stateful.max-steps = 10
[checks]
enabled = true
{operations}
{refused}
""")


def _run(
    app, config: SchemathesisConfig, *, authenticated: bool = False, operation_id: str | None = None
) -> tuple[int, list[str]]:
    """Run the engine; the number of cases and every failure, described."""
    if authenticated:
        # schemathesis' WSGI transport passes requests' max_redirects to werkzeug when it
        # adds credentials: an authenticated run goes over HTTP
        with serving(app) as base:
            schema = schemathesis.openapi.from_url(f"{base}/api/v1/openapi.json", config=config)
            return _execute(schema)
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app, config=config)
    if operation_id:
        # include() would be one more include, and the config's per-operation settings count
        # as includes too: leave every other operation out instead
        schema = schema.exclude(operation_id_regex=f"^(?!{operation_id}$)")
    return _execute(schema)


def _execute(schema) -> tuple[int, list[str]]:
    cases, failures = 0, []
    for event in from_schema(schema).execute():
        if isinstance(event, (events.ScenarioFinished, events.FuzzScenarioFinished)):
            cases += len(event.recorder.cases)
            for checks in event.recorder.checks.values():
                failures += [
                    f"{event.recorder.label}: {c.name}: {c.failure_info.failure.title}\n"
                    f"{c.failure_info.failure.message}\n"
                    f"{c.failure_info.steps[-1].curl if c.failure_info.steps else ''}"
                    for c in checks
                    if c.failure_info is not None
                ]
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            failures.append(f"error: {event}")
    return cases, failures


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "token"])
def test_every_check_passes_in_every_phase(make_app, token):
    settings_ = {"API_TOKEN": token} if token else {}
    # the checks send wrong tokens on purpose, so the throttle would answer the right one 429;
    # a stream the client left holds its slot until its next keep-alive
    app = make_app(TOKEN_GUESS_LIMIT="100000 per minute", EVENT_STREAMS=1000, **settings_)
    doc = app.test_client().get("/api/v1/openapi.json").json
    assert doc["paths"]["/experiments"]["post"]["security"] == (
        [{"bearer": []}] if token else [{}, {"bearer": []}]
    )
    # a spec body's coverage cases (thousands) run once, in the test below
    skip_spec_coverage = "".join(
        f'[[operations]]\ninclude-operation-id = "{op}"\nphases.coverage.enabled = false\n'
        for op in SPEC_OPERATIONS
    )
    config = _config(
        token=token, phases="examples,coverage,fuzzing,stateful", operations=skip_spec_coverage
    )
    cases, failures = _run(app, config, authenticated=bool(token))
    assert cases > 500
    assert not failures, "\n\n".join(failures)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_rule_of_a_spec_body_is_in_the_document(make_app):
    # POST /experiments takes the same schema and the same validation as POST /validate
    app = make_app()
    cases, failures = _run(app, _config(token=None, phases="coverage"), operation_id="validate")
    assert cases > 1000
    assert not failures, "\n\n".join(failures)


SPEC_PATHS = [("/validate", "post"), ("/experiments", "post")]
ODD_KEYS = st.text(alphabet=st.sampled_from("a-_[].0 é€\u200b'\""), min_size=1, max_size=6)
SPEC_LEVELS = (None, "model", "training", "dataset", "search")


@st.composite
def specs_with_odd_keys(draw) -> tuple[dict, tuple]:
    spec = {
        "name": "odd",
        "dataset": {"name": "iris"},
        "model": {"width": 4},
        "training": {"max_epochs": 1},
        "search": {"seeds": 1},
    }
    level = draw(st.sampled_from(SPEC_LEVELS))
    key = draw(ODD_KEYS)
    section = spec if level is None else spec[level]
    section[key] = draw(st.one_of(st.integers(), st.text(max_size=3), st.just({"grid": [1]})))
    return spec, (key,) if level is None else (level, key)


@pytest.mark.parametrize(
    "path, method", SPEC_PATHS, ids=[f"{m.upper()} {p}" for p, m in SPEC_PATHS]
)
def test_unknown_keys_of_any_spelling_are_refused_by_name(make_app, path, method):
    app = make_app()
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
    operation = schema[path][method]

    @given(drawn=specs_with_odd_keys())
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(drawn):
        spec, at = drawn
        response = operation.Case(body=spec, media_type="application/json").call_and_validate(
            checks=[not_a_server_error]
        )
        if at[-1] not in {
            "name",
            "width",
            "max_epochs",
            "seeds",
            "dataset",
            "model",
            "training",
            "search",
            "description",
        }:
            assert response.status_code == 400, response.text
            # named where it is, the key as written (unprintable characters escaped)
            paths = [e["path"] for e in response.json()["errors"]]
            spelt = (at[-1], repr(at[-1])[1:-1])
            assert any(
                p.startswith(at[0] if len(at) == 2 else "") and any(k in p for k in spelt)
                for p in paths
            ), paths

    check()
