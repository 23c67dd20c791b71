"""What tells the two SQL engines' statements apart, in one small object, and the one place a
driver's error becomes one of ours.

The shared SQL layer (``memstrata.store.sql``) writes each statement once and asks its engine's
``Dialect`` for the few words that differ: the parameter mark (``?`` or ``%s``), how a list of
ids is one parameter (``IN (SELECT value FROM json_each(?))`` or ``= ANY(%s)``), the row lock of
an update (``FOR UPDATE`` or nothing: SQLite has one writer), the lock two writers of one key
queue on (``lock``), how a JSON metadata value is compared, how a page without a limit is written,
and how rows are read by column name.  Upserts are one syntax on both (``INSERT … ON CONFLICT
(…) DO UPDATE SET col = excluded.col`` / ``DO NOTHING``), written by ``upsert``.

``mapped`` is where every driver error leaves as a ``memstrata.errors`` type: a database another
connection holds locked (or a server refusing for lack of a lock) is ``StorageError`` saying so,
any other driver error ``StorageError`` with the driver's first line; our own errors pass.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memstrata.errors import MemstrataError, StorageError

#: The hint of a ``StorageError`` for a database another connection holds locked.
LOCKED_HINT = "another process holds the database locked; retry, or raise busy_timeout_ms"


class Dialect:
    """An engine's words for the shared statements (see the module doc); one instance per engine.

    Subclasses set the class attributes and implement ``among``, ``json_equals`` and ``dicts``.
    """

    #: the engine's name in messages (``sqlite``, ``postgresql``)
    name: str = ""
    #: the driver's positional parameter mark
    mark: str = "?"
    #: appended to a read whose rows the transaction then updates
    for_update: str = ""
    #: the function giving the position of a substring (``instr``, ``strpos``)
    position: str = "instr"
    #: the ``LIMIT`` parameter that means no limit
    no_limit: Any = None
    #: the driver's base error class, mapped by ``mapped``
    driver_error: type[BaseException] = Exception

    def marks(self, count: int) -> str:
        """``count`` parameter marks, comma-separated: ``?, ?, ?``."""
        return ", ".join([self.mark] * count)

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column IN (…)`` over a short list of constants (statuses, tiers), one mark each;
        an empty list matches nothing."""
        if not values:
            return "1 = 0", []
        return f"{column} IN ({self.marks(len(values))})", list(values)

    def among(self, column: str, values: Sequence[str]) -> tuple[str, Any]:
        """``column`` is one of ``values`` (ids, any number), as one parameter: the statement is
        the same whatever the list's length (each length would be a statement of its own)."""
        raise NotImplementedError

    def json_equals(self, column: str, key: str, value: Any) -> tuple[str, list[Any]]:
        """``column`` (JSON text of an object) holds ``value`` at ``key``, compared as JSON
        values compare (``filters.same_json``); ``None`` matches a JSON null or a missing key."""
        raise NotImplementedError

    def contains(self, column: str) -> str:
        """``column`` (text) contains the one parameter this condition takes, literally (no
        ``LIKE`` pattern: a ``%`` or ``_`` in it is itself)."""
        return f"{self.position}({column}, {self.mark}) > 0"

    def order(self, descending: bool) -> str:
        """The direction of an ``ORDER BY`` term, NULLs first when ascending (SQLite's order)."""
        return "DESC" if descending else "ASC"

    def indexed_by(self, index: str) -> str:
        """A hint naming the index a read must use (empty where the planner takes none)."""
        del index
        return ""

    def dicts(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one statement on ``conn``, each readable by column name."""
        raise NotImplementedError

    def executemany(self, conn: Any, sql: str, params: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once per parameter row, batched by the driver."""
        if params:
            with conn.cursor() as cursor:
                cursor.executemany(sql, params)

    def upsert(
        self, table: str, columns: Sequence[str], keys: Sequence[str], update: str | None
    ) -> str:
        """``INSERT INTO table (columns) VALUES (marks) ON CONFLICT (keys)`` then ``DO UPDATE
        SET update`` (``excluded.col`` names the row offered), or ``DO NOTHING`` for None."""
        action = "DO NOTHING" if update is None else f"DO UPDATE SET {update}"
        return (
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({self.marks(len(columns))}) "
            f"ON CONFLICT ({', '.join(keys)}) {action}"
        )

    def lock(self, conn: Any, key: str, space: int) -> None:
        """Make concurrent writers of ``key`` (in key space ``space``) queue here until this
        transaction ends; nothing where the engine has one writer (SQLite)."""
        del conn, key, space

    def is_locked(self, exc: BaseException) -> bool:
        """Whether a driver error says another connection holds what was asked for."""
        del exc
        return False

    def first_line(self, exc: BaseException) -> str:
        """The first line of a driver error (some drivers' messages run over several lines)."""
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__

    def storage_error(self, doing: str, where: str, exc: BaseException) -> StorageError:
        """The ``StorageError`` a driver error ``exc`` becomes: ``<doing> <where> failed: …``."""
        if self.is_locked(exc):
            return StorageError(
                f"{doing} {where} failed: another connection holds it locked",
                hint=LOCKED_HINT,
            )
        return StorageError(f"{doing} {where} failed: {self.first_line(exc)}")

    @contextmanager
    def mapped(self, doing: str, where: str) -> Iterator[None]:
        """Driver errors raised inside as ``StorageError`` (``storage_error``); ours pass."""
        try:
            yield
        except MemstrataError:
            raise
        except self.driver_error as exc:
            raise self.storage_error(doing, where, exc) from exc
