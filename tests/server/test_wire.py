"""``memstrata.wire``: the one JSON shape of the data model, written and read back exactly.

Pure-logic tests: no server (``test_client`` runs the same round trip through a real one).
"""

from __future__ import annotations

import json
import re
from dataclasses import fields
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memstrata import wire
from memstrata.model import (
    ApiKey,
    Cube,
    Event,
    Grant,
    Hit,
    MemoryItem,
    Part,
    Preference,
    ProfileAttribute,
    Source,
    User,
    Version,
)
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import ChatReply
from memstrata.scheduler import Task

WHEN = datetime(2024, 5, 8, 13, 56, 1, 123456, tzinfo=timezone.utc)
ITEM = MemoryItem(
    id="01J", cube_id="notes", text="Ann moved to Porto.", version=3, tier="long", type="fact",
    session_id="s1", user_id="ann", agent_id="bot", role="user", speaker="Ann", key="lives_in",
    keywords=["porto"], tags=["move"], metadata={"n": 2, "deep": {"x": [1, None]}},
    external_id="m-1", event_time=WHEN, created_at=WHEN + timedelta(1),
    updated_at=WHEN + timedelta(2), valid_from=WHEN, valid_to=WHEN + timedelta(3),
    status="activated", merged_into="01K", confidence=0.5, pinned=True, access_count=4,
    last_accessed_at=WHEN, heat=1.5, segment_id="01S",
    sources=[Source(item_id="01A", role="evidence"), Source(uri="file:///a.md", span=(1, 9))],
)  # fmt: skip
HIT = Hit(ITEM, 0.25, {"keyword": 1, "dense": 3})
PARTS = (
    Part("channel", "keyword", 1 / 61, rank=1),
    Part("channel", "dense", 1 / 63, rank=3),
    Part("adjustment", "speaker", -0.0161, "other speaker", factor=0.5),
    Part("adjustment", "neighbour", 0.0094, "next turn of #2"),
)
EXPLAINED = Hit(ITEM, sum(p.value for p in PARTS), HIT.ranks, PARTS)
SHORT_SPAN = {"item_id": None, "uri": "x", "span": [1], "role": None}


def _json(value: Any) -> Any:
    """``value`` through real JSON text, as a surface sends it."""
    return json.loads(json.dumps(value))


def test_the_item_has_every_field_and_round_trips() -> None:
    written = _json(wire.item_to_wire(ITEM))
    assert list(written) == [f.name for f in fields(MemoryItem)]
    assert written["event_time"] == "2024-05-08T13:56:01.123456+00:00"
    assert written["sources"][1] == {"item_id": None, "uri": "file:///a.md", "span": [1, 9],
                                     "role": None}  # fmt: skip
    assert wire.item_from_wire(written) == ITEM


def test_a_hit_is_flat_for_rest_and_nested_for_mcp_and_the_cli() -> None:
    flat = _json(wire.hit_to_wire(HIT, parts=False))
    assert flat == _json(wire.item_to_wire(ITEM)) | {"score": 0.25, "ranks": HIT.ranks}
    assert wire.hit_from_wire(flat) == HIT
    nested = {"item": flat_item(flat), "score": 0.25, "ranks": HIT.ranks}
    assert _json(wire.scored_hit_to_wire(HIT, parts=False)) == nested
    assert _json(wire.to_wire(HIT)) == _json(wire.scored_hit_to_wire(HIT)) == nested | {"parts": []}


def test_a_hit_with_parts_round_trips_each_part_with_exactly_its_fields() -> None:
    flat = _json(wire.hit_to_wire(EXPLAINED))
    assert [list(p) for p in flat["parts"]] == [[f.name for f in fields(Part)]] * len(PARTS)
    assert flat["parts"][2] == {"kind": "adjustment", "name": "speaker", "value": -0.0161,
                                "reason": "other speaker", "rank": None, "factor": 0.5}  # fmt: skip
    assert wire.hit_from_wire(flat) == EXPLAINED
    assert _json(wire.scored_hit_to_wire(EXPLAINED))["parts"] == flat["parts"]
    assert _json(wire.to_wire(EXPLAINED))["parts"] == flat["parts"]


def test_a_hit_without_parts_reads_back_with_none_and_bad_parts_are_named() -> None:
    flat = _json(wire.hit_to_wire(EXPLAINED, parts=False))
    assert "parts" not in flat  # an older server's hit, or a search not asked to explain
    assert wire.hit_from_wire(flat).parts == ()
    bad = flat | {"parts": [{"kind": "bonus", "name": "x", "value": 1, "reason": "",
                             "rank": None, "factor": None}]}  # fmt: skip
    with pytest.raises(wire.WireError, match=re.escape("Hit.parts[0].kind is 'bonus'")):
        wire.hit_from_wire(bad)
    with pytest.raises(wire.WireError, match=re.escape("Hit.parts is not an array")):
        wire.hit_from_wire(flat | {"parts": {}})


