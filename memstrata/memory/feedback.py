"""Corrections: ``MemoryOS.feedback`` (docs/lifecycle.md, "Feedback").

A piece of feedback ("No, I moved to Porto, not Lisbon", "that's wrong", "forget that I
smoke", "yes, that's right") is read by rules (``reader.corrections``) into one of four kinds
and applied to its targets, each change an event of the audit trail:

=============  ===============================================================================
``correct``    supersession (``supersede``): each target gets ``valid_to`` = now and
               ``metadata["superseded_by"]``; a new long-tier item holds the corrected
               statement (``corrected``, else the feedback without its markers), with
               ``valid_from`` = now and ``metadata["supersedes"]``.  A profile attribute or a
               preference the statement states (``reader.rules``) becomes that kind of item.
``invalidate`` the targets and what was derived from them are archived (out of search, kept in
               history)
``forget``     the targets are erased for good, with what was derived from them (``memory.erase``)
``confirm``    the targets' ``confidence`` rises by ``CONFIRM_STEP`` (at most 1) and
               ``metadata["confirmed"]`` counts the confirmations
=============  ===============================================================================

Targets are ``item_ids`` when given (each must be writable by the caller); otherwise they are
found in the cube: for a correction, the current profile attributes and preferences with the
key the statement states, and the items naming the value it rejects ("not Lisbon"); else (or
when none is found) the facts, profile entries, preferences and turns closest to the
statement (cosine within ``TARGET_MARGIN`` of the best candidate of both search channels).
Every change but ``forget`` is undone by ``rollback`` to the version before it (and, for a
correction, ``delete`` of the new item); erasure is final.  Reasons in the audit name the kind,
never the feedback's words (a ``forget`` must not write down what it forgets).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from memstrata.embed import fingerprint
from memstrata.errors import ValidationError
from memstrata.filters import Filters
from memstrata.limits import MAX_CONTENT_CHARS, MAX_FEEDBACK_TARGETS, MAX_QUERY_CHARS, check_text
from memstrata.memory import erase, expiry
from memstrata.memory.components import Components
from memstrata.memory.items import Items
from memstrata.model import FeedbackKind, FeedbackResult, MemoryItem, new_id, utcnow
from memstrata.reader import rules
from memstrata.reader.corrections import FeedbackReading, read_feedback
from memstrata.reader.findings import Finding
from memstrata.reader.messages import parse_content
from memstrata.reader.notes import third_person
from memstrata.store.base import FeedbackStore, ItemStore
from memstrata.text import embedding_text

#: The kinds of item feedback may change.
TARGET_TYPES = ("fact", "profile", "preference", "turn")
#: Candidates each search channel offers when targets are found by the feedback's text.
CANDIDATES = 20
#: Cosine below the best candidate's within which a candidate is a target too.
TARGET_MARGIN = 0.03
#: How much one confirmation raises an item's ``confidence`` (from 0.5 when it had none).
CONFIRM_STEP = 0.2


class Feedback:
    """``MemoryOS.feedback`` (see the module docs)."""

    def __init__(self, parts: Components, items: Items) -> None:
        self._parts = parts
        self._store: FeedbackStore = parts.store
        self._access = parts.access
        self._items = items

    def feedback(
        self,
        text: str,
        *,
        user_id: str,
        cube_id: str,
        item_ids: Sequence[str] | None = None,
        corrected: str | None = None,
    ) -> FeedbackResult:
        """Apply a natural-language correction, confirmation, rejection or request to forget
        to the memories of ``cube_id`` it is about (see the module docs); needs ``write``.

        ``item_ids`` (at most ``MAX_FEEDBACK_TARGETS``) names the memories; without them they
        are found by the text.  ``corrected`` is the corrected statement (the feedback is then a
        correction).  ``ValidationError`` when the text is none of the four kinds, or is a bare
        "yes"/"that's wrong" with nothing to find its memories by.
        """
        reading = _read(text, corrected)
        if reading.kind is None:
            raise ValidationError(
                "cannot tell what this feedback asks",
                hint='say "yes, that\'s right", "that\'s wrong", "forget that …" or the '
                "corrected statement, or pass corrected=",
            )
        ids = _check_ids(item_ids)
        self._access.writable_cube(user_id, cube_id)
        if ids is not None:
            targets = [
                expiry.check_live(self._store, self._access.item(i, user_id, "write", cube_id))
                for i in dict.fromkeys(ids)
            ]
        else:
            targets = self._find(cube_id, user_id, reading)
        if not targets and reading.kind != "correct":
            raise ValidationError(
                f"no memory of cube {cube_id!r} matches this {reading.kind} feedback",
                hint="name the memories with item_ids",
            )
        apply = {
            "correct": self._correct, "invalidate": self._invalidate,
            "forget": self._forget, "confirm": self._confirm,
        }[reading.kind]  # fmt: skip
        return apply(cube_id, user_id, reading, targets)

    # -- targets ------------------------------------------------------------------------------

    def _find(self, cube_id: str, user_id: str, reading: FeedbackReading) -> list[MemoryItem]:
        """The memories the feedback is about when it names none (see the module docs)."""
        if not reading.statement:
            raise ValidationError(
                f"{reading.kind} feedback without a statement needs item_ids",
                hint="say which memories it is about: pass their ids as item_ids",
            )
        named: list[MemoryItem] = []
        if reading.kind == "correct":
            named = self._same_attribute(cube_id, self._subject(cube_id, user_id), reading)
        scored = self._candidates(cube_id, reading.statement)
        if reading.replaced:
            named += [i for i, _ in scored if _mentions(i.text, reading.replaced)]
        if not named and scored:
            best = scored[0][1]
            named = [i for i, cos in scored if cos >= best - TARGET_MARGIN]
        if reading.kind == "correct":  # never the statement itself, said before
            named = [i for i in named if i.text.strip().lower() != reading.statement.lower()]
        return list({i.id: i for i in named}.values())[:MAX_FEEDBACK_TARGETS]

    def _candidates(self, cube_id: str, statement: str) -> list[tuple[MemoryItem, float]]:
        """Items of ``TARGET_TYPES`` either channel finds for ``statement``, with their cosine
        to it, best first; expired ones left out."""
        vector = self._parts.embedder.embed_query(statement)
        scope, wanted = [cube_id], Filters(types=TARGET_TYPES)
        cosine = dict(self._store.vector_search(vector, scope, wanted, CANDIDATES))
        words = [i for i, _ in self._store.keyword_search(statement, scope, wanted, CANDIDATES)]
        missing = [i for i in words if i not in cosine]
        if missing:
            rows = self._store.get_vectors(missing, scope)
            for item_id, row in zip(missing, rows, strict=True):
                cosine[item_id] = float(row @ vector)
        found = expiry.visible(self._store, self._store.get_items(list(cosine), scope))
        return sorted(((i, cosine[i.id]) for i in found), key=lambda pair: -pair[1])

    def _same_attribute(
        self, cube_id: str, subject: str, reading: FeedbackReading
    ) -> list[MemoryItem]:
        """The current profile attributes and preferences with a key the statement states (a
        single-valued attribute with another value; a preference of either polarity), of the
        user (their name as the subject) or else of the one subject holding that key."""
        found: list[MemoryItem] = []
        for finding in _findings(reading.statement, subject, cube_id):
            if finding.type == "profile" and finding.key not in rules.SINGLE_VALUED:
                continue
            same = Filters(tiers=("long",), types=(finding.type,), metadata={"key": finding.key})
            held = [
                item
                for item in self._store.list_items(cube_id, same)
                if item.valid_to is None
                and str(item.metadata.get("value", "")).lower() != (finding.value or "").lower()
            ]
            subjects = {str(i.metadata.get("subject", "")).lower() for i in held}
            if subject.lower() in subjects:
                held = [
                    i for i in held if str(i.metadata.get("subject", "")).lower() == subject.lower()
                ]
            elif len(subjects) > 1:  # someone else's attribute, and whose is unclear
                held = []
            found += held
        return expiry.visible(self._store, found)

    def _subject(self, cube_id: str, user_id: str) -> str:
        """Whom first-person feedback is about: the user's name, else id."""
        user = self._access.user(user_id)
        return user.name or user.user_id

    # -- the four kinds -----------------------------------------------------------------------

    def _correct(
        self, cube_id: str, user_id: str, reading: FeedbackReading, targets: list[MemoryItem]
    ) -> FeedbackResult:
        now = utcnow()
        subject = _subject_of(targets) or self._subject(cube_id, user_id)
        new = _statement_item(cube_id, user_id, subject, reading.statement, targets, now)
        embedder = self._parts.embedder
        vector = embedder.embed_passages([embedding_text(new)])
        self._store.add_items([new], vector, fingerprint(embedder))
        self._parts.index.added(cube_id)
        superseded = supersede(self._store, targets, new.id, now, user_id)
        return FeedbackResult("correct", cube_id, [i.id for i in superseded], new.id)

    def _invalidate(
        self, cube_id: str, user_id: str, reading: FeedbackReading, targets: list[MemoryItem]
    ) -> FeedbackResult:
        # What was read from a wrong statement (a fact, a profile entry) says the same wrong
        # thing: it is archived with it, as an erasure takes the derived items with it.
        ids = erase._with_derived(self._store, cube_id, [i.id for i in targets])
        for item in self._store.get_items(ids, [cube_id]):
            if item.status in ("generated", "activated"):
                self._store.update_item(
                    replace(item, status="archived"), None, op="invalidate", actor=user_id,
                    reason="feedback: that is wrong",
                )  # fmt: skip
        return FeedbackResult("invalidate", cube_id, ids)

    def _forget(
        self, cube_id: str, user_id: str, reading: FeedbackReading, targets: list[MemoryItem]
    ) -> FeedbackResult:
        ids = erase._with_derived(self._store, cube_id, [i.id for i in targets])
        if self._store.erase_items(ids, [cube_id], user_id, "feedback: forget"):
            self._parts.forget([cube_id])
        return FeedbackResult("forget", cube_id, ids)

    def _confirm(
        self, cube_id: str, user_id: str, reading: FeedbackReading, targets: list[MemoryItem]
    ) -> FeedbackResult:
        for item in targets:
            confidence = min(1.0, (item.confidence or 0.5) + CONFIRM_STEP)
            count = item.metadata.get("confirmed")
            times = (count if type(count) is int else 0) + 1
            confirmed = replace(
                item, confidence=confidence, metadata={**item.metadata, "confirmed": times}
            )
            self._items.write_version(item, confirmed, user_id, "confirm", "feedback: confirmed")
        return FeedbackResult("confirm", cube_id, [i.id for i in targets])


