"""The core calls the service stands on: API keys, admin checks, cube deletion, paging, stats,
runtime settings.  Real SQLite and the real embedder, through ``MemoryOS``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memstrata import MemoryOS
from memstrata.embed.e5 import MAX_CHARS
from memstrata.errors import (
    AdminRequired,
    CubeNotFound,
    NotFoundError,
    PermissionDenied,
    Unauthenticated,
    ValidationError,
)
from memstrata.keys import key_hash
from tests.conftest import row_counts


def test_bootstrap_creates_one_admin_and_prints_its_key_once(mos: MemoryOS) -> None:
    key = mos.bootstrap_admin()
    assert key is not None and key.startswith("ms_")
    admin = mos.authenticate(key)
    assert (admin.user_id, admin.role) == ("admin", "admin")
    assert mos.bootstrap_admin() is None  # users exist: nothing more
    assert [u.user_id for u in mos.list_users()] == ["admin"]


def test_bootstrap_with_a_fixed_key_survives_restarts(db_path: Path) -> None:
    fixed = "a-fixed-admin-key-of-some-length"
    with MemoryOS.open(str(db_path), workers=0) as m:
        assert m.bootstrap_admin(fixed) == fixed
    with MemoryOS.open(str(db_path), workers=0) as m:
        assert m.bootstrap_admin(fixed) is None
        assert m.authenticate(fixed).user_id == "admin"
    with MemoryOS.open(str(db_path), workers=0) as m, pytest.raises(ValidationError):
        m.bootstrap_admin("short")


def test_keys_are_stored_hashed_and_can_be_revoked(mos: MemoryOS, db_path: Path) -> None:
    mos.bootstrap_admin()
    mos.create_user("alice", by="admin")
    key = mos.create_key("alice", by="alice", label="laptop")
    assert key.secret and mos.authenticate(key.secret).user_id == "alice"
    conn = sqlite3.connect(db_path)
    stored = [r[0] for r in conn.execute("SELECT key_hash FROM api_keys")]
    conn.close()
    assert key.secret not in stored and key_hash(key.secret) in stored
    [listed] = mos.list_keys("alice", by="admin")
    assert (listed.key_id, listed.label, listed.secret, listed.revoked_at) == (
        key.key_id, "laptop", None, None,
    )  # fmt: skip
    mos.revoke_key("alice", key.key_id, by="alice")
    with pytest.raises(Unauthenticated):
        mos.authenticate(key.secret)
    assert mos.list_keys("alice", by="alice")[0].revoked_at is not None
    with pytest.raises(NotFoundError):
        mos.revoke_key("alice", key.key_id, by="alice")  # already revoked


@pytest.mark.parametrize("key", [None, "", "ms_not-a-key"])
def test_missing_or_unknown_keys_are_unauthenticated(mos: MemoryOS, key: str | None) -> None:
    with pytest.raises(Unauthenticated):
        mos.authenticate(key)


def test_only_admins_create_users_and_manage_others_keys(mos: MemoryOS, db_path: Path) -> None:
    mos.bootstrap_admin()
    mos.create_user("alice", by="admin")
    mos.create_user("bob", by="admin")
    before = row_counts(db_path)
    with pytest.raises(AdminRequired):
        mos.create_user("mallory", by="alice")
    with pytest.raises(PermissionDenied):
        mos.create_key("bob", by="alice")
    with pytest.raises(PermissionDenied):
        mos.list_users(by="alice")
    assert row_counts(db_path) == before
    assert mos.create_key("bob", by="admin").user_id == "bob"


def test_delete_cube_removes_its_content_and_keeps_tombstones(
    mos: MemoryOS, alice_cube: str, db_path: Path
) -> None:
    mos.create_cube("other", owner="alice", cube_id="other")
    mos.add("the cube marker zebracorn", user_id="alice", cube_id=alice_cube)
    mos.add("kept elsewhere", user_id="alice", cube_id="other")
    mos.grant(alice_cube, "bob", "write", by="alice")
    with pytest.raises(PermissionDenied):
        mos.delete_cube(alice_cube, user_id="bob")  # write is not admin
    assert mos.delete_cube(alice_cube, user_id="alice") == 1
    with pytest.raises(CubeNotFound):
        mos.get_cube(alice_cube, user_id="alice")
    assert [c.cube_id for c in mos.list_cubes(user_id="bob")] == []
    assert [h.item.text for h in mos.search("zebracorn kept", user_id="alice")] == [
        "kept elsewhere"
    ]
    conn = sqlite3.connect(db_path)
    leftovers = {
        table: conn.execute(f"SELECT count(*) FROM {table} WHERE {col}", (alice_cube,)).fetchone()[0]
        for table, col in [("items", "cube_id = ?"), ("grants", "cube_id = ?"),
                           ("tasks", "cube_id = ?"), ("items_fts", "items_fts MATCH ?")]
    }  # fmt: skip
    payloads = conn.execute(
        "SELECT count(*) FROM events WHERE cube_id = ? AND (before LIKE '%zebracorn%' "
        "OR after LIKE '%zebracorn%')",
        (alice_cube,),
    ).fetchone()[0]
    ops = [r[0] for r in conn.execute("SELECT op FROM events WHERE cube_id = ?", (alice_cube,))]
    conn.close()
    assert leftovers == {"items": 0, "grants": 0, "tasks": 0, "items_fts": 0}
    assert payloads == 0 and ops[-1] == "delete_cube" and "create" in ops


def test_list_memories_pages_through_a_cube(mos: MemoryOS, alice_cube: str) -> None:
    ids = mos.add(
        [{"content": f"note {n}", "timestamp": f"2026-01-0{n + 1}"} for n in range(5)],
        user_id="alice", cube_id=alice_cube,
    )  # fmt: skip
    first = mos.list_memories(alice_cube, user_id="alice", limit=2)
    rest = mos.list_memories(alice_cube, user_id="alice", limit=10, offset=2)
    assert [i.id for i in first + rest] == ids
    with pytest.raises(PermissionDenied):
        mos.list_memories(alice_cube, user_id="bob")
    with pytest.raises(ValidationError):
        mos.list_memories(alice_cube, user_id="alice", offset=-1)


def test_stats_count_items_by_tier_and_type(mos: MemoryOS, alice_cube: str) -> None:
    mos.add([{"content": "one"}, {"content": "two"}], user_id="alice", cube_id=alice_cube)
    stats = mos.stats(user_id="alice")
    assert stats[alice_cube]["items"] == {"working/turn": 2}
    assert stats[alice_cube]["llm_usage"]["calls"] == 0
    assert mos.stats(user_id="bob") == {}


def test_configure_changes_search_tuning_for_admins_only(mos: MemoryOS) -> None:
    mos.bootstrap_admin()
    mos.create_user("alice", by="admin")
    assert mos.configure(by="admin", rrf_k=60, dense_weight=0.5).rrf_k == 60
    assert mos.settings.dense_weight == 0.5
    with pytest.raises(PermissionDenied):
        mos.configure(by="alice", rrf_k=10)
    with pytest.raises(ValidationError, match="cannot be changed at run time"):
        mos.configure(by="admin", db="/tmp/elsewhere.db")
    with pytest.raises(ValidationError):
        mos.configure(by="admin", rrf_k=0)
    with pytest.raises(ValidationError):
        mos.configure(by="admin", rrf_k="many")
    assert mos.settings.rrf_k == 60


def test_configure_reaches_every_process_on_the_database(mos: MemoryOS, database: str) -> None:
    mos.bootstrap_admin()
    mos.create_user("alice", by="admin")
    with MemoryOS.open(database, workers=0) as other:
        assert other.settings.rrf_k != 7
        mos.configure(by="admin", rrf_k=7)
        other.search("anything", user_id="alice")  # reads the recorded settings first
        assert other.settings.rrf_k == 7
        other.configure(by="admin", dense_weight=0.25)
        mos.search("anything", user_id="alice")
        assert (mos.settings.rrf_k, mos.settings.dense_weight) == (7, 0.25)


def test_configure_keyword_max_postings_reaches_the_keyword_channel(mos: MemoryOS) -> None:
    """Only the query's rarest terms within the postings budget are matched by keyword."""
    mos.create_user("admin", role="admin")
    mos.create_cube("c", owner="admin", cube_id="c")
    texts = ["the zebra grazed", "an apple fell", "apple pie again", "apple juice today"]
    ids = mos.add([{"content": t} for t in texts], user_id="admin", cube_id="c")

    def keyword_hits() -> set[str]:
        hits = mos.search("zebra apple", user_id="admin", top_k=10)
        return {h.item.id for h in hits if "keyword" in h.ranks}

    assert keyword_hits() == set(ids)  # zebra (1 posting) and apple (3) within 5,000
    mos.configure(by="admin", keyword_max_postings=1)
    assert keyword_hits() == {ids[0]}  # only the rarest term, zebra, fits


@pytest.mark.parametrize(
    "change",
    [
        {"dense_weight": float("nan")},
        {"keyword_weight": float("inf")},
        {"search_candidates": 10**9},
        {"keyword_max_postings": 2**63},
        {"rrf_k": -5},
    ],
)
def test_configure_refuses_values_out_of_range(mos: MemoryOS, change: dict[str, float]) -> None:
    mos.create_user("admin", role="admin")
    before = mos.settings
    with pytest.raises(ValidationError, match="must be from"):
        mos.configure(by="admin", **change)
    assert mos.settings == before


def test_huge_messages_and_offsets_are_refused(mos: MemoryOS, alice_cube: str) -> None:
    with pytest.raises(ValidationError, match="add_document"):
        mos.add("x" * 40_000, user_id="alice", cube_id=alice_cube)
    with pytest.raises(ValidationError):
        mos.list_memories(alice_cube, user_id="alice", offset=2**63)


def test_long_texts_are_embedded_from_their_beginning(mos: MemoryOS) -> None:
    long = "The harbour office opens at nine. " * 60 + "zebra " * 3000
    whole, head = mos.embedder.embed_passages([long, long[:MAX_CHARS]])
    assert np.array_equal(whole, head)  # the tail costs no embedding time
