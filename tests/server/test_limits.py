"""Every bound a surface states is the core's: read from the OpenAPI description of the real REST
app and from the MCP tools' input schemas, compared with ``memstrata.limits`` and the states of
``lifecycle.states`` and ``memstrata.model``.

Each numeric or length bound found must be listed here with the core's value, and each listed one
must be found: a bound copied into a schema (and left to drift) fails the test, and so does one
that went missing.  Each enumeration must be one of the core's sets of allowed values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, get_args

import pytest

from memstrata import MemoryOS
from memstrata.config import RUNTIME_RANGES
from memstrata.lifecycle import states
from memstrata.limits import (
    MAX_AUDIT_LIMIT,
    MAX_BUDGET,
    MAX_CHAT_TOKENS,
    MAX_CONTENT_CHARS,
    MAX_DISPLAY_NAME,
    MAX_KEY_LABEL,
    MAX_OFFSET,
    MAX_QUERY_CHARS,
    MAX_REASON,
    MAX_TOP_K,
    MAX_WAIT_S,
)
from memstrata.memory.kinds import KINDS, SEARCH_INCLUDE
from memstrata.memory.skills import OUTCOMES
from memstrata.model import (
    CUBE_KINDS,
    FEEDBACK_KINDS,
    ITEM_TYPES,
    PERMISSIONS,
    ROLES,
    STATUSES,
    TIERS,
    PartKind,
)
from memstrata.scheduler import TaskStatus
from memstrata.server.mcp import Caller, build_server
from memstrata.server.rest import create_app

#: The JSON Schema keywords that bound a value.
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength")
TARGETS = get_args(states.Target)
#: Every set of allowed values an enumeration may list.
CORE_ENUMS = {
    tuple(values)
    for values in (ROLES, CUBE_KINDS, PERMISSIONS, TIERS, ITEM_TYPES, STATUSES,
                   states.INCLUDABLE, TARGETS, get_args(TaskStatus), FEEDBACK_KINDS,
                   SEARCH_INCLUDE, OUTCOMES, get_args(PartKind))
}  # fmt: skip

#: Each bound of the REST API: where → keyword → the core's value.
REST_BOUNDS: dict[str, dict[str, float]] = {
    **{
        f"ConfigureIn.{name}": {"minimum": low, "maximum": high}
        for name, (low, high) in RUNTIME_RANGES.items()
    },
    "SearchIn.top_k": {"minimum": 1, "maximum": MAX_TOP_K},
    "ContextIn.budget_tokens": {"minimum": 1, "maximum": MAX_BUDGET},
    "ChatIn.budget_tokens": {"minimum": 1, "maximum": MAX_BUDGET},
    "ChatIn.max_tokens": {"minimum": 1, "maximum": MAX_CHAT_TOKENS},
    "KeyIn.label": {"maxLength": MAX_KEY_LABEL},
    "SearchIn.query": {"maxLength": MAX_QUERY_CHARS},
    "ContextIn.query": {"maxLength": MAX_QUERY_CHARS},
    "ChatIn.query": {"maxLength": MAX_QUERY_CHARS},
    "UserIn.name": {"maxLength": MAX_DISPLAY_NAME},
    "CubeIn.name": {"maxLength": MAX_DISPLAY_NAME},
    "UpdateIn.text": {"maxLength": MAX_CONTENT_CHARS},
    "AddIn.messages": {"maxLength": MAX_CONTENT_CHARS},  # one string; a list is maxItems
    "AddIn.memory_content": {"maxLength": MAX_CONTENT_CHARS},
    "UpdateIn.reason": {"maxLength": MAX_REASON},
    "TransitionIn.reason": {"maxLength": MAX_REASON},
    "RollbackIn.reason": {"maxLength": MAX_REASON},
    "EraseIn.reason": {"maxLength": MAX_REASON},
    "FeedbackIn.text": {"maxLength": MAX_QUERY_CHARS},
    "EndTaskIn.goal": {"maxLength": MAX_QUERY_CHARS},
    "FeedbackIn.corrected": {"maxLength": MAX_CONTENT_CHARS},
    "WaitIn.timeout_s": {"minimum": 0, "maximum": MAX_WAIT_S},
    "RollbackIn.version": {"minimum": 1},  # versions count from 1
    "GET /memories/{cube_id} ?limit": {"minimum": 1, "maximum": MAX_TOP_K},
    "GET /memories/{cube_id} ?offset": {"minimum": 0, "maximum": MAX_OFFSET},
    "GET /tasks ?limit": {"minimum": 1, "maximum": MAX_TOP_K},
    "GET /audit ?limit": {"minimum": 1, "maximum": MAX_AUDIT_LIMIT},
}
#: The MCP tools that take a ``reason``.
REASONED = (
    "update_memory",
    "delete_memory",
    "transition_memory",
    "rollback_memory",
    "erase_memory",
)
#: Each bound of the MCP tools (``audit``'s limit is left to the core, whose one-line message
#: names the range: a schema error would be the SDK's several lines).
MCP_BOUNDS: dict[str, dict[str, float]] = {
    "retrieve_memory.max_results": {"minimum": 1, "maximum": MAX_TOP_K},
    "retrieve_memory.budget_tokens": {"minimum": 1, "maximum": MAX_BUDGET},
    "search_memories.top_k": {"minimum": 1, "maximum": MAX_TOP_K},
    "rollback_memory.version": {"minimum": 1},
    "retrieve_memory.query": {"maxLength": MAX_QUERY_CHARS},
    "search_memories.query": {"maxLength": MAX_QUERY_CHARS},
    "add_memory.user_input": {"maxLength": MAX_CONTENT_CHARS},
    "add_memory.agent_response": {"maxLength": MAX_CONTENT_CHARS},
    "update_memory.text": {"maxLength": MAX_CONTENT_CHARS},
    "feedback.text": {"maxLength": MAX_QUERY_CHARS},
    "end_task.goal": {"maxLength": MAX_QUERY_CHARS},
    "feedback.corrected": {"maxLength": MAX_CONTENT_CHARS},
    **{f"{tool}.reason": {"maxLength": MAX_REASON} for tool in REASONED},
}


def _walk(schema: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every sub-schema of ``schema`` with the property path that leads to it."""
    if not isinstance(schema, dict):
        return
    yield where, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, f"{where}.{name}")
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            yield from _walk(sub, where)
    yield from _walk(schema.get("items"), where)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], where)


