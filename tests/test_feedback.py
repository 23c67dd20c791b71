"""Corrections (issue 25): ``MemoryOS.feedback`` reads a correction, a rejection, a request to
forget or a confirmation and applies it as supersession, archiving, erasure or a confidence
boost; each is audited, undone by rollback (but erasure), and refused without write access."""

from __future__ import annotations

import pytest

from memstrata import MemoryOS
from memstrata.errors import ItemNotFound, PermissionDenied, ValidationError
from memstrata.filters import Filters
from memstrata.model import STATUSES
from memstrata.reader.corrections import classify, read_feedback
from tests.conftest import row_counts

pytestmark = pytest.mark.engines("sqlite", "postgres")

#: every turn leaves the working tier at once, joins one segment, and is promoted right away
HOT = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 0.0}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("No, I moved to Porto, not Lisbon", "correct"),
        ("Actually, I'm a paramedic now", "correct"),
        ("That's not right, I live in Porto", "correct"),
        ("that's wrong", "invalidate"),
        ("No, that is not true.", "invalidate"),
        ("I never said that", "invalidate"),
        ("forget that I smoke", "forget"),
        ("Please delete what I said about my ex", "forget"),
        ("yes, that's right", "confirm"),
        ("Correct!", "confirm"),
        ("hmm", None),
    ],
)
def test_the_classifier_tells_the_four_kinds_apart(text: str, kind: str | None) -> None:
    assert classify(text) == kind


def test_a_correction_names_its_statement_and_the_value_it_rejects() -> None:
    reading = read_feedback("No, I moved to Porto, not Lisbon")
    assert (reading.statement, reading.replaced) == ("I moved to Porto", "Lisbon")
    assert read_feedback("forget that I smoke").statement == "I smoke"


def lisbon(mos: MemoryOS) -> tuple[str, str]:
    """Ann (user ``ann``) said she lives in Lisbon, Bob that he lives in Oslo; promoted."""
    mos.create_user("ann", name="Ann")
    mos.create_user("bob", name="Bob")
    cube = mos.create_cube("c", owner="ann", settings=HOT).cube_id
    [turn] = mos.add([{"name": "Ann", "content": "I live in Lisbon, right by the river."}],
                     user_id="ann", cube_id=cube, session_id="s")  # fmt: skip
    mos.add([{"name": "Bob", "content": "I live in Oslo."}, {"name": "Bob", "content": "ok"}],
            user_id="ann", cube_id=cube, session_id="s")  # fmt: skip
    assert mos.wait(cube, timeout=60)
    return cube, turn


def test_a_correction_supersedes_the_old_value_and_is_undone_by_rollback(mos: MemoryOS) -> None:
    cube, turn = lisbon(mos)
    [old] = [a for a in mos.get_profile(user_id="ann", cube_id=cube) if a.subject == "Ann"]
    result = mos.feedback("No, I moved to Porto, not Lisbon", user_id="ann", cube_id=cube)
    assert result.kind == "correct" and result.new_item_id is not None
    assert old.item_id in result.affected and turn in result.affected
    profile = {a.subject: a.value for a in mos.get_profile(user_id="ann", cube_id=cube)}
    assert profile == {"Ann": "Porto", "Bob": "Oslo"}  # Bob's home is not Ann's correction
    before = mos.get(old.item_id, user_id="ann")
    assert before.valid_to is not None
    assert before.metadata["superseded_by"] == result.new_item_id
    new = mos.get(result.new_item_id, user_id="ann")
    assert (new.type, new.key, new.text) == ("profile", "lives_in", "Ann lives in Porto")
    assert new.valid_from is not None and new.metadata["supersedes"] == result.affected
    events = mos.audit(by="ann", item_id=old.item_id)
    assert events[-1].op == "supersede" and events[-1].actor == "ann"
    # Undo: the old value back as it was, the new one deleted.
    versions = mos.history(old.item_id, user_id="ann")
    mos.rollback(old.item_id, versions[-2].version, user_id="ann")
    mos.delete(result.new_item_id, user_id="ann")
    assert {a.subject: a.value for a in mos.get_profile(user_id="ann", cube_id=cube)} == {
        "Ann": "Lisbon", "Bob": "Oslo",
    }  # fmt: skip


