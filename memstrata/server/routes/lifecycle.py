"""Lifecycle and governance: transitions, rollback, erasure and the audit trail (docs/lifecycle.md).

``/memories/{cube_id}/{memory_id}/transition`` and ``…/rollback`` write a new version of one item;
``/erase`` is ``MemoryOS.erase`` (an item, a session, a cube or a data subject); ``/audit`` reads
the append-only events.  Reading an item or searching as of a past time are the ``as_of`` options
of ``GET /memories/{cube_id}/{memory_id}`` and ``POST /search``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Query

from memstrata.limits import MAX_AUDIT_LIMIT
from memstrata.model import Event
from memstrata.server.auth import Caller, Memory
from memstrata.server.routes import check_self, make_router
from memstrata.server.schemas import (
    Erased,
    EraseIn,
    ExpireIn,
    FeedbackIn,
    FeedbackOut,
    MemoryOut,
    RollbackIn,
    TransitionIn,
)

router = make_router("lifecycle")


@router.post(
    "/memories/{cube_id}/{memory_id}/transition", summary="Move an item to another lifecycle state"
)
def transition(
    cube_id: str, memory_id: str, body: TransitionIn, memory: Memory, user: Caller
) -> MemoryOut:
    """Needs write.  A move the lifecycle does not allow (from frozen, to generated…) is a 409
    naming the legal ones; a state that is no target (``generated``, ``deleted``) is a 422."""
    item = memory.transition(
        memory_id, body.to, user_id=user.user_id, reason=body.reason, cube_id=cube_id
    )
    return MemoryOut.of(item)


@router.post(
    "/memories/{cube_id}/{memory_id}/rollback", summary="Restore an old version as a new one"
)
def rollback(
    cube_id: str, memory_id: str, body: RollbackIn, memory: Memory, user: Caller
) -> MemoryOut:
    """Needs write.  The history keeps every version, the rollback included; an unknown version is
    a 404, a frozen or deleted item a 409."""
    item = memory.rollback(
        memory_id, body.version, user_id=user.user_id, reason=body.reason, cube_id=cube_id
    )
    return MemoryOut.of(item)


@router.post("/erase", summary="Erase for good: an item, a session, a cube or a user's data")
def erase(body: EraseIn, memory: Memory, user: Caller) -> Erased:
    """GDPR erasure: the content leaves every table, index and cache; derived items go too.

    Needs write for an item or a session, admin on the cube for a whole cube; a subject's data
    may be erased by that user or an administrator.  Naming none or several scopes is a 422.
    """
    count = memory.erase(
        body.item_id,
        user_id=user.user_id,
        session_id=body.session_id,
        cube_id=body.cube_id,
        subject_user_id=body.subject_user_id,
        reason=body.reason,
    )
    return Erased(erased=count)


@router.post("/feedback", summary="Correct, reject, forget or confirm memories in words")
def feedback(body: FeedbackIn, memory: Memory, user: Caller) -> FeedbackOut:
    """Needs write.  The text is read as a correction ("No, I moved to Porto, not Lisbon"), a
    rejection ("that's wrong"), a request to forget ("forget that I smoke") or a confirmation
    ("yes, that's right") and applied to ``item_ids``, or to the memories the text is about:
    supersession, archiving, erasure or a confidence boost (docs/lifecycle.md).  Text that is
    none of these, or a bare rejection or confirmation without ``item_ids``, is a 422."""
    check_self(body.user_id, user)
    result = memory.feedback(
        body.text, user_id=user.user_id, cube_id=body.cube_id, item_ids=body.item_ids,
        corrected=body.corrected,
    )  # fmt: skip
    return FeedbackOut.of(result)


@router.post("/expire", summary="Erase the memories whose expiry has passed, now")
def expire(body: ExpireIn, memory: Memory, user: Caller) -> Erased:
    """What the background ``expire`` task does, now: needs write on ``cube_id``; without it an
    administrator's call covers every cube."""
    return Erased(erased=memory.expire(user_id=user.user_id, cube_id=body.cube_id))


@router.get("/audit", summary="The audit trail, oldest event first")
def audit(
    memory: Memory,
    user: Caller,
    cube_id: str | None = None,
    item_id: str | None = None,
    since: Annotated[datetime | None, Query(description="Events at or after this time.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_LIMIT)] = 1000,
) -> list[Event]:
    """Every event for an administrator; a cube's events (``cube_id`` or ``item_id``) for that
    cube's admins.  Erased content is absent from the payloads."""
    return memory.audit(by=user.user_id, cube_id=cube_id, item_id=item_id, since=since, limit=limit)
