"""The long tier (DESIGN §3.4): facts, profile attributes, preferences and assistant knowledge.

When a segment is hot enough its unprocessed pages (status ``generated``) are read into findings
(see ``reader``), and each finding is checked against what the tier already holds about the same
subject:

* **duplicate** (the same attribute value, the same preference, a fact whose vector is within
  ``DUPLICATE_COSINE`` of an existing one): a new item carries the evidence of both, and the old
  one becomes ``merged`` into it;
* **contradiction** (a single-valued attribute with another value, a preference with the opposite
  polarity): the old item gets ``valid_to`` — it held until then — and stays; the new one is
  added with ``valid_from``;
* otherwise the finding is a new item.

Nothing is overwritten or lost: every state is an item or a version, and every item lists the
turns it came from in ``sources``.  The pages read become ``activated`` (consolidated).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from memstrata.embed.base import Embedder, Vectors, fingerprint
from memstrata.filters import Filters
from memstrata.model import MemoryItem, Source, new_id, utcnow
from memstrata.reader.findings import Finding, Reader
from memstrata.reader.rules import SINGLE_VALUED
from memstrata.store.base import Store

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

    def __init__(self, store: Store, embedder: Embedder, reader: Reader) -> None:
        self.store = store
        self.embedder = embedder
        self.reader = reader

    def promote(self, segment_id: str) -> list[Outcome]:
        """Read the segment's unprocessed pages into long-tier items; mark the pages activated.

        Idempotent: pages already activated are not read again, and a finding repeated by a
        retry is recognised as a duplicate.
        """
        found = self.store.get_items([segment_id])
        if not found:
            return []
        page_ids = [s.item_id for s in found[0].sources if s.item_id]
        pages = [p for p in self.store.get_items(page_ids) if p.status == "generated"]
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
            self.store.update_item(
                replace(page, status="activated"), None, op="transition", actor=None,
                reason="promoted to the long tier",
            )  # fmt: skip
        return outcomes

    def _remember(self, finding: Finding, vector: Vectors, pages: list[MemoryItem]) -> Outcome:
        cube_id = pages[0].cube_id
        when = max(p.event_time for p in pages)
        new = _item(finding, cube_id, when)
        old = self._counterpart(finding, new, vector)
        if old is None:
            self._add(new, vector)
            return Outcome("added", new.id)
        if _contradicts(finding, old):
            self._add(new, vector)
            self.store.update_item(
                replace(old, valid_to=when), None, op="contradict", actor=None,
                reason=f"contradicted by {new.id}",
            )  # fmt: skip
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
        if finding.type in ("profile", "preference"):
            same = replace(same, metadata={**same.metadata, "key": finding.key})
            current = [i for i in self.store.list_items(new.cube_id, same) if i.valid_to is None]
            if finding.type == "profile" and finding.key not in SINGLE_VALUED:
                current = [i for i in current if _same_value(i, finding)]
            return current[-1] if current else None
        near = self.store.vector_search(vector, [new.cube_id], same, 1)
        if near and near[0][1] >= DUPLICATE_COSINE:
            return self.store.get_items([near[0][0]])[0]
        return None

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


def _same_value(item: MemoryItem, finding: Finding) -> bool:
    return str(item.metadata.get("value", "")).lower() == str(finding.value or "").lower()


def _contradicts(finding: Finding, old: MemoryItem) -> bool:
    if finding.type == "profile":
        return finding.key in SINGLE_VALUED and not _same_value(old, finding)
    if finding.type == "preference":
        return int(old.metadata.get("polarity", 0)) != finding.polarity
    return False


def _union(a: list[Source], b: list[Source]) -> list[Source]:
    return list(dict.fromkeys([*a, *b]))
