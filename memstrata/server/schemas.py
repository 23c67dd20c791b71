"""The REST API's request and response bodies (pydantic), and their conversions from the core.

Request bodies reject unknown fields (a typo is a 422, not a silent default) except ``/configure``,
whose unknown settings the core names in its own error.  Field aliases accept MemOS's names
(``mem_cube_id``, ``target_user_id``, ``install_cube_ids``, ``memory_id``).  A ``user_id`` in a
body is accepted for MemOS compatibility only: the caller is who the API key says, and a different
``user_id`` is a 422 (see ``routes.check_self``).

Bounds come from ``memstrata.limits`` and states from ``lifecycle.states``, so the schema refuses
exactly what the core would.  Items, hits, versions, contexts and chat replies are made by
``memstrata.wire`` (the shape every surface shares) and validated by the ``*Out`` models here,
which document them in OpenAPI; the plain records (``User``, ``Cube``, ``Grant``, ``Event``,
``Task``…) are returned as the core's dataclasses, whose every field is the same record.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from memstrata import wire
from memstrata.config import RUNTIME_RANGES
from memstrata.lifecycle.states import Target
from memstrata.limits import (
    MAX_BUDGET,
    MAX_CHAT_TOKENS,
    MAX_CONTENT_CHARS,
    MAX_CUBE_IDS,
    MAX_DISPLAY_NAME,
    MAX_FEEDBACK_TARGETS,
    MAX_KEY_LABEL,
    MAX_MESSAGES,
    MAX_QUERY_CHARS,
    MAX_REASON,
    MAX_TOOLS,
    MAX_WAIT_S,
)
from memstrata.memcube import Artifact
from memstrata.model import (
    ApiKey,
    CubeKind,
    FeedbackKind,
    FeedbackResult,
    Hit,
    ItemType,
    MemoryItem,
    Permission,
    Role,
    Status,
    Tier,
    Version,
)
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import ChatReply


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


class _Out(BaseModel):
    """A response body made from ``memstrata.wire``: a field the wire has and the model lacks is
    an error here (a test run finds it), never a field silently left out."""

    model_config = ConfigDict(extra="forbid")


# -- users and keys ----------------------------------------------------------------------------


class UserIn(_Body):
    user_id: str
    name: str | None = Field(default=None, max_length=MAX_DISPLAY_NAME)
    role: Role = "user"


class KeyIn(_Body):
    label: str | None = Field(default=None, max_length=MAX_KEY_LABEL)


class KeyOut(_Out):
    """An API key's record; the key itself is never shown again after creation."""

    key_id: str
    user_id: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey) -> KeyOut:
        return cls.model_validate(_key_record(key))


class NewKey(KeyOut):
    """A new API key: ``key`` is shown here once and cannot be recovered later."""

    key: str

    @classmethod
    def of(cls, key: ApiKey) -> NewKey:
        return cls.model_validate(_key_record(key) | {"key": key.secret or ""})


def _key_record(key: ApiKey) -> dict[str, Any]:
    """The key's record without its secret (the API calls a new key's secret ``key``)."""
    record: dict[str, Any] = wire.to_wire(key)
    del record["secret"]
    return record


# -- cubes -----------------------------------------------------------------------------------


class CubeIn(_Body):
    name: str = Field(max_length=MAX_DISPLAY_NAME)
    cube_id: str | None = Field(default=None, description="Default: a generated id.")
    kind: CubeKind = "user"
    settings: dict[str, Any] | None = Field(
        default=None, description="Tier settings (capacities, thresholds); defaults fill the rest."
    )


class CubeDeleted(BaseModel):
    cube_id: str
    deleted_items: int


class ArtifactOut(BaseModel):
    """A cube's artifact as the API shows it (where the server keeps its file is not shown)."""

    artifact_id: str
    kind: str = Field(description="kv_cache (activation memory) or lora (an adapter).")
    fingerprint: str
    sha256: str | None
    size_bytes: int | None
    metadata: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, artifact: Artifact) -> ArtifactOut:
        return cls.model_validate(wire.artifact_to_wire(artifact))


class ShareIn(_Body):
    user_id: str = Field(validation_alias=AliasChoices("user_id", "target_user_id"))
    permission: Permission = "read"


# -- memories --------------------------------------------------------------------------------


