"""Lifecycle and governance through ``MemoryOS``: transitions, versions and as-of, rollback,
audit, sharing, and erasure that leaves the content nowhere in the database files."""

from __future__ import annotations

import itertools
import sqlite3
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memstrata import MemoryOS
from memstrata.errors import (
    AdminRequired,
    ConflictError,
    ItemNotFound,
    NotFoundError,
    PermissionDenied,
    ValidationError,
)
from memstrata.lifecycle.states import TRANSITIONS
from memstrata.model import STATUSES, utcnow
from tests.conftest import row_counts

LEGAL = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}


def tick() -> datetime:
    """A moment strictly between the writes around it (version times have µs resolution)."""
    time.sleep(0.02)
    moment = utcnow()
    time.sleep(0.02)
    return moment


def in_state(mos: MemoryOS, cube: str, state: str) -> str:
    """A fresh item of ``cube`` brought to ``state`` by legal transitions."""
    [item_id] = mos.add("a note about gardening", user_id="alice", cube_id=cube)
    path = {"generated": [], "activated": ["activated"], "merged": ["activated", "merged"],
            "archived": ["activated", "archived"], "frozen": ["activated", "frozen"]}  # fmt: skip
    if state == "deleted":
        mos.delete(item_id, user_id="alice")
    for step in path.get(state, []):
        mos.transition(item_id, step, user_id="alice")
    return item_id


@pytest.mark.parametrize(("start", "to"), list(itertools.product(STATUSES, STATUSES)))
def test_every_transition_is_legal_or_a_clear_error(
    mos: MemoryOS, alice_cube: str, db_path: Path, start: str, to: str
) -> None:
    item_id = in_state(mos, alice_cube, start)
    if (start, to) in LEGAL:
        moved = mos.transition(item_id, to, user_id="alice", reason="because")
        assert moved.status == to
        assert mos.history(item_id, user_id="alice")[-1].reason == "because"
        return
    before = row_counts(db_path)
    with pytest.raises(ValidationError if to == "deleted" else ConflictError):
        mos.transition(item_id, to, user_id="alice")
    assert row_counts(db_path) == before


def test_unknown_states_and_missing_grants_are_refused(mos: MemoryOS, alice_cube: str) -> None:
    item_id = in_state(mos, alice_cube, "generated")
    with pytest.raises(ValidationError, match="unknown state"):
        mos.transition(item_id, "sleeping", user_id="alice")
    mos.grant(alice_cube, "bob", "read", by="alice")
    with pytest.raises(PermissionDenied):
        mos.transition(item_id, "activated", user_id="bob")


def test_frozen_items_are_read_only(mos: MemoryOS, alice_cube: str) -> None:
    item_id = in_state(mos, alice_cube, "frozen")
    for change in (
        lambda: mos.update(item_id, user_id="alice", text="changed"),
        lambda: mos.delete(item_id, user_id="alice"),
        lambda: mos.rollback(item_id, 1, user_id="alice"),
    ):
        with pytest.raises(ConflictError, match="frozen"):
            change()
    assert mos.get(item_id, user_id="alice").text == "a note about gardening"


def test_merged_archived_and_frozen_are_searched_only_when_included(
    mos: MemoryOS, alice_cube: str
) -> None:
    ids = {state: in_state(mos, alice_cube, state) for state in ("archived", "merged", "frozen")}
    assert mos.search("gardening", user_id="alice") == []
    found = mos.search("gardening", user_id="alice", include=["archived", "frozen"])
    assert {h.item.id for h in found} == {ids["archived"], ids["frozen"]}
    with pytest.raises(ValidationError, match="include may name"):
        mos.search("gardening", user_id="alice", include=["deleted"])
    mos.transition(ids["archived"], "activated", user_id="alice", reason="restore")
    assert [h.item.id for h in mos.search("gardening", user_id="alice")] == [ids["archived"]]


def test_as_of_answers_as_the_memory_stood(mos: MemoryOS, alice_cube: str) -> None:
    t0 = tick()
    [item] = mos.add("The meeting is on Monday", user_id="alice", cube_id=alice_cube)
    t1 = tick()
    mos.update(item, user_id="alice", text="The meeting is on Tuesday", reason="moved")
    t2 = tick()
    [later] = mos.add("The budget is approved", user_id="alice", cube_id=alice_cube)
    mos.update(item, user_id="alice", text="The meeting is on Friday")

    assert mos.get(item, user_id="alice", as_of=t1).text == "The meeting is on Monday"
    assert mos.get(item, user_id="alice", as_of=t2.isoformat()).text == "The meeting is on Tuesday"
    assert mos.get(item, user_id="alice").text == "The meeting is on Friday"
    with pytest.raises(ItemNotFound):
        mos.get(later, user_id="alice", as_of=t2)
    with pytest.raises(ItemNotFound):
        mos.get(item, user_id="alice", as_of=t0)

    then = mos.search("meeting budget", user_id="alice", as_of=t2)
    assert [h.item.text for h in then] == ["The meeting is on Tuesday"]
    assert then[0].item.cube_id == alice_cube
    monday = mos.search("Monday", user_id="alice", as_of=t1, top_k=1)
    assert monday[0].item.text == "The meeting is on Monday"  # found by its old words
    now = {h.item.text for h in mos.search("meeting budget", user_id="alice")}
    assert now == {"The meeting is on Friday", "The budget is approved"}


