"""The approximate dense index of large SQLite cubes (``memstrata/store/sqlite/ann.py``).

Every search through the index is compared with an exact scan of the same file (a second store
opened with the index off), so "never wrong" is checked, not assumed: after an incremental
build, with an index file older than the database, after another process's writes, and after
deletion, archiving and erasure.  The cubes are small (a few hundred random vectors) with the
index threshold lowered to match; HNSW recall on such cubes is practically exact, and the
comparison allows no miss.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memstrata.filters import Filters
from memstrata.model import Cube, MemoryItem, User, new_id
from memstrata.store.sqlite import SQLiteStore

DIM = 32
CUBE = "big"
FP = "test/32"
ALL = Filters()


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def indexed(path: Path, minimum: int = 200) -> SQLiteStore:
    return SQLiteStore(path, vector_index_min_items=minimum)


def fill(store: SQLiteStore, vectors: np.ndarray, session: str = "s1") -> list[str]:
    items = [
        MemoryItem(id=new_id(), cube_id=CUBE, text=f"turn {i}", user_id="u", session_id=session)
        for i in range(len(vectors))
    ]
    return store.add_items(items, vectors, FP)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    store.put_user(User("u"))
    store.put_cube(Cube(CUBE, CUBE, owner="u", embedder=FP))
    store.close()
    return path


def same_as_exact(path: Path, store: SQLiteStore, queries: np.ndarray, filters: Filters = ALL):
    """Every query's top 10 through ``store`` equals an exact scan's of the same file."""
    exact = SQLiteStore(path)
    try:
        for q in queries:
            got = store.vector_search(q, [CUBE], filters, 10)
            want = exact.vector_search(q, [CUBE], filters, 10)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert np.allclose([s for _, s in got], [s for _, s in want])
    finally:
        exact.close()


def uses_index(store: SQLiteStore) -> bool:
    return store._vectors.refreshed(CUBE, store._changed_rows).ann is not None


def index_files(path: Path) -> list[Path]:
    return sorted(Path(f"{path}.vindex").glob("*"))


def test_small_cubes_are_never_indexed(db: Path) -> None:
    store = indexed(db, minimum=500)
    fill(store, unit(np.random.default_rng(1), 300))
    assert store.build_vector_index(CUBE) == 0
    assert not uses_index(store) and index_files(db) == []


def test_incremental_build_covers_new_rows_and_stays_exact(db: Path) -> None:
    rng = np.random.default_rng(2)
    store = indexed(db)
    fill(store, unit(rng, 400))
    queries = unit(rng, 20)
    assert store.build_vector_index(CUBE) == 400
    assert uses_index(store) and index_files(db)
    same_as_exact(db, store, queries)
    # Rows added after the build are found before the index is extended (scanned exactly) ...
    added = fill(store, queries[:5] * 1.0)  # each query's exact twin: must rank first
    for q, item_id in zip(queries[:5], added, strict=True):
        assert store.vector_search(q, [CUBE], ALL, 1)[0][0] == item_id
    same_as_exact(db, store, queries)
    # ... and through the index once it is extended, by the new rows only.
    assert store.build_vector_index(CUBE) == 5
    assert store.build_vector_index(CUBE) == 0  # current: nothing to do
    same_as_exact(db, store, queries)
    store.close()


def test_identical_vectors_are_all_found(db: Path) -> None:
    rng = np.random.default_rng(3)
    store = indexed(db)
    base = unit(rng, 300)
    base[100:110] = base[5]  # ten rows repeating row 5's vector
    ids = fill(store, base)
    store.build_vector_index(CUBE)
    hits = store.vector_search(base[5], [CUBE], ALL, 11)
    assert {i for i, _ in hits} == {ids[5], *ids[100:110]}
    store.close()


def test_index_file_older_than_the_database(db: Path) -> None:
    """A crash after writes but before the next build: the old file is used, never wrong."""
    rng = np.random.default_rng(4)
    store = indexed(db)
    ids = fill(store, unit(rng, 300))
    store.build_vector_index(CUBE)
    store.close()
    # Writes the index never saw: new rows, a changed vector, a deleted item.
    other = SQLiteStore(db)
    queries = unit(rng, 20)
    new_ids = fill(other, queries[:3])
    [moved] = other.get_items([ids[0]], [CUBE])
    other.update_item(replace(moved, text="moved"), queries[3], op="update", actor="u")
    [gone] = other.get_items([ids[1]], [CUBE])
    other.update_item(replace(gone, status="deleted"), None, op="delete", actor="u")
    other.close()

    reopened = indexed(db)
    assert uses_index(reopened)  # the old file was loaded
    for q, item_id in zip(queries[:3], new_ids, strict=True):
        assert reopened.vector_search(q, [CUBE], ALL, 1)[0][0] == item_id
    assert reopened.vector_search(queries[3], [CUBE], ALL, 1)[0][0] == ids[0]
    found = reopened.vector_search(unit(rng, 1)[0], [CUBE], ALL, 400)
    assert ids[1] not in {i for i, _ in found}
    same_as_exact(db, reopened, queries)
    # The next build extends it: the changed vector goes stale (scanned exactly), new rows in.
    assert reopened.build_vector_index(CUBE) >= 4
    same_as_exact(db, reopened, queries)
    reopened.close()


def test_filters_apply_to_what_the_index_proposes(db: Path) -> None:
    rng = np.random.default_rng(5)
    store = indexed(db)
    fill(store, unit(rng, 300), session="a")
    fill(store, unit(rng, 60), session="b")
    store.build_vector_index(CUBE)
    queries = unit(rng, 10)
    same_as_exact(db, store, queries, Filters(session_id="b"))
    same_as_exact(db, store, queries, Filters(session_id="a"))
    store.close()


def test_erasure_removes_the_index_files_and_the_vectors(db: Path) -> None:
    rng = np.random.default_rng(6)
    store = indexed(db)
    vectors = unit(rng, 300)
    ids = fill(store, vectors)
    store.build_vector_index(CUBE)
    assert index_files(db)
    [archived] = store.get_items([ids[2]], [CUBE])
    store.update_item(replace(archived, status="archived"), None, op="archive", actor="u")
    assert ids[2] not in [i for i, _ in store.vector_search(vectors[2], [CUBE], ALL, 5)]

    store.erase_items([ids[3]], [CUBE], "u", "asked")
    # An erased item's vector must not outlive it on disk: the files go; the next build redoes.
    assert index_files(db) == []
    assert ids[3] not in [i for i, _ in store.vector_search(vectors[3], [CUBE], ALL, 5)]
    assert store.build_vector_index(CUBE) == 299
    assert ids[3] not in [i for i, _ in store.vector_search(vectors[3], [CUBE], ALL, 5)]
    same_as_exact(db, store, unit(rng, 10))
    store.delete_cube(CUBE, "u")
    assert index_files(db) == []
    store.close()


_WRITER = """
import sys
import numpy as np
from memstrata.model import MemoryItem, new_id
from memstrata.store.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
vectors = np.load(sys.argv[2])
items = [MemoryItem(id=new_id(), cube_id="big", text=f"w{i}", user_id="u") for i in range(len(vectors))]
print(",".join(store.add_items(items, vectors, "test/32")))
store.close()
"""


def test_another_process_builds_and_writes(db: Path, tmp_path: Path) -> None:
    """A worker process's saved index is picked up; its later writes are seen exactly."""
    rng = np.random.default_rng(7)
    fill(SQLiteStore(db), unit(rng, 300))
    builder = indexed(db)  # stands for a worker: another VectorCache, another mirror
    server = indexed(db)
    queries = unit(rng, 10)
    assert not uses_index(server)
    builder.build_vector_index(CUBE)
    assert uses_index(server)  # loaded from the saved file on its next search
    np.save(tmp_path / "q.npy", queries[:4])
    written = subprocess.run(
        [sys.executable, "-c", _WRITER, str(db), str(tmp_path / "q.npy")],
        capture_output=True, text=True, check=True,
    ).stdout.strip().split(",")  # fmt: skip
    for q, item_id in zip(queries[:4], written, strict=True):
        assert server.vector_search(q, [CUBE], ALL, 1)[0][0] == item_id
    same_as_exact(db, server, queries)
    builder.close()
    server.close()


