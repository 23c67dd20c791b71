"""The REST endpoints, one module per concept; each route is parse → one ``MemoryOS`` call → render.

Routes are synchronous functions (FastAPI runs them in its thread pool; ``MemoryOS`` is
thread-safe) except where the body is parsed by hand (``POST /memories``).  Every route but
``/health`` takes the ``Caller`` dependency, and passes the caller's id to the core, which checks
the grants.
"""

from __future__ import annotations

from typing import Any

from memstrata.errors import ValidationError
from memstrata.model import User
from memstrata.server.schemas import ErrorBody

_ERROR_STATUSES = {
    400: "Bad request (settings that do not fit, a malformed upload)",
    401: "Missing, unknown or revoked API key",
    403: "The caller lacks the grant or role this needs",
    404: "No such thing (or none the caller may know of)",
    409: "Conflicts with what is stored",
    413: "Request body over the server's limit",
    422: "Invalid input",
    500: "Unexpected server error (the message has an id to look up in the server log)",
}
#: The error responses every authenticated route declares (all with the ``ErrorBody`` shape).
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text} for status, text in _ERROR_STATUSES.items()
}
#: ``ERRORS`` for a route whose own responses are not JSON (FastAPI would document a ``model``
#: response in the route's media type): the JSON content is spelled out.
JSON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": text,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for status, text in _ERROR_STATUSES.items()
}


def check_self(claimed: str | None, user: User) -> None:
    """Refuse a body's ``user_id`` that is not the caller's: identity comes from the key."""
    if claimed is not None and claimed != user.user_id:
        raise ValidationError(
            f"user_id {claimed!r} is not the caller ({user.user_id!r})",
            hint="omit user_id: the API key says who you are",
        )


def user_path(user_id: str, user: User) -> str:
    """A ``{user_id}`` path segment, where ``me`` is the caller."""
    return user.user_id if user_id == "me" else user_id
