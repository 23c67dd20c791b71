"""The MCP server, driven by the official ``mcp`` client against ``memstrata mcp`` subprocesses.

Real parts only: the server runs as ``python -m memstrata mcp`` with the default e5 embedder on a
database prepared here through ``MemoryOS``; the stdio test calls every tool and reads every
resource, the HTTP test authenticates with an API key (and is refused without one).  The tools'
own logic (arguments to ``MemoryOS``) is small; these tests check that each argument reaches the
core and each core error comes back as one line.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import httpx
import httpx2
import pytest
from click.testing import CliRunner
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent, TextResourceContents

from memstrata import MemoryOS
from memstrata.cli import cli
from memstrata.cli.mcp import mcp as mcp_command
from memstrata.errors import CubeNotFound, PermissionDenied
from memstrata.lifecycle import states
from memstrata.memory.kinds import KINDS
from memstrata.server.mcp import Caller, Included, Target, Tools, fixed_caller

pytestmark = pytest.mark.anyio
TOOLS = set(Tools.TOOLS)
RESOURCES = {"memstrata://profile", "memstrata://stats"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
PAGE = {"id", "text", "speaker", "timestamp"}
TEMPLATES = {"memstrata://cubes/{cube_id}/profile", "memstrata://cubes/{cube_id}/stats"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def prepared_db(db_path: Path) -> Path:
    """Alice's cube ``notes`` with a promoted profile (Porto, nurse) and preference (jazz), and
    her empty cube ``lab``; Bob with his own cube."""
    with MemoryOS.open(str(db_path), workers=0) as mos:
        mos.create_user("alice")
        mos.create_user("bob")
        settings = {"working_capacity": 2, "similarity_threshold": 0.0}
        mos.create_cube("notes", owner="alice", cube_id="notes", settings=settings)
        mos.create_cube("bobs", owner="bob", cube_id="bobs")
        mos.create_cube("lab", owner="alice", cube_id="lab")  # erased by the test
        exchanges = [
            ("I live in Porto and I work as a nurse. I love jazz.", "Nice! How is the job?"),
            ("I adopted a cat named Pixel.", "Lovely name."),
        ]
        for said, answered in exchanges:
            turns = [
                {"role": "user", "name": "alice", "content": said},
                {"role": "assistant", "name": "assistant", "content": answered},
            ]
            mos.add(turns, user_id="alice", cube_id="notes")
        assert mos.consolidate("notes", user_id="alice", promote_all=True) > 0
    return db_path


def _server_env() -> dict[str, str]:
    """The environment minus any MEMSTRATA_* setting of the machine running the tests."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}


# -- client helpers --------------------------------------------------------------------------


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured result of a tool call that must succeed."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fail(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The error text of a tool call that must fail: one line, no traceback."""
    text = await schema_fail(session, tool, **arguments)
    assert "\n" not in text
    return text


