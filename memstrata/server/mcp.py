"""The MCP server: MemoryOS's tools, and memstrata's, over the official ``mcp`` SDK (stdio or HTTP).

A thin adapter: every tool parses its arguments, calls ``MemoryOS`` and returns plain JSON.

Who calls, and which cube is theirs:

- **stdio** (a local client such as Claude Desktop starts the server): one configured user and
  cube, created on first use if absent (like ``memstrata.compat.Memoryos``); ``fixed_caller``.
- **streamable HTTP**: the user of the ``Authorization: Bearer KEY`` header
  (``MemoryOS.authenticate``); a request without a valid key is answered 401 before any tool
  runs.  Their cube is their *default cube*: the oldest cube they own, or a new one named after
  them when they own none (``default_cube``).  A tool that takes ``cube_id`` acts on that cube
  instead, if the caller's grants allow.

What an agent may do is what its user may (the core checks the grants), with one exception:
``erase_memory`` erases a data subject's data only when the subject is the caller, since an agent
reads what others wrote and must not be talked into wiping their data.  Each tool carries MCP's
``readOnlyHint`` / ``destructiveHint`` so that a client can ask its user before acting.

Errors: a ``MemstrataError`` becomes an MCP tool error (``isError``) whose text is the error's
one-line message (a resource read answers a JSON-RPC error with it); never a traceback.  Tools are
synchronous and the SDK runs each call on a worker thread, so the event loop never waits on an
embedding or the database (``MemoryOS`` is thread-safe).
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import fields, is_dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import ToolAnnotations
from pydantic import AnyHttpUrl, Field

from memstrata import __version__
from memstrata.errors import AlreadyExists, CubeNotFound, MemstrataError, Unauthenticated
from memstrata.memory.system import MAX_TOP_K, MemoryOS
from memstrata.model import MemoryItem, Permission, ProfileAttribute, utcnow

P = ParamSpec("P")
R = TypeVar("R")

#: What MemoryOS's ``add_memory`` names the assistant's turns.
ASSISTANT = "assistant"
#: Tokens of the packed ``context`` that ``retrieve_memory`` returns by default.
RETRIEVE_BUDGET = 1000
#: The long-tier types MemoryOS calls user knowledge (``knowledge`` is the assistant's).
USER_KNOWLEDGE = ("fact", "profile", "preference")

INSTRUCTIONS = (
    "Long-term memory for this user. Call add_memory after each exchange worth keeping; call "
    "retrieve_memory before answering a question that may depend on the past; the 'context' "
    "field of its result is ready to put in a prompt."
)

CubeArg = Annotated[
    str | None, Field(description="Cube to use; default: your cube (see list_cubes).")
]
MaxResults = Annotated[int, Field(ge=1, le=MAX_TOP_K, description="Most entries per list.")]
AsOf = Annotated[
    str | None,
    Field(description="A past time (ISO 8601): answer as the memory stood then; default now."),
]
InCube = Annotated[str | None, Field(description="Optional check: the cube the memory is in.")]
#: The states ``transition_memory`` can move to (the targets of ``lifecycle.states.TRANSITIONS``).
Target = Literal["activated", "merged", "archived", "frozen"]
#: The states ``search_memories`` leaves out unless asked (``lifecycle.states.INCLUDABLE``).
Included = Literal["merged", "archived", "frozen"]


# -- who is calling ------------------------------------------------------------------------------


class Caller:
    """Resolves the acting user and their cube for the current request.

    ``user`` is fixed (stdio) or, when None, read from the request's bearer key (HTTP).
    """

    def __init__(self, memory: MemoryOS, user: str | None = None, cube: str | None = None) -> None:
        self._memory = memory
        self._user = user
        self._cube = cube
        self._lock = threading.Lock()

    def user(self) -> str:
        """The acting user; ``Unauthenticated`` over HTTP without a verified key."""
        if self._user is not None:
            return self._user
        token = get_access_token()
        if token is None:
            raise Unauthenticated("an API key is required", hint="send 'Authorization: Bearer KEY'")
        return token.client_id

    def scope(self, cube_id: str | None = None) -> tuple[str, str]:
        """``(user, cube)``: ``cube_id`` when given, else the caller's own cube."""
        user = self.user()
        if cube_id is not None:
            return user, cube_id
        if self._cube is not None:
            return user, self._cube
        return user, default_cube(self._memory, user, self._lock)


