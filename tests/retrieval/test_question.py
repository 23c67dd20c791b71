"""Reading whose memory a question asks about (retrieval.question) and what search does with it."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from memstrata import MemoryOS
from memstrata.filters import Filters
from memstrata.model import Hit, MemoryItem
from memstrata.retrieval import search, timeline
from memstrata.retrieval.question import (
    MAX_DATES,
    dates,
    names,
    near,
    periods,
    subjects,
)
from memstrata.retrieval.search import expand_chain, hybrid_search


def test_names_are_capitalised_words_unless_only_the_first_is() -> None:
    assert names("What does Melanie's dog eat?") == ["Melanie"]
    assert names("Where did Mary Ann go with Bo?") == ["Mary", "Ann", "Bo", "Mary Ann", "Ann Bo"]
    assert names("what does melanie's dog eat") == [
        "melanie", "dog", "eat", "melanie dog", "dog eat",
    ]  # fmt: skip
    assert names("How are you?") == []
    # Only the sentence's first word capitalised: every word may be a name.
    assert names("What does melanie like?") == ["melanie", "like", "melanie like"]
    assert names("Melanie likes what?") == ["Melanie", "likes", "Melanie likes"]


def _talk(mos: MemoryOS) -> list[str]:
    mos.create_user("ann")
    mos.create_cube("c", owner="ann", cube_id="c", settings={"working_capacity": 100})
    said = [
        ("Caroline", "Do you love pottery, Melanie? I love pottery and painting."),
        ("Melanie", "Yes, I love it too."),
        ("Caroline", "Running is how I relax after work."),
        ("Melanie", "Reading relaxes me."),
    ]
    return mos.add(
        [{"role": "user", "name": who, "content": text} for who, text in said],
        user_id="ann", cube_id="c", session_id="s1",
    )  # fmt: skip


def test_subjects_are_the_cube_speakers_a_query_names(mos: MemoryOS) -> None:
    _talk(mos)
    assert subjects(mos.store, "What does Melanie love?", ["c"]) == {"Melanie"}
    assert subjects(mos.store, "what does melanie love", ["c"]) == {"Melanie"}
    assert subjects(mos.store, "Did Caroline and Melanie meet?", ["c"]) == {"Caroline", "Melanie"}
    assert subjects(mos.store, "What does Bob love?", ["c"]) == frozenset()
    assert subjects(mos.store, "What does Melanie love?", ["other"]) == frozenset()


def test_a_named_speakers_items_rank_above_another_speakers(
    mos: MemoryOS, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _talk(mos)
    args = (mos.store, mos.embedder, mos.settings, "Does Melanie love pottery?", ["c"])
    named = hybrid_search(*args, Filters(), 4)
    assert named[0].item.id == ids[1]
    # Without the factor, Caroline's question (the query's own words) would come first.
    monkeypatch.setattr(search, "OTHER_SPEAKER", 1.0)
    monkeypatch.setattr(timeline, "QUESTION", 1.0)  # nor a question weighed as one
    unweighted = hybrid_search(*args, Filters(), 4)
    assert unweighted[0].item.id == ids[0]
    before = {h.item.id: h.score for h in unweighted}
    assert {h.item.id: h.score for h in named}[ids[0]] == pytest.approx(0.5 * before[ids[0]])


def test_a_derived_item_counts_as_its_subjects() -> None:
    about = {"Melanie": MemoryItem(id="f1", cube_id="c", text="Melanie loves pottery.",
                                   tier="long", type="fact", metadata={"subject": "Melanie"}),
             None: MemoryItem(id="d1", cube_id="c", text="A document.", type="document")}  # fmt: skip
    assert search._spoken_by(about["Melanie"], frozenset({"Melanie"}))
    assert not search._spoken_by(about["Melanie"], frozenset({"Caroline"}))
    assert search._spoken_by(about[None], frozenset({"Caroline"}))  # no one's: not weighed down


def test_the_chain_adds_only_the_named_speakers_next_turns(mos: MemoryOS) -> None:
    ids = _talk(mos)
    running = mos.store.get_items([ids[2]], ["c"])
    hits = [Hit(running[0], 1.0)]
    assert [h.item.id for h in expand_chain(mos.store, hits)] == [ids[2], ids[3]]
    named = expand_chain(mos.store, hits, frozenset({"Caroline"}))
    assert [h.item.id for h in named] == [ids[2]]
    assert [h.item.id for h in expand_chain(mos.store, hits, frozenset({"Melanie"}))] == [
        ids[2], ids[3],
    ]  # fmt: skip


def test_dates_a_query_names() -> None:
    assert dates("What did Nate do on 25 May, 2022?") == [date(2022, 5, 25)]
    assert dates("between August 11th 2023 and 2023-08-15") == [
        date(2023, 8, 11), date(2023, 8, 15),
    ]  # fmt: skip
    assert dates("on 31 February 2022, in May 2022, at 10:25") == []
    many = " ".join(f"2022-01-{day:02d}" for day in range(1, 29))
    assert dates(many) == [date(2022, 1, day) for day in range(1, MAX_DATES + 1)]
    when = datetime(2022, 5, 26, 9, tzinfo=timezone.utc)
    item = MemoryItem(id="x", cube_id="c", text="t", event_time=when)
    assert near(item, [date(2022, 5, 25)]) and not near(item, [date(2022, 5, 24)])


def test_periods_are_the_days_and_months_a_query_names() -> None:
    assert periods("What did Nate do on 25 May, 2022?") == [(date(2022, 5, 24), date(2022, 5, 26))]
    # A month with a year and no day: the month, a day either side; December ends the year.
    assert periods("Where was Jo in December 2023 and on May 3rd 2022?") == [
        (date(2022, 5, 2), date(2022, 5, 4)), (date(2023, 11, 30), date(2024, 1, 1))
    ]  # fmt: skip
    assert periods("What did Jo do in 2022?") == []  # a year alone is too long to look in


def test_an_item_from_the_date_a_query_names_ranks_first(mos: MemoryOS) -> None:
    mos.create_user("ann")
    mos.create_cube("c", owner="ann", cube_id="c", settings={"working_capacity": 100})
    days = ("2022-05-01T10:00:00Z", "2022-05-25T10:00:00Z", "2022-06-20T10:00:00Z")
    ids = [
        mos.add(
            [{"role": "user", "content": "We went to the lake again.", "timestamp": day}],
            user_id="ann",
            cube_id="c",
            session_id=day,
        )[0]
        for day in days
    ]
    hits = mos.search("Where did we go on 25 May, 2022?", user_id="ann", top_k=3)
    assert hits[0].item.id == ids[1]
    later = mos.search("Where did we go on June 20th 2022?", user_id="ann", top_k=3)
    assert later[0].item.id == ids[2]


def test_the_day_a_query_names_brings_its_items_among_the_candidates(mos: MemoryOS) -> None:
    # Sixty turns on other days match the question's words better than the one turn of the
    # day it names: only the dated channel (the dense ranking within that day) finds that one.
    mos.create_user("ann")
    mos.create_cube("c", owner="ann", cube_id="c", settings={"working_capacity": 200})
    others = [
        {"role": "user", "content": f"Nate did something nice for Joanna, time {n}.",
         "timestamp": f"2022-0{1 + n % 4}-0{1 + n % 9}T10:00:{n:02d}Z"}
        for n in range(60)
    ]  # fmt: skip
    mos.add(others, user_id="ann", cube_id="c", session_id="before")
    (planted,) = mos.add(
        [{"role": "user", "content": "We planted a cherry tree in the garden.",
          "timestamp": "2022-05-25T10:00:00Z"}],
        user_id="ann", cube_id="c", session_id="may",
    )  # fmt: skip
    hits = mos.search("What did Nate do for Joanna on 25 May, 2022?", user_id="ann", top_k=5)
    found = {h.item.id: h for h in hits}
    assert planted in found and "dated" in found[planted].ranks
