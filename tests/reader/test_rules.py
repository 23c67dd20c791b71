from __future__ import annotations

from memstrata.model import MemoryItem
from memstrata.reader.notes import third_person
from memstrata.reader.offline import OfflineReader, keywords, summarise

TEXT = (
    "My name is Ann Lee and I live in Porto. I work as a nurse at Santa Maria. "
    "I adopted a grey cat named Pixel. I really love hiking in the mountains, but I hate crowded "
    "beaches. I always drink green tea in the morning. My sister Lena moved to Berlin. "
    "What about you?"
)


def page(text: str, role: str = "user", speaker: str | None = "Ann") -> MemoryItem:
    return MemoryItem(id="p1", cube_id="c", text=text, role=role, speaker=speaker)


def test_profile_attributes() -> None:
    found = OfflineReader().read([page(TEXT)])
    profile = {(f.key, f.value) for f in found if f.type == "profile"}
    assert profile == {
        ("name", "Ann Lee"), ("lives_in", "Porto"), ("job", "nurse"), ("pet_cat", "Pixel"),
        ("sister", "Lena"), ("interest", "hiking"),
    }  # fmt: skip
    assert all(f.sources == ("p1",) and f.subject == "Ann" for f in found)


def test_preferences_explicit_and_implicit() -> None:
    found = OfflineReader().read([page(TEXT)])
    prefs = {(f.key, f.polarity, f.explicit) for f in found if f.type == "preference"}
    assert prefs == {("hiking", 1, True), ("crowded beaches", -1, True),
                     ("drink green tea", 1, False)}  # fmt: skip


def test_facts_are_third_person_and_questions_are_skipped() -> None:
    facts = [f.text for f in OfflineReader().read([page(TEXT)]) if f.type == "fact"]
    assert "Ann adopted a grey cat named Pixel." in facts
    assert "Ann loves hiking in the mountains, but Ann hates crowded beaches." in facts
    assert not any("?" in f for f in facts)
    assert (
        third_person("I went there and I have my keys.", "Bo")
        == "Bo went there and Bo has Bo's keys."
    )


def test_assistant_commitments_become_knowledge() -> None:
    found = OfflineReader().read(
        [page("I'll remember that you prefer tea. Nice weather!", "assistant", None)]
    )
    assert [(f.type, f.text) for f in found] == [
        ("knowledge", "I'll remember that you prefer tea.")
    ]


def test_keywords_and_summaries() -> None:
    assert keywords("We hiked the alpine trail; the trail was steep!")[0] == "trail"
    texts = ["Hi Bo! I moved to Porto.", "I love the sea.", "Third.", "Fourth.", "Nice!",
             "I got a dog, Bo!"]  # fmt: skip
    pages = [MemoryItem(id=f"p{i}", cube_id="c", text=t, role="user", speaker="Ann",
                        session_id="s") for i, t in enumerate(texts)]  # fmt: skip
    # The first and last two pages, each by its first sentence saying something, as a note;
    # "Nice!" says nothing, so that page is left out.
    assert summarise(pages) == "Ann moved to Porto. / Ann loves the sea. / Ann got a dog!"
    assert summarise(pages[4:5]) == "Nice!"  # nothing said at all: the first sentence


def _profile(text: str) -> set[tuple[str | None, str | None]]:
    found = OfflineReader().read([page(text, speaker="Mel")])
    return {(f.key, f.value) for f in found if f.type == "profile"}


def test_interests_are_pastimes_not_any_gerund() -> None:
    assert _profile("I started transitioning and I've been caring for people.") == set()
    assert _profile("I went swimming, I play the violin and I'm into pottery.") == {
        ("interest", "swimming"), ("interest", "violin"), ("interest", "pottery")
    }  # fmt: skip
    assert _profile("I booked a kayaking trip.") == {("interest", "kayaking")}


def test_family() -> None:
    found = OfflineReader().read(
        [
            page(
                "My husband and my kids are great. I'm planning to open my own studio.",
                speaker="Mel",
            )
        ]
    )
    profile = {(f.key, f.value, f.text) for f in found if f.type == "profile"}
    # A plan is a fact (a note), not a profile line packed into every context.
    assert profile == {
        ("family", "husband", "Mel has a husband"),
        ("family", "kids", "Mel has kids"),
    }


def test_a_like_with_no_thing_is_no_preference() -> None:
    found = OfflineReader().read([page("I'd love to.")])
    assert [f for f in found if f.type == "preference"] == []