def test_a_part_in_words() -> None:
    assert [wire.part_text(p) for p in PARTS] == [
        "keyword #1 +0.0164",
        "dense #3 +0.0159",
        "speaker ×0.5 -0.0161 (other speaker)",
        "neighbour +0.0094 (next turn of #2)",
    ]
    # a note that moved nothing says why without a number; a tiny real change keeps its sign
    assert wire.part_text(Part("adjustment", "source", 0.0, "of fact #1")) == "source (of fact #1)"
    assert (
        wire.part_text(Part("adjustment", "date", -1e-6, "named day")) == "date -0.0000 (named day)"
    )


def flat_item(flat: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in flat.items() if k not in wire.HIT_KEYS}


def test_versions_contexts_and_chat_replies_round_trip() -> None:
    version = Version(2, ITEM, WHEN, "ann", None)
    assert wire.version_from_wire(_json(wire.to_wire(version))) == version
    recent = MemoryItem(id="01R", cube_id="notes", text="hi", event_time=WHEN, created_at=WHEN,
                        updated_at=WHEN)  # fmt: skip
    context = Context("text", 12, 100, hits=[HIT], recent=[recent], profile=["lives in: Porto"])
    assert wire.context_from_wire(_json(wire.context_to_wire(context))) == context
    # a context's hits go without their parts (a search with explain is where to read them)
    explained = Context("text", 12, 100, hits=[EXPLAINED], recent=[recent], profile=[])
    assert "parts" not in wire.context_to_wire(explained)["hits"][0]
    reply = ChatReply("Porto.", ["01Q", "01A"], context)
    assert wire.chat_reply_from_wire(_json(wire.chat_reply_to_wire(reply))) == reply
    assert wire.chat_reply_from_wire(_json(wire.chat_reply_to_wire(ChatReply("x")))).context is None


@pytest.mark.parametrize(
    "record",
    [
        User("ann", "Ann", "admin", WHEN),
        Cube("notes", "Notes", "ann", "shared", {"working_capacity": 5}, "e5/384", WHEN),
        Grant("notes", "bob", "write", "ann", WHEN),
        ApiKey("k1", "ann", "laptop", WHEN, None, None),
        Event(7, WHEN, "ann", "notes", "01J", "update", {"text": "a"}, None, 2, "typo"),
        ProfileAttribute(
            "notes", "ann", "lives_in", "Porto", "Ann lives in Porto", WHEN, ["01J"], "01P"
        ),
        Preference(
            "notes", "ann", "hiking", -1, False, "Ann dislikes hiking", None, ["01J"], "01Q"
        ),
        Task("t1", "consolidate", "notes", {"n": 1}, "done", 1, 5, WHEN, None, None, WHEN, WHEN),
    ],
)
def test_every_record_round_trips(record: Any) -> None:
    assert wire.record_from_wire(type(record), _json(wire.to_wire(record))) == record


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"heat": ...}, "MemoryItem has no heat"),
        ({"colour": "red"}, "MemoryItem has unknown colour"),
        ({"pinned": 1}, "MemoryItem.pinned is int 1, not bool"),
        ({"version": "3"}, "MemoryItem.version is str '3', not int"),
        ({"tier": "hot"}, "MemoryItem.tier is 'hot', not one of working, mid, long"),
        ({"event_time": "yesterday"}, "MemoryItem.event_time 'yesterday' is not a time"),
        ({"text": None}, "MemoryItem.text is null"),
        ({"sources": [{"uri": "x"}]}, "MemoryItem.sources[0] has no item_id, span, role"),
        ({"sources": [SHORT_SPAN]}, "MemoryItem.sources[0].span has 1 entries, not 2"),
    ],
)
def test_reading_is_strict(change: dict[str, Any], message: str) -> None:
    written = _json(wire.item_to_wire(ITEM))
    broken = {k: v for k, v in (written | change).items() if v is not ...}
    with pytest.raises(wire.WireError, match=re.escape(message)):
        wire.item_from_wire(broken)


def test_times_may_come_as_z_or_epoch_seconds() -> None:
    written = _json(wire.item_to_wire(ITEM))
    assert wire.item_from_wire(written | {"event_time": "2024-05-08T13:56:01.123456Z"}) == ITEM
    epoch = wire.item_from_wire(written | {"event_time": WHEN.timestamp()})
    assert abs(epoch.event_time - WHEN) < timedelta(microseconds=2)
    with pytest.raises(wire.WireError, match="not a time"):
        wire.item_from_wire(written | {"event_time": True})
