"""The REST server fixtures of ``tests/server`` (one server per engine, users made through the
API), for the adapters' scenarios over ``Client`` and ``AsyncClient``
(tests/integrations/test_clients.py)."""

from tests.server.conftest import admin, new_user, server, start_server

__all__ = ["admin", "new_user", "server", "start_server"]