async def schema_fail(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The error text of a tool call that must fail (the SDK's own errors are multi-line)."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    (content,) = result.content
    assert isinstance(content, TextContent) and "Traceback" not in content.text
    return content.text


async def read_json(session: ClientSession, uri: str) -> Any:
    result = await session.read_resource(uri)
    (content,) = result.contents
    assert isinstance(content, TextResourceContents)
    assert content.mime_type == "application/json"
    return json.loads(content.text)


@asynccontextmanager
async def stdio_session(db: Path, errlog: Path, *args: str) -> AsyncIterator[ClientSession]:
    """An initialised client session with ``memstrata mcp --transport stdio ARGS`` on ``db``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memstrata", "mcp", "--transport", "stdio", "--db", str(db), *args],
        env=_server_env(),
    )
    with errlog.open("w", encoding="utf-8") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


# -- stdio: every tool, every resource -------------------------------------------------------


async def test_stdio_every_tool_and_resource(prepared_db: Path, tmp_path: Path) -> None:
    errlog = tmp_path / "server.log"
    async with stdio_session(prepared_db, errlog, "--user", "alice", "--cube", "notes") as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        hints = {name: tool.annotations for name, tool in tools.items()}
        assert {n for n, h in hints.items() if h and h.read_only_hint} == set(Tools.READ_ONLY)
        assert {n for n, h in hints.items() if h and h.destructive_hint} == set(Tools.DESTRUCTIVE)
        assert {"erase_memory", "delete_memory"} <= set(Tools.DESTRUCTIVE)
        await _memoryos_tools(session)
        await _item_tools(session)
        await _lifecycle_tools(session)
        await _erase_tools(session)
        await _feedback_tool(session)
        await _cube_tools(session)
        await _resources(session)
        await _errors(session)
    assert "Traceback" not in errlog.read_text(encoding="utf-8")
    with MemoryOS.open(str(prepared_db), workers=0) as mos:  # the changes reached the database
        assert "notes" not in {c.cube_id for c in mos.list_cubes(user_id="bob")}
        assert [g.user_id for g in mos.grants("notes", by="alice")] == ["alice"]
        with pytest.raises(CubeNotFound):
            mos.get_cube("lab", user_id="alice")


async def _memoryos_tools(session: ClientSession) -> None:
    """``add_memory``, ``retrieve_memory`` and ``get_user_profile``, as MemoryOS has them, and
    ``get_preferences`` beside them."""
    added = await call(
        session, "add_memory", user_input="My sister Ana plays the cello.",
        agent_response="A beautiful instrument.", timestamp="2026-05-01 10:00:00",
        meta_data={"topic": "family"},
    )  # fmt: skip
    assert added["status"] == "success" and added["cube_id"] == "notes" and len(added["ids"]) == 2
    recalled = await call(session, "retrieve_memory", query="Where does alice live?")
    assert recalled["status"] == "success" and "Porto" in recalled["context"]
    assert any("Porto" in page["text"] for page in recalled["retrieved_pages"])
    assert any("Porto" in k["knowledge"] for k in recalled["retrieved_user_knowledge"])
    assert recalled["retrieved_assistant_knowledge"] == []
    assert "lives in: Porto" in recalled["user_profile"].splitlines()
    assert recalled["short_term_memory"]  # the working tier's turns, as pages
    assert all(set(turn) == set(PAGE) for turn in recalled["short_term_memory"])
    few = await call(session, "retrieve_memory", query="Porto", max_results=1)
    assert len(few["retrieved_pages"]) <= 1 and len(few["short_term_memory"]) == 1
    profile = await call(session, "get_user_profile", include_assistant_knowledge=True)
    assert {"lives in: Porto", "job: nurse"} <= set(profile["user_profile"].splitlines())
    assert profile["user_id"] == "alice" and profile["user_knowledge_count"] > 0
    assert {a["key"] for a in profile["profile"]} >= {"lives_in", "job"}
    assert profile["assistant_knowledge"] == [] and profile["assistant_knowledge_count"] == 0
    bare = await call(session, "get_user_profile", include_knowledge=False)
    assert "user_knowledge" not in bare and "assistant_knowledge" not in bare
    tastes = await call(session, "get_preferences")
    assert (tastes["user_id"], tastes["cube_id"]) == ("alice", "notes")
    (jazz,) = tastes["preferences"]
    assert tastes["preference_count"] == 1
    assert (jazz["subject"], jazz["key"], jazz["polarity"], jazz["explicit"]) == (
        "alice", "jazz", 1, True
    )  # fmt: skip
    assert jazz["text"] == "alice likes jazz" and len(jazz["evidence"]) == 1
    assert "may not read cube 'bobs'" in await fail(session, "get_preferences", cube_id="bobs")
    # no local chat model here: no KV cache to build, none listed (tests/llm has the real ones)
    assert await call(session, "build_activation") == {"cube_id": "notes", "artifact": None}
    assert await call(session, "list_artifacts") == {"cube_id": "notes", "artifacts": []}
    assert "may not read cube 'bobs'" in await fail(session, "list_artifacts", cube_id="bobs")


async def _item_tools(session: ClientSession) -> None:
    """Add, search, get, update and delete single memories."""
    messages = [{"role": "user", "content": "I run every Sunday morning.", "id": "msg-1"}]
    first = await call(session, "add_memories", messages=messages, session_id="s1")
    again = await call(session, "add_memories", messages=messages, session_id="s1")
    assert first["ids"] == again["ids"] and len(first["ids"]) == 1  # the id makes it idempotent
    (item_id,) = first["ids"]
    hits = (await call(session, "search_memories", query="running on Sunday", top_k=3))["hits"]
    assert hits[0]["item"]["id"] == item_id and hits[0]["score"] > 0
    only_long = await call(session, "search_memories", query="nurse", filters={"tier": "long"})
    assert only_long["hits"] and {h["item"]["tier"] for h in only_long["hits"]} == {"long"}
    got = await call(session, "get_memory", memory_id=item_id)
    assert got["text"] == "I run every Sunday morning." and got["session_id"] == "s1"
    updated = await call(
        session, "update_memory", memory_id=item_id, text="I run every Saturday morning.",
        metadata={"sport": "running"}, reason="corrected by the user",
    )  # fmt: skip
    assert updated["version"] == 2 and updated["metadata"] == {"sport": "running"}
    deleted = await call(session, "delete_memory", memory_id=item_id, reason="asked to forget")
    assert deleted == {"id": item_id, "status": "deleted", "version": 3}
    assert (await call(session, "get_memory", memory_id=item_id))["status"] == "deleted"
    hits = (await call(session, "search_memories", query="running on Saturday"))["hits"]
    assert item_id not in {h["item"]["id"] for h in hits}


async def _found(session: ClientSession, query: str, **arguments: Any) -> list[str]:
    """The ids of the items ``search_memories`` finds, best first."""
    hits = (await call(session, "search_memories", query=query, **arguments))["hits"]
    return [h["item"]["id"] for h in hits]


async def _lifecycle_tools(session: ClientSession) -> None:
    """Transitions, history, the time machine (``as_of``), rollback and audit, in cube ``lab``."""
    note = [{"role": "user", "content": "I keep bees on the roof."}]
    (item_id,) = (await call(session, "add_memories", messages=note, cube_id="lab"))["ids"]
    illegal = await fail(session, "transition_memory", memory_id=item_id, to="archived")
    assert illegal.endswith(
        f"item '{item_id}' cannot go from generated to archived "
        "(from generated it may go to: activated)"
    )
    moved = await call(
        session, "transition_memory", memory_id=item_id, to="activated", reason="confirmed",
        cube_id="lab",
    )  # fmt: skip
    assert (moved["status"], moved["version"]) == ("activated", 2)
    moved = await call(session, "transition_memory", memory_id=item_id, to="archived")
    assert (moved["status"], moved["version"]) == ("archived", 3)
    assert item_id not in await _found(session, "bees on the roof")
    assert (await _found(session, "bees on the roof", include=["archived"]))[0] == item_id
    await call(session, "transition_memory", memory_id=item_id, to="activated")  # version 4
    await call(session, "update_memory", memory_id=item_id, text="I keep bees in the garden.")
    versions = (await call(session, "memory_history", memory_id=item_id))["versions"]
    assert [(v["version"], v["item"]["status"]) for v in versions] == [
        (1, "generated"), (2, "activated"), (3, "archived"), (4, "activated"), (5, "activated")
    ]  # fmt: skip
    assert (versions[1]["actor"], versions[1]["reason"]) == ("alice", "confirmed")
    first = _between(versions[0]["at"], versions[1]["at"])
    then = await call(session, "get_memory", memory_id=item_id, as_of=first)
    assert (then["version"], then["text"]) == (1, "I keep bees on the roof.")
    hits = await call(session, "search_memories", query="bees", cube_ids=["lab"], as_of=first)
    assert [h["item"]["text"] for h in hits["hits"]] == ["I keep bees on the roof."]
    rolled = await call(session, "rollback_memory", memory_id=item_id, version=1, reason="undo")
    assert (rolled["version"], rolled["text"], rolled["status"]) == (
        6, "I keep bees on the roof.", "generated"
    )  # fmt: skip
    events = (await call(session, "audit", memory_id=item_id))["events"]
    assert [e["op"] for e in events] == [
        "create", "transition", "transition", "transition", "update", "rollback"
    ]  # fmt: skip
    assert events[-1]["reason"] == "undo" and events[-1]["after"]["text"] == rolled["text"]
    since = _between(versions[3]["at"], versions[4]["at"])
    later = await call(session, "audit", cube_id="lab", since=since)
    assert [e["op"] for e in later["events"]] == ["update", "rollback"]
    assert len((await call(session, "audit", limit=2))["events"]) == 2  # your cube: notes
    await _lifecycle_errors(session, item_id)


def _between(earlier: str, later: str) -> str:
    """The time halfway between two ISO 8601 times.

    Not either time itself: a version's time is stored with more digits than its ISO 8601 form
    shows, so asking for exactly that time may fall a fraction of a microsecond before it.
    """
    start = datetime.fromisoformat(earlier)
    return (start + (datetime.fromisoformat(later) - start) / 2).isoformat()


async def _lifecycle_errors(session: ClientSession, item_id: str) -> None:
    future = "2999-01-01T00:00:00Z"
    in_future = await fail(session, "get_memory", memory_id=item_id, as_of=future)
    assert in_future.endswith("as_of is in the future (the memory has no future yet)")
    assert "as_of is in the future" in await fail(
        session, "search_memories", query="bees", as_of=future
    )
    early = await fail(session, "get_memory", memory_id=item_id, as_of="2000-01-01")
    assert "as_of is before the cube existed" in early
    unknown = await fail(session, "rollback_memory", memory_id=item_id, version=99)
    assert unknown.endswith(f"item '{item_id}' has no version 99 (its versions are 1 to 6)")
    assert "no memory item 'nope'" in await fail(session, "memory_history", memory_id="nope")
    assert "may not admin cube 'bobs'" in await fail(session, "audit", cube_id="bobs")
    assert "since 'yesterday' is not a time" in await fail(session, "audit", since="yesterday")
    assert "limit must be an integer from 1 to 10000" in await fail(session, "audit", limit=0)
    rejected = [  # by the tools' input schemas, before memstrata sees them
        await schema_fail(session, "transition_memory", memory_id=item_id, to="deleted"),
        await schema_fail(session, "rollback_memory", memory_id=item_id, version=0),
        await schema_fail(session, "search_memories", query="bees", include=["deleted"]),
    ]
    assert "Input should be 'activated', 'merged', 'archived' or 'frozen'" in rejected[0]
    assert "Input should be greater than or equal to 1" in rejected[1]
    included = "'merged', 'archived', 'frozen', 'text', 'tool' or 'skill'"  # states and kinds
    assert f"Input should be {included}" in rejected[2]


async def _erase_tools(session: ClientSession) -> None:
    """Erasure of an item, a session (of your cube, or of a named one), a subject, a cube."""
    (item_id,) = await _found(session, "bees on the roof", cube_ids=["lab"])
    assert await call(session, "erase_memory", memory_id=item_id, reason="asked") == {"erased": 1}
    gone = await call(session, "get_memory", memory_id=item_id)
    assert gone["status"] == "deleted" and "bees" not in json.dumps(gone)
    assert (await call(session, "memory_history", memory_id=item_id))["versions"] == []
    assert await _found(session, "bees", cube_ids=["lab"], include=list(get_args(Included))) == []
    events = (await call(session, "audit", memory_id=item_id))["events"]
    assert events[-1]["op"] == "erase" and "bees" not in json.dumps(events)
    said = [{"role": "user", "content": "My locker code is 4711."}]
    (code_id,) = (await call(session, "add_memories", messages=said, session_id="gym"))["ids"]
    assert await call(session, "erase_memory", session_id="gym") == {"erased": 1}  # in notes
    assert code_id not in await _found(session, "locker code")
    notes = []
    for session_id in ("s-a", "s-b"):
        said = [{"role": "user", "content": f"Lab notes of session {session_id}."}]
        added = await call(
            session, "add_memories", messages=said, session_id=session_id, cube_id="lab"
        )
        notes += added["ids"]
    erased = await call(session, "erase_memory", session_id="s-a", cube_id="lab")
    assert erased == {"erased": 1}
    erased = await call(session, "erase_memory", subject_user_id="alice", cube_id="lab")
    assert erased["erased"] >= 1  # what alice added in lab: the note of s-b (and tombstones)
    for note_id in notes:
        gone = await call(session, "get_memory", memory_id=note_id)
        assert gone["status"] == "deleted" and "Lab notes" not in json.dumps(gone)
    await call(session, "add_memories", messages=said, cube_id="lab")
    assert (await call(session, "erase_memory", cube_id="lab"))["erased"] >= 1
    assert "unknown cube 'lab'" in await fail(
        session, "search_memories", query="x", cube_ids=["lab"]
    )
    assert "name exactly one thing to erase" in await fail(session, "erase_memory")
    both = await fail(session, "erase_memory", memory_id=item_id, session_id="gym")
    assert "name exactly one thing to erase" in both
    others = await fail(session, "erase_memory", subject_user_id="bob")
    assert "subject_user_id must be you ('alice')" in others
    assert "may not admin cube 'bobs'" in await fail(session, "erase_memory", cube_id="bobs")


async def _feedback_tool(session: ClientSession) -> None:
    """Issue 25: ``feedback`` confirms and corrects (the old memory stops holding, a new one
    holds the correction); text that is no feedback is a one-line error."""
    said = [{"role": "user", "content": "My bike is a red Cinelli."}]
    (bike,) = (await call(session, "add_memories", messages=said))["ids"]
    confirmed = await call(session, "feedback", text="yes, that's right", item_ids=[bike])
    assert confirmed == {
        "kind": "confirm", "cube_id": "notes", "affected": [bike], "new_item_id": None,
    }  # fmt: skip
    fixed = await call(session, "feedback", text="No, my bike is a blue Colnago", item_ids=[bike])
    assert fixed["kind"] == "correct" and fixed["affected"] == [bike]
    assert "Colnago" in (await call(session, "get_memory", memory_id=fixed["new_item_id"]))["text"]
    assert (await call(session, "get_memory", memory_id=bike))["valid_to"] is not None
    assert "cannot tell what this feedback asks" in await fail(session, "feedback", text="hmm")


async def _cube_tools(session: ClientSession) -> None:
    listed = await call(session, "list_cubes")
    assert listed["default_cube"] == "notes"
    assert [c["cube_id"] for c in listed["cubes"]] == ["notes"]
    grant = await call(session, "share_cube", cube_id="notes", user_id="bob", permission="read")
    assert (grant["cube_id"], grant["user_id"], grant["permission"]) == ("notes", "bob", "read")
    grants = (await call(session, "list_grants", cube_id="notes"))["grants"]
    assert [(g["user_id"], g["permission"]) for g in grants] == [
        ("alice", "admin"),
        ("bob", "read"),
    ]
    revoked = await call(session, "revoke_cube", cube_id="notes", user_id="bob")
    assert revoked == {"cube_id": "notes", "user_id": "bob", "revoked": True}
    grants = (await call(session, "list_grants", cube_id="notes"))["grants"]
    assert [g["user_id"] for g in grants] == ["alice"]
    ops = [e["op"] for e in (await call(session, "audit", cube_id="notes"))["events"]]
    assert [op for op in ops if op in ("grant", "revoke")][-2:] == ["grant", "revoke"]
    again = await fail(session, "revoke_cube", cube_id="notes", user_id="bob")
    assert again.endswith("user 'bob' holds no grant on cube 'notes'")
    owner = await fail(session, "revoke_cube", cube_id="notes", user_id="alice")
    assert owner.endswith("the owner of a cube always keeps admin")
    assert "may not admin cube 'bobs'" in await fail(session, "list_grants", cube_id="bobs")


async def _resources(session: ClientSession) -> None:
    listed = {str(r.uri) for r in (await session.list_resources()).resources}
    templates = (await session.list_resource_templates()).resource_templates
    assert listed == RESOURCES and {t.uri_template for t in templates} == TEMPLATES
    profile = await read_json(session, "memstrata://profile")
    assert profile["cube_id"] == "notes" and "job: nurse" in profile["summary"].splitlines()
    assert all(a["evidence"] for a in profile["attributes"])  # each attribute cites its turns
    assert profile == await read_json(session, "memstrata://cubes/notes/profile")
    stats = await read_json(session, "memstrata://stats")
    assert set(stats) == {"notes"} and stats["notes"]["items"]
    assert await read_json(session, "memstrata://cubes/notes/stats") == stats


async def _errors(session: ClientSession) -> None:
    """Core errors come back as tool errors with the core's one-line message."""
    missing = await fail(session, "get_memory", memory_id="nope")
    assert missing.endswith("no memory item 'nope' that you can read")
    assert "nothing to update" in await fail(session, "update_memory", memory_id="nope")
    denied = await fail(session, "search_memories", query="cat", cube_ids=["bobs"])
    assert "user 'alice' may not read cube 'bobs'" in denied
    assert "ask a cube admin" in denied  # the hint travels on the same line
    assert "query must be a non-empty string" in await fail(session, "retrieve_memory", query=" ")
    rejected = await schema_fail(
        session, "share_cube", cube_id="notes", user_id="bob", permission="owner"
    )  # by the tool's input schema, before memstrata sees it
    assert "Input should be 'read', 'write' or 'admin'" in rejected
    with pytest.raises(MCPError, match="may not read cube 'bobs'"):
        await session.read_resource("memstrata://cubes/bobs/stats")


async def test_stdio_creates_the_user_and_a_cube_named_after_them(
    db_path: Path, tmp_path: Path
) -> None:
    async with stdio_session(db_path, tmp_path / "server.log", "--user", "carol") as session:
        added = await call(session, "add_memory", user_input="hi", agent_response="hello")
        cubes = (await call(session, "list_cubes"))["cubes"]
    assert [(c["cube_id"], c["name"], c["owner"]) for c in cubes] == [
        (added["cube_id"], "carol", "carol")
    ]


# -- who the caller is -----------------------------------------------------------------------


def test_fixed_caller_reuses_the_oldest_own_cube(mos: MemoryOS) -> None:
    first = fixed_caller(mos, "dora").scope()
    assert fixed_caller(mos, "dora").scope() == first  # the second start finds it
    mos.create_cube("later", owner="dora")
    assert fixed_caller(mos, "dora").scope() == first
    assert fixed_caller(mos, "dora", "other").scope() == ("dora", "other")  # created
    assert {c.cube_id for c in mos.list_cubes(user_id="dora")} >= {first[1], "other"}


def test_erase_memory_erases_only_the_callers_own_data(mos: MemoryOS, alice_cube: str) -> None:
    """An agent reads what others wrote: even an administrator's may not erase another user."""
    mos.create_user("root", role="admin")
    mos.add([{"role": "user", "content": "I am Alice."}], user_id="alice", cube_id=alice_cube)
    with pytest.raises(ToolError, match="subject_user_id must be you"):
        Tools(mos, Caller(mos, "root")).erase_memory(subject_user_id="alice")
    assert mos.erase(user_id="root", subject_user_id="alice") == 1  # the core would let root


def test_the_state_arguments_are_the_lifecycles() -> None:
    targets = {state for moves in states.TRANSITIONS.values() for state in moves}
    assert set(get_args(Target)) == targets
    assert get_args(Included) == (*states.INCLUDABLE, *KINDS)  # states, and memory kinds


def test_fixed_caller_refuses_a_cube_of_someone_else(mos: MemoryOS, alice_cube: str) -> None:
    with pytest.raises(PermissionDenied):
        fixed_caller(mos, "bob", alice_cube)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mcp"], "--transport stdio needs --user (or the mcp_user setting)"),
        (["mcp", "--transport", "http", "--user", "x"], "--user and --cube apply to stdio"),
    ],
)
def test_cli_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and message in result.output


