"""What a client raises: the server's error responses as ``memstrata.errors`` classes, and the
two failures only a client meets (``ResponseError``, ``ServerUnreachable``)."""

from __future__ import annotations

import httpx

from memstrata.errors import MemstrataError


class ResponseError(MemstrataError):
    """An error response whose ``code`` has no class in ``memstrata.errors``."""

    def __init__(self, message: str, *, status: int, code: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.code = code


class ServerUnreachable(MemstrataError):
    """The server did not answer: refused or broken connection, or no answer within the timeout."""

    status = 503
    code = "unreachable"


#: An error ``code`` → the class raised in process: the first level of ``memstrata.errors``.
_BY_CODE: dict[str, type[MemstrataError]] = {
    cls.code: cls for cls in MemstrataError.__subclasses__() if cls.__module__ == "memstrata.errors"
}


def error_for(status: int, code: str, message: str, hint: str | None) -> MemstrataError:
    """The exception for an error response: its code's class, else ``ResponseError``."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return ResponseError(message, status=status, code=code, hint=hint)
    # Subclasses such as PermissionDenied build their message from fields a response does not
    # carry, so the instance is made without their __init__ (as errors.AdminRequired does).
    error = cls.__new__(cls)
    MemstrataError.__init__(error, message, hint=hint)
    return error


def error_of(response: httpx.Response) -> MemstrataError:
    """The exception for a 4xx/5xx response, in the API's shape or not (a proxy's page)."""
    try:
        detail = response.json()["error"]
        return error_for(
            response.status_code, detail["code"], detail["message"], detail.get("hint")
        )
    except (ValueError, KeyError, TypeError):
        text = " ".join(response.text.split())[:200]
        return ResponseError(
            f"HTTP {response.status_code} {response.reason_phrase}: {text}",
            status=response.status_code,
            code=f"http_{response.status_code}",
        )


def unreachable(method: str, url: httpx.URL, exc: httpx.TransportError) -> ServerUnreachable:
    what = "did not answer in time" if isinstance(exc, httpx.TimeoutException) else "failed"
    return ServerUnreachable(
        f"{method} {url} {what} ({type(exc).__name__}: {exc})",
        hint="is the server running (memstrata serve), and is the URL right?",
    )