def test_as_of_in_the_future_or_before_the_cube_is_refused(mos: MemoryOS, alice_cube: str) -> None:
    [item] = mos.add("x marks the spot", user_id="alice", cube_id=alice_cube)
    created = mos.get_cube(alice_cube, user_id="alice").created_at
    for bad in (utcnow() + timedelta(hours=1), created - timedelta(seconds=5), "not a time"):
        with pytest.raises(ValidationError):
            mos.get(item, user_id="alice", as_of=bad)
        with pytest.raises(ValidationError):
            mos.search("spot", user_id="alice", as_of=bad)


def test_rollback_writes_a_new_version_equal_to_an_old_one(
    mos: MemoryOS, alice_cube: str, db_path: Path
) -> None:
    [item] = mos.add("version one", user_id="alice", cube_id=alice_cube)
    mos.update(item, user_id="alice", text="version two", metadata={"k": 2})
    rolled = mos.rollback(item, 1, user_id="alice")
    assert (rolled.version, rolled.text, rolled.metadata) == (3, "version one", {})
    history = mos.history(item, user_id="alice")
    assert [(v.version, v.item.text) for v in history] == [
        (1, "version one"), (2, "version two"), (3, "version one"),
    ]  # fmt: skip
    assert history[-1].reason == "rollback to version 1"
    assert mos.search("version one", user_id="alice", top_k=1)[0].item.id == item
    before = row_counts(db_path)
    with pytest.raises(NotFoundError, match="no version 9"):
        mos.rollback(item, 9, user_id="alice")
    with pytest.raises(ValidationError):
        mos.rollback(item, "1", user_id="alice")  # type: ignore[arg-type]
    with pytest.raises(ItemNotFound):
        mos.rollback(item, 1, user_id="bob")  # no grant: existence does not leak
    assert row_counts(db_path) == before


def test_audit_lists_events_to_admins_only(mos: MemoryOS, alice_cube: str) -> None:
    mos.create_user("admin", role="admin")
    [item] = mos.add("audited", user_id="alice", cube_id=alice_cube)
    since = tick()
    mos.update(item, user_id="alice", text="audited again", reason="typo")
    ops = [e.op for e in mos.audit(by="alice", cube_id=alice_cube)]
    assert ops[0] == "create_cube" and ops[-2:] == ["create", "update"]
    recent = mos.audit(by="alice", item_id=item, since=since)
    assert [(e.op, e.actor, e.reason) for e in recent] == [("update", "alice", "typo")]
    assert {e.cube_id for e in mos.audit(by="admin")} >= {alice_cube, None}
    # administrators need no grant on the cube
    assert [e.op for e in mos.audit(by="admin", cube_id=alice_cube)] == ops
    assert mos.audit(by="admin", item_id=item)[-1].reason == "typo"
    with pytest.raises(ItemNotFound):
        mos.audit(by="admin", item_id="no-such-item")
    with pytest.raises(AdminRequired):
        mos.audit(by="alice")  # everything: administrators only
    mos.grant(alice_cube, "bob", "write", by="alice")
    with pytest.raises(PermissionDenied):
        mos.audit(by="bob", cube_id=alice_cube)


def test_share_revoke_and_list_grants(mos: MemoryOS, alice_cube: str) -> None:
    mos.create_cube("bobs", owner="bob", cube_id="bobs")
    mos.add("alice likes tea", user_id="alice", cube_id=alice_cube)
    mos.add("bob likes tea too", user_id="bob", cube_id="bobs")
    mos.share(alice_cube, "bob", "read", by="alice")
    assert [(g.user_id, g.permission) for g in mos.grants(alice_cube, by="alice")] == [
        ("alice", "admin"), ("bob", "read"),
    ]  # fmt: skip
    both = mos.search("tea", user_id="bob")
    assert {(h.item.cube_id, h.item.text) for h in both} == {
        (alice_cube, "alice likes tea"), ("bobs", "bob likes tea too"),
    }  # fmt: skip
    with pytest.raises(PermissionDenied):
        mos.grants(alice_cube, by="bob")
    with pytest.raises(PermissionDenied):
        mos.revoke(alice_cube, "bob", by="bob")
    mos.revoke(alice_cube, "bob", by="alice")
    assert {h.item.cube_id for h in mos.search("tea", user_id="bob")} == {"bobs"}
    with pytest.raises(NotFoundError):
        mos.revoke(alice_cube, "bob", by="alice")
    with pytest.raises(ValidationError, match="owner"):
        mos.revoke(alice_cube, "alice", by="alice")