def test_the_docs_name_every_tool_resource_and_option() -> None:
    text = DOCS.read_text(encoding="utf-8")
    options = {o for p in mcp_command.params for o in p.opts if o.startswith("--")}
    names = TOOLS | RESOURCES | TEMPLATES | options
    assert sorted(n for n in names if f"`{n}" not in text) == []
    configs = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]
    assert len(configs) == 3 and all(set(c) == {"mcpServers"} for c in configs)


# -- streamable HTTP with API keys -----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def keys(db_path: Path) -> dict[str, str]:
    """API keys of users ``dave`` and ``erin`` (no cubes yet)."""
    with MemoryOS.open(str(db_path), workers=0) as mos:
        for user in ("dave", "erin"):
            mos.create_user(user)
        return {u: str(mos.create_key(u, by=u).secret) for u in ("dave", "erin")}


@pytest.fixture
def http_url(db_path: Path, keys: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """``memstrata mcp --transport http`` on a free port; its /mcp URL once it answers."""
    port = _free_port()
    command = [sys.executable, "-m", "memstrata", "mcp", "--transport", "http",
               "--port", str(port), "--db", str(db_path)]  # fmt: skip
    log = tmp_path / "server.log"
    with log.open("w", encoding="utf-8") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=_server_env())
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _wait_until_up(url, server, log)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "Traceback" not in log.read_text(encoding="utf-8")


