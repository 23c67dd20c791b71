"""The memory inspector: server-rendered pages under ``/ui`` over the same ``MemoryOS`` calls as
the SDK (docs/inspector.md).

``install(app)`` mounts it on the REST app.  One module per concern: ``signin`` (the sign-in
form, sign-in and sign-out), ``cubes`` (the cube list and a cube's memory browser and search),
``items`` (an item's page and its actions), ``diff`` (two versions of an item, word by word),
``tiers`` (a cube's working, mid and long tiers), ``timemachine`` (a cube as of a past time),
``audit`` (a cube's audit trail, filtered), ``tools`` (context preview, tasks); ``activity`` (a
cube's items per day by tier and LLM usage, on its page) and ``charts`` (bar charts as inline
SVG) draw for them;
``visit`` holds what they share (who is signed in, CSRF, refusals as pages), ``parts`` the
pieces several pages show and the bounded parsers of what forms send, ``notices`` the fixed
messages an action's redirect names by a code, ``sessions`` the session store (bounded per
user) and the sign-in form's signed tokens, ``markup`` the escaping HTML builder (bidi controls
shown, not obeyed) and ``style`` the stylesheet.  No route is
in the OpenAPI description: the pages are for people.  ``apidocs`` serves ``/docs``, the REST
API's description as a plain page with no script (in place of FastAPI's Swagger UI, whose script
comes from a CDN), under the inspector's headers.
"""

from __future__ import annotations

from fastapi import FastAPI

from memstrata.server.ui import (
    apidocs,
    audit,
    cubes,
    diff,
    items,
    signin,
    tiers,
    timemachine,
    tools,
)
from memstrata.server.ui.sessions import Sessions

__all__ = ["install"]


def install(app: FastAPI) -> None:
    """Mount the inspector's routes and ``/docs`` on ``app``, with a session store of its own."""
    app.state.ui_sessions = Sessions()
    for module in (signin, cubes, items, diff, tiers, timemachine, audit, tools, apidocs):
        app.include_router(module.router)
