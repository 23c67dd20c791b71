"""The REST API's request and response bodies (pydantic), and their conversions from the core.

Request bodies reject unknown fields (a typo is a 422, not a silent default) except ``/configure``,
whose unknown settings the core names in its own error.  Field aliases accept MemOS's names
(``mem_cube_id``, ``target_user_id``, ``install_cube_ids``,
``memory_id``).  A ``user_id`` in a body is accepted
for MemOS compatibility only: the caller is who the API key says, and a different ``user_id`` is a
422 (see ``routes.check_self``).  Responses that are core dataclasses (``User``, ``Cube``,
``MemoryItem``, ``Version``, ``Task``…) are returned as they are; the rest are defined here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from memstrata.memory.system import MAX_BUDGET, MAX_TOP_K
from memstrata.model import (
    ApiKey,
    CubeKind,
    Hit,
    ItemType,
    MemoryItem,
    Permission,
    Role,
    Source,
    Status,
    Tier,
)
from memstrata.retrieval.pack import Context

#: The longest ``/tasks/wait`` a request may ask for, in seconds (it holds a worker thread).
MAX_WAIT_S = 60.0
#: The states a search leaves out unless ``include`` names them (``lifecycle.states.INCLUDABLE``).
Includable = Literal["merged", "archived", "frozen"]


def _user_field() -> Any:
    return Field(
        default=None,
        description="Accepted for MemOS clients; must be the caller's own id (the key says who).",
    )


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class ErrorDetail(BaseModel):
    code: str = Field(description="A stable, machine-readable error code (e.g. `not_found`).")
    message: str
    hint: str | None = Field(default=None, description="What to do next, when known.")


class ErrorBody(BaseModel):
    """The one shape of every error response (4xx and 5xx)."""

    error: ErrorDetail


# -- users and keys ----------------------------------------------------------------------------


class UserIn(_Body):
    user_id: str
    name: str | None = None
    role: Role = "user"


class KeyIn(_Body):
    label: str | None = Field(default=None, max_length=200)


class KeyOut(BaseModel):
    """An API key's record; the key itself is never shown again after creation."""

    key_id: str
    user_id: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey) -> KeyOut:
        return cls(
            key_id=key.key_id,
            user_id=key.user_id,
            label=key.label,
            created_at=key.created_at,
            revoked_at=key.revoked_at,
        )


class NewKey(BaseModel):
    """A new API key: ``key`` is shown here once and cannot be recovered later."""

    key_id: str
    key: str
    user_id: str
    label: str | None


# -- cubes -----------------------------------------------------------------------------------


class CubeIn(_Body):
    name: str
    cube_id: str | None = Field(default=None, description="Default: a generated id.")
    kind: CubeKind = "user"
    settings: dict[str, Any] | None = Field(
        default=None, description="Tier settings (capacities, thresholds); defaults fill the rest."
    )


class CubeDeleted(BaseModel):
    cube_id: str
    deleted_items: int


class ShareIn(_Body):
    user_id: str = Field(validation_alias=AliasChoices("user_id", "target_user_id"))
    permission: Permission = "read"


# -- memories --------------------------------------------------------------------------------


class AddIn(_Body):
    """Memories to add: ``messages`` (chat messages or one string) or ``memory_content``."""

    cube_id: str = Field(validation_alias=AliasChoices("cube_id", "mem_cube_id"))
    messages: list[dict[str, Any]] | str | None = Field(
        default=None,
        description="Chat messages: each {content, role?, name?, timestamp?, id?, metadata?}.",
    )
    memory_content: str | None = Field(default=None, description="One text to remember.")
    session_id: str | None = None
    user_id: str | None = _user_field()


class Added(BaseModel):
    """The ids of the stored items, in input order (an already stored message keeps its id)."""

    ids: list[str]


class UpdateIn(_Body):
    text: str | None = None
    metadata: dict[str, Any] | None = None
    reason: str | None = Field(default=None, description="Why; kept in the history.")


class MemoryOut(BaseModel):
    """The part of a memory item a search or context result shows."""

    id: str
    cube_id: str
    text: str
    type: ItemType
    tier: Tier
    event_time: datetime
    session_id: str | None
    speaker: str | None
    sources: list[Source]

    @classmethod
    def of(cls, item: MemoryItem) -> MemoryOut:
        return cls(**_shown(item))


class HitOut(MemoryOut):
    score: float = Field(description="Fused relevance; higher is better.")

    @classmethod
    def of_hit(cls, hit: Hit) -> HitOut:
        return cls(**_shown(hit.item), score=hit.score)


def _shown(item: MemoryItem) -> dict[str, Any]:
    return {name: getattr(item, name) for name in MemoryOut.model_fields}


