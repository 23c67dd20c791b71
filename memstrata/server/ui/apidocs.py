"""``GET /docs``: the REST API's OpenAPI description as one plain HTML page, with no script.

FastAPI's own ``/docs`` (Swagger UI) and ``/redoc`` load their JavaScript from a CDN; on the
server's origin that script would run beside the inspector's signed-in sessions, so a
compromised CDN could act as any user with an open inspector.  The app turns both off
(``rest.create_app``) and serves this page instead: every operation (method, path, summary,
description, parameters, body, responses) and every schema (fields, types, bounds), read from
``app.openapi()``, escaped by ``markup`` and sent with the inspector's headers, whose
Content-Security-Policy allows no script at all (``default-src 'none'``) and styles only from
this server.  The machine-readable description stays at ``/openapi.json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import APIRouter, Request, Response

from memstrata.server.ui.markup import Markup, join, page, table, tag
from memstrata.server.ui.visit import html

__all__ = ["api_page", "router"]

router = APIRouter(include_in_schema=False)
#: The HTTP methods an OpenAPI path item may hold, in the order the page lists them.
METHODS = ("get", "put", "post", "patch", "delete", "head", "options")
#: The schema keywords shown as a field's bounds, with how each reads.
BOUNDS = {
    "minimum": "≥ {}",
    "exclusiveMinimum": "> {}",
    "maximum": "≤ {}",
    "exclusiveMaximum": "< {}",
    "minLength": "at least {} chars",
    "maxLength": "at most {} chars",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
    "pattern": "matches {}",
    "default": "default {}",
}
Spec = Mapping[str, Any]


@router.get("/docs")
def docs(request: Request) -> Response:
    """The API description as HTML (rendered once per app: the description does not change)."""
    state = request.app.state
    if getattr(state, "api_docs", None) is None:
        state.api_docs = str(api_page(request.app.openapi()))
    return html(Markup(state.api_docs))


def api_page(spec: Spec) -> Markup:
    """The whole page for the OpenAPI description ``spec``."""
    info = spec.get("info", {})
    paths: Mapping[str, Any] = spec.get("paths", {})
    operations = [(path, m, item[m]) for path, item in paths.items() for m in METHODS if m in item]
    schemas: Mapping[str, Any] = spec.get("components", {}).get("schemas", {})
    body = [
        tag("p", f"version {info.get('version', '?')} · OpenAPI {spec.get('openapi', '?')} · ",
            tag("a", "openapi.json", href="/openapi.json"), " (machine-readable)",
            class_="muted"),
        _prose(info.get("description", "")),
        tag("h2", "Endpoints"),
        table(["method", "path", "summary"], [_index_row(*op) for op in operations]),
        *(_operation(*op) for op in operations),
        tag("h2", "Schemas"),
        *(_schema(name, schemas[name]) for name in sorted(schemas)),
    ]  # fmt: skip
    return page(f"{info.get('title', 'API')} REST API", join(body))


def _anchor(method: str, path: str) -> str:
    return "op-" + method + "-" + "".join(c if c.isalnum() else "-" for c in path)


def _index_row(path: str, method: str, op: Spec) -> list[Markup | str]:
    link = tag("a", path, href="#" + _anchor(method, path))
    return [tag("code", method.upper()), link, op.get("summary", "")]


def _prose(text: str) -> Markup:
    """Plain text in paragraphs (blank lines split them; nothing is read as markup)."""
    return join(tag("p", p.strip()) for p in text.split("\n\n") if p.strip())


def _operation(path: str, method: str, op: Spec) -> Markup:
    """One endpoint: what it does, what it takes and what it answers."""
    parameters = [
        [tag("code", p.get("name", "")), p.get("in", ""), "yes" if p.get("required") else "no",
         type_of(p.get("schema", {})), p.get("description", "")]
        for p in op.get("parameters", [])
    ]  # fmt: skip
    parts: list[Markup] = [
        tag("h3", tag("code", method.upper()), " ", tag("code", path), id=_anchor(method, path)),
        tag("p", tag("strong", op.get("summary", ""))),
        _prose(op.get("description", "")),
    ]
    if op.get("security"):
        parts.append(tag("p", "Needs Authorization: Bearer KEY.", class_="muted"))
    if parameters:
        parts.append(table(["parameter", "in", "required", "type", "what"], parameters))
    request_body = op.get("requestBody")
    if request_body:
        parts.append(tag("p", "Body: ", _content(request_body.get("content", {}))))
    responses = [
        [tag("code", code), answer.get("description", ""), _content(answer.get("content", {}))]
        for code, answer in op.get("responses", {}).items()
    ]
    parts.append(table(["status", "meaning", "body"], responses))
    return tag("section", *parts)


def _content(content: Mapping[str, Any]) -> Markup:
    """Each media type of a body with its schema."""
    return join(
        (join([tag("code", media), " ", type_of(kind.get("schema", {}))])
         for media, kind in content.items()),
        "; ",
    )  # fmt: skip


def _schema(name: str, schema: Spec) -> Markup:
    """One component schema: its description and a row per field."""
    required = set(schema.get("required", []))
    rows = [
        [tag("code", field), type_of(sub), "yes" if field in required else "no", bounds(sub),
         sub.get("description", "")]
        for field, sub in schema.get("properties", {}).items()
    ]  # fmt: skip
    heading = tag("h3", tag("code", name), id=f"schema-{name}")
    fields = table(["field", "type", "required", "bounds", "what"], rows, empty=type_of(schema))
    return tag("section", heading, _prose(schema.get("description", "")), fields)


def type_of(schema: Spec) -> Markup:
    """A schema's type in a few words: a link for a named schema, ``A | B`` for a choice,
    ``T[]`` for an array, the values of an enum."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return tag("a", name, href=f"#schema-{name}")
    for choice in ("anyOf", "oneOf", "allOf"):
        if choice in schema:
            return join((type_of(s) for s in schema[choice]), " & " if choice == "allOf" else " | ")
    if "enum" in schema:
        return join((tag("code", repr(v)) for v in schema["enum"]), " | ")
    if "const" in schema:
        return tag("code", repr(schema["const"]))
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("items", {})
        one = type_of(items)
        several = any(k in items for k in ("anyOf", "oneOf", "allOf", "enum"))
        return join(["(", one, ")[]"] if several else [one, "[]"])
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return join(["object of ", type_of(schema["additionalProperties"])])
    return join(map(str, kind), " | ") if isinstance(kind, list) else join([str(kind)])


def bounds(schema: Spec) -> str:
    """A field's bounds (range, length, items, pattern, default), in words."""
    found: list[str] = []
    for part in _alternatives(schema):
        found += [rule.format(_value(part[key])) for key, rule in BOUNDS.items() if key in part]
    return ", ".join(dict.fromkeys(found))


def _value(value: object) -> object:
    """A bound as written: pydantic states ``le=1000`` as ``1000.0``."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _alternatives(schema: Spec) -> Iterable[Spec]:
    yield schema
    for choice in ("anyOf", "oneOf", "allOf"):
        yield from schema.get(choice, [])
