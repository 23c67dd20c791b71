"""Promotion into the long tier with the offline reader: facts, profile, preferences, and the
duplicate / contradiction rules that never lose a memory."""

from __future__ import annotations

import pytest

from memstrata import MemoryOS
from memstrata.errors import PermissionDenied
from memstrata.filters import Filters

LONG = Filters(tiers=("long",), statuses=("generated", "activated", "merged"))
#: every turn leaves the working tier at once, joins one segment, and is promoted right away
HOT = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 0.0}


def setup(mos: MemoryOS) -> str:
    mos.create_user("u")
    return mos.create_cube("c", owner="u", settings=HOT).cube_id


def say(mos: MemoryOS, cube: str, *turns: tuple[str, str]) -> list[str]:
    messages = [{"name": "Ann", "content": text, "timestamp": when} for text, when in turns]
    ids = mos.add(messages, user_id="u", cube_id=cube, session_id="s")
    mos.add([{"name": "Bob", "content": "ok", "timestamp": "2030-01-01"}], user_id="u",
            cube_id=cube, session_id="s")  # pushes the last turn out of the working tier  # fmt: skip
    assert mos.wait(cube, timeout=60)
    return ids


def long_items(mos: MemoryOS, cube: str, **filters: object) -> list:  # type: ignore[type-arg]
    from dataclasses import replace

    return mos.store.list_items(cube, replace(LONG, **filters))


def test_promotion_reads_facts_profile_and_preferences_with_sources(mos: MemoryOS) -> None:
    cube = setup(mos)
    (turn,) = say(mos, cube, ("My name is Ann and I live in Porto. I really love hiking.",
                              "2024-03-01T10:00:00Z"))  # fmt: skip
    items = long_items(mos, cube)
    kinds = sorted((i.type, i.key) for i in items)
    assert ("profile", "lives_in") in kinds and ("profile", "name") in kinds
    assert ("preference", "hiking") in kinds and any(k == "fact" for k, _ in kinds)
    assert all([s.item_id for s in i.sources] == [turn] for i in items)
    fact = next(i for i in items if i.type == "fact")
    assert fact.text.startswith("Ann's name is Ann and Ann lives in Porto")
    assert mos.get(turn, user_id="u").status == "activated"  # the page was consolidated
    profile = {(a.subject, a.key): a for a in mos.get_profile(user_id="u")}
    assert profile[("Ann", "lives_in")].value == "Porto"
    assert profile[("Ann", "lives_in")].evidence == [turn]
    hit = mos.search("Where does Ann live?", user_id="u", filters={"tier": "long"})[0]
    assert hit.item.sources[0].item_id == turn  # a derived hit carries its source turns


def test_a_contradiction_ends_the_old_value_and_keeps_it(mos: MemoryOS) -> None:
    cube = setup(mos)
    porto, lisbon = say(mos, cube, ("I live in Porto.", "2024-01-01T00:00:00Z"),
                        ("I moved to Lisbon last month.", "2024-06-01T00:00:00Z"))  # fmt: skip
    lives = long_items(mos, cube, types=("profile",), metadata={"key": "lives_in"})
    assert len(lives) == 2  # nothing lost
    old = next(i for i in lives if i.metadata["value"] == "Porto")
    new = next(i for i in lives if i.metadata["value"] == "Lisbon")
    assert old.valid_to is not None and old.valid_to.year == 2024 and old.valid_to.month == 6
    assert new.valid_to is None and new.valid_from == old.valid_to
    assert [e.op for e in mos.store.events(item_id=old.id)][-1] == "contradict"
    current = [a for a in mos.get_profile(user_id="u") if a.key == "lives_in"]
    assert [(a.value, a.evidence) for a in current] == [("Lisbon", [lisbon])]
    assert porto != lisbon


