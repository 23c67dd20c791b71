"""The MCP tools: each method of ``Tools`` is one tool, its docstring the tool's description.

Each tool resolves the caller (``Caller``), makes its ``MemoryOS`` call and renders the result in
``memstrata.wire``'s shapes (MemoryOS's own tools in ``memory.shaping``'s).  Every method raises
the SDK's ``ToolError`` with the core error's one line (``reporting.reported``).
"""

from __future__ import annotations

import base64
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent

from memstrata.limits import MAX_TOP_K
from memstrata.memory import shaping
from memstrata.memory.system import MemoryOS
from memstrata.model import MemoryItem, Permission, utcnow
from memstrata.reader.parts import IMAGE_TYPES
from memstrata.server.mcp.args import (
    AgentResponse,
    AsOf,
    AuditCube,
    AuditLimit,
    Budget,
    Corrected,
    CubeArg,
    CubeIds,
    EndSession,
    EraseCube,
    EraseSession,
    Explain,
    FeedbackIds,
    FeedbackText,
    Filters,
    Goal,
    Include,
    InCube,
    MaxResults,
    MemoryFilter,
    Messages,
    NewText,
    OutcomeArg,
    Query,
    Reason,
    SessionArg,
    Since,
    SkillIds,
    Subject,
    TargetArg,
    ToolDefs,
    ToolSteps,
    TopK,
    UserInput,
    VersionArg,
)
from memstrata.server.mcp.caller import Caller
from memstrata.server.mcp.reporting import reported
from memstrata.wire import artifact_to_wire, item_to_wire, scored_hit_to_wire, to_wire

#: What MemoryOS's ``add_memory`` names the assistant's turns.
ASSISTANT = "assistant"

tool = reported(ToolError)