def test_a_correction_with_ids_and_corrected_text(mos: MemoryOS, alice_cube: str) -> None:
    [note] = mos.add("The meeting is on Monday", user_id="alice", cube_id=alice_cube)
    result = mos.feedback("wrong day", user_id="alice", cube_id=alice_cube, item_ids=[note],
                          corrected="The meeting is on Tuesday")  # fmt: skip
    assert result.affected == [note]
    assert mos.get(note, user_id="alice").valid_to is not None
    assert mos.get(result.new_item_id, user_id="alice").text == "The meeting is on Tuesday"
    top = mos.search("When is the meeting?", user_id="alice", top_k=1)[0]
    assert top.item.id in (note, result.new_item_id)


def test_invalidate_archives_and_rollback_restores(mos: MemoryOS, alice_cube: str) -> None:
    [note] = mos.add("My sister is called Emma", user_id="alice", cube_id=alice_cube)
    result = mos.feedback("that's wrong", user_id="alice", cube_id=alice_cube, item_ids=[note])
    assert (result.kind, result.affected[0], result.new_item_id) == ("invalidate", note, None)
    assert mos.get(note, user_id="alice").status == "archived"
    # what was read from it (the profile's sister) says the same wrong thing: archived too
    assert mos.search("sister", user_id="alice") == []
    assert mos.audit(by="alice", item_id=note)[-1].op == "invalidate"
    mos.rollback(note, 1, user_id="alice")
    assert mos.get(note, user_id="alice").status == "generated"


def test_forget_erases_what_it_is_about_and_nothing_else(mos: MemoryOS, alice_cube: str) -> None:
    [smoke] = mos.add("I smoke a pack of cigarettes a day", user_id="alice", cube_id=alice_cube)
    [hike] = mos.add("I love hiking in the mountains", user_id="alice", cube_id=alice_cube)
    result = mos.feedback("forget that I smoke", user_id="alice", cube_id=alice_cube)
    assert result.kind == "forget" and result.affected == [smoke]
    erased = mos.store.get_items([smoke], [alice_cube])[0]
    assert erased.text == "" and erased.status == "deleted"
    assert mos.get(hike, user_id="alice").text.startswith("I love hiking")
    events = mos.audit(by="alice", cube_id="notes")
    assert not any("smoke" in (e.reason or "") for e in events)  # the audit forgets it too


def test_confirm_raises_confidence_and_rollback_lowers_it(mos: MemoryOS, alice_cube: str) -> None:
    [note] = mos.add("My birthday is on 3 May", user_id="alice", cube_id=alice_cube)
    result = mos.feedback("yes, that's right", user_id="alice", cube_id=alice_cube,
                          item_ids=[note])  # fmt: skip
    assert result.kind == "confirm"
    item = mos.get(note, user_id="alice")
    assert item.confidence == pytest.approx(0.7) and item.metadata["confirmed"] == 1
    mos.feedback("Correct!", user_id="alice", cube_id=alice_cube, item_ids=[note])
    assert mos.get(note, user_id="alice").metadata["confirmed"] == 2
    mos.rollback(note, 1, user_id="alice")
    assert mos.get(note, user_id="alice").confidence is None


def test_feedback_is_refused_without_write_and_writes_nothing(
    mos: MemoryOS, alice_cube: str, database: str
) -> None:
    [note] = mos.add("My car is red", user_id="alice", cube_id=alice_cube)
    mos.grant(alice_cube, "bob", "read", by="alice")
    mos.create_user("eve")
    mos.create_cube("eves", owner="eve", cube_id="eves")
    before = row_counts(database)
    with pytest.raises(PermissionDenied):
        mos.feedback("that's wrong", user_id="bob", cube_id=alice_cube, item_ids=[note])
    with pytest.raises(PermissionDenied):
        mos.feedback("No, my car is blue", user_id="bob", cube_id=alice_cube)
    with pytest.raises(ItemNotFound):  # an item of another cube is not found, not denied
        mos.feedback("that's wrong", user_id="eve", cube_id="eves", item_ids=[note])
    for bad in ({"text": "hmm"}, {"text": ""}, {"text": "that's wrong"},
                {"text": "yes", "item_ids": []}, {"text": "yes", "item_ids": "x"},
                {"text": "x" * 5000}):  # fmt: skip
        with pytest.raises(ValidationError):
            mos.feedback(user_id="alice", cube_id=alice_cube, **bad)  # type: ignore[arg-type]
    assert row_counts(database) == before
    assert len(mos.store.list_items(alice_cube, Filters(statuses=STATUSES))) == 1
