"""The tools' argument types: descriptions for the agent, bounds and states taken from the core.

The SDK turns these ``Annotated`` types into each tool's JSON input schema, so a value the core
would refuse for its range or state is refused there first (a test compares the schemas with
``memstrata.limits`` and ``lifecycle.states``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from memstrata.lifecycle import states
from memstrata.limits import (
    MAX_AUDIT_LIMIT,
    MAX_BUDGET,
    MAX_CONTENT_CHARS,
    MAX_FEEDBACK_TARGETS,
    MAX_QUERY_CHARS,
    MAX_REASON,
    MAX_TOOLS,
    MAX_TOP_K,
)
from memstrata.memory.kinds import SearchInclude
from memstrata.memory.skills import Outcome

#: The states ``transition_memory`` can move to (``lifecycle.states.Target``).
Target = states.Target
#: The states ``search_memories`` leaves out unless asked, and the kinds of memory it may search
#: (``memory.kinds.SearchInclude``).
Included = SearchInclude

CubeArg = Annotated[
    str | None, Field(description="Cube to use; default: your cube (see list_cubes).")
]
MaxResults = Annotated[int, Field(ge=1, le=MAX_TOP_K, description="Most entries per list.")]
TopK = Annotated[int, Field(ge=1, le=MAX_TOP_K, description="Most hits.")]
Budget = Annotated[int, Field(ge=1, le=MAX_BUDGET, description="Size of 'context', in tokens.")]
AsOf = Annotated[
    str | None,
    Field(description="A past time (ISO 8601): answer as the memory stood then; default now."),
]
InCube = Annotated[str | None, Field(description="Optional check: the cube the memory is in.")]
Reason = Annotated[
    str | None,
    Field(max_length=MAX_REASON, description="Why; kept in the history and the audit."),
]
Query = Annotated[str, Field(max_length=MAX_QUERY_CHARS, description="What to look for.")]
UserInput = Annotated[str, Field(max_length=MAX_CONTENT_CHARS, description="What the user said.")]
AgentResponse = Annotated[
    str, Field(max_length=MAX_CONTENT_CHARS, description="What the assistant answered.")
]
NewText = Annotated[
    str | None, Field(max_length=MAX_CONTENT_CHARS, description="The memory's new text.")
]
CubeIds = Annotated[
    list[str] | None, Field(description="Cubes to search; default: all you may read.")
]
Filters = Annotated[
    dict[str, Any] | None,
    Field(
        description="Optional: session_id, tier, type, status, since, until (ISO 8601), "
        "metadata ({key: value} equality)."
    ),
]
Include = Annotated[
    list[Included] | None,
    Field(description="States to search too (left out by default); kinds: text, tool, skill."),
]
Explain = Annotated[
    bool,
    Field(
        description="Give each hit its parts: what its score is made of (each channel's rank "
        "and share, then each boost or penalty with its reason), summing to the score."
    ),
]
Messages = Annotated[
    list[dict[str, Any]],
    Field(
        description="Messages, each {content, role?, name?, timestamp?, id?, metadata?}; "
        "a message whose id is already stored is not stored twice. OpenAI chat format: an "
        "assistant's tool_calls, tool results (role tool, tool_call_id) and content as a list "
        "of parts (text, image_url with a data: URL, input_file) are stored as tool calls, "
        "images and documents."
    ),
]
ToolSteps = Annotated[
    list[dict[str, Any]] | None,
    Field(
        description="The tool use between the two, in OpenAI chat format: assistant messages "
        "with tool_calls and the tools' results (role tool, tool_call_id); each call is stored "
        "with its arguments, outcome and a bounded summary of its result."
    ),
]
ToolDefs = Annotated[
    list[dict[str, Any]] | None,
    Field(
        max_length=MAX_TOOLS,
        description="Definitions of the tools called ({type: function, function: {name, "
        "description, parameters}}): stored once per version as the tools' schemas.",
    ),
]
SessionArg = Annotated[
    str | None, Field(description="The session (one task of yours) these belong to.")
]
EndSession = Annotated[str, Field(description="The session whose task ended.")]
OutcomeArg = Annotated[
    Outcome,
    Field(description="success: learn a skill from the run; failure: demote the skills used."),
]
Goal = Annotated[
    str | None,
    Field(
        max_length=MAX_QUERY_CHARS,
        description="What the task was for; default: the session's first user message.",
    ),
]
SkillIds = Annotated[
    list[str] | None,
    Field(description="On failure, the skills the run followed; default: the same goal's."),
]
TargetArg = Annotated[
    Target,
    Field(
        description="From generated: activated; from activated: merged, archived or frozen; "
        "from archived: activated."
    ),
]
VersionArg = Annotated[int, Field(ge=1, description="The version to restore.")]
FeedbackText = Annotated[
    str,
    Field(
        max_length=MAX_QUERY_CHARS,
        description='The feedback: "No, I moved to Porto, not Lisbon", "that\'s wrong", '
        '"forget that I smoke", "yes, that\'s right".',
    ),
]
FeedbackIds = Annotated[
    list[str] | None,
    Field(
        min_length=1,
        max_length=MAX_FEEDBACK_TARGETS,
        description="The memories it is about; default: found by the text.",
    ),
]
Corrected = Annotated[
    str | None, Field(max_length=MAX_CONTENT_CHARS, description="The corrected statement.")
]
# The core checks the audit limit itself: its one-line message names the range, where a schema
# error would be the SDK's several lines.
AuditLimit = Annotated[int, Field(description=f"Most events, 1 to {MAX_AUDIT_LIMIT}.")]
EraseSession = Annotated[
    str | None, Field(description="A session of cube_id (default: your cube).")
]
EraseCube = Annotated[
    str | None,
    Field(
        description="Alone: the whole cube (you need admin on it). With session_id: the "
        "session's cube; with memory_id or subject_user_id: only in this cube."
    ),
]
Subject = Annotated[str | None, Field(description="Yourself: everything you added, in every cube.")]
AuditCube = Annotated[
    str | None,
    Field(
        description="The cube whose events to list; default: your cube, or with memory_id the "
        "memory's."
    ),
]
MemoryFilter = Annotated[str | None, Field(description="Only this memory's events.")]
Since = Annotated[str | None, Field(description="Only events from this time on (ISO 8601).")]
