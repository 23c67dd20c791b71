"""Every error the REST API returns, in one JSON shape::

    {"error": {"code": "not_found", "message": "unknown cube 'x'", "hint": "…"}}

``hint`` is present only when there is one.  A ``MemstrataError`` keeps its ``status`` and ``code``
(a 429 ``busy`` also says ``Retry-After``); its message is the client's, except a 500's (the
database failed): that message names the database (host, port, user, name), so the client gets
``storage_error`` with an id and the log has the message under that id.  FastAPI's own errors (unknown path 404, wrong method 405, malformed JSON — too deeply nested, a
lone surrogate escape — or a body that does not fit the schema 422, a malformed multipart body
400) get the same shape with codes from ``HTTP_CODES``.  A 401 carries ``WWW-Authenticate: Bearer``.  Unexpected exceptions are turned into
a 500 by ``middleware.CatchAll``, not here.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from memstrata.errors import Busy, MemstrataError

log = logging.getLogger("memstrata.server")

#: Error codes for statuses that FastAPI or Starlette raise themselves.
HTTP_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "busy",
}
#: How many validation problems one message lists.
MAX_PROBLEMS = 5


def error_response(
    status: int,
    code: str,
    message: str,
    hint: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The JSON error response; a 401 also says which authentication scheme to use."""
    detail = {"code": code, "message": message}
    if hint:
        detail["hint"] = hint
    extra = dict(headers or {})
    if status == 401:
        extra.setdefault("WWW-Authenticate", "Bearer")
    return JSONResponse({"error": detail}, status_code=status, headers=extra or None)


def describe(problems: Sequence[Any]) -> str:
    """One line for pydantic's list of validation problems: ``where: what; …``."""
    parts = []
    for problem in problems[:MAX_PROBLEMS]:
        why = (problem.get("ctx") or {}).get("error")
        if problem.get("type") == "json_invalid":  # FastAPI's and pydantic's words, made one
            parts.append(f"body: not valid JSON ({why or problem.get('msg')})")
            continue
        where = ".".join(str(p) for p in problem.get("loc", ())) or "request"
        what = str(problem.get("msg", "invalid"))
        if isinstance(why, str) and why not in what:
            what += f" ({why})"
        parts.append(f"{where}: {what}")
    if len(problems) > MAX_PROBLEMS:
        parts.append(f"and {len(problems) - MAX_PROBLEMS} more")
    return "; ".join(parts) or "invalid request"


async def _memstrata_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, MemstrataError):  # pragma: no cover - registered for that class only
        raise exc
    if exc.status == 500:
        # The database failed: the operator needs the details, which name the database's host,
        # port, user and name; the client gets an id to report instead (issue 24, finding 8).
        error_id = secrets.token_hex(6)
        where = f"{request.method} {request.url.path}"
        log.error("%s %s failed (id %s): %s", where, exc.code, error_id, exc, exc_info=exc)
        return error_response(
            500,
            exc.code,
            f"the database failed, id {error_id}",
            hint="report the id to the server's operator",
        )
    if exc.status > 500:  # a model or embedding endpoint failed, or none is configured
        log.warning("%s %s failed: %s", request.method, request.url.path, exc)
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, Busy) else None
    return error_response(exc.status, exc.code, exc.message, exc.hint, headers)


async def _validation_error(request: Request, exc: Exception) -> Response:
    problems = exc.errors() if isinstance(exc, RequestValidationError) else []
    return error_response(
        422, "invalid_input", describe(problems), hint="see /docs for the request schema"
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # pragma: no cover - registered for that class only
        raise exc
    status = exc.status_code
    if status == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
        # FastAPI's answer to a JSON body that is not UTF-8: malformed JSON, like the rest.
        return error_response(422, "invalid_input", "body: not valid JSON (not UTF-8 text)")
    code = HTTP_CODES.get(status, f"http_{status}")
    message = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
    hint = None
    if status == 404:
        message, hint = f"no endpoint {request.url.path}", "see /docs for the endpoints"
    elif status == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
        hint = "see /docs for the endpoints"
    return error_response(status, code, message, hint, exc.headers)


def install(app: FastAPI) -> None:
    """Register the handlers that give every error response the shape above."""
    app.add_exception_handler(MemstrataError, _memstrata_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
