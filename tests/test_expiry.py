"""Expiry apart from decay (issue 25): an item past its ``expires_at`` is gone from every read,
and the ``expire`` task (or ``MemoryOS.expire``) erases it with what was derived from it.

Times are explicit past and future moments: nothing here sleeps or waits for a clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memstrata import MemoryOS
from memstrata.errors import ItemNotFound, PermissionDenied, ValidationError
from memstrata.filters import Filters
from memstrata.memory.expiry import EXPIRY_ACTOR
from memstrata.model import STATUSES, utcnow

pytestmark = pytest.mark.engines("sqlite", "postgres")

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2999-01-01T00:00:00Z"
#: every turn leaves the working tier at once, joins one segment, and is promoted right away
HOT = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 0.0}


def ids_of(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.item.id for h in hits]


def test_an_expired_turn_is_gone_from_every_read(mos: MemoryOS, alice_cube: str) -> None:
    """Search (live and as of a time), context, list, get and history leave it out; a turn
    expiring in the future is there."""
    [gone] = mos.add("My locker code is 4711", user_id="alice", cube_id=alice_cube,
                     expires_at=PAST)  # fmt: skip
    [kept] = mos.add(
        [{"content": "My gym locker is number 12", "expires_at": FUTURE}],
        user_id="alice", cube_id=alice_cube,
    )  # fmt: skip
    assert (
        mos.store.get_items([gone], [alice_cube])[0].expires_at is not None
    )  # stored, not yet erased
    hits = mos.search("locker", user_id="alice", cube_ids=[alice_cube])
    assert ids_of(hits) == [kept]
    then = mos.search("locker", user_id="alice", as_of=utcnow())
    assert gone not in ids_of(then) and kept in ids_of(then)
    context = mos.context("locker code", user_id="alice", cube_ids=[alice_cube])
    assert "4711" not in context.text and "number 12" in context.text
    listed = [i.id for i in mos.list_memories(alice_cube, user_id="alice")]
    assert listed == [kept]
    for read in (mos.get, mos.history, mos.cited_by):
        with pytest.raises(ItemNotFound):
            read(gone, user_id="alice")
    with pytest.raises(ItemNotFound):
        mos.update(gone, user_id="alice", text="revived")
    assert mos.get(kept, user_id="alice").expires_at.year == 2999


def test_a_message_expiry_wins_over_the_call_and_the_cube_ttl(mos: MemoryOS) -> None:
    mos.create_user("u")
    cube = mos.create_cube("c", owner="u", settings={"ttl_days_turn": 2}).cube_id
    before = utcnow()
    [by_ttl] = mos.add("a turn with the cube's lifetime", user_id="u", cube_id=cube)
    [by_call] = mos.add("a turn with the call's", user_id="u", cube_id=cube, expires_at=FUTURE)
    [by_message] = mos.add(
        [{"content": "a turn with its own", "expires_at": "2998-05-01T00:00:00Z"}],
        user_id="u", cube_id=cube, expires_at=FUTURE,
    )  # fmt: skip
    ttl = mos.get(by_ttl, user_id="u").expires_at
    assert before + timedelta(days=2) <= ttl <= utcnow() + timedelta(days=2)
    assert mos.get(by_call, user_id="u").expires_at.year == 2999
    assert mos.get(by_message, user_id="u").expires_at.year == 2998


def test_update_sets_and_removes_an_expiry(mos: MemoryOS, alice_cube: str) -> None:
    [item] = mos.add("a note", user_id="alice", cube_id=alice_cube)
    assert mos.get(item, user_id="alice").expires_at is None
    assert mos.update(item, user_id="alice", expires_at=FUTURE).expires_at.year == 2999
    assert mos.update(item, user_id="alice", expires_at="never").expires_at is None
    with pytest.raises(ValidationError):
        mos.update(item, user_id="alice", expires_at="next tuesday")
    with pytest.raises(ValidationError):
        mos.add("x", user_id="alice", cube_id=alice_cube, expires_at="soon")
    with pytest.raises(ValidationError):
        mos.add([{"content": "x", "expires_at": [1]}], user_id="alice", cube_id=alice_cube)
    with pytest.raises(PermissionDenied):
        mos.grant(alice_cube, "bob", "read", by="alice")
        mos.update(item, user_id="bob", expires_at=PAST)
    mos.update(item, user_id="alice", expires_at=PAST)  # expired now
    assert mos.search("a note", user_id="alice") == []


def test_expiry_erases_the_item_and_what_was_derived_from_it(mos: MemoryOS) -> None:
    """The profile read from an expired turn is gone with it at once, and erased with it by
    the ``expire`` task, audited as erasures by the expiry; a turn that has not expired stays."""
    mos.create_user("u")
    cube = mos.create_cube("c", owner="u", settings=HOT).cube_id
    [turn] = mos.add([{"name": "Ann", "content": "I live in Lisbon.", "expires_at": FUTURE}],
                     user_id="u", cube_id=cube, session_id="s")  # fmt: skip
    [other] = mos.add([{"name": "Bob", "content": "I live in Oslo."}], user_id="u",
                      cube_id=cube, session_id="s")  # fmt: skip
    mos.add([{"name": "Bob", "content": "ok"}], user_id="u", cube_id=cube, session_id="s")
    assert mos.wait(cube, timeout=60)
    profile = {a.subject: a for a in mos.get_profile(user_id="u", cube_id=cube)}
    derived = profile["Ann"].item_id
    assert profile["Ann"].value == "Lisbon" and "Bob" in profile
    mos.update(turn, user_id="u", expires_at=PAST)
    assert [a.subject for a in mos.get_profile(user_id="u", cube_id=cube)] == ["Bob"]
    with pytest.raises(ItemNotFound):
        mos.get(derived, user_id="u")  # made from the expired turn
    assert "Lisbon" not in mos.context("Where does Ann live?", user_id="u").text
    assert mos.expiry_tasks.sweep() == [cube]  # inline: the expire task ran here
    everything = Filters(statuses=STATUSES)
    erased = {i.id: i for i in mos.store.list_items(cube, everything) if i.text == ""}
    assert turn in erased and derived in erased and other not in erased
    assert all(i.status == "deleted" and i.expires_at is None for i in erased.values())
    events = mos.audit(by="u", cube_id=cube)
    assert {e.item_id for e in events if e.op == "erase" and e.actor == EXPIRY_ACTOR} >= {
        turn,
        derived,
    }
    assert mos.store.expired_items(utcnow(), 10, [cube]) == []
    assert mos.expiry_tasks.sweep() == []  # nothing left to do
    done = [t for t in mos.tasks(user_id="u", cube_id=cube) if t.kind == "expire"]
    assert [t.status for t in done] == ["done"]


def test_expire_now_needs_write_and_erases_only_the_expired(
    mos: MemoryOS, alice_cube: str, engine: str
) -> None:
    [gone] = mos.add("expired", user_id="alice", cube_id=alice_cube, expires_at=PAST)
    [kept] = mos.add("kept", user_id="alice", cube_id=alice_cube, expires_at=FUTURE)
    mos.grant(alice_cube, "bob", "read", by="alice")
    with pytest.raises(PermissionDenied):
        mos.expire(user_id="bob", cube_id=alice_cube)
    if engine == "sqlite":  # PostgreSQL keeps artifacts only in a configured folder
        mos.store.put_artifact(alice_cube, "kv_cache", "fp", b"made with the expired turn", {})
    assert mos.expire(user_id="alice", cube_id=alice_cube) == 1
    assert mos.artifacts(alice_cube, user_id="alice") == []  # rebuilt later, without it
    assert mos.store.get_items([gone], [alice_cube])[0].text == ""
    assert mos.get(kept, user_id="alice").text == "kept"
    assert mos.expire(user_id="alice", cube_id=alice_cube) == 0


def test_a_document_expires_by_call_and_by_the_cube_ttl(mos: MemoryOS) -> None:
    mos.create_user("u")
    cube = mos.create_cube("c", owner="u", settings={"ttl_days_chunk": 1}).cube_id
    ttl = mos.add_document(b"Chunked text about tides.", filename="t.txt", user_id="u",
                           cube_id=cube)  # fmt: skip
    assert mos.get(ttl[0], user_id="u").expires_at is not None
    gone = mos.add_document(b"Old notes about ferries.", filename="f.txt", user_id="u",
                            cube_id=cube, expires_at=PAST)  # fmt: skip
    assert gone[0] not in ids_of(mos.search("ferries", user_id="u"))


def test_a_worker_process_sweeps_on_its_own(database: str) -> None:
    """With worker threads the sweep looks for expired items by itself and queues the
    ``expire`` task; bounded by a generous deadline, never by a sleep."""
    with MemoryOS.open(database, workers=1, expiry_sweep_s=0.05) as mos:
        mos.create_user("u")
        cube = mos.create_cube("c", owner="u").cube_id
        [gone] = mos.add("a short-lived note", user_id="u", cube_id=cube, expires_at=PAST)
        deadline = utcnow() + timedelta(seconds=120)
        while mos.store.get_items([gone], [cube])[0].text and utcnow() < deadline:
            mos.wait(cube, timeout=1)
        assert mos.store.get_items([gone], [cube])[0].text == ""
    assert not mos.expiry_tasks._thread.is_alive()  # type: ignore[union-attr]  # stopped