def default_cube(memory: MemoryOS, user_id: str, lock: threading.Lock) -> str:
    """The oldest cube ``user_id`` owns; a new one named after them if they own none.

    ``lock`` makes concurrent first calls create one cube, not several.
    """
    with lock:
        owned = [c for c in memory.list_cubes(user_id=user_id) if c.owner == user_id]
        return owned[0].cube_id if owned else memory.create_cube(user_id, owner=user_id).cube_id


def fixed_caller(memory: MemoryOS, user_id: str, cube_id: str | None = None) -> Caller:
    """The stdio caller: ``user_id`` and ``cube_id`` (default: their default cube).

    The user, and a named cube, are created when absent (the cube with id and name ``cube_id``,
    owned by ``user_id``).  A cube that exists but that the user may not read raises
    ``PermissionDenied``.
    """
    with suppress(AlreadyExists):
        memory.create_user(user_id)
    if cube_id is None:
        return Caller(memory, user_id, default_cube(memory, user_id, threading.Lock()))
    try:
        memory.get_cube(cube_id, user_id=user_id)
    except CubeNotFound:
        with suppress(AlreadyExists):  # another process created it meanwhile
            memory.create_cube(cube_id, owner=user_id, cube_id=cube_id)
    return Caller(memory, user_id, cube_id)


class KeyVerifier:
    """The SDK's ``TokenVerifier`` for memstrata API keys (``MemoryOS.authenticate``)."""

    def __init__(self, memory: MemoryOS) -> None:
        self._memory = memory

    async def verify_token(self, token: str) -> AccessToken | None:
        """The key's user as ``client_id`` and ``subject``; None for an unknown or revoked key."""
        try:
            user = await anyio.to_thread.run_sync(self._memory.authenticate, token)
        except Unauthenticated:
            return None
        return AccessToken(token=token, client_id=user.user_id, subject=user.user_id, scopes=[])


# -- rendering -----------------------------------------------------------------------------------


def plain(value: object) -> Any:
    """``value`` as JSON-ready data: dataclasses as objects of their fields, times as ISO 8601."""
    if isinstance(value, datetime):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _page(item: MemoryItem) -> dict[str, Any]:
    """A retrieved turn as MemoryOS-style page (as ``memstrata.compat`` shows it), with its id."""
    when = item.event_time.isoformat()
    return {"id": item.id, "text": item.text, "speaker": item.speaker, "timestamp": when}


def _record(value: object) -> dict[str, Any]:
    """``plain(value)`` for a dataclass instance: a JSON object."""
    record: dict[str, Any] = plain(value)
    return record


def _knowledge(item: MemoryItem) -> dict[str, Any]:
    return {"id": item.id, "knowledge": item.text, "timestamp": item.event_time.isoformat()}


def one_line(exc: MemstrataError) -> str:
    """The error's message and hint on one line."""
    return " ".join(str(exc).split())


