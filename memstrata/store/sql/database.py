"""``SQLDatabase``: what the shared SQL layer asks of an engine's database.

An engine (``store/sqlite/``, ``store/postgres/``) subclasses it with its connections
(``connection``, ``transaction``, ``snapshot``), its ``Dialect``, its ``Layout`` (where an
item's full text and vector live: the engine's ``writes`` module), what its caches must forget
(``_forget``, ``_added``) and where artifact files go (``artifact_dir``, ``_artifact_base``).
The shared modules (``principals``, ``cubes``, ``items``, ``history``, ``erasure``, ``usage``,
``archive``, ``artifacts``) are written once over this class.

Reads go through ``connection()`` (or ``rows``, ``row``, ``dicts``): driver errors leave them as
``StorageError`` (``Dialect.mapped``), as they leave ``transaction()`` and ``snapshot()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy.typing as npt

from memstrata.model import MemoryItem
from memstrata.store.sql.dialect import Dialect

#: One vector as an engine reads it back: a float32 ``(dim,)`` array.
Vector = npt.NDArray[Any]


class Layout(Protocol):
    """The rows only an engine lays out: where an item's full text and vector live.  An engine's
    ``writes`` module is one; each function runs inside the caller's write transaction."""

    def insert_items(
        self,
        conn: Any,
        items: Sequence[MemoryItem],
        vectors: Sequence[Vector | None],
        embedder: str | None,
    ) -> None:
        """Store new items: each row with a fresh change sequence number, its full text and its
        vector (``None``: it has none), recorded as ``embedder``'s.  Versions and events are the
        caller's (a new item has a first version, an imported one brings its own)."""

    def rewrite(self, conn: Any, old: MemoryItem, new: MemoryItem, vector: Vector | None) -> None:
        """Overwrite the stored ``old`` with ``new`` (a fresh change sequence number), its full
        text only when the indexed words changed, its vector when one is given."""

    def tombstone(self, conn: Any, item_ids: Sequence[str], cube_ids: Sequence[str]) -> None:
        """Blank what these items of these cubes said (``erasure.ERASED``) and drop their full
        text and vector, each taking a fresh change sequence number."""

    def drop_cube_rows(self, conn: Any, cube_id: str) -> None:
        """Drop the full-text and vector rows the engine keeps apart from the cube's items
        (before the items go)."""

    def cube_vectors(self, conn: Any, cube_id: str) -> list[tuple[str, str | None, Vector]]:
        """(item id, embedder, vector) of each of the cube's items with a vector, by id."""


class SQLDatabase:
    """One database of an engine: connections, file-level settings, and the engine's hooks."""

    #: the engine's words (see ``Dialect``)
    dialect: ClassVar[Dialect]
    #: the database as messages name it (a file path, or ``postgresql://user@host/db``)
    where: str

    # -- connections (the engine's) ----------------------------------------------------------

    def connection(self) -> AbstractContextManager[Any]:
        """A connection to read with (this thread's write transaction's, when inside one);
        driver errors inside become ``StorageError``."""
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[Any]:
        """One write transaction (nested uses join the outer one), committed before it returns;
        driver errors inside become ``StorageError``."""
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager[Any]:
        """A connection inside one read transaction: one consistent view however many queries
        are made, while others write."""
        raise NotImplementedError

    # -- reads -------------------------------------------------------------------------------

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one read, readable by position."""
        with self.connection() as conn:
            return list(conn.execute(sql, params).fetchall())

    def row(self, sql: str, params: Sequence[Any] = ()) -> Any | None:
        """The first row of one read, or None."""
        with self.connection() as conn:
            return conn.execute(sql, params).fetchone()

    def dicts(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one read, readable by column name (what ``rows.item_from_dict`` takes)."""
        with self.connection() as conn:
            return self.dialect.dicts(conn, sql, params)

    # -- file-level settings -----------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """The database-level setting ``key`` (the embedder it was made with, …), or None."""
        found = self.row(f"SELECT value FROM meta WHERE key = {self.dialect.mark}", (key,))
        return None if found is None else str(found[0])

    def set_meta(self, key: str, value: str) -> None:
        """Set the database-level setting ``key``."""
        statement = self.dialect.upsert(
            "meta", ("key", "value"), ("key",), "value = excluded.value"
        )
        with self.transaction() as conn:
            conn.execute(statement, (key, value))

    # -- the engine's own (hooks) -----------------------------------------------------------

    #: how the engine lays out an item's row, full text and vector (its ``writes`` module)
    layout: ClassVar[Layout]

    def _added(self, cube_id: str, count: int) -> None:
        """Note that ``count`` items were added to ``cube_id`` (search bookkeeping)."""
        raise NotImplementedError

    def _forget(self, cube_ids: Iterable[str]) -> None:
        """Drop what the caches know of these cubes (after a write that removed content)."""
        raise NotImplementedError

    def artifact_dir(self, cube_id: str) -> Path:
        """The directory of ``cube_id``'s artifact files; ``MemCubeError`` when there is none."""
        raise NotImplementedError

    def _artifact_base(self) -> Path:
        """The directory a stored relative artifact path is relative to."""
        raise NotImplementedError
