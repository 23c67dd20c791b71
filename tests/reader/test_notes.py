"""Writing sentences as notes: chatter dropped, people resolved, dates given (reader.notes)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memstrata.model import MemoryItem
from memstrata.reader import notes
from memstrata.reader.offline import OfflineReader

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)  # a Monday


@pytest.mark.parametrize(
    "sentence",
    ["Hey Mel!", "Good to see you!", "Wow, that's so cool!", "What happened next?",
     "Thanks, Caroline!", "That sounds amazing!", "That's a great pic!", "Sounds like a blast!",
     "It must have been awesome.", "Awesome, Mel!", "How cool!", "They're amazing."],
)  # fmt: skip
def test_chatter_is_not_a_note(sentence: str) -> None:
    assert list(notes.candidates(sentence)) == []


def test_the_speakers_names_are_not_what_a_sentence_tells() -> None:
    assert list(notes.candidates("Melanie, wow!", ("Caroline", "Melanie"))) == []
    assert list(notes.candidates("Melanie, wow!")) == ["Melanie, wow!"]


@pytest.mark.parametrize(
    "sentence",
    ["That's awesome news about the fashion internship.", "It was a transgender poetry reading.",
     "It is my favorite book.", "I went hiking, Mel!"],
)  # fmt: skip
def test_a_reaction_that_tells_something_is_kept(sentence: str) -> None:
    assert list(notes.candidates(sentence)) == [sentence]


def test_a_note_names_the_speaker_and_the_listener() -> None:
    note = notes.write("Wow, I really love your painting, Mel!", "Caroline", "Melanie", MAY_8)
    assert note == "Caroline loves Melanie's painting!"
    assert notes.write("My kids are excited.", "Melanie", None, None) == (
        "Melanie's kids are excited."
    )


def test_a_note_spoken_to_someone_unknown_is_not_written() -> None:
    assert notes.write("Your dog is lovely.", "Ann", None, None) is None


def test_a_note_without_its_speaker_says_whose_it_is() -> None:
    assert notes.write("It was a transgender poetry reading.", "Caroline", "Mel", None) == (
        "Caroline: It was a transgender poetry reading."
    )


def test_verbs_agree_with_the_speaker() -> None:
    assert notes.third_person("I paint and I went out; I don't swim.", "Mel") == (
        "Mel paints and Mel went out; Mel doesn't swim."
    )


@pytest.mark.parametrize(
    ("phrase", "date"),
    [("yesterday", "7 May 2023"), ("last Saturday", "6 May 2023"),
     ("next Friday", "12 May 2023"), ("last year", "2022"), ("next month", "June 2023"),
     ("two days ago", "6 May 2023"), ("last week", "the week of 1 May 2023")],
)  # fmt: skip
def test_relative_dates_are_dated(phrase: str, date: str) -> None:
    assert notes.absolute(phrase, MAY_8) == date
    assert notes.dated(f"I went {phrase}.", MAY_8) == f"I went {phrase} ({date})."


def test_the_reader_keeps_worthy_notes_citing_their_turn() -> None:
    pages = [
        MemoryItem(id="t1", cube_id="c", text="Hey Mel! How are you?", role="user",
                   speaker="Caroline", session_id="s1", event_time=MAY_8),
        MemoryItem(id="t2", cube_id="c", role="user", speaker="Melanie", session_id="s1",
                   event_time=MAY_8,
                   text="I painted a lake sunrise last year. It means a lot to me."),
    ]  # fmt: skip
    facts = [f for f in OfflineReader().read(pages) if f.type == "fact"]
    assert [f.sources for f in facts] == [("t2",)] * len(facts)
    assert "Melanie painted a lake sunrise last year (2022)." in [f.text for f in facts]
    assert all(0 < f.confidence <= 1 and f.subject == "Melanie" for f in facts)