def _reported(fn: Callable[P, R], error: type[Exception]) -> Callable[P, R]:
    """``fn`` with a ``MemstrataError`` re-raised as ``error`` (the SDK's) with its one line."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except MemstrataError as exc:
            raise error(one_line(exc)) from exc

    return call


# -- tools and resources -------------------------------------------------------------------------


class Tools:
    """The tools and resources; each method is one MCP tool (its docstring is the description)."""

    TOOLS = (
        "add_memory",
        "retrieve_memory",
        "get_user_profile",
        "search_memories",
        "add_memories",
        "get_memory",
        "update_memory",
        "delete_memory",
        "transition_memory",
        "memory_history",
        "rollback_memory",
        "erase_memory",
        "list_cubes",
        "share_cube",
        "revoke_cube",
        "list_grants",
        "audit",
    )
    #: Tools that change nothing (MCP's ``readOnlyHint``: a client may call them unasked).
    READ_ONLY = (
        "retrieve_memory", "get_user_profile", "search_memories", "get_memory", "memory_history",
        "list_cubes", "list_grants", "audit",
    )  # fmt: skip
    #: Tools whose effect cannot be undone here (``destructiveHint``: a client should confirm).
    DESTRUCTIVE = ("delete_memory", "erase_memory", "revoke_cube")

    def __init__(self, memory: MemoryOS, caller: Caller) -> None:
        self._memory = memory
        self._caller = caller

    def add_memory(
        self,
        user_input: str,
        agent_response: str,
        timestamp: str | None = None,
        meta_data: dict[str, Any] | None = None,
        cube_id: CubeArg = None,
    ) -> dict[str, Any]:
        """Remember one exchange: what the user said and what the assistant answered.

        timestamp: when it happened (ISO 8601, e.g. 2026-05-01 14:30:00); default now.
        Returns the ids of the two stored turns.
        """
        user, cube = self._caller.scope(cube_id)
        common: dict[str, Any] = {"metadata": meta_data or {}}
        if timestamp is not None:
            common["timestamp"] = timestamp
        messages = [
            {"role": "user", "name": user, "content": user_input, **common},
            {"role": "assistant", "name": ASSISTANT, "content": agent_response, **common},
        ]
        ids = self._memory.add(messages, user_id=user, cube_id=cube)
        return {"status": "success", "message": "memory added", "cube_id": cube, "ids": ids}

    def retrieve_memory(
        self,
        query: str,
        relationship_with_user: str = "friend",
        style_hint: str = "",
        max_results: MaxResults = 10,
        cube_id: CubeArg = None,
        budget_tokens: Annotated[int, Field(ge=1, description="Size of 'context'.")] = 1000,
    ) -> dict[str, Any]:
        """Recall what is relevant to a query: past exchanges (pages), knowledge about the user
        and the assistant, the user's profile, and 'context': all of it packed into at most
        budget_tokens tokens, ready for a prompt.

        relationship_with_user and style_hint are accepted for MemoryOS compatibility; they shape
        an answer, not retrieval, and are ignored here.
        """
        del relationship_with_user, style_hint
        user, cube = self._caller.scope(cube_id)
        ctx = self._memory.context(
            query, user_id=user, cube_ids=[cube], budget_tokens=budget_tokens,
            expand_sources=False,  # MemoryOS returns pages and knowledge apart
        )  # fmt: skip
        long = [i for i in ctx.items if i.tier == "long"]
        pages = [_page(i) for i in ctx.items if i.type == "turn"]
        users = [_knowledge(i) for i in long if i.type != "knowledge"]
        assistant = [_knowledge(i) for i in long if i.type == "knowledge"]
        working = self._list(user, cube, tier="working", type="turn")
        return {
            "status": "success",
            "query": query,
            "timestamp": utcnow().isoformat(),
            "cube_id": cube,
            "user_profile": self._summary(user, cube),
            "short_term_memory": [_page(i) for i in working][-max_results:],
            "retrieved_pages": pages[:max_results],
            "retrieved_user_knowledge": users[:max_results],
            "retrieved_assistant_knowledge": assistant[:max_results],
            "total_pages_found": len(pages),
            "total_user_knowledge_found": len(users),
            "total_assistant_knowledge_found": len(assistant),
            "context": ctx.text,
        }

    def get_user_profile(
        self,
        include_knowledge: bool = True,
        include_assistant_knowledge: bool = False,
        cube_id: CubeArg = None,
    ) -> dict[str, Any]:
        """The user's profile (one 'key: value' line per current attribute, and the attributes
        with their evidence), optionally with what is known about the user and the assistant."""
        user, cube = self._caller.scope(cube_id)
        attributes = self._memory.get_profile(user_id=user, cube_id=cube)
        result: dict[str, Any] = {
            "status": "success",
            "user_id": user,
            "assistant_id": ASSISTANT,
            "cube_id": cube,
            "user_profile": _summary(user, attributes),
            "profile": plain(attributes),
        }
        if include_knowledge:
            known = [
                _knowledge(i) for i in self._list(user, cube, tier="long", type=USER_KNOWLEDGE)
            ]
            result |= {"user_knowledge": known, "user_knowledge_count": len(known)}
        if include_assistant_knowledge:
            known = [_knowledge(i) for i in self._list(user, cube, tier="long", type="knowledge")]
            result |= {"assistant_knowledge": known, "assistant_knowledge_count": len(known)}
        return result

    def search_memories(
        self,
        query: str,
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K)] = 10,
        cube_ids: Annotated[
            list[str] | None, Field(description="Cubes to search; default: all you may read.")
        ] = None,
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description="Optional: session_id, tier, type, status, since, until (ISO 8601), "
                "metadata ({key: value} equality)."
            ),
        ] = None,
        include: Annotated[
            list[Included] | None,
            Field(description="States to search too; left out by default."),
        ] = None,
        as_of: AsOf = None,
    ) -> dict[str, Any]:
        """Hybrid (keyword + vector) search, best first: each hit has its score and item.

        Merged, archived and frozen memories are left out unless include names them.  With
        as_of, the search answers as the memory stood then (slower: it reads the history).
        """
        hits = self._memory.search(
            query, user_id=self._caller.user(), cube_ids=cube_ids, top_k=top_k, filters=filters,
            include=include, as_of=as_of,
        )  # fmt: skip
        return {"hits": plain(hits)}

    def add_memories(
        self,
        messages: Annotated[
            list[dict[str, Any]],
            Field(
                description="Messages, each {content, role?, name?, timestamp?, id?, metadata?}; "
                "a message whose id is already stored is not stored twice."
            ),
        ],
        session_id: str | None = None,
        cube_id: CubeArg = None,
    ) -> dict[str, Any]:
        """Remember messages (turns of a conversation, notes); returns their ids in order."""
        user, cube = self._caller.scope(cube_id)
        ids = self._memory.add(messages, user_id=user, cube_id=cube, session_id=session_id)
        return {"cube_id": cube, "ids": ids}

    def get_memory(self, memory_id: str, as_of: AsOf = None) -> dict[str, Any]:
        """One memory item, current version (a deleted one shows status 'deleted'), or with
        as_of the version current then."""
        return _record(self._memory.get(memory_id, user_id=self._caller.user(), as_of=as_of))

    def update_memory(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Write a new version of a memory with new text and/or metadata; the old one stays in
        its history.  reason is kept with the change."""
        item = self._memory.update(
            memory_id, user_id=self._caller.user(), text=text, metadata=metadata, reason=reason
        )
        return _record(item)

    def delete_memory(self, memory_id: str, reason: str | None = None) -> dict[str, Any]:
        """Delete a memory: out of search and recall, its history kept.  Deleting twice is fine."""
        item = self._memory.delete(memory_id, user_id=self._caller.user(), reason=reason)
        return {"id": item.id, "status": item.status, "version": item.version}

    def transition_memory(
        self,
        memory_id: str,
        to: Annotated[
            Target,
            Field(
                description="From generated: activated; from activated: merged, archived or "
                "frozen; from archived: activated."
            ),
        ],
        reason: str | None = None,
        cube_id: InCube = None,
    ) -> dict[str, Any]:
        """Move a memory to another lifecycle state; returns the new version.

        Merged, archived and frozen memories are left out of search; frozen ones are read-only;
        archived ones can be activated again.  reason is kept with the change.  To delete, use
        delete_memory or erase_memory.
        """
        user = self._caller.user()
        item = self._memory.transition(memory_id, to, user_id=user, reason=reason, cube_id=cube_id)
        return _record(item)

    def memory_history(self, memory_id: str) -> dict[str, Any]:
        """Every version of a memory, oldest first: its number, the memory as it stood, when,
        by whom and why."""
        return {"versions": plain(self._memory.history(memory_id, user_id=self._caller.user()))}

    def rollback_memory(
        self,
        memory_id: str,
        version: Annotated[int, Field(ge=1, description="The version to restore.")],
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Restore an old version of a memory (text, metadata, state) as a new version; the
        history keeps every version.  reason is kept with it."""
        user = self._caller.user()
        return _record(self._memory.rollback(memory_id, version, user_id=user, reason=reason))

    def erase_memory(
        self,
        memory_id: str | None = None,
        session_id: Annotated[
            str | None, Field(description="A session of cube_id (default: your cube).")
        ] = None,
        cube_id: Annotated[
            str | None,
            Field(
                description="Alone: the whole cube (you need admin on it). With session_id: the "
                "session's cube; with memory_id or subject_user_id: only in this cube."
            ),
        ] = None,
        subject_user_id: Annotated[
            str | None, Field(description="Yourself: everything you added, in every cube.")
        ] = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Erase for good (GDPR), unlike delete_memory: the content leaves the memory, its
        history and every index, with the memories derived from it; only tombstones stay.

        Name one thing: memory_id, session_id, cube_id alone (the cube itself goes), or
        subject_user_id.  It cannot be undone: confirm with the user first.  Returns how many
        memories were erased.
        """
        user = self._caller.user()
        if subject_user_id is not None and subject_user_id != user:
            raise ToolError(  # an agent reads what others wrote; it must not wipe their data
                f"subject_user_id must be you ({user!r}): over MCP you may erase only your own "
                "data (an administrator erases another user's outside MCP)"
            )
        if session_id is not None:
            cube_id = self._caller.scope(cube_id)[1]
        erased = self._memory.erase(
            memory_id, user_id=user, session_id=session_id, cube_id=cube_id,
            subject_user_id=subject_user_id, reason=reason,
        )  # fmt: skip
        return {"erased": erased}

    def list_cubes(self) -> dict[str, Any]:
        """The cubes you may read (owned or shared with you), oldest first, and your own cube."""
        user, cube = self._caller.scope()
        return {"default_cube": cube, "cubes": plain(self._memory.list_cubes(user_id=user))}

    def share_cube(self, cube_id: str, user_id: str, permission: Permission) -> dict[str, Any]:
        """Give another user read, write or admin permission on a cube (you need admin on it)."""
        grant = self._memory.grant(cube_id, user_id, permission, by=self._caller.user())
        return _record(grant)

    def revoke_cube(self, cube_id: str, user_id: str) -> dict[str, Any]:
        """Take away a user's permission on a cube (you need admin on it; its owner keeps admin)."""
        self._memory.revoke(cube_id, user_id, by=self._caller.user())
        return {"cube_id": cube_id, "user_id": user_id, "revoked": True}

    def list_grants(self, cube_id: str) -> dict[str, Any]:
        """Who holds which permission on a cube, oldest grant first (you need admin on it)."""
        return {"grants": plain(self._memory.grants(cube_id, by=self._caller.user()))}

    def audit(
        self,
        cube_id: Annotated[
            str | None,
            Field(
                description="The cube whose events to list; default: your cube, or with "
                "memory_id the memory's."
            ),
        ] = None,
        memory_id: Annotated[str | None, Field(description="Only this memory's events.")] = None,
        since: Annotated[
            str | None, Field(description="Only events from this time on (ISO 8601).")
        ] = None,
        limit: Annotated[int, Field(description="Most events, 1 to 10000.")] = 1000,
    ) -> dict[str, Any]:
        """The audit trail, oldest first: each event's op (create, update, transition,
        rollback, delete, merge, grant, revoke, erase...), time, actor, memory, the memory
        before and after, and reason.  You need admin on the cube."""
        user = self._caller.user()
        if memory_id is None:
            cube_id = self._caller.scope(cube_id)[1]
        events = self._memory.audit(
            by=user, cube_id=cube_id, item_id=memory_id, since=since, limit=limit
        )
        return {"events": plain(events)}

    # resources

    def profile(self) -> str:
        """Your cube's profile: a summary line per attribute, and the attributes with evidence."""
        return self.cube_profile(self._caller.scope()[1])

    def cube_profile(self, cube_id: str) -> str:
        """A cube's profile: a summary line per attribute, and the attributes with evidence."""
        user = self._caller.user()
        attributes = self._memory.get_profile(user_id=user, cube_id=cube_id)
        summary = _summary(user, attributes)
        return _json({"cube_id": cube_id, "summary": summary, "attributes": plain(attributes)})

    def stats(self) -> str:
        """Per cube you may read: items by tier/type, pending background tasks, LLM usage."""
        return _json(self._memory.stats(user_id=self._caller.user()))

    def cube_stats(self, cube_id: str) -> str:
        """One cube's items by tier/type, pending background tasks and LLM usage."""
        return _json(self._memory.stats(user_id=self._caller.user(), cube_id=cube_id))

    def _list(self, user: str, cube: str, **filters: object) -> list[MemoryItem]:
        """The cube's items passing ``filters``, oldest first (at most ``MAX_TOP_K``)."""
        return self._memory.list_memories(cube, user_id=user, filters=filters, limit=MAX_TOP_K)

    def _summary(self, user: str, cube: str) -> str:
        return _summary(user, self._memory.get_profile(user_id=user, cube_id=cube))


def _summary(user: str, attributes: list[ProfileAttribute]) -> str:
    """The user's attributes, one ``key: value`` line each ("" if none), as ``compat`` shows them."""
    return "\n".join(
        f"{a.key.replace('_', ' ')}: {a.value}" for a in attributes if a.subject == user
    )


def _json(value: object) -> str:
    return json.dumps(plain(value), ensure_ascii=False)


RESOURCES = (
    ("memstrata://profile", "profile"),
    ("memstrata://stats", "stats"),
    ("memstrata://cubes/{cube_id}/profile", "cube_profile"),
    ("memstrata://cubes/{cube_id}/stats", "cube_stats"),
)


# -- the server ----------------------------------------------------------------------------------


def build_server(memory: MemoryOS, caller: Caller, *, auth_url: str | None = None) -> MCPServer:
    """An ``MCPServer`` with every tool and resource bound to ``memory`` and ``caller``.

    With ``auth_url`` (the server's own base URL, HTTP only) every request must carry a live
    API key; ``caller`` must then be an unfixed ``Caller(memory)``.
    """
    auth = None
    if auth_url is not None:  # the SDK's bearer check, without OAuth: no issuer is advertised
        auth = AuthSettings(issuer_url=AnyHttpUrl(auth_url), resource_server_url=None)
    server: MCPServer = MCPServer(
        "memstrata",
        instructions=INSTRUCTIONS,
        version=__version__,
        auth=auth,
        token_verifier=None if auth is None else KeyVerifier(memory),
    )
    tools = Tools(memory, caller)
    for name in Tools.TOOLS:
        method = getattr(tools, name)
        hints = ToolAnnotations(
            read_only_hint=name in Tools.READ_ONLY, destructive_hint=name in Tools.DESTRUCTIVE
        )
        server.add_tool(
            _reported(method, ToolError), name=name, description=inspect.getdoc(method),
            annotations=hints,
        )  # fmt: skip
    for uri, name in RESOURCES:
        reader = _reported(getattr(tools, name), ResourceError)
        description = inspect.getdoc(reader)
        server.resource(uri, name=name, description=description, mime_type="application/json")(
            reader
        )
    return server


def serve_stdio(memory: MemoryOS, user_id: str, cube_id: str | None = None) -> None:
    """Serve over stdin/stdout until the client closes them (see ``fixed_caller``)."""
    build_server(memory, fixed_caller(memory, user_id, cube_id)).run("stdio")


def serve_http(memory: MemoryOS, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted; keys required."""
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    server = build_server(memory, Caller(memory), auth_url=base)
    server.run(
        "streamable-http",
        host=host,
        port=port,
        max_request_body_size=memory.settings.max_request_bytes,
    )
