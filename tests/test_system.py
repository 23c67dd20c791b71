"""MemoryOS against the real stores (SQLite, and PostgreSQL when a test server is available) and
the real default embedder (e5)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memstrata import MemoryOS
from memstrata.errors import (
    AlreadyExists,
    ConflictError,
    CubeNotFound,
    EmbedderMismatch,
    ItemNotFound,
    MemstrataError,
    PermissionDenied,
    UserNotFound,
    ValidationError,
)
from tests.conftest import row_counts

pytestmark = pytest.mark.engines("sqlite", "postgres")

CONVERSATION = [
    {"role": "user", "name": "Ann", "content": "I adopted a beagle puppy named Biscuit.",
     "timestamp": "2024-03-02T10:00:00Z", "id": "D1:1"},
    {"role": "assistant", "name": "Bot", "content": "Congratulations! Beagles are playful.",
     "timestamp": "2024-03-02T10:00:05Z", "id": "D1:2"},
    {"role": "user", "name": "Ann", "content": "Next month I start a new job as a nurse.",
     "timestamp": "2024-03-02T10:01:00Z", "id": "D1:3"},
    {"role": "user", "name": "Ann", "content": "We went hiking in the Alps in July.",
     "timestamp": "2024-08-01T09:00:00Z", "id": "D2:1", "metadata": {"topic": "travel"}},
    {"role": "user", "name": "Ann", "content": "我最喜欢的水果是芒果。",
     "timestamp": "2024-08-01T09:05:00Z", "id": "D2:2"},
]  # fmt: skip


@pytest.fixture
def alice_cube(mos: MemoryOS) -> str:
    """``tests.conftest.alice_cube``, whose quiet sessions stay in the working tier: these
    tests are about adding, reading and searching, not about the tiers (tests/tiers/)."""
    mos.create_user("alice", name="Alice")
    mos.create_user("bob")
    settings = {"session_idle_hours": 0}
    return mos.create_cube("notes", owner="alice", cube_id="notes", settings=settings).cube_id


@pytest.fixture
def filled(mos: MemoryOS, alice_cube: str) -> list[str]:
    return mos.add(
        CONVERSATION[:3], user_id="alice", cube_id=alice_cube, session_id="s1"
    ) + mos.add(CONVERSATION[3:], user_id="alice", cube_id=alice_cube, session_id="s2")


def texts(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.item.text for h in hits]


def test_open_creates_file_and_context_manager_closes(tmp_path: Path) -> None:
    path = tmp_path / "new" / "m.db"
    with MemoryOS.open(str(path)) as m:
        m.create_user("u")
        assert m.settings.embedder == "e5"
    assert path.exists()
    with MemoryOS.open(str(path)) as m:
        assert [u.user_id for u in m.list_users()] == ["u"]


def test_add_messages_become_turn_items(mos: MemoryOS, alice_cube: str, filled: list[str]) -> None:
    assert len(filled) == 5
    item = mos.get(filled[0], user_id="alice")
    assert item.text == CONVERSATION[0]["content"]
    assert (item.tier, item.type, item.status) == ("working", "turn", "generated")
    assert item.external_id == "D1:1" and item.speaker == "Ann" and item.role == "user"
    assert item.event_time == datetime(2024, 3, 2, 10, 0, tzinfo=timezone.utc)
    assert item.session_id == "s1" and item.cube_id == alice_cube and item.user_id == "alice"
    assert item.sources == []
    assert mos.get(filled[3], user_id="alice").metadata == {"topic": "travel"}
    assert filled == sorted(filled)  # ids are time-sortable


def test_add_plain_string_and_idempotent_retry(mos: MemoryOS, alice_cube: str) -> None:
    (one,) = mos.add("remember the milk", user_id="alice", cube_id=alice_cube)
    item = mos.get(one, user_id="alice")
    assert item.role == "user" and item.session_id is None
    first = mos.add(CONVERSATION[:2], user_id="alice", cube_id=alice_cube)
    assert mos.add(CONVERSATION[:2], user_id="alice", cube_id=alice_cube) == first
    changed = [dict(CONVERSATION[0], content="something else")]
    with pytest.raises(ConflictError):
        mos.add(changed, user_id="alice", cube_id=alice_cube)


def test_search_finds_what_was_added_immediately(mos: MemoryOS, filled: list[str]) -> None:
    hits = mos.search("What is the name of Ann's dog?", user_id="alice", top_k=3)
    assert hits[0].item.id == filled[0]
    assert hits[0].ranks.keys() >= {"keyword", "dense"}  # and the feedback pass's
    assert hits[0].score >= hits[1].score >= hits[2].score
    assert texts(mos.search("what job will she start", user_id="alice", top_k=1)) == [
        CONVERSATION[2]["content"]
    ]


def test_chinese_is_found_by_keyword(mos: MemoryOS, filled: list[str]) -> None:
    hits = mos.search("芒果", user_id="alice", top_k=5)
    assert hits[0].item.id == filled[4]
    assert "keyword" in hits[0].ranks  # not only by vector


def test_search_filters(mos: MemoryOS, alice_cube: str, filled: list[str]) -> None:
    def ids(**filters: object) -> set[str]:
        filters.setdefault("type", "turn")  # not what the long tier read from the turns
        return {h.item.id for h in mos.search("hiking", user_id="alice", filters=filters)}

    assert ids(session_id="s2") == set(filled[3:])
    assert ids(since="2024-07-01", until="2024-12-31") == set(filled[3:])
    assert ids(until="2024-03-02T10:00:30Z") == set(filled[:2])
    assert ids(metadata={"topic": "travel"}) == {filled[3]}
    assert ids(tier="mid") == set()
    assert ids(type="turn") == set(filled)
    hits = mos.search("hiking", user_id="alice", cube_ids=[alice_cube], top_k=2)
    assert len(hits) == 2 and hits[0].cube_id == alice_cube


def test_update_history_delete(mos: MemoryOS, filled: list[str]) -> None:
    new = mos.update(filled[0], user_id="alice", text="I adopted a cat named Biscuit.",
                     reason="it was a cat")  # fmt: skip
    assert new.version == 2
    assert mos.get(filled[0], user_id="alice").text == "I adopted a cat named Biscuit."
    hist = mos.history(filled[0], user_id="alice")
    assert [(v.version, v.item.text) for v in hist] == [
        (1, CONVERSATION[0]["content"]),
        (2, "I adopted a cat named Biscuit."),
    ]
    assert hist[1].actor == "alice" and hist[1].reason == "it was a cat"
    assert mos.search("cat", user_id="alice", top_k=1)[0].item.id == filled[0]  # re-embedded
    meta = mos.update(filled[0], user_id="alice", metadata={"checked": True})
    assert meta.metadata == {"checked": True} and meta.text == new.text
    gone = mos.delete(filled[0], user_id="alice")
    assert gone.status == "deleted"
    assert mos.delete(filled[0], user_id="alice").version == gone.version  # idempotent
    assert filled[0] not in {h.item.id for h in mos.search("Biscuit cat", user_id="alice")}
    assert mos.get(filled[0], user_id="alice").status == "deleted"
    with pytest.raises(ConflictError):
        mos.update(filled[0], user_id="alice", text="back")
    deleted = mos.search("Biscuit", user_id="alice", filters={"status": "deleted"})
    assert [h.item.id for h in deleted] == [filled[0]]


def test_grants_and_denials(mos: MemoryOS, alice_cube: str, filled: list[str]) -> None:
    with pytest.raises(PermissionDenied):
        mos.search("dog", user_id="bob", cube_ids=[alice_cube])
    assert mos.search("dog", user_id="bob") == []  # no readable cubes
    with pytest.raises(ItemNotFound):  # existence does not leak
        mos.get(filled[0], user_id="bob")
    with pytest.raises(PermissionDenied):
        mos.add("hi", user_id="bob", cube_id=alice_cube)
    with pytest.raises(PermissionDenied):
        mos.grant(alice_cube, "bob", "read", by="bob")
    mos.grant(alice_cube, "bob", "read", by="alice")
    assert mos.search("dog", user_id="bob", top_k=1)[0].item.id == filled[0]
    assert mos.get(filled[0], user_id="bob").id == filled[0]
    assert [c.cube_id for c in mos.list_cubes(user_id="bob")] == [alice_cube]
    with pytest.raises(PermissionDenied):
        mos.update(filled[0], user_id="bob", text="vandalism")
    with pytest.raises(PermissionDenied):
        mos.delete(filled[0], user_id="bob")
    with pytest.raises(PermissionDenied):
        mos.add("hi", user_id="bob", cube_id=alice_cube)
    mos.grant(alice_cube, "bob", "write", by="alice")
    mos.add("bob was here", user_id="bob", cube_id=alice_cube)
    with pytest.raises(PermissionDenied):
        mos.grant(alice_cube, "bob", "admin", by="bob")
    with pytest.raises(ValidationError):
        mos.grant(alice_cube, "alice", "read", by="alice")  # the owner keeps admin


def test_item_of_another_cube(mos: MemoryOS, alice_cube: str, filled: list[str]) -> None:
    other = mos.create_cube("other", owner="alice").cube_id
    with pytest.raises(ItemNotFound):
        mos.get(filled[0], user_id="alice", cube_id=other)
    with pytest.raises(ItemNotFound):
        mos.update(filled[0], user_id="alice", cube_id=other, text="x")
    assert mos.get(filled[0], user_id="alice", cube_id=alice_cube).id == filled[0]


BAD_CALLS = {
    "empty content": lambda m: m.add("   ", user_id="alice", cube_id="notes"),
    "non-string content": lambda m: m.add([{"role": "user", "content": 42}], user_id="alice",
                                          cube_id="notes"),
    "empty list": lambda m: m.add([], user_id="alice", cube_id="notes"),
    "not messages": lambda m: m.add(42, user_id="alice", cube_id="notes"),
    "unknown message key": lambda m: m.add([{"content": "x", "txt": 1}], user_id="alice",
                                           cube_id="notes"),
    "bad timestamp": lambda m: m.add([{"content": "x", "timestamp": "soon"}], user_id="alice",
                                     cube_id="notes"),
    "bad metadata": lambda m: m.add([{"content": "x", "metadata": {"f": object()}}],
                                    user_id="alice", cube_id="notes"),
    "one bad message of two": lambda m: m.add([{"content": "fine"}, {"content": ""}],
                                              user_id="alice", cube_id="notes"),
    "unknown user": lambda m: m.add("x", user_id="nobody", cube_id="notes"),
    "unknown cube": lambda m: m.add("x", user_id="alice", cube_id="nocube"),
    "denied": lambda m: m.add("x", user_id="bob", cube_id="notes"),
    "malformed filter": lambda m: m.search("x", user_id="alice", filters={"tier": "nope"}),
    "empty query": lambda m: m.search(" ", user_id="alice"),
    "bad top_k": lambda m: m.search("x", user_id="alice", top_k=0),
    "cube_ids a string": lambda m: m.search("x", user_id="alice", cube_ids="notes"),
    "unknown item": lambda m: m.get("01NOPE", user_id="alice"),
    "update nothing": lambda m: m.update("01NOPE", user_id="alice"),
    "bad user id": lambda m: m.create_user("has space"),
    "duplicate user": lambda m: m.create_user("alice"),
    "bad role": lambda m: m.create_user("carol", role="root"),
    "duplicate cube": lambda m: m.create_cube("again", owner="alice", cube_id="notes"),
    "cube for unknown owner": lambda m: m.create_cube("c", owner="nobody"),
    "empty cube name": lambda m: m.create_cube(" ", owner="alice"),
    "negative capacity": lambda m: m.create_cube("c", owner="alice",
                                                 settings={"working_capacity": -5}),
    "bad permission": lambda m: m.grant("notes", "bob", "root", by="alice"),
    "grant to unknown user": lambda m: m.grant("notes", "nobody", "read", by="alice"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_is_a_typed_error_that_changes_nothing(
    mos: MemoryOS, alice_cube: str, database: str, case: str
) -> None:
    before = row_counts(database)
    with pytest.raises(MemstrataError) as info:
        BAD_CALLS[case](mos)
    assert info.value.hint or info.value.message  # says what happened / what to do
    assert row_counts(database) == before


def test_error_types(mos: MemoryOS, alice_cube: str) -> None:
    with pytest.raises(UserNotFound, match="create the user"):
        mos.list_cubes(user_id="ghost")
    with pytest.raises(CubeNotFound):
        mos.get_cube("ghost", user_id="alice")
    with pytest.raises(AlreadyExists):
        mos.create_user("alice")
    assert PermissionDenied("a", "b", "read").status == 403


def test_embedder_mismatch_names_both_and_the_way_out(db_path: Path) -> None:
    with MemoryOS.open(str(db_path)) as m:
        m.create_user("u")
        cube = m.create_cube("c", owner="u").cube_id
        (item_id,) = m.add("the secret code is 4471", user_id="u", cube_id=cube)
    with MemoryOS.open(str(db_path), embedder="use") as m:
        with pytest.raises(EmbedderMismatch) as info:
            m.search("secret code", user_id="u")
        message = str(info.value)
        assert "multilingual-e5-small" in message and "universal-sentence-encoder" in message
        assert "reembed" in message
        assert m.get(item_id, user_id="u").text  # reading by id needs no embedder
        assert m.reembed(cube, user_id="u") == 1
        assert m.search("secret code", user_id="u")[0].item.id == item_id
    with MemoryOS.open(str(db_path)) as m:  # the file remembers e5; the cube is now USE
        assert m.settings.embedder == "e5"
        with pytest.raises(EmbedderMismatch):
            m.add("x", user_id="u", cube_id=cube)


WRITER = textwrap.dedent(
    """
    import sys
    from memstrata import MemoryOS
    with MemoryOS.open(sys.argv[1]) as m:
        for i in range(int(sys.argv[3])):
            m.add(f"{sys.argv[2]} note number {i}", user_id="alice", cube_id="notes")
    """
)


def test_two_processes_share_one_database(mos: MemoryOS, alice_cube: str, database: str) -> None:
    mos.add("the parent wrote this first", user_id="alice", cube_id=alice_cube)
    assert len(mos.search("note", user_id="alice")) == 1  # the vector mirror is now warm
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, database, name, "15"])
        for name in ("zebra", "quokka")
    ]
    mos.add([{"content": f"parent note {i}"} for i in range(10)], user_id="alice",
            cube_id=alice_cube)  # fmt: skip
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    # Turns only: the writers' background consolidation may have noted the same words as a
    # long-tier fact ("user: Quokka note number 7."), which can rank first too.
    hits = mos.search("quokka note number 7", user_id="alice", top_k=3, filters={"type": "turn"})
    assert hits[0].item.text == "quokka note number 7"
    assert "dense" in hits[0].ranks and "keyword" in hits[0].ranks
    all_hits = mos.search("note", user_id="alice", top_k=100, filters={"type": "turn"})
    assert len(all_hits) == 41


def test_unknown_embedder_is_a_configuration_error_that_records_nothing(db_path: Path) -> None:
    from memstrata.errors import ConfigurationError
    from memstrata.store.sqlite import SQLiteStore

    with pytest.raises(ConfigurationError, match="unknown embedder"):
        MemoryOS.open(str(db_path), embedder="word2vec")
    store = SQLiteStore(db_path)
    try:
        assert store.get_meta("embedder") is None
    finally:
        store.close()


def test_an_embedder_instance_is_used_and_left_open(db_path: Path) -> None:
    from memstrata.config import Settings
    from memstrata.embed import make_embedder

    embedder = make_embedder("use", Settings())
    with MemoryOS.open(str(db_path), embedder=embedder) as m:
        assert m.embedder is embedder and m.settings.embedder == "use"
        m.create_user("u")
        cube = m.create_cube("c", owner="u")
        assert cube.embedder is not None and cube.embedder.endswith("/512")


def test_a_script_run_twice_gets_the_same_user_and_cube(mos: MemoryOS) -> None:
    """``exist_ok``: the README's example run a second time (issue 28 §4: ``AlreadyExists``)."""
    first = mos.create_user("alice", name="Alice", exist_ok=True)
    assert mos.create_user("alice", name="Other", exist_ok=True) == first
    with pytest.raises(AlreadyExists):
        mos.create_user("alice")
    cube = mos.create_cube("notes", owner="alice", exist_ok=True)
    assert mos.create_cube("notes", owner="alice", exist_ok=True) == cube
    named = mos.create_cube("named", owner="alice", cube_id="named", exist_ok=True)
    assert mos.create_cube("named", owner="alice", cube_id="named", exist_ok=True) == named
    mos.create_user("bob")
    with pytest.raises(AlreadyExists):  # another's cube is never handed out
        mos.create_cube("named", owner="bob", cube_id="named", exist_ok=True)
    assert len(mos.list_cubes(user_id="alice")) == 2


def test_resending_a_message_after_its_update_is_idempotent(mos: MemoryOS) -> None:
    mos.create_user("alice")
    cube = mos.create_cube("notes", owner="alice").cube_id
    message = {"role": "user", "content": "I adopted a beagle.", "id": "msg-1"}
    (item_id,) = mos.add([message], user_id="alice", cube_id=cube)
    mos.update(item_id, user_id="alice", text="I adopted a beagle in March.")
    assert mos.add([message], user_id="alice", cube_id=cube) == [item_id]  # what was sent
    again = {**message, "content": "I adopted a beagle in March."}
    assert mos.add([again], user_id="alice", cube_id=cube) == [item_id]  # what it says now
    with pytest.raises(ConflictError):
        mos.add([{**message, "content": "I adopted a cat."}], user_id="alice", cube_id=cube)
