"""Every item query names its cube (issue 28): a sharded PostgreSQL distributed by ``cube_id``
routes a statement to one node only when the statement names the cube.

A representative workload runs through ``MemoryOS`` on PostgreSQL (add, update with versions,
search, get by id, history and a past state, rollback, consolidation, feedback, forget, erasure,
export and import) while every statement the driver sends is observed (the real connections,
wrapped at psycopg's cursor: nothing is faked).  Each reference to ``items`` or
``item_versions`` in a read, update or delete must be narrowed by ``cube_id``, and each insert
must write it, except the allowlisted statements below: the id → cube lookup, and what reads no
item but counts the whole table (statistics) or finds cubes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import MemoryOS

pytestmark = pytest.mark.engines("postgres")

#: A reference to an item table whose rows are read, changed or deleted.
_READS = re.compile(r"\b(?:FROM|JOIN|UPDATE)\s+(items|item_versions)\b(?!_)", re.IGNORECASE)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(items|item_versions)\s*\(([^)]*)\)", re.IGNORECASE)
#: The cube narrowing a read: ``cube_id = …``, ``cube_id = ANY(…)``, ``cube_id IN (…)``.
_NAMES_CUBE = re.compile(r"\bcube_id\s*(?:=|\bIN\b)", re.IGNORECASE)

#: Statements allowed to name no cube, each with why (matched on their text).
ALLOWED = {
    # the one item query without a cube: which cube holds an item known by id alone
    "SELECT id, cube_id FROM items WHERE id = ANY(%s)": "the id → cube lookup (item_cubes)",
    # statistics of the whole table, no item read: BM25's N and mean length, a term's document
    # count, the rows of a vector width (whether its HNSW index is due); per node when sharded
    "SELECT count(*), avg(doclen) FROM items WHERE tsv IS NOT NULL": "BM25 collection size",
    "SELECT count(*) FROM items WHERE tsv @@": "BM25 document frequency",
    "SELECT count(*) FROM (SELECT 1 FROM items WHERE dim = %s": "HNSW index threshold",
    # which cubes hold a data subject's items (the erasure by subject then names each cube)
    "SELECT DISTINCT cube_id FROM items WHERE user_id = %s": "the cubes of a subject's items",
}


def _scopes(sql: str) -> list[str]:
    """Each parenthesised part of ``sql`` (a subquery, a function's arguments) and the whole,
    each without the parts nested in it: a subquery is checked on its own clauses."""
    done: list[str] = []
    open_: list[list[str]] = [[]]
    for char in sql:
        if char == "(":
            open_[-1].append("(…)")
            open_.append([])
        elif char == ")" and len(open_) > 1:
            done.append("".join(open_.pop()))
        else:
            open_[-1].append(char)
    return done + ["".join(part) for part in open_]


def unrouted(sql: str) -> bool:
    """Whether ``sql`` reads or writes an item table without naming the cube (and is not
    allowlisted)."""
    flat = " ".join(sql.split())
    if any(flat.startswith(allowed) for allowed in ALLOWED):
        return False
    inserted = _INSERT.match(flat)
    if inserted:
        return "cube_id" not in [c.strip() for c in inserted.group(2).split(",")]
    # each query level that reads an item table narrows it by cube in its own clauses
    return any(_READS.search(part) and not _NAMES_CUBE.search(part) for part in _scopes(flat))


def test_the_check_catches_a_query_by_id_alone() -> None:
    assert unrouted("SELECT i.id FROM items i WHERE i.id = ANY(%s)")
    assert unrouted("INSERT INTO item_versions (item_id, version) VALUES (%s, %s)")
    assert unrouted(
        "SELECT id FROM items i WHERE i.cube_id = %s AND i.session_id IN "
        "(SELECT session_id FROM items WHERE id = ANY(%s))"
    )
    assert not unrouted("SELECT i.id FROM items i WHERE i.cube_id = ANY(%s) AND i.id = ANY(%s)")
    assert not unrouted("SELECT 1 FROM items_fts")  # another table
    assert not unrouted("SELECT id, cube_id FROM items WHERE id = ANY(%s)")  # the lookup


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement psycopg's cursors execute from now on (the real cursors, observed)."""
    import psycopg

    seen: list[str] = []

    def observed(method: Callable[..., Any]) -> Callable[..., Any]:
        def run(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(query if isinstance(query, str) else query.as_string(cursor))
            return method(cursor, query, *args, **kwargs)

        return run

    for name in ("execute", "executemany"):
        monkeypatch.setattr(psycopg.Cursor, name, observed(getattr(psycopg.Cursor, name)))
    yield seen


def workload(mos: MemoryOS, tmp_path: Path) -> None:
    """Add, update, search, read by id, history, the past, rollback, consolidation, feedback,
    forget, read counts, erasure (an item, a subject), export and import."""
    mos.create_user("alice", name="Alice")
    cube = mos.create_cube("notes", owner="alice", cube_id="notes").cube_id
    talk = [
        "I moved to Lisbon last spring.", "My sister Lena lives in Porto.",
        "I smoke a pack a day.", "I love hiking in the mountains.",
        "My cat is called Biscuit.", "I work as a nurse at the hospital.",
    ]  # fmt: skip
    ids = [mos.add(t, user_id="alice", cube_id=cube, session_id="s1")[0] for t in talk]
    mos.update(ids[0], user_id="alice", text="I moved to Lisbon in May.")
    mos.update(ids[0], user_id="alice", text="I moved to Lisbon in June.")
    assert mos.search("where do I live", user_id="alice", cube_ids=[cube], top_k=3)
    mos.get(ids[0], user_id="alice")  # by id alone: the cube is looked up first
    mos.get(ids[1], user_id="alice", cube_id=cube)
    assert len(mos.history(ids[0], user_id="alice")) == 3
    mos.search(
        "Lisbon",
        user_id="alice",
        cube_ids=[cube],
        as_of=mos.get(ids[0], user_id="alice").created_at,
    )
    mos.rollback(ids[0], 1, user_id="alice", reason="undo")
    mos.consolidate(cube, user_id="alice")
    mos.feedback("forget that I smoke", user_id="alice", cube_id=cube)
    mos.erase(user_id="alice", item_id=ids[4], reason="asked")
    path = tmp_path / "notes-export"
    mos.export(cube, path, user_id="alice")
    mos.import_cube(path, owner="alice", cube_id="copy", keep_ids=False)
    mos.search("hiking", user_id="alice", cube_ids=[cube, "copy"], top_k=3)
    mos.tiers.flush_reads(force=True)  # the reads counted by the searches: a visits task
    mos.wait(cube)
    mos.erase(user_id="alice", subject_user_id="alice", reason="subject")


def test_every_item_statement_on_postgres_names_the_cube(
    mos: MemoryOS, statements: list[str], tmp_path: Path
) -> None:
    workload(mos, tmp_path)
    touching = [s for s in statements if _READS.search(s) or _INSERT.match(" ".join(s.split()))]
    assert len(touching) > 50  # the workload reached the item tables
    named = [" ".join(s.split())[:300] for s in touching if unrouted(s)]
    assert list(dict.fromkeys(named)) == []