def test_a_damaged_index_file_is_ignored(db: Path) -> None:
    rng = np.random.default_rng(8)
    store = indexed(db)
    fill(store, unit(rng, 300))
    store.build_vector_index(CUBE)
    store.close()
    for path in index_files(db):
        if path.suffix == ".usearch":
            path.write_bytes(b"not an index")
    reopened = indexed(db)
    same_as_exact(db, reopened, unit(rng, 10))
    assert reopened.build_vector_index(CUBE) == 300
    same_as_exact(db, reopened, unit(rng, 10))
    reopened.close()


def test_an_erasure_while_the_index_is_built_drops_it(db: Path, monkeypatch) -> None:
    """Another process erases an item between the build's snapshot and its save: the saved
    files would hold the erased vector, so the build drops them."""
    from memstrata.store.sqlite import ann

    store = indexed(db)
    ids = fill(store, unit(np.random.default_rng(9), 300))
    other = SQLiteStore(db)
    save = ann.save

    def erase_then_save(index: ann.AnnIndex, folder: Path, cube_id: str) -> None:
        other.erase_items([ids[0]], [CUBE], "u", "asked")  # commits, then deletes files (none yet)
        save(index, folder, cube_id)

    monkeypatch.setattr(ann, "save", erase_then_save)
    assert store.build_vector_index(CUBE) == 0
    assert index_files(db) == [] and not uses_index(store)
    monkeypatch.setattr(ann, "save", save)
    assert store.build_vector_index(CUBE) == 299  # the next build starts over, without it
    other.close()
    store.close()
