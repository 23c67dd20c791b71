from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memstrata import MemoryOS
from memstrata.errors import ValidationError
from memstrata.model import Hit, MemoryItem, Source, new_id
from memstrata.retrieval.pack import count_tokens, pack, render


def item(text: str, day: int, speaker: str | None = "Ann", **extra: object) -> MemoryItem:
    when = datetime(2024, 5, day, tzinfo=timezone.utc)
    return MemoryItem(id=new_id(), cube_id="c", text=text, speaker=speaker, event_time=when,
                      **extra)  # type: ignore[arg-type]  # fmt: skip


def test_count_tokens_is_words_times_1_3_rounded_up() -> None:
    assert count_tokens("one two three") == 4
    assert count_tokens("") == 0


def test_render_dates_and_speakers() -> None:
    assert render(item("hello  there", 8)) == "[2024-05-08] Ann: hello there"
    segment = item("summary", 9, speaker=None, type="segment", keywords=["alps", "hike"])
    assert render(segment) == "[2024-05-09] (topic) alps · hike: summary"
    fact = item("Ann adopted a cat.", 10, speaker=None, tier="long", type="fact",
                metadata={"subject": "Ann"})  # fmt: skip
    assert render(fact) == "[2024-05-10] Ann (fact): Ann adopted a cat."


def test_pack_respects_the_budget_in_rank_order_and_renders_by_time() -> None:
    first, second, third = (
        item("late but best", 20),
        item("early and second", 1),
        item("a very long memory " * 30, 5),
    )
    hits = [Hit(first, 0.9), Hit(third, 0.8), Hit(second, 0.7)]
    ctx = pack(hits, [], budget=30)
    assert [h.item.id for h in ctx.hits] == [first.id, second.id]  # the long one did not fit
    assert ctx.tokens <= 30
    lines = ctx.text.splitlines()
    assert lines == ["# Relevant memories", render(second), render(first)]


def test_recent_turns_come_first_and_are_not_repeated() -> None:
    recent = [item(f"recent {i}", 10 + i) for i in range(3)]
    hits = [Hit(recent[2], 1.0), Hit(item("older fact", 1), 0.5)]
    ctx = pack(hits, recent, budget=1000)
    assert ctx.recent == recent and [h.item.text for h in ctx.hits] == ["older fact"]
    assert ctx.text.splitlines()[0] == "# Recent conversation"
    small = pack(hits, recent, budget=10)  # only the newest recent turn fits
    assert small.recent == [recent[2]] and small.hits == [] and small.tokens <= 10


def test_pack_keeps_sources_of_derived_hits() -> None:
    segment = item("summary", 3, speaker=None, type="segment", sources=[Source(item_id="p1")])
    assert pack([Hit(segment, 1.0)], [], 100).hits[0].item.sources == [Source(item_id="p1")]


def test_memoryos_context(mos: MemoryOS) -> None:
    mos.create_user("u")
    cube = mos.create_cube("c", owner="u").cube_id
    mos.add([{"content": "My sister Lena lives in Porto.", "timestamp": "2024-01-02"}],
            user_id="u", cube_id=cube, session_id="old")  # fmt: skip
    mos.add([{"content": "Let us plan the weekend.", "timestamp": "2024-06-01"}],
            user_id="u", cube_id=cube, session_id="now")  # fmt: skip
    ctx = mos.context("Where does Lena live?", user_id="u", budget_tokens=200, session_id="now")
    assert ctx.recent[0].text == "Let us plan the weekend."
    assert ctx.hits[0].item.text == "My sister Lena lives in Porto."
    assert "[2024-01-02]" in ctx.text and ctx.tokens <= 200
    with pytest.raises(ValidationError):
        mos.context("x", user_id="u", budget_tokens=0)


def test_profile_lines_come_first_within_the_budget() -> None:
    ctx = pack([Hit(item("a memory", 2), 1.0)], [], 100, profile=["Ann lives in Porto"])
    assert ctx.text.splitlines()[:2] == ["# Profile", "Ann lives in Porto"]
    assert ctx.profile == ["Ann lives in Porto"]
    tiny = pack([], [], 3, profile=["Ann lives in Porto"])  # does not fit: left out
    assert tiny.text == "" and tiny.tokens == 0


def test_context_brings_the_next_turn_of_each_hit(mos: MemoryOS) -> None:
    mos.create_user("u")
    cube = mos.create_cube("c", owner="u").cube_id
    ids = mos.add(
        [{"name": "Ann", "content": "What did you name the new puppy?"},
         {"name": "Bob", "content": "Biscuit, after the colour of his fur."},
         {"name": "Ann", "content": "Unrelated weather talk."}],
        user_id="u", cube_id=cube, session_id="s",
    )  # fmt: skip
    ctx = mos.context("name the new puppy", user_id="u", budget_tokens=60)
    at = {h.item.id: n for n, h in enumerate(ctx.hits)}
    # the question brings its answer right after it, with its score (the answer may also
    # rank first on its own: a turn that only asks weighs less, retrieval.timeline)
    assert at[ids[1]] in (0, at[ids[0]] + 1)
    plain = mos.context("name the new puppy", user_id="u", budget_tokens=60, chain=False)
    chained = {h.item.id for h in ctx.hits} - {h.item.id for h in plain.hits}
    assert chained <= {ids[1], ids[2]}
