"""The OpenAPI 3.1 document, generated: its paths from the app's URL map, each operation from
what its route declares (:mod:`.operations`; the headers of its answers from the code that
sets them, :mod:`.headers`), its schemas from the spec's pydantic models and the API's
response TypedDicts (:mod:`.openapi_schemas`, :mod:`.responses`,
:mod:`.experiment_responses`).

A small generator rather than a library: apispec, spectree and flask-openapi3 would each have
the routes restate their parameters in that library's terms (YAML in docstrings, or its own
models and route classes) and write by hand what a route already shows. Here the URL map
gives every path and method, the route's variables its path parameters (and their 404),
``@require_token`` its security and the 401, 403 and 429, its query parameters and body the
400, its body the 413; the route adds only what its code cannot show. Every route under
``/api/`` is in the document or says why not, or building the document fails.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from flask import Flask, current_app, has_app_context
from werkzeug.routing import Rule

from dnnframe import __version__

from .errors import RETRY_LATER
from .headers import Header
from .openapi_schemas import component_schemas
from .operations import Operation, answer, marked, operation_of, outside_reason
from .security import CHALLENGE, EVERY_RESPONSE, THROTTLED, TOKEN_GUARD

if TYPE_CHECKING:
    from collections.abc import Iterator

SERVER = "/api/v1"
API_PREFIX = "/api/"
# methods every route answers by itself: HEAD as its GET, OPTIONS with its Allow header
_IMPLIED_METHODS = frozenset({"HEAD", "OPTIONS"})
_CONVERTER_TYPES = {"default": "string", "string": "string", "int": "integer"}
_VARIABLE = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")

_ERRORS = {
    400: "invalid input; `errors` names every invalid field",
    401: "missing or wrong API token",
    403: "cross-site request, or a form body without the session's CSRF token (no API token set)",
    404: "unknown id",
    413: "request body too large",
    429: "too many wrong API tokens from this client: wait Retry-After seconds",
    503: "store, executor or broker unavailable, or (an event stream) as many streams open "
    "as the server serves",
}
# the headers an error answer carries besides those every response does
_ERROR_HEADERS: dict[int, tuple[Header, ...]] = {
    401: (CHALLENGE,),
    429: (THROTTLED,),
    503: (RETRY_LATER,),
}
_HEADER_REFS = {h.name: {"$ref": f"#/components/headers/{h.name}"} for h in EVERY_RESPONSE}


class UndocumentedRoute(RuntimeError):
    """A route under ``/api/`` that the document cannot describe: it declares no operation, or
    declares one that does not fit the route."""


def openapi_document(app: Flask | None = None, token_required: bool = False) -> dict[str, Any]:
    """A fresh copy of ``app``'s OpenAPI document (built once per app and configuration;
    without an app, the current one, else a default one): with ``token_required`` the writes
    need the bearer token, else it is optional."""
    if app is None:
        if not has_app_context():
            raise RuntimeError(
                "openapi_document() outside a request needs the app whose "
                "routes it describes: openapi_document(create_app())"
            )
        app = current_app
    built = app.extensions.setdefault("dnnframe.openapi", {})
    if token_required not in built:
        built[token_required] = json.dumps(_document(app, token_required))
    return json.loads(built[token_required])


def api_routes(app: Flask) -> Iterator[tuple[Rule, Operation | None, str | None]]:
    """Each route under ``/api/`` with the operation it declares and, for one the document
    leaves out, why."""
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(API_PREFIX):
            view = app.view_functions[rule.endpoint]
            yield rule, operation_of(view), outside_reason(view)


def _document(app: Flask, token_required: bool) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    built: list[tuple[Operation, dict[str, Any]]] = []
    for rule, op, outside in api_routes(app):
        fault = _misplaced(rule, op, outside)
        if fault:
            raise UndocumentedRoute(f"{rule.rule} ({rule.endpoint}) {fault}")
        if op is None:
            continue
        methods = sorted((rule.methods or set()) - _IMPLIED_METHODS)
        if len(methods) != 1:
            raise UndocumentedRoute(
                f"{rule.rule} ({rule.endpoint}) answers {methods}: one "
                "route and one @operation per method"
            )
        guarded = bool(marked(app.view_functions[rule.endpoint], TOKEN_GUARD))
        path, item = _operation(rule, op, guarded, token_required)
        paths.setdefault(path, {})[methods[0].lower()] = item
        built.append((op, item))
    _link(built)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "dnnframe API",
            "version": __version__,
            "description": "Submit neural-network layer-design sweeps and follow their results. "
            "Errors are JSON ({status, error, message, errors[{path, message}]}).",
        },
        "servers": [{"url": SERVER}],
        "paths": paths,
        "components": {
            "schemas": component_schemas(),
            "headers": {h.name: h.object() for h in EVERY_RESPONSE},
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "DNNFRAME_API_TOKEN, when the server sets one",
                }
            },
        },
    }


def _misplaced(rule: Rule, op: Operation | None, outside: str | None) -> str | None:
    """What is wrong with where a route under ``/api/`` stands towards the document."""
    in_api = rule.rule.startswith(SERVER + "/")
    if op is not None and outside is not None:
        return "is both an @operation and @outside_document"
    if op is None and in_api:
        return f"has no @operation: every route under {SERVER} is in the document"
    if op is not None and not in_api:
        return f"is an @operation outside {SERVER}, where the document's paths are"
    if op is None and outside is None:
        return (
            f"is under {API_PREFIX} but neither under {SERVER} with an @operation nor "
            "marked @outside_document with the reason"
        )
    return None


def _operation(
    rule: Rule, op: Operation, guarded: bool, token_required: bool
) -> tuple[str, dict[str, Any]]:
    """The document's path for ``rule`` and its Operation Object."""
    variables = {name: converter or "default" for converter, name in _VARIABLE.findall(rule.rule)}
    if set(variables) != set(op.path):
        raise UndocumentedRoute(
            f"{rule.rule} ({op.operation_id}) takes {sorted(variables)}, "
            f"but its @operation describes {sorted(op.path)}"
        )
    unknown = {c for c in variables.values() if c not in _CONVERTER_TYPES}
    if unknown:
        raise UndocumentedRoute(f"{rule.rule}: no schema for the converters {sorted(unknown)}")
    path = _VARIABLE.sub(r"{\2}", rule.rule).removeprefix(SERVER)
    item: dict[str, Any] = {"summary": op.summary}
    if op.description:
        item["description"] = op.description
    item["operationId"] = op.operation_id
    if guarded:
        # without a configured token, writes need no Authorization header (and ignore one)
        item["security"] = [{"bearer": []}] if token_required else [{}, {"bearer": []}]
    parameters = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": _CONVERTER_TYPES[variables[name]]},
            "description": text,
        }
        for name, text in op.path.items()
    ] + [arg.parameter() for arg in op.query]
    if parameters:
        item["parameters"] = parameters
    if op.body is not None:
        item["requestBody"] = {"required": True, "content": dict(op.body)}
    codes = set(op.errors)
    meaningless = codes - set(_ERRORS) - {409}
    if meaningless:
        raise UndocumentedRoute(f"{op.operation_id}: no meaning known for {sorted(meaningless)}")
    codes |= {400} if op.query or op.body is not None else set()
    codes |= {401, 403, 429} if guarded else set()  # wrong tokens are throttled per client
    codes |= {404} if op.path else set()
    codes |= {413} if op.body is not None else set()
    responses = {
        **{str(status): dict(response) for status, response in op.responses.items()},
        **{
            str(c): answer(
                op.conflict if c == 409 else _ERRORS[c], "Error", _ERROR_HEADERS.get(c, ())
            )
            for c in sorted(codes)
        },
    }
    for response in responses.values():
        response["headers"] = {**response.get("headers", {}), **_HEADER_REFS}
    item["responses"] = responses
    return path, item


def _link(built: list[tuple[Operation, dict[str, Any]]]) -> None:
    """Add the links each operation declares to its successful answers."""
    for op, item in built:
        if not op.links:
            continue
        links = {
            target.operation_id: {
                "operationId": target.operation_id,
                "parameters": {
                    name: expression
                    for name, expression in op.links.items()
                    if name in target.path or any(arg.name == name for arg in target.query)
                },
            }
            for target, _ in built
            if set(op.links) & set(target.path)
        }
        for status, response in item["responses"].items():
            if status.startswith("2"):
                response["links"] = links
