"""The long tier: facts, profile attributes, preferences and assistant knowledge.

When a segment is hot enough its unprocessed pages (status ``generated``) are read into findings
(see ``reader``), and each finding is checked against what the tier already holds about the same
subject:

* **duplicate** (the same attribute value, the same preference, a fact whose vector is within
  ``DUPLICATE_COSINE`` of an existing one): a new item carries the evidence of both, and the old
  one becomes ``merged`` into it;
* **contradiction** (a single-valued attribute with another value, a preference with the opposite
  polarity): the old item is **superseded**: it gets ``valid_to`` — it held until then — and
  ``metadata["superseded_by"]`` (the new item's id), and stays; the new one is added with
  ``valid_from`` and ``metadata["supersedes"]``.  A finding older than the value it meets (pages
  are promoted in any order) is added as already superseded by it;
* otherwise the finding is a new item.

What a page says has **ended** ("I moved out of Lisbon", "I quit nursing", "I sold my Civic",
"I'm not vegan any more"; ``reader.rules.ended``) supersedes the subject's current attributes
and preferences of that value, whatever their key (so multi-valued ones — interests, languages,
pets — lose a value); a stated **replacement** ("I switched from coffee to tea") supersedes the
old value and adds the new one under the old one's key.  With an attribute or preference the
facts read from the same turns that name its value stop holding too, and so does each source
turn that states nothing else (``supersede``): search and context then know the turn is past.
A page already read is never read again into a value (``_known``), so reading working turns
early (``note``) and promoting them later agree.

Nothing is overwritten or lost: every state is an item or a version, and every item lists the
turns it came from in ``sources``.  The pages read become ``activated`` (consolidated).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from memstrata.embed.base import Embedder, Vectors, fingerprint
from memstrata.filters import Filters
from memstrata.model import MemoryItem, Source, new_id, utcnow
from memstrata.reader import changes, rules
from memstrata.reader.findings import Finding, Reader
from memstrata.reader.rules import SINGLE_VALUED
from memstrata.store.base import TierStore

#: Cosine at which two facts of one subject are taken to say the same thing.
DUPLICATE_COSINE = 0.97


@dataclass(frozen=True)
class Outcome:
    """What one finding did: ``added``, ``merged`` (into a new item) or ``contradicted``."""

    action: str
    item_id: str
    previous_id: str | None = None


class LongTier:
    """Promotes pages into long-tier items of one store."""

    def __init__(self, store: TierStore, embedder: Embedder, reader: Reader) -> None:
        self.store = store
        self.embedder = embedder
        self.reader = reader

    def promote(self, cube_id: str, segment_id: str) -> list[Outcome]:
        """Read the unprocessed pages of the segment ``segment_id`` of ``cube_id`` into
        long-tier items; mark the pages activated.

        Idempotent: pages already activated are not read again, and a finding repeated by a
        retry is recognised as a duplicate.
        """
        found = self.store.get_items([segment_id], [cube_id])
        if not found:
            return []
        page_ids = [s.item_id for s in found[0].sources if s.item_id]
        pages = [p for p in self.store.get_items(page_ids, [cube_id]) if p.status == "generated"]
        findings = self.reader.read(pages)
        known = {p.id: p for p in pages}
        findings = [f for f in findings if f.sources and set(f.sources) <= set(known)]
        unembedded = [f.text for f in findings if f.vector is None]
        fresh: Iterator[Vectors] = iter(
            self.embedder.embed_passages(unembedded) if unembedded else []
        )
        vectors = [f.vector if f.vector is not None else next(fresh) for f in findings]
        outcomes = [
            self._remember(f, v, [known[i] for i in f.sources])
            for f, v in zip(findings, vectors, strict=True)
        ]
        for page in pages:
            outcomes += self._changes(page)
        for page in pages:
            self.store.update_item(
                replace(page, status="activated"), None, op="transition", actor=None,
                reason="promoted to the long tier",
            )  # fmt: skip
        return outcomes

    def note(self, pages: list[MemoryItem]) -> list[Outcome]:
        """Read the profile attributes, preferences and changes the rules find in ``pages``
        (working-tier turns, not yet promoted) into the long tier now, so the profile and the
        ranking know a change as soon as it is said; the pages stay as they are, and their
        promotion later reads them whole (what this read is recognised: ``_known``)."""
        outcomes: list[Outcome] = []
        for page in sorted(pages, key=lambda p: (p.event_time, p.id)):
            if page.status != "generated" or page.role == "assistant":
                continue
            found = [f for f in rules.read_page(page) if f.type in ("profile", "preference")]
            found = [f for f in found if self._known(f, page) is None]
            if found:
                vectors = self.embedder.embed_passages([f.text for f in found])
                outcomes += [
                    self._remember(f, v, [page]) for f, v in zip(found, vectors, strict=True)
                ]
            outcomes += self._changes(page)
        return outcomes

    def _remember(self, finding: Finding, vector: Vectors, pages: list[MemoryItem]) -> Outcome:
        cube_id = pages[0].cube_id
        when = max(p.event_time for p in pages)
        new = _item(finding, cube_id, when)
        known = self._known(finding, pages[0]) if len(pages) == 1 else None
        if known is not None and (known.valid_to is not None or self.reader.name == "offline"):
            # read before (the same rules; or superseded since): not again.  Another reader's
            # finding of a current value merges with it as a duplicate (its text is kept).
            return Outcome("known", known.id)
        ended = [p for p in pages if p.valid_to is not None]
        if finding.type == "fact" and ended and len(ended) == len(pages):
            # read from turns whose statement was superseded before they were promoted
            last = max(ended, key=lambda p: p.valid_to or when)
            successor = str(last.metadata.get("superseded_by") or last.id)
            self._add(_closed(new, last.valid_to or when, successor), vector)
            return Outcome("added", new.id)
        old = self._counterpart(finding, new, vector)
        if old is None:
            self._add(new, vector)
            return Outcome("added", new.id)
        if _contradicts(finding, old):
            if old.valid_from is not None and old.valid_from > when:
                # read late: the finding held before what the tier already holds
                self._add(_closed(new, old.valid_from, old.id), vector)
                return Outcome("contradicted", new.id, old.id)
            new.metadata["supersedes"] = [old.id]
            self._add(new, vector)
            self.supersede([old], new.id, when, op="contradict")
            return Outcome("contradicted", new.id, old.id)
        merged = replace(new, sources=_union(old.sources, new.sources),
                         confidence=min(1.0, max(old.confidence or 0, new.confidence or 0) + 0.1))  # fmt: skip
        self._add(merged, vector)
        self.store.update_item(
            replace(old, status="merged", merged_into=merged.id), None, op="merge", actor=None,
            reason=f"the same again, merged into {merged.id}",
        )  # fmt: skip
        return Outcome("merged", merged.id, old.id)

    def _counterpart(self, finding: Finding, new: MemoryItem, vector: Vectors) -> MemoryItem | None:
        """The current item this finding duplicates or contradicts, if any."""
        same = Filters(
            tiers=("long",), types=(finding.type,), metadata={"subject": finding.subject}
        )
        if finding.type == "profile" and finding.key and _single(finding.key):
            # one attribute under several keys (pet_dog, pet_cat; boyfriend, partner)
            held = self.store.list_items(new.cube_id, same)
            key = changes.group(finding.key)
            current = [i for i in held if i.valid_to is None and changes.group(i.key or "") == key]
            alike = [i for i in current if _same_value(i, finding)]
            return (alike or current)[-1] if current else None
        if finding.type in ("profile", "preference"):
            same = replace(same, metadata={**same.metadata, "key": finding.key})
            current = [i for i in self.store.list_items(new.cube_id, same) if i.valid_to is None]
            if finding.type == "profile":
                current = [i for i in current if _same_value(i, finding)]
            return current[-1] if current else None
        near = self.store.vector_search(vector, [new.cube_id], same, 1)
        if near and near[0][1] >= DUPLICATE_COSINE:
            return self.store.get_items([near[0][0]], [new.cube_id])[0]
        return None

    def _known(self, finding: Finding, page: MemoryItem) -> MemoryItem | None:
        """The item ``page`` was already read into for this attribute or preference (by
        ``note``, or a promotion before a retry): one of the same subject, key and value that
        cites it, current or not; None if there is none."""
        if finding.type not in ("profile", "preference"):
            return None
        same = Filters(tiers=("long",), types=(finding.type,),
                       metadata={"subject": finding.subject})  # fmt: skip
        for item in self.store.list_items(page.cube_id, same):
            if page.id not in {s.item_id for s in item.sources} or item.key != finding.key:
                continue
            if finding.type == "preference" or _same_value(item, finding):
                return item
        return None

    def _changes(self, page: MemoryItem) -> list[Outcome]:
        """Apply what ``page`` says has ended or was replaced to its speaker's current
        attributes and preferences said before it (see the module docs)."""
        gone, pairs = rules.ended(page), rules.replaced(page)
        if not gone and not pairs:
            return []
        subject = page.speaker or page.role or "user"
        wanted = Filters(tiers=("long",), types=("profile", "preference"),
                         metadata={"subject": subject})  # fmt: skip
        held = [
            i for i in self.store.list_items(page.cube_id, wanted)
            if i.valid_to is None and (i.valid_from or i.event_time) < page.event_time
            and page.id not in {s.item_id for s in i.sources}
        ]  # fmt: skip
        fresh = [i for i in self.store.list_items(page.cube_id, wanted)
                 if i.valid_to is None and page.id in {s.item_id for s in i.sources}]  # fmt: skip
        outcomes = []
        for item in held:
            value = _value(item)
            pair = next((p for p in pairs if changes.same_value(value, p[0])), None)
            if pair is not None:
                new = self._replacement(item, value, pair[1], page, fresh)
                self.supersede([item], new.id, page.event_time)
                outcomes.append(Outcome("replaced", new.id, item.id))
            elif any(changes.same_value(value, g) for g in gone):
                successor = next((i.id for i in fresh if _group(i) == _group(item)), page.id)
                self.supersede([item], successor, page.event_time)
                outcomes.append(Outcome("ended", successor, item.id))
        return outcomes

    def _replacement(
        self, old: MemoryItem, value: str, new_value: str, page: MemoryItem, fresh: list[MemoryItem]
    ) -> MemoryItem:
        """The item holding ``new_value`` in place of ``old``'s value: one the page already
        gave, else a new one of ``old``'s key whose text says the new value."""
        for item in fresh:
            if _group(item) == _group(old) and changes.same_value(_value(item), new_value):
                return item
        text = re.sub(re.escape(value), new_value, old.text, flags=re.I)
        metadata = {**old.metadata, "supersedes": [old.id]}
        metadata.pop("superseded_by", None)
        if old.type == "profile":
            metadata["value"] = new_value
        now = utcnow()
        new = replace(
            old, id=new_id(), text=text, version=1, metadata=metadata,
            key=new_value.lower() if old.type == "preference" else old.key,
            event_time=page.event_time, created_at=now, updated_at=now,
            valid_from=page.event_time, valid_to=None, status="generated", merged_into=None,
            access_count=0, last_accessed_at=None, heat=None,
            sources=[Source(item_id=page.id, role="evidence")],
        )  # fmt: skip
        if old.type == "preference":
            new.metadata["key"] = new.key
        self._add(new, self.embedder.embed_passages([text])[0])
        return new

    def supersede(
        self, items: list[MemoryItem], successor: str, when: datetime, op: str = "supersede"
    ) -> None:
        """Close ``items`` at ``when`` (``valid_to``; ``metadata["superseded_by"]`` =
        ``successor``), each in a new version (event ``supersede``), with the facts read from
        their turns that name their value and each of those turns that states nothing else.
        Nothing is deleted; ``rollback`` to the version before undoes each.  ``op`` names the
        items' event (``contradict`` for a new value of a single-valued attribute)."""
        for item in items:
            if item.valid_to is not None or item.status in ("frozen", "deleted"):
                continue
            self._close(item, successor, when, op)
            turns = {s.item_id for s in item.sources if s.item_id}
            value = _value(item)
            subject = Filters(tiers=("long",), types=("fact",),
                              metadata={"subject": item.metadata.get("subject")})  # fmt: skip
            for fact in self.store.list_items(item.cube_id, subject):
                cites = turns & {s.item_id for s in fact.sources}
                if fact.valid_to is None and cites and changes.same_value(value, fact.text):
                    self._close(fact, successor, when)
            for turn in self.store.get_items(sorted(turns), [item.cube_id]):
                if turn.valid_to is None and turn.event_time < when and _only(turn, value):
                    self._close(turn, successor, when)

    def _close(
        self, item: MemoryItem, successor: str, when: datetime, op: str = "supersede"
    ) -> None:
        self.store.update_item(
            _closed(item, when, successor), None, op=op, actor=None,
            reason=f"superseded by {successor}",
        )  # fmt: skip

    def _add(self, item: MemoryItem, vector: Vectors) -> None:
        # The finding's text names its subject, so its vector is the item's as it stands.
        self.store.add_items([item], np.asarray(vector)[None, :], fingerprint(self.embedder))


