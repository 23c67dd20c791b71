"""Finding 10 of the second hardening round: SIGTERM mid-request.

A request still running when the server's grace period after SIGTERM ended was cancelled: its
client got a plain-text 500 "Internal Server Error" and the log a ``CancelledError`` traceback.
Now it gets a 503 ``shutting_down`` (JSON, ``Retry-After``) and the log one line.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from starlette.types import Message, Receive, Scope, Send

from memstrata.server.middleware import CatchAll


async def _forever(scope: Scope, receive: Receive, send: Send) -> None:
    await asyncio.Event().wait()  # a request still working when the server stops


async def _request(app: CatchAll) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/memories", "headers": []}
    task = asyncio.ensure_future(app(scope, receive, send))
    await asyncio.sleep(0.01)
    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")  # what uvicorn does
    await task  # answered, not raised
    return sent


def test_a_request_cancelled_at_shutdown_gets_a_503(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="memstrata.server"):
        sent = asyncio.run(_request(CatchAll(_forever)))
    start, body = sent[0], sent[1]
    assert start["status"] == 503
    assert (b"retry-after", b"5") in start["headers"]
    assert json.loads(body["body"])["error"]["code"] == "shutting_down"
    assert [r.getMessage() for r in caplog.records] == [
        "request cancelled while the server stops: POST /memories"
    ]
    assert not any(r.exc_info for r in caplog.records)