class AddIn(_Body):
    """Memories to add: ``messages`` (chat messages or one string) or ``memory_content``."""

    cube_id: str = Field(validation_alias=AliasChoices("cube_id", "mem_cube_id"))
    messages: (
        Annotated[list[dict[str, Any]], Field(max_length=MAX_MESSAGES)]
        | Annotated[str, Field(max_length=MAX_CONTENT_CHARS)]
        | None
    ) = Field(
        default=None,
        description=(
            "Chat messages: each {content, role?, name?, timestamp?, id?, metadata?, expires_at?};"
            " OpenAI-format tool_calls, tool results (role tool, tool_call_id) and content parts"
            " (docs/tools-skills.md)."
        ),
    )
    tools: Annotated[list[dict[str, Any]], Field(max_length=MAX_TOOLS)] | None = Field(
        default=None, description="OpenAI tool definitions: stored as the tools' schemas."
    )
    memory_content: str | None = Field(
        default=None, max_length=MAX_CONTENT_CHARS, description="One text to remember."
    )
    session_id: str | None = None
    expires_at: datetime | None = Field(
        default=None, description="When these memories stop existing (a message's own wins)."
    )
    user_id: str | None = _user_field()


class Added(BaseModel):
    """The ids of the stored items, in input order (an already stored message keeps its id)."""

    ids: list[str]


class UpdateIn(_Body):
    text: str | None = Field(default=None, max_length=MAX_CONTENT_CHARS)
    metadata: dict[str, Any] | None = None
    expires_at: datetime | Literal["never"] | None = Field(
        default=None, description='A new expiry; "never" removes it; null leaves it.'
    )
    reason: str | None = Field(
        default=None, max_length=MAX_REASON, description="Why; kept in the history."
    )


class SourceOut(_Out):
    """Where a derived item came from: an item id, or a URI with a character span."""

    item_id: str | None
    uri: str | None
    span: tuple[int, int] | None
    role: str | None


class MemoryOut(_Out):
    """A memory item, every field (``memstrata.wire``'s item)."""

    id: str
    cube_id: str
    text: str
    version: int
    tier: Tier
    type: ItemType
    session_id: str | None
    user_id: str | None = Field(description="Who added it.")
    agent_id: str | None
    role: str | None
    speaker: str | None
    key: str | None = Field(description="A derived item's key (a profile attribute's name…).")
    keywords: list[str]
    tags: list[str]
    metadata: dict[str, Any]
    external_id: str | None = Field(description="The id the message was added with.")
    event_time: datetime = Field(description="When it was said or happened.")
    created_at: datetime
    updated_at: datetime
    valid_from: datetime | None
    valid_to: datetime | None = Field(description="Set when a later fact contradicted it.")
    status: Status
    merged_into: str | None
    confidence: float | None
    pinned: bool
    access_count: int
    last_accessed_at: datetime | None
    heat: float | None
    sources: list[SourceOut]
    segment_id: str | None = Field(description="A mid-tier page's segment.")
    expires_at: datetime | None = Field(
        description="When it stops existing (gone from every read, then erased); null: never."
    )

    @classmethod
    def of(cls, item: MemoryItem) -> MemoryOut:
        return cls.model_validate(wire.item_to_wire(item))


class HitOut(MemoryOut):
    """A search hit: the item's fields, its score and its rank in each channel (the parts of
    its score: ``search_schemas.ExplainedHitOut``)."""

    score: float = Field(description="Fused relevance; higher is better.")
    ranks: dict[str, int] = Field(description="1-based rank in each channel that found it.")

    @classmethod
    def of_hit(cls, hit: Hit) -> HitOut:
        return cls.model_validate(wire.hit_to_wire(hit, parts=False))


class VersionOut(_Out):
    """One version of an item: the item as it stood after a change, when, by whom and why."""

    version: int
    item: MemoryOut
    at: datetime
    actor: str | None
    reason: str | None

    @classmethod
    def of(cls, version: Version) -> VersionOut:
        return cls.model_validate(wire.to_wire(version))


# -- context and chat (search: ``search_schemas``) -------------------------------------------


class ContextIn(_Body):
    query: str = Field(max_length=MAX_QUERY_CHARS)
    budget_tokens: int = Field(default=1000, ge=1, le=MAX_BUDGET)
    cube_ids: list[str] | None = Field(
        default=None,
        max_length=MAX_CUBE_IDS,
        validation_alias=AliasChoices("cube_ids", "install_cube_ids"),
    )
    session_id: str | None = Field(default=None, description="Its working turns come first.")
    filters: dict[str, Any] | None = None
    expand_sources: bool = True
    chain: bool = True
    user_id: str | None = _user_field()


class ContextOut(_Out):
    """A packed context: ``text`` for a prompt (``tokens`` ≤ ``budget``) and what it holds."""

    text: str
    tokens: int
    budget: int
    profile: list[str]
    items: list[MemoryOut] = Field(description="Every item in the context, recent turns first.")
    hits: list[HitOut] = Field(description="The search hits packed, in rank order.")

    @classmethod
    def of(cls, context: Context) -> ContextOut:
        return cls.model_validate(wire.context_to_wire(context))