def _item(finding: Finding, cube_id: str, when: datetime) -> MemoryItem:
    metadata: dict[str, object] = {"subject": finding.subject, "key": finding.key}
    if finding.value is not None:
        metadata["value"] = finding.value
    if finding.type == "preference":
        metadata |= {"polarity": finding.polarity, "explicit": finding.explicit}
    now = utcnow()
    return MemoryItem(
        id=new_id(),
        cube_id=cube_id,
        text=finding.text,
        tier="long",
        type=finding.type,
        key=finding.key,
        metadata=metadata,
        event_time=when,
        created_at=now,
        updated_at=now,
        valid_from=when,
        confidence=finding.confidence,
        sources=[Source(item_id=i, role="evidence") for i in finding.sources],
    )


def _value(item: MemoryItem) -> str:
    """What an attribute holds, or what a preference is about."""
    return str(item.metadata.get("value") or item.key or "")


def _group(item: MemoryItem) -> str:
    return f"{item.type}:{changes.group(item.key or '')}"


def _only(turn: MemoryItem, value: str) -> bool:
    """Whether every attribute and preference the rules read in ``turn`` is ``value`` (a turn
    that also says something that still holds is not closed)."""
    found = [f for f in rules.read_page(turn) if f.type in ("profile", "preference")]
    return (
        bool(found) and all(changes.same_value(f.value or f.key or "", value) for f in found)
    ) or (not found and changes.same_value(value, turn.text))


def _same_value(item: MemoryItem, finding: Finding) -> bool:
    return str(item.metadata.get("value", "")).lower() == str(finding.value or "").lower()


def _single(key: str) -> bool:
    """Whether an attribute holds one value at a time (``reader.changes.single_valued``)."""
    return changes.single_valued(key, SINGLE_VALUED)


def _closed(item: MemoryItem, until: datetime, successor: str) -> MemoryItem:
    """``item`` as one that stopped holding at ``until``, replaced by ``successor``."""
    return replace(item, valid_to=until, metadata={**item.metadata, "superseded_by": successor})


def _contradicts(finding: Finding, old: MemoryItem) -> bool:
    if finding.type == "profile":
        return bool(finding.key) and _single(finding.key or "") and not _same_value(old, finding)
    if finding.type == "preference":
        return int(old.metadata.get("polarity", 0)) != finding.polarity
    return False


def _union(a: list[Source], b: list[Source]) -> list[Source]:
    return list(dict.fromkeys([*a, *b]))
