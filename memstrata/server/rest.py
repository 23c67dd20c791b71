"""The REST API: ``create_app(memory)`` builds the FastAPI app over one ``MemoryOS``.

The app is a thin adapter: each route authenticates the caller by bearer API key (``auth``),
validates the body (``schemas``), calls one ``MemoryOS`` method with the caller's id and renders
the result.  The endpoints live in ``routes``; the OpenAPI description is at ``/openapi.json``,
and ``/docs`` shows it as a plain page without script (``ui.apidocs``; FastAPI's Swagger UI and
ReDoc are off: they load script from a CDN onto the inspector's origin).  Around the routes, from
the outside in: ``metrics.MetricsMiddleware`` (counts and times every request),
``middleware.CatchAll`` (unexpected exception → 500 with an id), ``middleware.BodyLimit``
(``Settings.max_request_bytes`` → 413), then the handlers that give every error the one JSON
shape (``handlers``).

The caller of ``create_app`` owns ``memory``: the app never opens or closes it, so tests and
``memstrata serve`` share one.  ``bootstrap`` makes the first admin on an empty database.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI

from memstrata.memory.system import MemoryOS
from memstrata.server import handlers
from memstrata.server.metrics import Metrics, MetricsMiddleware
from memstrata.server.middleware import BodyLimit, CatchAll
from memstrata.server.routes import (
    cubes,
    lifecycle,
    memcube,
    memories,
    ops,
    product,
    retrieval,
    sessions,
    users,
)
from memstrata.server.ui import install as install_ui
from memstrata.version import version

log = logging.getLogger("memstrata.server")

DESCRIPTION = """Long-term memory for LLM agents: users, memory cubes, add, search, context, chat,
lifecycle, audit, erasure, MemCube export and import.

Every endpoint but `/health` needs `Authorization: Bearer KEY`.  Errors are
`{"error": {"code", "message", "hint"?}}`."""


def create_app(memory: MemoryOS) -> FastAPI:
    """A FastAPI app serving ``memory`` (thread-safe, shared by every request)."""
    app = FastAPI(
        title="memstrata",
        version=version(),
        description=DESCRIPTION,
        docs_url=None,  # Swagger UI and ReDoc load script from a CDN: /docs is ui.apidocs
        redoc_url=None,
    )
    app.state.memory = memory
    app.state.metrics = Metrics()
    handlers.install(app)
    app.include_router(ops.public)
    for module in (users, cubes, memcube, memories, sessions, lifecycle, retrieval, ops, product):
        app.include_router(module.router)
    install_ui(app)
    app.add_middleware(BodyLimit, max_bytes=memory.settings.max_request_bytes)
    app.add_middleware(CatchAll)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics, routes=app.router.routes)
    return app


def bootstrap(memory: MemoryOS) -> str | None:
    """Create the first admin on an empty database (``MemoryOS.bootstrap_admin``).

    Returns the admin's API key when one was generated (the caller shows it once: it is not
    stored); None when users already existed or the key came from ``Settings.admin_key``.
    """
    configured = memory.settings.admin_key
    key = memory.bootstrap_admin(key=configured)
    if key is not None and configured is not None:
        log.info("created the admin user with the configured admin key")
        return None
    return key
