"""The Store contract, run against every backend (SQLite, and PostgreSQL when one is available).

Vectors here are hand-made unit vectors: the store stores and compares them, it never embeds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memstrata.errors import (
    AlreadyExists,
    ConflictError,
    CubeNotFound,
    ItemNotFound,
    StorageError,
)
from memstrata.filters import Filters
from memstrata.model import Cube, Grant, MemoryItem, Source, User, new_id
from memstrata.store.base import Store
from tests.store.backends import ENGINES, Backend, open_backend

pytestmark = pytest.mark.engines(*ENGINES)

DIM = 8
FP = "test-model/8"


@pytest.fixture
def backend(engine: str, tmp_path: Path) -> Iterator[Backend]:
    with open_backend(engine, tmp_path) as found:
        yield found


@pytest.fixture
def store(backend: Backend) -> Store:
    opened = backend.open()
    opened.put_user(User("u1"))
    opened.put_user(User("u2"))
    opened.put_cube(Cube("c1", "one", owner="u1", embedder=FP))
    opened.put_cube(Cube("c2", "two", owner="u2", embedder=FP))
    return opened


def unit(*hot: int) -> np.ndarray:
    v = np.zeros(DIM, np.float32)
    for h in hot:
        v[h] = 1.0
    return v / np.linalg.norm(v)


def item(text: str, cube: str = "c1", **fields: object) -> MemoryItem:
    return MemoryItem(id=new_id(), cube_id=cube, text=text, user_id="u1", **fields)  # type: ignore[arg-type]


def add(store: Store, *pairs: tuple[MemoryItem, np.ndarray]) -> list[str]:
    items = [p[0] for p in pairs]
    return store.add_items(items, np.stack([p[1] for p in pairs]), FP)


def test_users_cubes_grants(store: Store) -> None:
    with pytest.raises(AlreadyExists):
        store.put_user(User("u1"))
    with pytest.raises(AlreadyExists):
        store.put_cube(Cube("c1", "dup", owner="u2"))
    assert [u.user_id for u in store.list_users()] == ["u1", "u2"]
    assert store.permission("c1", "u1") == "admin"
    assert store.permission("c1", "u2") is None
    store.put_grant(Grant("c1", "u2", "read", "u1"))
    assert store.permission("c1", "u2") == "read"
    store.put_grant(Grant("c1", "u2", "write", "u1"))
    assert store.permission("c1", "u2") == "write"
    assert [c.cube_id for c in store.list_cubes("u2")] == ["c1", "c2"]
    cube = store.get_cube("c1")
    assert cube is not None and cube.embedder == FP and cube.owner == "u1"
    assert store.get_cube("nope") is None and store.get_user("nope") is None


def test_items_round_trip_every_field(store: Store) -> None:
    full = item(
        "the full item",
        tier="long",
        type="fact",
        session_id="s",
        agent_id="a",
        role="user",
        speaker="Ann",
        key="k",
        keywords=["x", "y"],
        tags=["t"],
        metadata={"n": 1, "nested": {"z": [1, 2]}},
        external_id="ext-1",
        event_time=datetime(2024, 5, 8, 13, 56, tzinfo=timezone.utc),
        valid_from=datetime(2024, 5, 8, tzinfo=timezone.utc),
        confidence=0.5,
        pinned=True,
        heat=2.5,
        expires_at=datetime(2031, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc),
    )
    (stored_id,) = add(store, (full, unit(0)))
    (got,) = store.get_items([stored_id], ["c1"])
    assert got == full
    assert store.get_items(["missing", stored_id, "missing2"], ["c1"]) == [full]


def test_external_id_is_idempotent_and_conflicts_on_other_text(store: Store) -> None:
    a = item("hello", external_id="m1")
    (first,) = add(store, (a, unit(0)))
    again = add(store, (item("hello", external_id="m1"), unit(0)), (item("new"), unit(1)))
    assert again[0] == first
    with pytest.raises(ConflictError):
        add(store, (item("fresh"), unit(2)), (item("changed", external_id="m1"), unit(0)))
    texts = {i.text for i in store.iter_items("c1")}
    assert texts == {"hello", "new"}  # the failed batch stored nothing
    # the same external id in another cube is another memory
    (other,) = add(store, (item("hello", cube="c2", external_id="m1"), unit(0)))
    assert other != first


def test_update_versions_events_and_optimistic_check(store: Store) -> None:
    (item_id,) = add(store, (item("v1 text"), unit(0)))
    (cur,) = store.get_items([item_id], ["c1"])
    new = store.update_item(replace(cur, text="v2 text"), unit(1), op="update", actor="u1",
                            reason="fix")  # fmt: skip
    assert new.version == 2 and new.text == "v2 text"
    with pytest.raises(ConflictError):
        store.update_item(replace(cur, text="stale"), None, op="update", actor="u1")
    versions = store.versions("c1", item_id)
    assert [(v.version, v.item.text, v.actor) for v in versions] == [
        (1, "v1 text", "u1"),
        (2, "v2 text", "u1"),
    ]
    assert versions[1].reason == "fix"
    ops = [(e.op, e.version) for e in store.events(item_id=item_id)]
    assert ops == [("create", 1), ("update", 2)]
    update = store.events(item_id=item_id)[1]
    assert update.before == {"text": "v1 text"} and update.after == {"text": "v2 text"}
    with pytest.raises(ItemNotFound):
        store.update_item(item("ghost"), None, op="update", actor="u1")


def test_keyword_search_bm25_filters_and_cjk(store: Store) -> None:
    add(
        store,
        (item("I adopted a dog named Biscuit", session_id="s1"), unit(0)),
        (item("The weather was rainy in Paris", session_id="s2"), unit(1)),
        (item("我们明天去北京", session_id="s1"), unit(2)),
        (item("Biscuit in another cube", cube="c2"), unit(0)),
    )
    hits = store.keyword_search("Biscuit the dog", ["c1"], Filters(), 10)
    assert len(hits) == 1
    (top,) = store.get_items([hits[0][0]], ["c1"])
    assert top.text.startswith("I adopted")
    assert store.keyword_search("北京", ["c1"], Filters(), 10)  # a two-character word
    assert store.keyword_search("paris", ["c1"], Filters(session_id="s1"), 10) == []
    assert len(store.keyword_search("biscuit", ["c1", "c2"], Filters(), 10)) == 2
    assert store.keyword_search("???", ["c1"], Filters(), 10) == []


def test_vector_search_is_exact_and_filtered(store: Store) -> None:
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    ids = add(
        store,
        (item("a", event_time=t0, metadata={"topic": "pets"}), unit(0)),
        (item("b", event_time=t0.replace(month=6), tier="mid"), unit(0, 1)),
        (item("c", event_time=t0.replace(month=9), type="fact"), unit(1)),
    )
    q = unit(0)
    found = store.vector_search(q, ["c1"], Filters(), 10)
    assert [f[0] for f in found] == ids
    assert found[0][1] == pytest.approx(1.0)
    assert [f[0] for f in store.vector_search(q, ["c1"], Filters(tiers=("mid",)), 10)] == [ids[1]]
    assert [f[0] for f in store.vector_search(q, ["c1"], Filters(types=("fact",)), 10)] == [ids[2]]
    since = Filters(since=t0.replace(month=5))
    assert [f[0] for f in store.vector_search(q, ["c1"], since, 10)] == ids[1:]
    meta = Filters(metadata={"topic": "pets"})
    assert [f[0] for f in store.vector_search(q, ["c1"], meta, 10)] == [ids[0]]
    assert len(store.vector_search(q, ["c1"], Filters(), 1)) == 1
    assert store.vector_search(q, ["c2"], Filters(), 10) == []


def test_metadata_filters_compare_as_json_values(store: Store) -> None:
    """The engines agree on every filter (finding 14 of the second hardening round: ``true``
    matched a stored ``1`` on SQLite, not on PostgreSQL): a boolean equals only a boolean,
    numbers equal by value, a string only a string, ``None`` a null or a missing key."""
    stored = [
        {"v": 1},
        {"v": True},
        {"v": 1.0},
        {"v": "1"},
        {"v": False},
        {"v": 0},
        {"v": None},
        {},
    ]
    ids = add(store, *((item(f"m{i}", metadata=m), unit(0)) for i, m in enumerate(stored)))
    expected: list[tuple[object, list[str]]] = [  # a list: True, 1 and 1.0 are one dict key
        (True, [ids[1]]),
        (False, [ids[4]]),
        (1, [ids[0], ids[2]]),
        (1.0, [ids[0], ids[2]]),
        (0, [ids[5]]),
        ("1", [ids[3]]),
        (None, [ids[6], ids[7]]),
    ]
    items = store.get_items(ids, ["c1"])
    for value, want in expected:
        f = Filters(metadata={"v": value})  # type: ignore[dict-item]
        found = store.vector_search(unit(0), ["c1"], f, 20)
        assert sorted(i for i, _ in found) == sorted(want), value
        assert sorted(i.id for i in items if f.matches(i)) == sorted(want), value


def test_status_changes_reach_the_vector_mirror(store: Store) -> None:
    (a, b) = add(store, (item("a"), unit(0)), (item("b"), unit(1)))
    assert len(store.vector_search(unit(0), ["c1"], Filters(), 10)) == 2  # mirror is warm
    (cur,) = store.get_items([a], ["c1"])
    store.update_item(replace(cur, status="deleted"), None, op="delete", actor="u1")
    assert [f[0] for f in store.vector_search(unit(0), ["c1"], Filters(), 10)] == [b]
    deleted = Filters(statuses=("deleted",))
    assert [f[0] for f in store.vector_search(unit(0), ["c1"], deleted, 10)] == [a]
    assert store.keyword_search("a", ["c1"], Filters(), 10) == []


def test_writes_from_another_connection_are_seen(store: Store, backend: Backend) -> None:
    add(store, (item("first"), unit(0)))
    assert len(store.vector_search(unit(0), ["c1"], Filters(), 10)) == 1
    other = backend.open()
    other.add_items([item("second")], np.stack([unit(1)]), FP)
    other.close()
    assert len(store.vector_search(unit(1), ["c1"], Filters(), 10)) == 2


def test_replace_vectors_changes_dimension(store: Store) -> None:
    ids = add(store, (item("a"), unit(0)), (item("b"), unit(1)))
    store.vector_search(unit(0), ["c1"], Filters(), 10)
    wide = np.eye(2, 16, dtype=np.float32)
    store.replace_vectors("c1", ids, wide, "other/16")
    cube = store.get_cube("c1")
    assert cube is not None and cube.embedder == "other/16"
    found = store.vector_search(wide[1], ["c1"], Filters(), 10)
    assert found[0] == (ids[1], pytest.approx(1.0))


def test_events_are_append_only(store: Store, backend: Backend) -> None:
    add(store, (item("x"), unit(0)))
    with backend.raw() as conn:
        with pytest.raises(backend.refused, match="append-only"):
            conn.execute("DELETE FROM events")
        with pytest.raises(backend.refused, match="append-only"):
            conn.execute("UPDATE events SET op = 'forged'")
        conn.execute("UPDATE events SET after = NULL WHERE op = 'create'")  # erasure may blank


def test_meta(store: Store) -> None:
    assert store.get_meta("k") is None
    store.set_meta("k", "v")
    assert store.get_meta("k") == "v"


def test_failed_write_is_rolled_back(store: Store) -> None:
    bad = item("x")
    with pytest.raises((StorageError, ValueError)):
        store.add_items([bad], np.zeros((2, DIM), np.float32), FP)  # one item, two vectors
    assert list(store.iter_items("c1")) == []


def test_list_count_and_overflowing_turns(store: Store) -> None:
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)

    def turn(i: int, session: str | None, **extra: object) -> tuple[MemoryItem, np.ndarray]:
        when = t0.replace(day=1 + i)
        return item(f"turn {i}", session_id=session, event_time=when, **extra), unit(i % DIM)

    ids = add(
        store,
        *[turn(i, "s1") for i in range(5)],
        *[turn(i, None) for i in range(5, 8)],
        turn(8, "s2", tier="mid"),
        turn(9, "s1", heat=7.0, type="segment", tier="mid"),
    )
    working = Filters(tiers=("working",))
    assert store.count_items("c1", working) == 8
    listed = store.list_items("c1", working, limit=3)
    assert [i.id for i in listed] == ids[:3]
    newest = store.list_items("c1", working, descending=True, limit=1)
    assert [i.id for i in newest] == [ids[7]]
    by_heat = store.list_items("c1", Filters(types=("segment",)), order="heat")
    assert [i.id for i in by_heat] == [ids[9]]
    # keep the newest 2 of each session: s1 sheds 3, the no-session group sheds 1
    overflow = store.overflowing_turns("c1", 2)
    assert [i.id for i in overflow] == [ids[0], ids[1], ids[2], ids[5]]
    assert store.overflowing_turns("c1", 10) == []


def test_overflowing_turns_of_idle_sessions(store: Store) -> None:
    start = datetime(2024, 5, 1, tzinfo=timezone.utc)

    def said(n: int, session: str, hours: float) -> MemoryItem:
        return replace(item(f"t{n}", session_id=session), event_time=start + timedelta(hours=hours))

    ids = add(
        store,
        (said(0, "old", 0), unit(0)),
        (said(1, "old", 1), unit(1)),
        (said(2, "new", 30), unit(2)),
    )
    # "old" ended 29 h before the newest turn: idle past 24 h, so both its turns leave
    assert [i.id for i in store.overflowing_turns("c1", 10, 24 * 3600)] == ids[:2]
    assert store.overflowing_turns("c1", 10, 30 * 3600) == []
    assert store.overflowing_turns("c1", 10) == []


def test_get_vectors_in_order(store: Store) -> None:
    ids = add(store, (item("a"), unit(0)), (item("b"), unit(1)))
    vectors = store.get_vectors([ids[1], ids[0]], ["c1"])
    assert np.allclose(vectors, np.stack([unit(1), unit(0)]))
    with pytest.raises(ItemNotFound):
        store.get_vectors([ids[0], "missing"], ["c1"])


def test_next_turns_follow_each_session_in_time_order(store: Store) -> None:
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    ids = add(
        store,
        (item("s1 first", session_id="s1", event_time=t0), unit(0)),
        (item("s2 only", session_id="s2", event_time=t0), unit(1)),
        (item("s1 second", session_id="s1", event_time=t0), unit(2)),  # same time: id order
        (item("s1 third", session_id="s1", event_time=t0.replace(day=2)), unit(3)),
        (item("no session", event_time=t0), unit(4)),
        (item("a fact", session_id="s1", event_time=t0, type="fact"), unit(5)),
    )
    following = store.next_turns("c1", [ids[0], ids[1], ids[2], ids[3], ids[4]])
    assert following == {ids[0]: ids[2], ids[2]: ids[3]}
    assert store.next_turns("c1", []) == {}


def test_named_speakers_are_found_without_case_among_live_items(store: Store) -> None:
    add(
        store,
        (item("hi", speaker="Melanie"), unit(0)),
        (item("yo", speaker="Mary Ann"), unit(1)),
        (item("gone", speaker="Bob", status="deleted"), unit(2)),
        (item("elsewhere", cube="c2", speaker="Tim"), unit(3)),
    )
    asked = ["melanie", "MARY ANN", "Bob", "Tim", "Nobody"]
    assert store.named_speakers(["c1"], asked) == {"Melanie", "Mary Ann"}
    assert store.named_speakers(["c1", "c2"], asked) == {"Melanie", "Mary Ann", "Tim"}
    assert store.named_speakers(["c1"], []) == set()


def test_a_list_that_grows_at_its_end_is_recorded_as_what_was_added(store: Store) -> None:
    """A segment gaining a page must not write its whole page list into the event again."""
    first = item("segment", sources=[Source(item_id="p1")])
    add(store, (first, unit(0)))
    grown = replace(first, sources=[Source(item_id="p1"), Source(item_id="p2")], text="seg 2")
    store.update_item(grown, None, op="update", actor="u1")
    update = store.events(item_id=first.id)[-1]
    assert update.before == {"text": "segment"}
    assert update.after == {"text": "seg 2", "sources+": [{"item_id": "p2"}]}


def test_llm_usage_adds_up_per_cube_and_goes_with_the_cube(store: Store) -> None:
    assert store.llm_usage("c1") == {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    store.record_usage("c1", 100, 7)
    store.record_usage("c1", 20, 3)
    store.record_usage("c2", 1, 1)
    assert store.llm_usage("c1") == {"calls": 2, "prompt_tokens": 120, "completion_tokens": 10}
    today = datetime.now(timezone.utc)
    days = store.llm_usage_by_day("c1", 30)  # one day, or two across a midnight
    assert {d for d, _ in days} <= {f"{today - timedelta(days=1):%Y-%m-%d}", f"{today:%Y-%m-%d}"}
    assert sum(u["calls"] for _, u in days) == 2 and sum(u["prompt_tokens"] for _, u in days) == 120
    store.delete_cube("c1", "u1")
    assert store.llm_usage("c1")["calls"] == 0 and store.llm_usage("c2")["calls"] == 1
    assert store.llm_usage_by_day("c1", 30) == [] and len(store.llm_usage_by_day("c2", 1)) == 1


def test_a_cube_read_whole_is_inserted_identically_elsewhere(
    store: Store, backend: Backend, tmp_path: Path
) -> None:
    ids = add(store, (item("a", session_id="s"), unit(0)), (item("b", session_id="s"), unit(1)))
    (cur,) = store.get_items([ids[0]], ["c1"])
    store.update_item(replace(cur, text="a2"), unit(2), op="update", actor="u1")
    data = store.read_cube("c1")
    assert [i.id for i in data.items] == sorted(ids) and data.vector_ids == sorted(ids)
    with pytest.raises(AlreadyExists):
        store.check_free(data)
    other = backend.other()
    try:
        other.put_user(User("u1"))
        other.check_free(data)
        other.insert_cube(data, artifact_paths={}, note={"from": "test"})
        assert other.get_items(ids, ["c1"]) == store.get_items(ids, ["c1"])
        assert np.array_equal(other.get_vectors(ids, ["c1"]), store.get_vectors(ids, ["c1"]))
        assert other.versions("c1", ids[0]) == store.versions("c1", ids[0])
        assert other.permission("c1", "u1") == "admin"
        assert [e.op for e in other.events(cube_id="c1")][-1] == "import"
        assert [f[0] for f in other.keyword_search("b", ["c1"], Filters(), 5)] == [ids[1]]
        assert other.vector_search(unit(2), ["c1"], Filters(), 1)[0][0] == ids[0]
        where = "other.db.artifacts" if backend.name == "sqlite" else "other"
        assert other.artifact_dir("c1") == tmp_path / where / "c1"
    finally:
        other.close()


def test_a_scratch_index_scores_as_the_live_store(store: Store) -> None:
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    ids = add(
        store,
        (item("the dog chased the cat", session_id="s", event_time=t0), unit(0)),
        (item("a cat slept on the mat", session_id="s", event_time=t0.replace(day=2)), unit(1)),
        (item("dogs and cats and dogs", metadata={"k": 1}), unit(0, 1)),
        (item("other cube dog", cube="c2"), unit(0)),
    )
    items = store.get_items(ids[:3], ["c1"])
    filters = [Filters(), Filters(metadata={"k": 1}), Filters(session_id="s")]
    with store.scratch_index(items, store.get_vectors(ids[:3], ["c1"])) as index:
        for f in filters:
            for query in ("dog", "cat mat", "dogs cats"):
                # BM25's statistics span the index (the live one holds c2 too): same order
                live = [i for i, _ in store.keyword_search(query, ["c1"], f, 10)]
                assert [i for i, _ in index.keyword_search(query, ["c1"], f, 10)] == live
            assert index.vector_search(unit(0), ["c1"], f, 10) == store.vector_search(
                unit(0), ["c1"], f, 10
            )
        assert index.next_turns("c1", ids[:1]) == {ids[0]: ids[1]}
        assert index.get_items([ids[3]], ["c1", "c2"]) == []  # only the items given
    assert store.get_items(ids[3:], ["c2"]) != []


def test_erased_items_leave_no_past_state(store: Store) -> None:
    ids = add(store, (item("secret words"), unit(0)), (item("kept words"), unit(1)))
    t = datetime.now(timezone.utc)
    assert store.erase_items([ids[0], ids[0]], ["c1"], "u1", "asked") == 1
    assert store.erase_items([ids[0]], ["c1"], "u1", None) == 0
    assert [i.text for i in store.items_as_of("c1", t)] == ["kept words"]
    assert store.keyword_search("secret", ["c1"], Filters(statuses=("deleted",)), 5) == []
    assert store.versions("c1", ids[0]) == []
    assert store.cubes_with_items_of("u1") == ["c1"]


def test_expired_items_are_found_by_time_and_cube_until_erased(store: Store) -> None:
    """Issue 25 (expiry): ``expired_items`` lists what expired at a time, earliest first, in
    the cubes asked about; an erased item never (erasure clears its expiry); the expiry is
    kept in every version."""
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    late, early, _never, _later, other = add(
        store,
        (item("late", expires_at=at - timedelta(hours=1)), unit(0)),
        (item("early", expires_at=at - timedelta(days=1)), unit(1)),
        (item("never"), unit(2)),
        (item("later", expires_at=at + timedelta(seconds=1)), unit(3)),
        (item("other", cube="c2", expires_at=at), unit(4)),
    )
    assert store.expired_items(at, 10) == [("c1", early), ("c1", late), ("c2", other)]
    assert store.expired_items(at, 1) == [("c1", early)]
    assert store.expired_items(at, 10, ["c2"]) == [("c2", other)]
    assert store.expired_items(at, 10, []) == []
    (stored,) = store.get_items([late], ["c1"])
    store.update_item(replace(stored, expires_at=None), None, op="update", actor="u1")
    assert [v.item.expires_at for v in store.versions("c1", late)] == [
        at - timedelta(hours=1),
        None,
    ]
    assert store.erase_items([early], ["c1"], "u1", "expired") == 1
    assert store.expired_items(at, 10) == [("c2", other)]
    assert store.get_items([early], ["c1"])[0].expires_at is None


def test_artifacts_are_written_listed_and_deleted_with_their_files(store: Store) -> None:
    first = store.put_artifact("c1", "kv_cache", "fp-1", b"state one", {"tokens": 3})
    second = store.put_artifact("c1", "lora", "fp-2", b"adapter", {})
    other = store.put_artifact("c2", "kv_cache", "fp-3", b"theirs", {})
    assert first.path.read_bytes() == b"state one" and first.size_bytes == 9
    listed = store.artifacts("c1")
    assert [a.artifact_id for a in listed] == [first.artifact_id, second.artifact_id]
    assert listed[0].metadata == {"tokens": 3} and listed[0].path == first.path
    assert listed[0].sha256 == first.sha256
    assert [a.artifact_id for a in store.artifacts("c1", "lora")] == [second.artifact_id]
    # another cube's id is not deleted through c1
    assert store.delete_artifacts("c1", [first.artifact_id, other.artifact_id]) == 1
    assert not first.path.exists() and other.path.exists()
    assert [a.artifact_id for a in store.artifacts("c1")] == [second.artifact_id]
    store.delete_cube("c1", "u1")
    assert not second.path.exists() and store.artifacts("c1") == []
    assert other.path.read_bytes() == b"theirs"


def test_an_artifact_of_no_cube_is_refused_and_leaves_no_file(store: Store) -> None:
    with pytest.raises(CubeNotFound):
        store.put_artifact("nope", "kv_cache", "fp", b"x", {})
    folder = store.artifact_dir("nope")
    assert not folder.exists() or list(folder.iterdir()) == []