class ChatIn(_Body):
    query: str = Field(max_length=MAX_QUERY_CHARS)
    cube_id: str = Field(
        validation_alias=AliasChoices("cube_id", "mem_cube_id"),
        description="Where the exchange is stored (needs write); context comes from every readable cube.",
    )
    session_id: str | None = None
    budget_tokens: int = Field(default=1000, ge=1, le=MAX_BUDGET)
    max_tokens: int = Field(default=256, ge=1, le=MAX_CHAT_TOKENS)
    use_adapter: bool = Field(
        default=False,
        description="Answer through the cube's LoRA adapter (the adapt extra; not streamed).",
    )
    user_id: str | None = _user_field()


class ChatOut(_Out):
    answer: str
    ids: list[str] = Field(description="The stored question and answer turns.")
    context: ContextOut | None
    activation: str | None = Field(
        default=None,
        description="The cube's KV cache artifact the local model started from (null: none).",
    )

    @classmethod
    def of(cls, reply: ChatReply) -> ChatOut:
        return cls.model_validate(wire.chat_reply_to_wire(reply))


# -- lifecycle and governance ---------------------------------------------------------------


class TransitionIn(_Body):
    to: Target = Field(description="The new state; see docs/lifecycle.md for the legal moves.")
    reason: str | None = Field(
        default=None, max_length=MAX_REASON, description="Why; kept in the history and audit."
    )


class RollbackIn(_Body):
    version: int = Field(ge=1, description="The version to restore (see the item's history).")
    reason: str | None = Field(
        default=None, max_length=MAX_REASON, description="Default: 'rollback to version N'."
    )


class EraseIn(_Body):
    """What to erase: ``item_id``; ``session_id`` with ``cube_id``; ``cube_id`` alone (the whole
    cube); or ``subject_user_id`` (everything that user added, in ``cube_id`` when given)."""

    item_id: str | None = Field(default=None, validation_alias=AliasChoices("item_id", "memory_id"))
    session_id: str | None = None
    cube_id: str | None = Field(
        default=None, validation_alias=AliasChoices("cube_id", "mem_cube_id")
    )
    subject_user_id: str | None = None
    reason: str | None = Field(
        default=None, max_length=MAX_REASON, description="Kept in the erase event."
    )


class Erased(BaseModel):
    erased: int = Field(description="How many items were erased (derived items included).")


class ExpireIn(_Body):
    cube_id: str | None = Field(default=None, description="Default: every cube (administrators).")


class FeedbackIn(_Body):
    """A correction, a rejection, a request to forget or a confirmation (docs/lifecycle.md)."""

    cube_id: str = Field(validation_alias=AliasChoices("cube_id", "mem_cube_id"))
    text: str = Field(max_length=MAX_QUERY_CHARS, description='e.g. "No, I moved to Porto".')
    item_ids: list[str] | None = Field(
        default=None, min_length=1, max_length=MAX_FEEDBACK_TARGETS,
        description="The memories it is about; default: found by the text.",
    )  # fmt: skip
    corrected: str | None = Field(
        default=None, max_length=MAX_CONTENT_CHARS, description="The corrected statement."
    )
    user_id: str | None = _user_field()


class FeedbackOut(_Out):
    """What the feedback did (``model.FeedbackResult``)."""

    kind: FeedbackKind
    cube_id: str
    affected: list[str] = Field(description="Confirmed, superseded, archived or erased items.")
    new_item_id: str | None = Field(description="A correction's new item.")

    @classmethod
    def of(cls, result: FeedbackResult) -> FeedbackOut:
        return cls.model_validate(wire.to_wire(result))


# -- operations ------------------------------------------------------------------------------


def _runtime(name: str) -> Any:
    """An optional field bounded by the core's range for runtime setting ``name``."""
    low, high = RUNTIME_RANGES[name]
    return Field(default=None, ge=low, le=high)


class ConfigureIn(BaseModel):
    """Runtime settings to change (search tuning); any other name is a 422 naming the allowed.

    One field per ``config.RUNTIME_RANGES`` entry, bounded by its range (a test checks both).
    """

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    rrf_k: int | None = _runtime("rrf_k")
    search_candidates: int | None = _runtime("search_candidates")
    keyword_max_postings: int | None = _runtime("keyword_max_postings")
    keyword_weight: float | None = _runtime("keyword_weight")
    dense_weight: float | None = _runtime("dense_weight")


class WaitIn(_Body):
    cube_id: str | None = Field(default=None, description="Default: every cube you may read.")
    timeout_s: float = Field(default=10.0, ge=0, le=MAX_WAIT_S)


class WaitOut(BaseModel):
    done: bool = Field(description="False when the timeout came first.")


class Health(BaseModel):
    status: str
    version: str