# -- search, context, chat -------------------------------------------------------------------


class SearchIn(_Body):
    query: str
    cube_ids: list[str] | None = Field(
        default=None,
        validation_alias=AliasChoices("cube_ids", "install_cube_ids"),
        description="Default: every cube the caller may read.",
    )
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    filters: dict[str, Any] | None = Field(
        default=None,
        description="session_id, tier, type, status, since, until, metadata (see docs/search.md).",
    )
    include: list[Includable] | None = Field(
        default=None, description="Also search items in these states (left out by default)."
    )
    as_of: datetime | None = Field(
        default=None,
        description="Search the memory as it stood then (ISO 8601 or epoch seconds; slower).",
    )
    user_id: str | None = _user_field()


class SearchOut(BaseModel):
    hits: list[HitOut]


class ContextIn(_Body):
    query: str
    budget_tokens: int = Field(default=1000, ge=1, le=MAX_BUDGET)
    cube_ids: list[str] | None = Field(
        default=None, validation_alias=AliasChoices("cube_ids", "install_cube_ids")
    )
    session_id: str | None = Field(default=None, description="Its working turns come first.")
    filters: dict[str, Any] | None = None
    expand_sources: bool = True
    chain: bool = True
    user_id: str | None = _user_field()


class ContextOut(BaseModel):
    """A packed context: ``text`` for a prompt (``tokens`` ≤ ``budget``) and what it holds."""

    text: str
    tokens: int
    budget: int
    profile: list[str]
    items: list[MemoryOut] = Field(description="Every item in the context, recent turns first.")
    hits: list[HitOut] = Field(description="The search hits packed, in rank order.")

    @classmethod
    def of(cls, context: Context) -> ContextOut:
        return cls(
            text=context.text,
            tokens=context.tokens,
            budget=context.budget,
            profile=context.profile,
            items=[MemoryOut.of(i) for i in context.items],
            hits=[HitOut.of_hit(h) for h in context.hits],
        )


class ChatIn(_Body):
    query: str
    cube_id: str = Field(
        validation_alias=AliasChoices("cube_id", "mem_cube_id"),
        description="Where the exchange is stored (needs write); context comes from every readable cube.",
    )
    session_id: str | None = None
    budget_tokens: int = Field(default=1000, ge=1, le=MAX_BUDGET)
    max_tokens: int = Field(default=256, ge=1, le=8192)
    user_id: str | None = _user_field()


class ChatOut(BaseModel):
    answer: str
    ids: list[str] = Field(description="The stored question and answer turns.")
    context: ContextOut | None


# -- lifecycle and governance ---------------------------------------------------------------


class TransitionIn(_Body):
    to: Status = Field(description="The new state; see docs/lifecycle.md for the legal moves.")
    reason: str | None = Field(default=None, description="Why; kept in the history and audit.")


class RollbackIn(_Body):
    version: int = Field(ge=1, description="The version to restore (see the item's history).")
    reason: str | None = Field(default=None, description="Default: 'rollback to version N'.")


class EraseIn(_Body):
    """What to erase: ``item_id``; ``session_id`` with ``cube_id``; ``cube_id`` alone (the whole
    cube); or ``subject_user_id`` (everything that user added, in ``cube_id`` when given)."""

    item_id: str | None = Field(default=None, validation_alias=AliasChoices("item_id", "memory_id"))
    session_id: str | None = None
    cube_id: str | None = Field(
        default=None, validation_alias=AliasChoices("cube_id", "mem_cube_id")
    )
    subject_user_id: str | None = None
    reason: str | None = Field(default=None, description="Kept in the erase event.")


class Erased(BaseModel):
    erased: int = Field(description="How many items were erased (derived items included).")


# -- operations ------------------------------------------------------------------------------


class ConfigureIn(BaseModel):
    """Runtime settings to change (search tuning); any other name is a 422 naming the allowed."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    rrf_k: int | None = Field(default=None, ge=1, le=10_000)
    search_candidates: int | None = Field(default=None, ge=1, le=10_000)
    keyword_max_postings: int | None = Field(default=None, ge=1, le=100_000_000)
    keyword_weight: float | None = Field(default=None, ge=0, le=1_000)
    dense_weight: float | None = Field(default=None, ge=0, le=1_000)


class WaitIn(_Body):
    cube_id: str | None = Field(default=None, description="Default: every cube you may read.")
    timeout_s: float = Field(default=10.0, ge=0, le=MAX_WAIT_S)


class WaitOut(BaseModel):
    done: bool = Field(description="False when the timeout came first.")


class Health(BaseModel):
    status: str
    version: str