def _wait_until_up(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the server exited: {log.read_text(encoding='utf-8')}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    pytest.fail("the server did not start within 60 s")


@asynccontextmanager
async def http_session(url: str, key: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


async def test_http_with_api_keys(http_url: str, keys: dict[str, str]) -> None:
    accept = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer not-a-key"}):
        refused = httpx.post(http_url, json=INITIALIZE, headers={**accept, **auth}, timeout=10)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
    async with http_session(http_url, keys["dave"]) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        added = await call(session, "add_memory", user_input="I live in Lyon.", agent_response="Ok")
        listed = await call(session, "list_cubes")
        assert listed["default_cube"] == added["cube_id"]
        assert [(c["name"], c["owner"]) for c in listed["cubes"]] == [("dave", "dave")]
        recalled = await call(session, "retrieve_memory", query="Where does dave live?")
        assert "Lyon" in recalled["context"]
        assert set(await read_json(session, "memstrata://stats")) == {added["cube_id"]}
    async with http_session(http_url, keys["erin"]) as session:  # another key, another user
        assert (await call(session, "list_cubes"))["default_cube"] != added["cube_id"]
        assert "no memory item" in await fail(session, "get_memory", memory_id=added["ids"][0])
        hits = (await call(session, "search_memories", query="Lyon"))["hits"]
        assert hits == []
