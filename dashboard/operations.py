"""What an API operation documents, declared at its route: ``@operation`` (directly above the
view, below the route and any ``@require_token``) names the operation and declares its path
and query parameters, request body and responses; the view's docstring is its text, the first
paragraph the summary and the rest the description. :mod:`.openapi` reads these off the app's
URL map, so a route is in the document with what its own code says.

The decorator also reads the declared query parameters (:mod:`.query_args`) before the view
runs, refusing a bad one with a 400 that names it, and passes their values to the view as
keyword arguments: the view takes exactly the parameters the document lists.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flask import request

from .headers import Header
from .query_args import QueryArg, read_args

View = Callable[..., Any]
_OPERATION = "openapi_operation"
_OUTSIDE = "openapi_outside"


@dataclass(frozen=True)
class Operation:
    """One operation of the document, as its route declares it."""

    operation_id: str
    summary: str
    description: str
    # path parameter → what it names (each of the route's variables has one)
    path: Mapping[str, str]
    query: tuple[QueryArg, ...]
    # media type → Media Type Object; None when the operation takes no body
    body: Mapping[str, Any] | None
    # the answers it gives when it works (status → Response Object)
    responses: Mapping[int, Mapping[str, Any]]
    # error statuses beyond those its parameters, body and guard imply
    errors: tuple[int, ...]
    # what a 409 means for this operation
    conflict: str
    # parameter name → runtime expression: a successful answer links to every operation
    # taking one of these as a path parameter, with the values for all of them it takes
    links: Mapping[str, str]


def operation(
    operation_id: str,
    *,
    responses: Mapping[int, Mapping[str, Any]],
    path: Mapping[str, str] | None = None,
    query: Sequence[QueryArg] = (),
    body: Mapping[str, Any] | None = None,
    errors: Iterable[int] = (),
    conflict: str = "",
    links: Mapping[str, str] | None = None,
) -> Callable[[View], View]:
    """Declare the operation a view serves (see the module's docstring)."""

    def decorate(view: View) -> View:
        summary, description = _docstring_text(view)
        where = f"{view.__module__}.{view.__qualname__} ({operation_id})"
        if not summary:
            raise TypeError(
                f"{where} has no docstring: its first paragraph is the "
                "operation's summary in the API document"
            )
        if (409 in errors) != bool(conflict):
            raise TypeError(f"{where}: a 409 and the conflict it means go together")
        _check_takes(view, [arg.name for arg in query], where)
        op = Operation(
            operation_id,
            summary,
            description,
            dict(path or {}),
            tuple(query),
            body,
            dict(responses),
            tuple(errors),
            conflict,
            dict(links or {}),
        )

        @functools.wraps(view)
        def read_query_then_view(*args: Any, **kwargs: Any) -> Any:
            return view(*args, **kwargs, **read_args(op.query, request.args))

        setattr(read_query_then_view, _OPERATION, op)
        return read_query_then_view

    return decorate


def outside_document(reason: str) -> Callable[[View], View]:
    """Mark a route under ``/api/`` that the API document leaves out, saying why."""

    def decorate(view: View) -> View:
        setattr(view, _OUTSIDE, reason)
        return view

    return decorate


def _docstring_text(view: View) -> tuple[str, str]:
    """The docstring's first paragraph as one line (a title: no final full stop), and the
    paragraphs after it."""
    paragraphs = inspect.cleandoc(view.__doc__ or "").split("\n\n")
    summary = " ".join(paragraphs[0].split()).removesuffix(".")
    return summary, "\n\n".join(" ".join(p.split()) for p in paragraphs[1:])


def _check_takes(view: View, names: list[str], where: str) -> None:
    params = inspect.signature(view).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    missing = [n for n in names if n not in params]
    if missing:
        raise TypeError(f"{where} declares query parameters {missing} its view does not take")


def marked(view: View, attribute: str) -> Any:
    """The value of ``attribute`` on the view or the first function it wraps that has it."""
    return getattr(inspect.unwrap(view, stop=lambda f: hasattr(f, attribute)), attribute, None)


def operation_of(view: View) -> Operation | None:
    """The operation a view declares, looking through the decorators around it."""
    return marked(view, _OPERATION)


def outside_reason(view: View) -> str | None:
    """Why the document leaves a view's route out, when it does."""
    return marked(view, _OUTSIDE)


def json_content(schema: str | Mapping[str, Any]) -> dict[str, Any]:
    """A JSON body: a component schema by name, or a schema."""
    ref = {"$ref": f"#/components/schemas/{schema}"} if isinstance(schema, str) else schema
    return {"application/json": {"schema": ref}}


def _with_headers(response: dict[str, Any], headers: Iterable[Header]) -> dict[str, Any]:
    declared = {h.name: h.object() for h in headers}
    return {
        "description": response["description"],
        **({"headers": declared} if declared else {}),
        **{k: v for k, v in response.items() if k != "description"},
    }


def answer(
    description: str, schema: str | Mapping[str, Any] = "Object", headers: Iterable[Header] = ()
) -> dict[str, Any]:
    """A JSON response, with the headers it carries besides those every response does."""
    return _with_headers({"description": description, "content": json_content(schema)}, headers)


def content(
    description: str, media: Mapping[str, Mapping[str, Any]], headers: Iterable[Header] = ()
) -> dict[str, Any]:
    """A response in the given media types (media type → schema), with its headers."""
    return _with_headers(
        {
            "description": description,
            "content": {kind: {"schema": schema} for kind, schema in media.items()},
        },
        headers,
    )


def no_content(description: str, headers: Iterable[Header] = ()) -> dict[str, Any]:
    """A response without a body."""
    return _with_headers({"description": description}, headers)
