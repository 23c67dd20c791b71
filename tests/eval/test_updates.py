"""The knowledge-update suite (``memstrata eval updates``): its stories and its marks."""

from __future__ import annotations

import tempfile
from pathlib import Path

from memstrata import MemoryOS
from memstrata.eval import stories, updates


def test_the_stories_are_many_kinds_two_disjoint_halves_and_always_the_same() -> None:
    every = stories.stories()
    assert every == stories.stories()  # deterministic
    assert len(every) >= 50 and len({s.kind for s in every}) >= 15
    tune, held = stories.stories(("tune",)), stories.stories(("held",))
    assert len(tune) == len(held) == len(every) // 2
    assert {s.name for s in tune}.isdisjoint({s.name for s in held})
    for kind in stories.KINDS:
        assert set(kind.state[0]).isdisjoint(kind.state[1])
        assert set(kind.change[0]).isdisjoint(kind.change[1])
    for story in every:
        said = {m["id"]: m["content"] for session in story.sessions for m in session}
        assert len(story.statements) == len(story.values) in (2, 3)
        for turn, value in zip(story.statements, story.values, strict=True):
            assert updates.names(said[turn], value)  # each statement names its value
        times = [m["timestamp"] for session in story.sessions for m in session]
        assert times == sorted(times)
    assert any(s.values[0] == s.current for s in every)  # some change back


def test_one_story_is_ingested_asked_and_marked() -> None:
    story = stories.stories(("tune",))[0]
    with (
        tempfile.TemporaryDirectory() as folder,
        MemoryOS.open(str(Path(folder) / "u.db"), workers=0) as mos,
    ):
        cube = updates._ingest(mos, story)
        row = updates._ask(mos, story, cube)
    assert set(updates.METRICS) <= set(row)
    assert row["context_new"] == 1  # the newest statement is in the context
    figures = updates.summary([row])
    assert figures["stories"] == 1 and 0.0 <= figures["new_above_old"] <= 1.0
    assert updates.table({"halves": {"tune": figures}, "overall": figures})[0].startswith("half")


def test_a_profile_value_names_a_value_whole_or_in_part() -> None:
    assert updates._same("Civic", "Honda Civic") and updates._same("Lisbon", "lisbon")
    assert not updates._same("a", "a cat") and not updates._same("Porto", "Portugal")
