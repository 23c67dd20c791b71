"""Two ASGI middlewares at the edge of the REST app: a request size limit and a last resort.

``BodyLimit`` refuses a request whose body is over ``max_bytes`` with a 413 before any route sees
it, whether the client declared the size (``Content-Length``) or streamed it (chunked): the body is
read, counted and replayed to the app.  ``CatchAll`` turns any exception nothing else handled into
a 500 ``internal_error`` whose message carries an id; the traceback is logged with that id, and
never sent to the client.  A request cancelled because the server is stopping (past its grace
period) gets a 503 ``shutting_down`` and one log line, not a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstrata.server.handlers import error_response

log = logging.getLogger("memstrata.server")


class BodyLimit:
    """Answer 413 ``payload_too_large`` to a request body of more than ``max_bytes`` bytes.

    A body within the limit is held in memory and handed to the app unchanged, so the limit is also
    the most memory one request's body can take.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _declared_length(scope) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            "payload_too_large",
            f"the request body is larger than {self.max_bytes} bytes",
            hint="send less at once, or raise max_request_bytes in the server's settings",
        )
        await response(scope, receive, send)


def _declared_length(scope: Scope) -> int:
    """The Content-Length the client sent, or -1 when there is none (or it is not a number)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return -1


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then defers to ``receive`` (for disconnects)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


class CatchAll:
    """Turn an unhandled exception into a 500 with an id that is also in the server log.

    When the response had already started (a stream), the exception is logged and re-raised, so
    the server drops the connection instead of ending a truncated body as if it were complete.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            # The server cancels the requests still in flight when its grace period after a
            # stop signal ends; that is no bug, and the client deserves a "retry" rather than a
            # plain-text 500.  The cancellation is absorbed: answering is what ends this task.
            where = f"{scope.get('method', '')} {scope.get('path', '')}"
            log.warning("request cancelled while the server stops: %s", where)
            task = asyncio.current_task()
            if task is not None and hasattr(task, "uncancel"):  # Python 3.11+
                task.uncancel()
            if started:
                return  # a stream cut short: the server closes the connection
            response = error_response(
                503, "shutting_down", "the server is stopping", hint="retry in a few seconds",
                headers={"Retry-After": "5", "Connection": "close"},
            )  # fmt: skip
            await response(scope, receive, send)
        except Exception:
            error_id = secrets.token_hex(6)
            where = f"{scope.get('method', '')} {scope.get('path', '')}"
            log.exception("unexpected error %s on %s", error_id, where)
            if started:
                raise
            message = f"unexpected server error, id {error_id}"
            response = error_response(
                500, "internal_error", message, hint="report the id to the server's operator"
            )
            await response(scope, receive, send)