class Tools:
    """The tools (see the module docs), bound to one ``MemoryOS`` and one ``Caller``."""

    TOOLS = (
        "add_memory", "retrieve_memory", "get_user_profile", "get_preferences", "search_memories",
        "add_memories", "get_memory", "update_memory", "delete_memory", "transition_memory",
        "memory_history", "rollback_memory", "erase_memory", "list_cubes", "share_cube",
        "revoke_cube", "list_grants", "audit", "list_artifacts", "build_activation", "feedback",
        "end_task", "get_image",
    )  # fmt: skip
    #: Tools that change nothing (MCP's ``readOnlyHint``: a client may call them unasked).
    READ_ONLY = (
        "retrieve_memory", "get_user_profile", "get_preferences", "search_memories", "get_memory",
        "memory_history", "list_cubes", "list_grants", "audit", "list_artifacts", "get_image",
    )  # fmt: skip
    #: Tools whose effect cannot be undone here (``destructiveHint``: a client should confirm).
    DESTRUCTIVE = ("delete_memory", "erase_memory", "revoke_cube", "feedback")

    def __init__(self, memory: MemoryOS, caller: Caller) -> None:
        self._memory = memory
        self._caller = caller

    # -- MemoryOS's own tools --------------------------------------------------------------------

    @tool
    def add_memory(
        self,
        user_input: UserInput,
        agent_response: AgentResponse,
        timestamp: str | None = None,
        meta_data: dict[str, Any] | None = None,
        cube_id: CubeArg = None,
        tool_steps: ToolSteps = None,
        tools: ToolDefs = None,
        session_id: SessionArg = None,
    ) -> dict[str, Any]:
        """Remember one exchange: what the user said and what the assistant answered, with the
        tools the assistant called on the way (tool_steps) if any.

        timestamp: when it happened (ISO 8601, e.g. 2026-05-01 14:30:00); default now.
        Returns the ids of the stored items: the two turns, and each tool call and new tool
        schema.  Give a session_id to end_task later.
        """
        user, cube = self._caller.scope(cube_id)
        common: dict[str, Any] = {"metadata": meta_data or {}}
        when = {} if timestamp is None else {"timestamp": timestamp}
        steps = [{**when, **step} for step in tool_steps or ()]
        messages = [
            {"role": "user", "name": user, "content": user_input, **common, **when},
            *steps,
            {"role": "assistant", "name": ASSISTANT, "content": agent_response, **common, **when},
        ]
        ids = self._memory.add(
            messages, user_id=user, cube_id=cube, session_id=session_id, tools=tools
        )
        return {"status": "success", "message": "memory added", "cube_id": cube, "ids": ids}

    @tool
    def retrieve_memory(
        self,
        query: Query,
        relationship_with_user: str = "friend",
        style_hint: str = "",
        max_results: MaxResults = 10,
        cube_id: CubeArg = None,
        budget_tokens: Budget = 1000,
    ) -> dict[str, Any]:
        """Recall what is relevant to a query: past exchanges (pages), knowledge about the user
        and the assistant, the user's profile, and 'context': all of it packed into at most
        budget_tokens tokens, ready for a prompt.

        relationship_with_user and style_hint are accepted for MemoryOS compatibility; they shape
        an answer, not retrieval, and are ignored here.
        """
        del relationship_with_user, style_hint
        user, cube = self._caller.scope(cube_id)
        found = self._memory.recall(query, user_id=user, cube_id=cube, budget_tokens=budget_tokens)
        pages = [shaping.page(i) for i in found.pages]
        users = [shaping.knowledge(i) for i in found.user_knowledge]
        assistant = [shaping.knowledge(i) for i in found.assistant_knowledge]
        return {
            "status": "success",
            "query": query,
            "timestamp": utcnow().isoformat(),
            "cube_id": cube,
            "user_profile": found.profile,
            "short_term_memory": [shaping.page(i) for i in found.working][-max_results:],
            "retrieved_pages": pages[:max_results],
            "retrieved_user_knowledge": users[:max_results],
            "retrieved_assistant_knowledge": assistant[:max_results],
            "total_pages_found": len(pages),
            "total_user_knowledge_found": len(users),
            "total_assistant_knowledge_found": len(assistant),
            "context": found.context.text,
        }

    @tool
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
            "user_profile": shaping.profile_summary(user, attributes),
            "profile": to_wire(attributes),
        }
        if include_knowledge:
            found = self._list(user, cube, tier="long", type=shaping.USER_KNOWLEDGE)
            known = [shaping.knowledge(i) for i in found]
            result |= {"user_knowledge": known, "user_knowledge_count": len(known)}
        if include_assistant_knowledge:
            found = self._list(user, cube, tier="long", type="knowledge")
            known = [shaping.knowledge(i) for i in found]
            result |= {"assistant_knowledge": known, "assistant_knowledge_count": len(known)}
        return result

    @tool
    def get_preferences(self, cube_id: CubeArg = None) -> dict[str, Any]:
        """The user's current preferences: what they like (polarity 1) or dislike (-1), stated
        (explicit) or shown by what they do, each with the ids of its evidence turns."""
        user, cube = self._caller.scope(cube_id)
        found = self._memory.get_preferences(user_id=user, cube_id=cube)
        return {
            "status": "success",
            "user_id": user,
            "cube_id": cube,
            "preferences": to_wire(found),
            "preference_count": len(found),
        }

    # -- memories --------------------------------------------------------------------------------

    @tool
    def search_memories(
        self,
        query: Query,
        top_k: TopK = 10,
        cube_ids: CubeIds = None,
        filters: Filters = None,
        include: Include = None,
        as_of: AsOf = None,
        explain: Explain = False,
    ) -> dict[str, Any]:
        """Hybrid (keyword + vector) search, best first: each hit has its score and item.

        Merged, archived and frozen memories are left out unless include names them.  With
        as_of, the search answers as the memory stood then (slower: it reads the history).
        With explain, each hit also has its parts: why it ranks where it does.
        """
        hits = self._memory.search(
            query, user_id=self._caller.user(), cube_ids=cube_ids, top_k=top_k, filters=filters,
            include=include, as_of=as_of,
        )  # fmt: skip
        return {"hits": [scored_hit_to_wire(h, parts=explain) for h in hits]}

    @tool
    def add_memories(
        self,
        messages: Messages,
        session_id: str | None = None,
        cube_id: CubeArg = None,
        tools: ToolDefs = None,
    ) -> dict[str, Any]:
        """Remember messages (turns of a conversation, notes, tool calls and their results,
        images, files); returns the ids of every item stored, in order."""
        user, cube = self._caller.scope(cube_id)
        ids = self._memory.add(
            messages, user_id=user, cube_id=cube, session_id=session_id, tools=tools
        )
        return {"cube_id": cube, "ids": ids}

    @tool
    def end_task(
        self,
        session_id: EndSession,
        outcome: OutcomeArg = "success",
        goal: Goal = None,
        skill_ids: SkillIds = None,
        cube_id: CubeArg = None,
    ) -> dict[str, Any]:
        """Say how the task of a session ended, so the memory learns how to do it: success
        distils a skill (goal, steps with the tools and argument patterns, pitfalls) from the
        session's tool calls, or improves the same goal's skill; failure demotes the skills the
        run followed.  Find skills later with search_memories(include=["skill"]).  Returns the
        skills written (none when a successful run called no tool)."""
        user, cube = self._caller.scope(cube_id)
        skills = self._memory.end_task(
            user_id=user, cube_id=cube, session_id=session_id, outcome=outcome, goal=goal,
            skill_ids=skill_ids,
        )  # fmt: skip
        return {"cube_id": cube, "skills": [item_to_wire(s) for s in skills]}

    @tool
    def get_image(self, memory_id: str, cube_id: InCube = None) -> ImageContent:
        """An image a message sent (a memory of type image, found by its caption), as an image
        you can look at.  An image kept only as an address was never downloaded: not found."""
        user = self._caller.user()
        media, data = self._memory.get_image(memory_id, user_id=user, cube_id=cube_id)
        if media not in IMAGE_TYPES:  # a writer may change an item's metadata: never relayed
            raise ToolError(f"memory {memory_id} holds no PNG, JPEG, GIF or WebP image")
        return ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=media)

    @tool
    def get_memory(self, memory_id: str, as_of: AsOf = None) -> dict[str, Any]:
        """One memory item, current version (a deleted one shows status 'deleted'), or with
        as_of the version current then."""
        return item_to_wire(self._memory.get(memory_id, user_id=self._caller.user(), as_of=as_of))

    @tool
    def update_memory(
        self,
        memory_id: str,
        text: NewText = None,
        metadata: dict[str, Any] | None = None,
        reason: Reason = None,
    ) -> dict[str, Any]:
        """Write a new version of a memory with new text and/or metadata; the old one stays in
        its history.  reason is kept with the change."""
        item = self._memory.update(
            memory_id, user_id=self._caller.user(), text=text, metadata=metadata, reason=reason
        )
        return item_to_wire(item)

    @tool
    def delete_memory(self, memory_id: str, reason: Reason = None) -> dict[str, Any]:
        """Delete a memory: out of search and recall, its history kept.  Deleting twice is fine."""
        item = self._memory.delete(memory_id, user_id=self._caller.user(), reason=reason)
        return {"id": item.id, "status": item.status, "version": item.version}

    # -- lifecycle and governance ----------------------------------------------------------------

    @tool
    def transition_memory(
        self, memory_id: str, to: TargetArg, reason: Reason = None, cube_id: InCube = None
    ) -> dict[str, Any]:
        """Move a memory to another lifecycle state; returns the new version.

        Merged, archived and frozen memories are left out of search; frozen ones are read-only;
        archived ones can be activated again.  reason is kept with the change.  To delete, use
        delete_memory or erase_memory.
        """
        user = self._caller.user()
        item = self._memory.transition(memory_id, to, user_id=user, reason=reason, cube_id=cube_id)
        return item_to_wire(item)

    @tool
    def memory_history(self, memory_id: str) -> dict[str, Any]:
        """Every version of a memory, oldest first: its number, the memory as it stood, when,
        by whom and why."""
        return {"versions": to_wire(self._memory.history(memory_id, user_id=self._caller.user()))}

    @tool
    def rollback_memory(
        self, memory_id: str, version: VersionArg, reason: Reason = None
    ) -> dict[str, Any]:
        """Restore an old version of a memory (text, metadata, state) as a new version; the
        history keeps every version.  reason is kept with it."""
        user = self._caller.user()
        return item_to_wire(self._memory.rollback(memory_id, version, user_id=user, reason=reason))

    @tool
    def erase_memory(
        self,
        memory_id: str | None = None,
        session_id: EraseSession = None,
        cube_id: EraseCube = None,
        subject_user_id: Subject = None,
        reason: Reason = None,
    ) -> dict[str, Any]:
        """Erase for good (GDPR), unlike delete_memory: the content leaves the memory, its
        history and every index, with the memories derived from it; only tombstones stay.

        Name one thing: memory_id, session_id, cube_id alone (the cube itself goes), or
        subject_user_id.  It cannot be undone: confirm with the user first.  Returns how many
        memories were erased.
        """
        user = self._caller.user()
        if session_id is not None:
            cube_id = self._caller.scope(cube_id)[1]
        erased = self._memory.erase(
            memory_id, user_id=user, session_id=session_id, cube_id=cube_id,
            subject_user_id=subject_user_id, reason=reason, own_data_only=True,
        )  # fmt: skip
        return {"erased": erased}

    @tool
    def feedback(
        self,
        text: FeedbackText,
        item_ids: FeedbackIds = None,
        corrected: Corrected = None,
        cube_id: CubeArg = None,
    ) -> dict[str, Any]:
        """Tell the memory it is right or wrong, in words: a correction ("No, I moved to Porto,
        not Lisbon": the old memory stops holding, the corrected one is stored), a rejection
        ("that's wrong": archived), a request to forget ("forget that I smoke": erased for good,
        which cannot be undone) or a confirmation ("yes, that's right").  Without item_ids the
        memories are found by the text.  Returns the kind read, the memories affected and a
        correction's new memory."""
        user, cube = self._caller.scope(cube_id)
        result = self._memory.feedback(
            text, user_id=user, cube_id=cube, item_ids=item_ids, corrected=corrected
        )
        wired: dict[str, Any] = to_wire(result)
        return wired

    @tool
    def audit(
        self,
        cube_id: AuditCube = None,
        memory_id: MemoryFilter = None,
        since: Since = None,
        limit: AuditLimit = 1000,
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
        return {"events": to_wire(events)}

    # -- cubes and sharing -----------------------------------------------------------------------

    @tool
    def list_cubes(self) -> dict[str, Any]:
        """The cubes you may read (owned or shared with you), oldest first, and your own cube."""
        user, cube = self._caller.scope()
        return {"default_cube": cube, "cubes": to_wire(self._memory.list_cubes(user_id=user))}

    @tool
    def share_cube(self, cube_id: str, user_id: str, permission: Permission) -> dict[str, Any]:
        """Give another user read, write or admin permission on a cube (you need admin on it)."""
        grant = self._memory.grant(cube_id, user_id, permission, by=self._caller.user())
        record: dict[str, Any] = to_wire(grant)
        return record

    @tool
    def revoke_cube(self, cube_id: str, user_id: str) -> dict[str, Any]:
        """Take away a user's permission on a cube (you need admin on it; its owner keeps admin)."""
        self._memory.revoke(cube_id, user_id, by=self._caller.user())
        return {"cube_id": cube_id, "user_id": user_id, "revoked": True}

    @tool
    def list_grants(self, cube_id: str) -> dict[str, Any]:
        """Who holds which permission on a cube, oldest grant first (you need admin on it)."""
        return {"grants": to_wire(self._memory.grants(cube_id, by=self._caller.user()))}

    # -- artifacts ---------------------------------------------------------------------------------

    @tool
    def list_artifacts(self, cube_id: CubeArg = None) -> dict[str, Any]:
        """A cube's KV caches and LoRA adapters, oldest first (id, kind, fingerprint, size,
        metadata: a KV cache's model, token count and source items with their versions)."""
        user, cube = self._caller.scope(cube_id)
        found = self._memory.artifacts(cube, user_id=user)
        return {"cube_id": cube, "artifacts": [artifact_to_wire(a) for a in found]}

    @tool
    def build_activation(self, cube_id: CubeArg = None) -> dict[str, Any]:
        """Have the server's local chat model read the cube's stable context (profile, pinned
        and newest facts) now and keep its KV cache, so its chats start faster; ``artifact`` is
        null without a local model or when nothing is stable yet (you need write)."""
        user, cube = self._caller.scope(cube_id)
        made = self._memory.build_activation(cube, user_id=user)
        return {"cube_id": cube, "artifact": None if made is None else artifact_to_wire(made)}

    def _list(self, user: str, cube: str, **filters: object) -> list[MemoryItem]:
        """The cube's items passing ``filters``, oldest first (at most ``MAX_TOP_K``)."""
        return self._memory.list_memories(cube, user_id=user, filters=filters, limit=MAX_TOP_K)
