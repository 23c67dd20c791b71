"""The security regression suite: replays of the attacks of each hardening round.

The REST server fixtures are those of ``tests/server`` (one server per engine, users made
through the API), so a replay here runs on SQLite and on PostgreSQL as the REST suites do.
"""

from tests.server.conftest import admin, new_user, owner_cube, server, start_server

__all__ = ["admin", "new_user", "owner_cube", "server", "start_server"]