def _bounds(schemas: dict[str, Any]) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for name, schema in schemas.items():
        for where, sub in _walk(schema, name):
            for keyword in BOUNDS:
                if keyword in sub:
                    found.setdefault(where, {})[keyword] = sub[keyword]
    return found


def _enums(schemas: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {
        where: tuple(sub["enum"])
        for name, schema in schemas.items()
        for where, sub in _walk(schema, name)
        if "enum" in sub
    }


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryOS]:
    db = tmp_path_factory.mktemp("limits") / "limits.db"
    with MemoryOS.open(str(db), workers=0) as opened:
        yield opened


@pytest.fixture(scope="module")
def rest_schemas(memory: MemoryOS) -> dict[str, Any]:
    """The OpenAPI components' schemas and each operation's query parameters, by name."""
    described = create_app(memory).openapi()
    schemas: dict[str, Any] = dict(described["components"]["schemas"])
    for path, operations in described["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            body = content.get("application/json", {}).get("schema", {})
            if "title" in body:  # a body described in place (POST /memories), not by reference
                schemas[body["title"]] = body
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query":
                    where = f"{method.upper()} {path} ?{parameter['name']}"
                    schemas[where] = parameter["schema"]
    return schemas


@pytest.fixture(scope="module")
def mcp_schemas(memory: MemoryOS) -> dict[str, Any]:
    """Each MCP tool's input schema, by tool name."""
    tools = asyncio.run(build_server(memory, Caller(memory, "alice")).list_tools())
    return {tool.name: tool.input_schema for tool in tools}


def test_every_rest_bound_is_the_cores(rest_schemas: dict[str, Any]) -> None:
    assert _bounds(rest_schemas) == REST_BOUNDS


def test_every_mcp_bound_is_the_cores(mcp_schemas: dict[str, Any]) -> None:
    assert _bounds(mcp_schemas) == MCP_BOUNDS


def test_configure_takes_every_runtime_setting_in_its_range(rest_schemas: dict[str, Any]) -> None:
    assert set(rest_schemas["ConfigureIn"]["properties"]) == set(RUNTIME_RANGES)
    for name, (low, high) in RUNTIME_RANGES.items():
        assert REST_BOUNDS[f"ConfigureIn.{name}"] == {"minimum": low, "maximum": high}


def test_the_states_are_the_lifecycles(
    rest_schemas: dict[str, Any], mcp_schemas: dict[str, Any]
) -> None:
    rest, mcp = _enums(rest_schemas), _enums(mcp_schemas)
    assert rest["SearchIn.include"] == mcp["search_memories.include"] == SEARCH_INCLUDE
    assert (*states.INCLUDABLE, *KINDS) == SEARCH_INCLUDE
    assert rest["TransitionIn.to"] == mcp["transition_memory.to"] == TARGETS
    assert set(TARGETS) == {s for moves in states.TRANSITIONS.values() for s in moves}


def test_every_enumeration_is_a_core_set(
    rest_schemas: dict[str, Any], mcp_schemas: dict[str, Any]
) -> None:
    enums = {**_enums(rest_schemas), **_enums(mcp_schemas)}
    assert {where: values for where, values in enums.items() if values not in CORE_ENUMS} == {}
