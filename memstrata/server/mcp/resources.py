"""The MCP resources: a cube's profile and statistics, as JSON text.

Each method of ``Resources`` reads one resource (its docstring is the description); a core error
is the SDK's ``ResourceError`` with the error's one line.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver.exceptions import ResourceError

from memstrata.memory import shaping
from memstrata.memory.system import MemoryOS
from memstrata.server.mcp.caller import Caller
from memstrata.server.mcp.reporting import reported
from memstrata.wire import to_wire

#: Each resource's URI (template) and the ``Resources`` method that reads it.
RESOURCES = (
    ("memstrata://profile", "profile"),
    ("memstrata://stats", "stats"),
    ("memstrata://cubes/{cube_id}/profile", "cube_profile"),
    ("memstrata://cubes/{cube_id}/stats", "cube_stats"),
)

resource = reported(ResourceError)


class Resources:
    """The resources (see ``RESOURCES``), bound to one ``MemoryOS`` and one ``Caller``."""

    def __init__(self, memory: MemoryOS, caller: Caller) -> None:
        self._memory = memory
        self._caller = caller

    @resource
    def profile(self) -> str:
        """Your cube's profile: a summary line per attribute, and the attributes with evidence."""
        return self._profile(self._caller.scope()[1])

    @resource
    def cube_profile(self, cube_id: str) -> str:
        """A cube's profile: a summary line per attribute, and the attributes with evidence."""
        return self._profile(cube_id)

    @resource
    def stats(self) -> str:
        """Per cube you may read: items by tier/type, pending background tasks, LLM usage."""
        return _json(self._memory.stats(user_id=self._caller.user()))

    @resource
    def cube_stats(self, cube_id: str) -> str:
        """One cube's items by tier/type, pending background tasks and LLM usage."""
        return _json(self._memory.stats(user_id=self._caller.user(), cube_id=cube_id))

    def _profile(self, cube_id: str) -> str:
        user = self._caller.user()
        attributes = self._memory.get_profile(user_id=user, cube_id=cube_id)
        summary = shaping.profile_summary(user, attributes)
        return _json({"cube_id": cube_id, "summary": summary, "attributes": attributes})


def _json(value: object) -> str:
    return json.dumps(to_wire(value), ensure_ascii=False)