def test_a_duplicate_merges_with_evidence_from_both(mos: MemoryOS) -> None:
    cube = setup(mos)
    first, second = say(mos, cube, ("I really love hiking.", "2024-01-01T00:00:00Z"),
                        ("I love hiking.", "2024-02-01T00:00:00Z"))  # fmt: skip
    prefs = long_items(mos, cube, types=("preference",))
    merged = [p for p in prefs if p.status == "merged"]
    live = [p for p in prefs if p.status != "merged"]
    assert len(merged) == 1 and len(live) == 1
    assert merged[0].merged_into == live[0].id
    assert [s.item_id for s in live[0].sources] == [first, second]


def test_an_opposite_preference_contradicts(mos: MemoryOS) -> None:
    cube = setup(mos)
    say(mos, cube, ("I love coffee.", "2024-01-01T00:00:00Z"),
        ("I hate coffee now.", "2024-05-01T00:00:00Z"))  # fmt: skip
    prefs = long_items(mos, cube, types=("preference",), metadata={"key": "coffee"})
    polarity = {p.metadata["polarity"]: p for p in prefs}
    assert polarity[1].valid_to is not None and polarity[-1].valid_to is None


def test_promotion_is_idempotent(mos: MemoryOS) -> None:
    cube = setup(mos)
    say(mos, cube, ("I work as a teacher in Graz.", "2024-01-01T00:00:00Z"))
    before = len(long_items(mos, cube))
    segment = mos.store.list_items(cube, Filters(types=("segment",)))[0]
    from memstrata.reader.offline import OfflineReader
    from memstrata.tiers.long import LongTier

    assert (
        LongTier(mos.store, mos.embedder, OfflineReader()).promote(segment.cube_id, segment.id)
        == []
    )
    assert len(long_items(mos, cube)) == before


def test_context_shows_long_tier_hits_as_their_source_turns(mos: MemoryOS) -> None:
    cube = setup(mos)
    (turn,) = say(mos, cube, ("I live in Porto.", "2024-03-01T10:00:00Z"))
    only_long = {"tier": "long"}
    ctx = mos.context("Where does Ann live?", user_id="u", filters=only_long, chain=False)
    assert [h.item.id for h in ctx.hits] == [turn]  # every long hit came from that one turn
    assert "Ann: I live in Porto." in ctx.text
    raw = mos.context("Where does Ann live?", user_id="u", filters=only_long, expand_sources=False)
    assert {h.item.tier for h in raw.hits} == {"long"}
    assert "# Profile\nAnn lives in Porto" in raw.text


def test_get_preferences_lists_the_current_ones_with_their_evidence(mos: MemoryOS) -> None:
    cube = setup(mos)
    _, hate, walk = say(mos, cube, ("I love coffee.", "2024-01-01T00:00:00Z"),
                        ("I hate coffee now.", "2024-05-01T00:00:00Z"),
                        ("I always walk to work.", "2024-06-01T00:00:00Z"))  # fmt: skip
    found = mos.get_preferences(user_id="u")
    assert found == mos.get_preferences(user_id="u", cube_id=cube)
    by_key = {p.key: p for p in found}
    assert set(by_key) == {"coffee", "walk to work"}  # the contradicted like is left out
    coffee = by_key["coffee"]
    assert (coffee.subject, coffee.polarity, coffee.explicit) == ("Ann", -1, True)
    assert (coffee.text, coffee.evidence, coffee.cube_id) == ("Ann dislikes coffee", [hate], cube)
    assert coffee.since is not None and coffee.since.month == 5
    assert mos.get(coffee.item_id, user_id="u").type == "preference"
    habit = by_key["walk to work"]
    assert (habit.polarity, habit.explicit, habit.evidence) == (1, False, [walk])


def test_get_preferences_is_scoped_to_readable_cubes(mos: MemoryOS) -> None:
    cube = setup(mos)
    say(mos, cube, ("I really love hiking.", "2024-01-01T00:00:00Z"))
    mos.create_user("v")
    assert mos.get_preferences(user_id="v") == []  # nothing of a cube v may not read
    with pytest.raises(PermissionDenied):
        mos.get_preferences(user_id="v", cube_id=cube)
    mos.share(cube, "v", "read", by="u")
    assert [p.key for p in mos.get_preferences(user_id="v")] == ["hiking"]