def supersede(
    store: ItemStore, items: Sequence[MemoryItem], new_id: str, at: datetime, actor: str | None
) -> list[MemoryItem]:
    """Mark ``items`` as no longer holding from ``at``, replaced by the item ``new_id``: each
    gets ``valid_to`` = ``at`` and ``metadata["superseded_by"]`` = ``new_id`` in a new version
    (event ``supersede``); nothing is deleted, and ``rollback`` to the version before undoes it.
    Items that already stopped holding (``valid_to`` set) or cannot change (frozen, deleted)
    are left as they are.  Returns the items superseded, as stored."""
    done = []
    for item in items:
        if item.valid_to is not None or item.status in ("frozen", "deleted"):
            continue
        later = replace(item, valid_to=at, metadata={**item.metadata, "superseded_by": new_id})
        done.append(store.update_item(
            later, None, op="supersede", actor=actor, reason=f"superseded by {new_id}"
        ))  # fmt: skip
    return done


def _read(text: object, corrected: object) -> FeedbackReading:
    """The feedback read (``reader.corrections``), or ``ValidationError``."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("feedback text must be a non-empty string")
    check_text(text, "text", MAX_QUERY_CHARS)
    reading = read_feedback(text)
    if corrected is not None:
        statement = parse_content(corrected, "corrected")
        return FeedbackReading("correct", statement, reading.replaced)
    if reading.kind == "correct" and len(reading.statement) > MAX_CONTENT_CHARS:
        raise ValidationError(f"the corrected statement is over {MAX_CONTENT_CHARS} characters")
    return reading


def _check_ids(item_ids: object) -> list[str] | None:
    if item_ids is None:
        return None
    if isinstance(item_ids, str) or not isinstance(item_ids, (list, tuple)):
        raise ValidationError("item_ids must be a list of item ids")
    if not item_ids or len(item_ids) > MAX_FEEDBACK_TARGETS:
        raise ValidationError(
            f"item_ids must name 1 to {MAX_FEEDBACK_TARGETS} items, not {len(item_ids)}"
        )
    return list(item_ids)


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"\b{re.escape(value)}\b", text, re.I) is not None


def _subject_of(targets: list[MemoryItem]) -> str | None:
    """The subject the targets are about: a derived item's ``subject``, else a turn's speaker."""
    for item in targets:
        subject = item.metadata.get("subject")
        if isinstance(subject, str) and subject:
            return subject
    return next((i.speaker for i in targets if i.speaker), None)


def _findings(statement: str, subject: str, cube_id: str) -> list[Finding]:
    """The profile attributes and preferences the rules read in ``statement`` said by
    ``subject``."""
    page = MemoryItem(id=new_id(), cube_id=cube_id, text=statement, speaker=subject)
    return [f for f in rules.read_page(page) if f.type in ("profile", "preference")]


def _statement_item(
    cube_id: str,
    user_id: str,
    subject: str,
    statement: str,
    targets: list[MemoryItem],
    now: datetime,
) -> MemoryItem:
    """The long-tier item holding a corrected statement: the profile attribute or preference it
    states when the rules read one, else a fact in the third person."""
    findings = _findings(statement, subject, cube_id)
    kind: FeedbackKind = "correct"
    metadata: dict[str, object] = {"subject": subject, "feedback": kind}
    if targets:
        metadata["supersedes"] = [t.id for t in targets]
    finding = findings[0] if findings else None
    text = third_person(statement, subject)
    if finding is not None:
        text = finding.text
        metadata |= {"key": finding.key, "value": finding.value}
        if finding.type == "preference":
            metadata |= {"polarity": finding.polarity, "explicit": finding.explicit}
    return MemoryItem(
        id=new_id(),
        cube_id=cube_id,
        text=text,
        tier="long",
        type=finding.type if finding is not None else "fact",
        key=None if finding is None else finding.key,
        user_id=user_id,
        metadata=metadata,
        event_time=now,
        created_at=now,
        updated_at=now,
        valid_from=now,
        confidence=1.0,
    )
