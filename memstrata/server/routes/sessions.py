"""Sessions as tasks: ``POST /sessions/{session_id}/end`` (``MemoryOS.end_task``).

A session's turns and tool calls are one task of an agent (docs/tools-skills.md); saying how it
ended teaches skill memory: a success distils (or improves) a skill, a failure demotes the skills
the run followed.  The body's model is here, beside its one route, like the product API's.
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from memstrata.limits import MAX_QUERY_CHARS
from memstrata.memory.skills import Outcome
from memstrata.server.auth import Caller, Memory
from memstrata.server.routes import check_self, make_router
from memstrata.server.schemas import MemoryOut

router = make_router("memories")


class EndTaskIn(BaseModel):
    """How the task of a session ended."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    cube_id: str = Field(validation_alias=AliasChoices("cube_id", "mem_cube_id"))
    outcome: Outcome = Field(
        default="success", description="success: learn a skill; failure: demote the skills used."
    )
    goal: str | None = Field(
        default=None,
        max_length=MAX_QUERY_CHARS,
        description="What the task was for; default: the session's first user turn.",
    )
    skill_ids: list[str] | None = Field(
        default=None,
        description="On failure, the skills the run followed; default: those of the same goal.",
    )
    user_id: str | None = Field(
        default=None,
        description="Accepted for MemOS clients; must be the caller's own id (the key says who).",
    )


class EndTaskOut(BaseModel):
    """The skills written: the one learnt (none when the run called no tool), or those demoted."""

    skills: list[MemoryOut]


@router.post("/sessions/{session_id}/end", summary="Say how a session's task ended (skills)")
def end_task(session_id: str, body: EndTaskIn, memory: Memory, user: Caller) -> EndTaskOut:
    """``MemoryOS.end_task`` on the session's turns and tool calls in ``cube_id`` (needs write)."""
    check_self(body.user_id, user)
    skills = memory.end_task(
        user_id=user.user_id, cube_id=body.cube_id, session_id=session_id, outcome=body.outcome,
        goal=body.goal, skill_ids=body.skill_ids,
    )  # fmt: skip
    return EndTaskOut(skills=[MemoryOut.of(s) for s in skills])
