"""The OpenAPI document against the app it describes: every route under /api/ is an operation
of it (or says why not), it names nothing the app does not serve, the server reads every query
parameter it lists and no other, and a route it cannot describe stops it being built."""

from __future__ import annotations

import inspect

import pytest
from werkzeug.exceptions import MethodNotAllowed, NotFound

from dashboard.openapi import API_PREFIX, SERVER, UndocumentedRoute, api_routes, openapi_document
from dashboard.operations import operation, operation_of

IMPLIED = {"HEAD", "OPTIONS"}


def _operations(doc):
    return [(path, method, op) for path, ops in doc["paths"].items() for method, op in ops.items()]


def test_every_api_route_is_an_operation_of_the_document_or_says_why_not(app):
    doc = openapi_document(app)
    documented = {(path, method): op["operationId"] for path, method, op in _operations(doc)}
    routes = list(api_routes(app))
    assert len(routes) >= 19
    for rule, op, outside in routes:
        if outside is not None:
            assert outside and op is None and not rule.rule.startswith(SERVER + "/"), rule.rule
            continue
        assert op is not None, f"{rule.rule} declares no @operation"
        path = rule.rule.removeprefix(SERVER).replace("<", "{").replace(">", "}")
        for method in rule.methods - IMPLIED:
            assert documented.get((path, method.lower())) == op.operation_id, (
                f"{method} {rule.rule} is not in the OpenAPI document"
            )
    assert any(rule.rule.startswith(API_PREFIX) and outside for rule, _, outside in routes)


def test_the_document_names_only_paths_and_methods_the_app_serves(app):
    urls = app.url_map.bind("localhost")
    for path, method, op in _operations(openapi_document(app)):
        url = SERVER + path.replace("{", "").replace("}", "")  # any value fits a variable
        try:
            endpoint, _ = urls.match(url, method=method.upper())
        except (NotFound, MethodNotAllowed) as exc:
            pytest.fail(
                f"{method.upper()} {path} is in the document, but the app answers {exc.code}"
            )
        served = operation_of(app.view_functions[endpoint])
        assert served is not None and served.operation_id == op["operationId"], (path, method)
        # the document's parameters are the ones the route declares, path and query
        names = {p["name"] for p in op.get("parameters", [])}
        assert names == set(served.path) | {arg.name for arg in served.query}, op["operationId"]


def _invalid(schema):
    """A value the parameter's schema refuses, or None when it takes any text."""
    if schema["type"] == "integer":
        return ["1.5"]
    if schema["type"] == "array":
        return (
            [str(i) for i in range(schema["maxItems"] + 1)]
            if "maxItems" in schema
            else ["\N{SNOWMAN}"]
        )
    if "maxLength" in schema:
        return ["x" * (schema["maxLength"] + 1)]
    if "pattern" in schema or "enum" in schema or "anyOf" in schema:
        return ["\N{SNOWMAN}"]
    return None


def test_the_server_reads_every_query_parameter_the_document_lists(client, app):
    """Each one, given a value its schema refuses, is refused by name: the server reads it
    (before looking the id up, so any id will do)."""
    free_text = []
    for path, method, op in _operations(openapi_document(app)):
        for param in op.get("parameters", []):
            if param["in"] != "query":
                continue
            bad = _invalid(param["schema"])
            if bad is None:
                free_text.append(param["name"])
                continue
            url = SERVER + path.replace("{", "").replace("}", "")
            r = client.open(
                url, method=method.upper(), query_string=[(param["name"], v) for v in bad]
            )
            assert r.status_code == 400 and r.json["errors"][0]["path"] == param["name"], (
                op["operationId"],
                param["name"],
                r.status_code,
                r.get_data(as_text=True),
            )
    # what any text is allowed for is checked where it is used (delete's confirmation)
    assert free_text == ["confirm"]


def test_the_api_views_read_no_query_parameter_themselves(app):
    """The server reads only what the document lists: a view gets the values of the query
    parameters its operation declares, and reads none from the request."""
    for rule, op, _ in api_routes(app):
        if op is None:
            continue
        source = inspect.getsource(inspect.unwrap(app.view_functions[rule.endpoint]))
        assert "request.args" not in source, rule.endpoint


def test_a_route_without_an_operation_stops_the_document(make_app):
    app = make_app()
    app.add_url_rule(SERVER + "/extra", "extra", lambda: "")
    with pytest.raises(UndocumentedRoute, match="/api/v1/extra"):
        openapi_document(app)
    assert app.test_client().get(SERVER + "/openapi.json").status_code == 500
    # elsewhere under /api/ a route must say why the document leaves it out
    other = make_app()
    other.add_url_rule("/api/v2/extra", "extra", lambda: "")
    with pytest.raises(UndocumentedRoute, match="/api/v2/extra"):
        openapi_document(other)


def test_an_operation_that_does_not_fit_its_route_stops_the_document(make_app):
    def view(trial_id: str) -> str:
        """A trial."""
        return trial_id

    app = make_app()
    app.add_url_rule(
        SERVER + "/things/<trial_id>",
        "thing",
        operation("thing", responses={200: {"description": "ok"}})(view),
    )
    with pytest.raises(UndocumentedRoute, match=r"takes \['trial_id'\]"):
        openapi_document(app)


def test_an_operation_needs_a_description_and_a_view_taking_its_parameters():
    from dashboard.query_args import IntArg

    def bare() -> str:
        return ""

    with pytest.raises(TypeError, match="no docstring"):
        operation("bare", responses={})(bare)

    def deaf() -> str:
        """Takes nothing."""
        return ""

    with pytest.raises(TypeError, match=r"\['since'\]"):
        operation("deaf", query=[IntArg("since", "cursor")], responses={})(deaf)