# -- erasure --------------------------------------------------------------------------------

MARKER = "zqxmarker7731"


def files_contain(db_path: Path, needle: str) -> list[str]:
    """The database files (main, WAL, shared memory) whose bytes contain ``needle``."""
    found = []
    for path in db_path.parent.glob(db_path.name + "*"):
        if needle.encode() in path.read_bytes():
            found.append(path.name)
    return found


def compact(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_erased_content_is_nowhere_in_the_database_files(
    mos: MemoryOS, alice_cube: str, db_path: Path
) -> None:
    said = f"My name is Ann, I work as a nurse and my code word is {MARKER}."
    turns = [{"content": f"filler turn number {n} about the weather"} for n in range(12)]
    ids = mos.add([{"content": said, "name": "Ann"}, *turns], user_id="alice",
                  cube_id=alice_cube, session_id="s1")  # fmt: skip
    mos.update(ids[0], user_id="alice", text=said + " Updated.", reason=f"note {MARKER}")
    mos.consolidate(alice_cube, user_id="alice", promote_all=True)  # facts, segments, profile
    mos.search(MARKER, user_id="alice")  # the query's terms pass through caches too
    compact(db_path)
    assert files_contain(db_path, MARKER)  # the check can fail: the marker is really there

    assert mos.erase(ids[0], user_id="alice", reason="GDPR request") >= 2  # + derived items
    compact(db_path)
    assert files_contain(db_path, MARKER) == []
    tomb = mos.get(ids[0], user_id="alice")
    assert (tomb.status, tomb.text, tomb.speaker) == ("deleted", "", None)
    assert mos.history(ids[0], user_id="alice") == []
    assert all(MARKER not in h.item.text for h in mos.search(MARKER, user_id="alice"))
    ops = [e.op for e in mos.audit(by="alice", item_id=ids[0])]
    assert ops[0] == "create" and ops[-1] == "erase"
    # the other turns are untouched
    assert mos.get(ids[5], user_id="alice").text == turns[4]["content"]


def test_erase_a_session_a_subject_and_a_cube(mos: MemoryOS, alice_cube: str) -> None:
    mos.create_user("admin", role="admin")
    mos.grant(alice_cube, "bob", "write", by="alice")
    mos.add(f"session secret {MARKER}", user_id="alice", cube_id=alice_cube, session_id="s1")
    kept = mos.add("other session", user_id="alice", cube_id=alice_cube, session_id="s2")
    assert mos.erase(user_id="alice", cube_id=alice_cube, session_id="s1") == 1
    assert all(MARKER not in h.item.text for h in mos.search(MARKER, user_id="alice"))
    assert mos.get(kept[0], user_id="alice").text == "other session"

    [bobs] = mos.add("bob was here", user_id="bob", cube_id=alice_cube)
    with pytest.raises(AdminRequired):
        mos.erase(user_id="alice", subject_user_id="bob")
    assert mos.erase(user_id="bob", subject_user_id="bob") == 1
    assert mos.get(bobs, user_id="alice").text == ""
    assert mos.get(kept[0], user_id="alice").text == "other session"

    with pytest.raises(PermissionDenied):
        mos.erase(user_id="bob", cube_id=alice_cube)  # a cube needs admin
    assert mos.erase(user_id="admin", subject_user_id="alice") >= 1
    assert mos.erase(user_id="alice", cube_id=alice_cube) >= 1
    assert mos.list_cubes(user_id="alice") == []


def test_erase_needs_exactly_one_scope(mos: MemoryOS, alice_cube: str, db_path: Path) -> None:
    [item] = mos.add("keep me", user_id="alice", cube_id=alice_cube)
    before = row_counts(db_path)
    for kwargs in ({}, {"session_id": "s1"}, {"item_id": item, "subject_user_id": "alice"}):
        with pytest.raises(ValidationError):
            mos.erase(user_id="alice", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ItemNotFound):
        mos.erase(item, user_id="bob")
    assert row_counts(db_path) == before


def test_times_given_back_as_shown_find_their_version(mos: MemoryOS, alice_cube: str) -> None:
    """A version's ``at`` as shown (whole µs) selects that version, whatever the stored float."""
    [item] = mos.add("first words", user_id="alice", cube_id=alice_cube)
    for n in range(15):
        mos.update(item, user_id="alice", text=f"words of version {n + 2}")
    for version in mos.history(item, user_id="alice")[1:]:
        hits = mos.search("words", user_id="alice", as_of=version.at)
        assert [h.item.text for h in hits] == [version.item.text]
        events = mos.audit(by="alice", item_id=item, since=version.at)
        assert events[0].version == version.version


def test_erasing_again_counts_nothing(mos: MemoryOS, alice_cube: str) -> None:
    [item] = mos.add("said once", user_id="alice", cube_id=alice_cube)
    assert mos.erase(item, user_id="alice") == 1
    assert mos.erase(item, user_id="alice") == 0
    assert mos.erase(user_id="alice", subject_user_id="alice") == 0
