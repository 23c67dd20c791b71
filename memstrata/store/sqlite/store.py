"""The default backend: one SQLite file (WAL), FTS5 full text, numpy vector search.

Concurrency, datasette-style: one writer connection used under a lock with ``BEGIN IMMEDIATE``
(so a write never starts a transaction it cannot finish), and one read connection per thread.
Other processes may open the same file; ``busy_timeout`` makes their writers queue, and vector
mirrors see their changes through the change sequence (see ``vectors.py``).  ``synchronous=FULL``
makes a commit durable before a write method returns.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from memstrata.errors import (
    AlreadyExists,
    ConflictError,
    ItemNotFound,
    MemstrataError,
    NotOurDatabase,
    SchemaTooNew,
    StorageError,
)
from memstrata.filters import Filters
from memstrata.model import (
    SEARCHABLE_STATUSES,
    ApiKey,
    Cube,
    Event,
    Grant,
    MemoryItem,
    User,
    Version,
    to_epoch,
    utcnow,
)
from memstrata.store.base import Scored, Vectors
from memstrata.store.sqlite import rows, schema
from memstrata.store.sqlite.vectors import VectorCache
from memstrata.text import any_of, cube_prefix, index_body, query_terms

_ITEM_INSERT = (
    f"INSERT INTO items ({', '.join(rows.ITEM_COLUMNS)}, seq) "
    f"VALUES ({', '.join('?' * len(rows.ITEM_COLUMNS))}, ?)"
)
_ITEM_UPDATE = (
    f"UPDATE items SET {', '.join(c + ' = ?' for c in rows.ITEM_COLUMNS)}, seq = ? WHERE rid = ?"
)
#: Seconds a term's posting count is remembered for choosing query terms (see _postings).
POSTINGS_TTL_S = 60.0
POSTINGS_CACHE_SIZE = 50_000
_USER_COLS = "user_id, name, role, created_at"
_CUBE_COLS = "cube_id, name, owner, kind, settings, embedder, created_at"
# Times are stored as float seconds and shown as datetimes (whole microseconds): a time given back
# as shown may differ from the stored one by half a microsecond either way.
_TIME_SLACK = 5e-7
# An erased item keeps identity, placement and times; everything said in it goes.
_ERASE = (
    "UPDATE items SET text = '', key = NULL, keywords = '[]', tags = '[]', metadata = '{}', "
    "speaker = NULL, external_id = NULL, sources = '[]', status = 'deleted', "
    "version = version + 1, updated_at = ?, seq = ? WHERE rid = ?"
)
_EVENT_COLS = "seq, at, actor, cube_id, item_id, op, before, after, version, reason"


def fts_body(item: MemoryItem) -> str:
    """What the full-text index holds for an item: its text, key and keywords."""
    return index_body(" ".join([item.text, item.key or "", *item.keywords]), item.cube_id)


def filter_sql(filters: Filters) -> tuple[str, list[Any]]:
    """A WHERE fragment over ``items i`` for every filter, with its parameters."""
    clauses = [f"i.status IN ({', '.join('?' * len(filters.statuses))})"]
    params: list[Any] = list(filters.statuses)
    for column, values in (("tier", filters.tiers), ("type", filters.types)):
        if values is not None:
            clauses.append(f"i.{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    if filters.session_id is not None:
        clauses.append("i.session_id = ?")
        params.append(filters.session_id)
    if filters.since is not None:
        clauses.append("i.event_time >= ?")
        params.append(filters.since.timestamp())
    if filters.until is not None:
        clauses.append("i.event_time <= ?")
        params.append(filters.until.timestamp())
    for key, value in filters.metadata.items():
        clauses.append("json_extract(i.metadata, ?) IS ?")
        params.extend([f'$."{key}"', value])
    return " AND ".join(clauses), params


class SQLiteStore:
    """``Store`` over one SQLite file.  Thread-safe; safe to share a file between processes."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = 10000,
        synchronous: str = "FULL",
        keyword_max_postings: int = 5000,
    ) -> None:
        self.path = str(path)
        self._max_postings = keyword_max_postings
        self._postings_cache: dict[tuple[tuple[str, ...], str], tuple[int, float]] = {}
        self._postings_lock = threading.Lock()
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._lock = threading.RLock()
        self._depth = 0
        self._writing_thread: int | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._vectors = VectorCache()
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = self._connect()
        self._prepare()

    # -- connections -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        return conn

    def _prepare(self) -> None:
        """Check the file is ours (or empty), switch on WAL, and migrate it forward."""
        conn = self._writer
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            n_tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise NotOurDatabase(self.path, f"not an SQLite database: {exc}") from exc
        if app_id != schema.APPLICATION_ID and n_tables:
            conn.close()
            raise NotOurDatabase(self.path, "it holds another application's tables")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Freed pages are zeroed, so erased content does not linger in the file's free list.
        conn.execute("PRAGMA secure_delete = ON")
        found = schema.current_version(conn)
        if found > schema.LATEST:
            conn.close()
            raise SchemaTooNew(self.path, found, schema.LATEST)
        if found < schema.LATEST:
            with self.transaction() as tx:
                tx.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
                schema.migrate(tx)

    def reader(self) -> sqlite3.Connection:
        """This thread's read connection (the writer's, inside a write transaction)."""
        if self._writing_thread == threading.get_ident():
            return self._writer
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (nested uses join the outer one); commits before returning."""
        with self._lock:
            conn = self._writer
            if self._depth:
                self._depth += 1
                try:
                    yield conn
                finally:
                    self._depth -= 1
                return
            self._depth = 1
            self._writing_thread = threading.get_ident()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    # After SQLITE_FULL, IOERR or NOMEM SQLite has rolled back already.
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except MemstrataError:
                raise
            except sqlite3.Error as exc:
                raise StorageError(f"write to {self.path} failed: {exc}") from exc
            finally:
                self._depth = 0
                self._writing_thread = None

    def close(self) -> None:
        with self._lock:
            for conn in [*self._readers, self._writer]:
                conn.close()
            self._readers.clear()

    # -- meta --------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.reader().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- principals --------------------------------------------------------------------------

    def put_user(self, user: User) -> None:
        with self.transaction() as conn:
            try:
                conn.execute(
                    f"INSERT INTO users ({_USER_COLS}) VALUES (?, ?, ?, ?)",
                    (user.user_id, user.name, user.role, to_epoch(user.created_at)),
                )
            except sqlite3.IntegrityError as exc:
                raise AlreadyExists("user", user.user_id) from exc
            _event(conn, user.user_id, None, None, "create_user", after={"role": user.role})

    def get_user(self, user_id: str) -> User | None:
        sql = f"SELECT {_USER_COLS} FROM users WHERE user_id = ?"
        row = self.reader().execute(sql, (user_id,)).fetchone()
        return None if row is None else rows.user_from_row(row)

    def list_users(self) -> list[User]:
        sql = f"SELECT {_USER_COLS} FROM users ORDER BY created_at, user_id"
        return [rows.user_from_row(r) for r in self.reader().execute(sql)]

    def put_key(self, key: ApiKey, key_hash: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO api_keys (key_id, user_id, key_hash, label, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (key.key_id, key.user_id, key_hash, key.label, to_epoch(key.created_at)),
            )
            _event(conn, key.user_id, None, None, "create_key", after={"key_id": key.key_id})

    def key_user(self, key_hash: str) -> str | None:
        row = (
            self.reader()
            .execute(
                "SELECT user_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL",
                (key_hash,),
            )
            .fetchone()
        )
        return None if row is None else str(row[0])

    def list_keys(self, user_id: str) -> list[ApiKey]:
        sql = (
            "SELECT key_id, user_id, label, created_at, revoked_at FROM api_keys "
            "WHERE user_id = ? ORDER BY created_at, key_id"
        )
        return [rows.key_from_row(r) for r in self.reader().execute(sql, (user_id,))]

    def revoke_key(self, user_id: str, key_id: str, actor: str) -> bool:
        with self.transaction() as conn:
            done = conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND user_id = ? "
                "AND revoked_at IS NULL",
                (time.time(), key_id, user_id),
            ).rowcount
            if done:
                _event(conn, actor, None, None, "revoke_key", after={"key_id": key_id})
            return bool(done)

    def put_cube(self, cube: Cube) -> None:
        with self.transaction() as conn:
            try:
                conn.execute(
                    f"INSERT INTO cubes ({_CUBE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (cube.cube_id, cube.name, cube.owner, cube.kind, rows.dumps(cube.settings),
                     cube.embedder, to_epoch(cube.created_at)),
                )  # fmt: skip
            except sqlite3.IntegrityError as exc:
                raise AlreadyExists("cube", cube.cube_id) from exc
            _event(conn, cube.owner, cube.cube_id, None, "create_cube", after={"name": cube.name})
            self.put_grant(Grant(cube.cube_id, cube.owner, "admin", cube.owner, cube.created_at))

    def get_cube(self, cube_id: str) -> Cube | None:
        sql = f"SELECT {_CUBE_COLS} FROM cubes WHERE cube_id = ?"
        row = self.reader().execute(sql, (cube_id,)).fetchone()
        return None if row is None else rows.cube_from_row(row)

    def list_cubes(self, user_id: str) -> list[Cube]:
        sql = (
            f"SELECT {', '.join('c.' + c for c in _CUBE_COLS.split(', '))} FROM cubes c "
            "JOIN grants g ON g.cube_id = c.cube_id WHERE g.user_id = ? "
            "ORDER BY c.created_at, c.cube_id"
        )
        return [rows.cube_from_row(r) for r in self.reader().execute(sql, (user_id,))]

    def delete_cube(self, cube_id: str, actor: str) -> int:
        """Delete a cube and everything in it; returns how many items went.

        Items, versions, vectors, full-text rows, tasks, grants, artifacts and usage go; the
        cube's events stay as tombstones (op, time, actor) with their payloads blanked.
        """
        with self.transaction() as conn:
            in_cube = "SELECT rid FROM items WHERE cube_id = ?"
            conn.execute(f"DELETE FROM items_fts WHERE rowid IN ({in_cube})", (cube_id,))
            conn.execute(f"DELETE FROM vectors WHERE rid IN ({in_cube})", (cube_id,))
            conn.execute(
                "DELETE FROM item_versions WHERE item_id IN "
                "(SELECT id FROM items WHERE cube_id = ?)",
                (cube_id,),
            )
            count = conn.execute("DELETE FROM items WHERE cube_id = ?", (cube_id,)).rowcount
            for table in ("tasks", "grants", "artifacts", "llm_usage"):
                conn.execute(f"DELETE FROM {table} WHERE cube_id = ?", (cube_id,))
            conn.execute(
                "UPDATE events SET before = NULL, after = NULL, reason = NULL WHERE cube_id = ?",
                (cube_id,),
            )
            conn.execute("DELETE FROM cubes WHERE cube_id = ?", (cube_id,))
            _event(conn, actor, cube_id, None, "delete_cube", after={"items": count})
            conn.execute("INSERT INTO items_fts (items_fts) VALUES ('optimize')")
        self._vectors.forget(cube_id)
        with self._postings_lock:
            self._postings_cache.clear()
        return int(count)

    def erase_items(self, item_ids: Sequence[str], actor: str, reason: str | None) -> int:
        """Remove the content of items for good, leaving tombstones; returns how many.

        In one transaction: each item row keeps its id, cube, placement and times but loses its
        text, key, keywords, tags, metadata, speaker, external id and sources, and becomes
        ``deleted``; its versions, vector and full-text row go; its events keep op, time and
        actor with payloads blanked; tasks that name it are dropped (unless running); an
        ``erase`` event is added.  The full-text index is then optimised so no old segment keeps
        the words, and freed pages are zeroed (``secure_delete``), so after a WAL checkpoint and
        ``VACUUM`` the content is nowhere in the files.
        """
        erased = 0
        cubes: set[str] = set()
        with self.transaction() as conn:
            for start in range(0, len(item_ids), 500):
                chunk = list(item_ids[start : start + 500])
                marks = ", ".join("?" * len(chunk))
                found = conn.execute(  # tombstones (erased before) are not counted again
                    f"SELECT rid, id, cube_id FROM items WHERE id IN ({marks}) "
                    "AND NOT (status = 'deleted' AND text = '')",
                    chunk,
                ).fetchall()
                if not found:
                    continue
                rids = [r[0] for r in found]
                rid_marks = ", ".join("?" * len(rids))
                conn.execute(f"DELETE FROM items_fts WHERE rowid IN ({rid_marks})", rids)
                conn.execute(f"DELETE FROM vectors WHERE rid IN ({rid_marks})", rids)
                conn.execute(f"DELETE FROM item_versions WHERE item_id IN ({marks})", chunk)
                conn.execute(
                    "UPDATE events SET before = NULL, after = NULL, reason = NULL "
                    f"WHERE item_id IN ({marks})",
                    chunk,
                )
                seq = _next_seq(conn, len(found))
                for n, (rid, item_id, cube_id) in enumerate(found):
                    conn.execute(_ERASE, (time.time(), seq - n, rid))
                    conn.execute(
                        "DELETE FROM tasks WHERE status != 'running' AND payload LIKE ?",
                        (f"%{item_id}%",),
                    )
                    _event(conn, actor, cube_id, item_id, "erase", reason=reason)
                    cubes.add(cube_id)
                erased += len(found)
            if erased:
                conn.execute("INSERT INTO items_fts (items_fts) VALUES ('optimize')")
        for cube_id in cubes:
            self._vectors.forget(cube_id)
        with self._postings_lock:
            self._postings_cache.clear()
        return erased

    def put_grant(self, grant: Grant) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO grants (cube_id, user_id, permission, granted_by, "
                "granted_at) VALUES (?, ?, ?, ?, ?)",
                (grant.cube_id, grant.user_id, grant.permission, grant.granted_by,
                 to_epoch(grant.granted_at)),
            )  # fmt: skip
            _event(conn, grant.granted_by, grant.cube_id, None, "grant",
                   after={"user_id": grant.user_id, "permission": grant.permission})  # fmt: skip

    def delete_grant(self, cube_id: str, user_id: str, actor: str) -> bool:
        with self.transaction() as conn:
            done = conn.execute(
                "DELETE FROM grants WHERE cube_id = ? AND user_id = ?", (cube_id, user_id)
            ).rowcount
            if done:
                _event(conn, actor, cube_id, None, "revoke", after={"user_id": user_id})
            return bool(done)

    def list_grants(self, cube_id: str) -> list[Grant]:
        sql = (
            "SELECT cube_id, user_id, permission, granted_by, granted_at FROM grants "
            "WHERE cube_id = ? ORDER BY granted_at, user_id"
        )
        return [rows.grant_from_row(r) for r in self.reader().execute(sql, (cube_id,))]

    def permission(self, cube_id: str, user_id: str) -> str | None:
        row = (
            self.reader()
            .execute(
                "SELECT permission FROM grants WHERE cube_id = ? AND user_id = ?",
                (cube_id, user_id),
            )
            .fetchone()
        )
        return None if row is None else str(row[0])

    # -- items -------------------------------------------------------------------------------

    def add_items(self, items: Sequence[MemoryItem], vectors: Vectors, embedder: str) -> list[str]:
        with self.transaction() as conn:
            ids: list[str] = []
            fresh: list[tuple[MemoryItem, Any]] = []
            seen: dict[tuple[str, str], tuple[str, str]] = {}
            for item, vector in zip(items, vectors, strict=True):
                existing = _existing(conn, seen, item)
                if existing is not None:
                    ids.append(existing)
                    continue
                if item.external_id is not None:
                    seen[(item.cube_id, item.external_id)] = (item.id, item.text)
                fresh.append((item, vector))
                ids.append(item.id)
            last = _next_seq(conn, len(fresh))
            for offset, (item, vector) in enumerate(fresh):
                self._insert(conn, item, vector, embedder, last - len(fresh) + 1 + offset)
        return ids

    def _insert(
        self, conn: sqlite3.Connection, item: MemoryItem, vector: Any, embedder: str, seq: int
    ) -> None:
        rid = conn.execute(_ITEM_INSERT, (*rows.item_to_row(item), seq)).lastrowid
        _index(conn, rid, item)
        conn.execute(
            "INSERT INTO vectors (rid, embedder, vector) VALUES (?, ?, ?)",
            (rid, embedder, np.asarray(vector, np.float32).tobytes()),
        )
        _version(conn, item, item.user_id, None)
        after = {"tier": item.tier, "type": item.type, "session_id": item.session_id}
        _event(conn, item.user_id, item.cube_id, item.id, "create", after=after, version=1)

    def update_item(
        self,
        item: MemoryItem,
        vector: Vectors | None,
        *,
        op: str,
        actor: str | None,
        reason: str | None = None,
        snapshot: bool = True,
    ) -> MemoryItem:
        with self.transaction() as conn:
            row = conn.execute("SELECT * FROM items WHERE id = ?", (item.id,)).fetchone()
            if row is None:
                raise ItemNotFound(item.id)
            old = rows.item_from_dict(row)
            if old.version != item.version:
                raise ConflictError(
                    f"item {item.id!r} changed since it was read (version {old.version}, "
                    f"not {item.version})",
                    hint="read it again and retry",
                )
            new = replace(item, version=old.version + 1, updated_at=utcnow())
            seq = _next_seq(conn, 1)
            conn.execute(_ITEM_UPDATE, (*rows.item_to_row(new), seq, row["rid"]))
            if fts_body(new) != fts_body(old):
                conn.execute("DELETE FROM items_fts WHERE rowid = ?", (row["rid"],))
                _index(conn, row["rid"], new)
            if vector is not None:
                conn.execute(
                    "UPDATE vectors SET vector = ? WHERE rid = ?",
                    (np.asarray(vector, np.float32).tobytes(), row["rid"]),
                )
            if snapshot:
                _version(conn, new, actor, reason)
            before, after = _diff(old, new)
            _event(conn, actor, new.cube_id, new.id, op, before=before, after=after,
                   version=new.version, reason=reason)  # fmt: skip
        return new

    def get_items(self, item_ids: Sequence[str]) -> list[MemoryItem]:
        if not item_ids:
            return []
        found: dict[str, MemoryItem] = {}
        for start in range(0, len(item_ids), 500):
            chunk = list(item_ids[start : start + 500])
            sql = f"SELECT * FROM items WHERE id IN ({', '.join('?' * len(chunk))})"
            for row in self.reader().execute(sql, chunk):
                found[row["id"]] = rows.item_from_dict(row)
        return [found[i] for i in item_ids if i in found]

    def list_items(
        self,
        cube_id: str,
        filters: Filters,
        *,
        order: Literal["event_time", "heat"] = "event_time",
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[MemoryItem]:
        where, params = filter_sql(filters)
        direction = "DESC" if descending else "ASC"
        sql = (
            f"SELECT i.* FROM items i WHERE i.cube_id = ? AND {where} "
            f"ORDER BY i.{order} {direction}, i.id {direction} LIMIT ? OFFSET ?"
        )
        page = [-1 if limit is None else limit, offset]
        cursor = self.reader().execute(sql, [cube_id, *params, *page])
        return [rows.item_from_dict(r) for r in cursor]

    def count_items(self, cube_id: str, filters: Filters) -> int:
        where, params = filter_sql(filters)
        sql = f"SELECT count(*) FROM items i WHERE i.cube_id = ? AND {where}"
        return int(self.reader().execute(sql, [cube_id, *params]).fetchone()[0])

    def overflowing_turns(self, cube_id: str, capacity: int) -> list[MemoryItem]:
        live = ", ".join(f"'{s}'" for s in SEARCHABLE_STATUSES)
        sql = (
            "SELECT * FROM (SELECT i.*, ROW_NUMBER() OVER (PARTITION BY i.session_id "
            "ORDER BY i.event_time DESC, i.id DESC) AS newest FROM items i "
            "WHERE i.cube_id = ? AND i.tier = 'working' AND i.type = 'turn' "
            f"AND i.status IN ({live})) WHERE newest > ? ORDER BY event_time, id"
        )
        return [rows.item_from_dict(r) for r in self.reader().execute(sql, (cube_id, capacity))]

    def next_turns(self, cube_id: str, item_ids: Sequence[str]) -> dict[str, str]:
        if not item_ids:
            return {}
        live = ", ".join(f"'{s}'" for s in SEARCHABLE_STATUSES)
        marks = ", ".join("?" * len(item_ids))
        sql = (
            "SELECT id, next_id FROM (SELECT i.id, LEAD(i.id) OVER (PARTITION BY i.session_id "
            "ORDER BY i.event_time, i.id) AS next_id FROM items i WHERE i.cube_id = ? "
            f"AND i.type = 'turn' AND i.status IN ({live}) AND i.session_id IN "
            f"(SELECT session_id FROM items WHERE id IN ({marks}))) "
            f"WHERE id IN ({marks}) AND next_id IS NOT NULL"
        )
        rows_ = self.reader().execute(sql, [cube_id, *item_ids, *item_ids])
        return {r[0]: r[1] for r in rows_}

    def record_access(self, counts: Mapping[str, int], at: datetime) -> None:
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE items SET access_count = access_count + ?, last_accessed_at = ? "
                "WHERE id = ?",
                [(n, at.timestamp(), item_id) for item_id, n in counts.items()],
            )

    def get_vectors(self, item_ids: Sequence[str]) -> Vectors:
        found: dict[str, bytes] = {}
        for start in range(0, len(item_ids), 500):
            chunk = list(item_ids[start : start + 500])
            sql = (
                "SELECT i.id, v.vector FROM items i JOIN vectors v ON v.rid = i.rid "
                f"WHERE i.id IN ({', '.join('?' * len(chunk))})"
            )
            found.update((r[0], r[1]) for r in self.reader().execute(sql, chunk))
        missing = [i for i in item_ids if i not in found]
        if missing:
            raise ItemNotFound(missing[0])
        if not item_ids:
            return np.zeros((0, 0), np.float32)
        return np.stack([np.frombuffer(found[i], dtype=np.float32) for i in item_ids])

    def versions(self, item_id: str) -> list[Version]:
        sql = (
            "SELECT version, snapshot, at, actor, reason FROM item_versions "
            "WHERE item_id = ? ORDER BY version"
        )
        return [
            Version(r[0], rows.item_from_dict(json.loads(r[1])), rows.to_datetime(r[2]), r[3], r[4])
            for r in self.reader().execute(sql, (item_id,))
        ]

    def events(
        self,
        *,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[Event]:
        clauses: list[str] = ["1"]
        params: list[Any] = []
        if since is not None:
            clauses.append("at >= ?")
            params.append(since.timestamp() - _TIME_SLACK)
        if cube_id is not None:
            clauses.append("cube_id = ?")
            params.append(cube_id)
        if item_id is not None:
            clauses.append("item_id = ?")
            params.append(item_id)
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE {' AND '.join(clauses)} ORDER BY seq LIMIT ?"
        return [rows.event_from_row(r) for r in self.reader().execute(sql, [*params, limit])]

    def cubes_with_items_of(self, user_id: str) -> list[str]:
        sql = "SELECT DISTINCT cube_id FROM items WHERE user_id = ? ORDER BY cube_id"
        return [r[0] for r in self.reader().execute(sql, (user_id,))]

    def items_as_of(self, cube_id: str, at: datetime) -> list[MemoryItem]:
        sql = (
            "SELECT v.snapshot FROM item_versions v JOIN items i ON i.id = v.item_id "
            "WHERE i.cube_id = ? AND v.version = (SELECT max(w.version) FROM item_versions w "
            "WHERE w.item_id = v.item_id AND w.at <= ?) ORDER BY i.event_time, i.id"
        )
        cursor = self.reader().execute(sql, (cube_id, at.timestamp() + _TIME_SLACK))
        return [rows.item_from_dict(json.loads(r[0])) for r in cursor]

    def iter_items(self, cube_id: str) -> Iterator[MemoryItem]:
        cursor = self.reader().execute(
            "SELECT i.* FROM items i JOIN vectors v ON v.rid = i.rid "
            "WHERE i.cube_id = ? ORDER BY i.id",
            (cube_id,),
        )
        while batch := cursor.fetchmany(512):
            yield from (rows.item_from_dict(r) for r in batch)

    def replace_vectors(
        self, cube_id: str, item_ids: Sequence[str], vectors: Vectors, embedder: str
    ) -> None:
        with self.transaction() as conn:
            last = _next_seq(conn, len(item_ids))
            for offset, (item_id, vector) in enumerate(zip(item_ids, vectors, strict=True)):
                rid = conn.execute(
                    "SELECT rid FROM items WHERE id = ? AND cube_id = ?", (item_id, cube_id)
                ).fetchone()
                if rid is None:
                    raise ItemNotFound(item_id, cube_id)
                conn.execute(
                    "UPDATE vectors SET vector = ?, embedder = ? WHERE rid = ?",
                    (np.asarray(vector, np.float32).tobytes(), embedder, rid[0]),
                )
                seq = last - len(item_ids) + 1 + offset
                conn.execute("UPDATE items SET seq = ? WHERE rid = ?", (seq, rid[0]))
            conn.execute("UPDATE cubes SET embedder = ? WHERE cube_id = ?", (embedder, cube_id))
            _event(conn, None, cube_id, None, "reembed", after={"embedder": embedder})
        self._vectors.forget(cube_id)

    # -- search ------------------------------------------------------------------------------

    def keyword_search(
        self, query: str, cube_ids: Sequence[str], filters: Filters, limit: int
    ) -> list[Scored]:
        """BM25 over the item text of ``cube_ids`` (their prefixed terms, see ``text``).

        Cost grows with the postings a query touches, so only the query's rarest terms are
        kept, up to ``keyword_max_postings`` matches in these cubes (always at least one term):
        the common terms dropped carry the least BM25 weight, and the dense channel still sees
        the whole query.
        """
        prefixes = [cube_prefix(c) for c in dict.fromkeys(cube_ids)]
        terms = self._rarest_terms(prefixes, query_terms(query))
        if not terms:
            return []
        expression = f"body : {any_of([p + t for p in prefixes for t in terms])}"
        where, params = filter_sql(filters)
        sql = (
            "SELECT i.id, f.score FROM (SELECT rowid, bm25(items_fts, 1.0, 0.0) AS score "
            "FROM items_fts WHERE items_fts MATCH ? ORDER BY score LIMIT ?) AS f "
            f"JOIN items i ON i.rid = f.rowid WHERE i.cube_id IN ({', '.join('?' * len(cube_ids))}) "
            f"AND {where} ORDER BY f.score LIMIT ?"
        )
        conn = self.reader()
        # Rank in the index first and filter a few times ``limit`` rows; only when filters
        # reject too many is every match joined and filtered.
        args = [*cube_ids, *params, limit]
        found = conn.execute(sql, [expression, 4 * limit, *args]).fetchall()
        if len(found) < limit:
            found = conn.execute(sql, [expression, -1, *args]).fetchall()
        return [(r[0], -float(r[1])) for r in found]

    def _postings(self, prefixes: list[str], term: str) -> int:
        """How many items of these cubes hold ``term``; remembered for ``POSTINGS_TTL_S``.

        The count only chooses which terms to keep, so a count a little out of date is harmless,
        and remembering it saves a query per term on every search.
        """
        key = (tuple(prefixes), term)
        now = time.monotonic()
        with self._postings_lock:
            cached = self._postings_cache.get(key)
            if cached is not None and now - cached[1] < POSTINGS_TTL_S:
                return cached[0]
        sql = "SELECT count(*) FROM items_fts WHERE items_fts MATCH ?"
        expression = f"body : {any_of([p + term for p in prefixes])}"
        count = int(self.reader().execute(sql, (expression,)).fetchone()[0])
        with self._postings_lock:
            if len(self._postings_cache) >= POSTINGS_CACHE_SIZE:
                self._postings_cache.clear()  # crude, but bounded and rare
            self._postings_cache[key] = (count, now)
        return count

    def _rarest_terms(self, prefixes: list[str], terms: list[str]) -> list[str]:
        """``terms`` found in these cubes, rarest first, within the postings budget."""
        counted = [(count, term) for term in terms if (count := self._postings(prefixes, term))]
        counted.sort()
        kept: list[str] = []
        total = 0
        for count, term in counted:
            if kept and total + count > self._max_postings:
                break
            kept.append(term)
            total += count
        return kept

    def vector_search(
        self, vector: Vectors, cube_ids: Sequence[str], filters: Filters, limit: int
    ) -> list[Scored]:
        found: list[Scored] = []
        for cube_id in cube_ids:
            cube = self._vectors.refreshed(cube_id, self._changed_rows)
            allowed = self._metadata_matches(cube_id, filters) if filters.metadata else None
            with self._vectors.single_threaded():
                found.extend(cube.search(vector, filters, limit, allowed))
        found.sort(key=lambda hit: -hit[1])
        return found[:limit]

    def _changed_rows(self, cube_id: str, since_seq: int) -> Iterator[tuple[Any, ...]]:
        cursor = self.reader().execute(
            "SELECT i.id, i.seq, i.status, i.tier, i.type, i.session_id, i.event_time, v.vector "
            "FROM items i LEFT JOIN vectors v ON v.rid = i.rid "
            "WHERE i.cube_id = ? AND i.seq > ? ORDER BY i.seq",
            (cube_id, since_seq),
        )
        while batch := cursor.fetchmany(4096):
            yield from (tuple(r) for r in batch)

    def _metadata_matches(self, cube_id: str, filters: Filters) -> list[str]:
        where, params = filter_sql(Filters(statuses=filters.statuses, metadata=filters.metadata))
        sql = f"SELECT i.id FROM items i WHERE i.cube_id = ? AND {where}"
        return [r[0] for r in self.reader().execute(sql, [cube_id, *params])]


# -- helpers (all run inside a write transaction) -------------------------------------------


def _index(conn: sqlite3.Connection, rid: int | None, item: MemoryItem) -> None:
    conn.execute(
        "INSERT INTO items_fts (rowid, body, cube) VALUES (?, ?, ?)",
        (rid, fts_body(item), item.cube_id),
    )


def _next_seq(conn: sqlite3.Connection, count: int) -> int:
    """Reserve ``count`` change sequence numbers; returns the last one."""
    row = conn.execute(
        "UPDATE counters SET value = value + ? WHERE name = 'item_seq' RETURNING value", (count,)
    ).fetchone()
    return int(row[0])


def _existing(
    conn: sqlite3.Connection, seen: dict[tuple[str, str], tuple[str, str]], item: MemoryItem
) -> str | None:
    """The id already stored (or earlier in this batch) for the item's external id, if any."""
    if item.external_id is None:
        return None
    key = (item.cube_id, item.external_id)
    hit = seen.get(key)
    if hit is None:
        row = conn.execute(
            "SELECT id, text FROM items WHERE cube_id = ? AND external_id = ?", key
        ).fetchone()
        hit = None if row is None else (row[0], row[1])
    if hit is None:
        return None
    if hit[1] != item.text:
        raise ConflictError(
            f"external id {item.external_id!r} is already stored in cube {item.cube_id!r} "
            f"as item {hit[0]!r} with other text",
            hint="use update() to change it, or another id",
        )
    return hit[0]


def _version(
    conn: sqlite3.Connection, item: MemoryItem, actor: str | None, reason: str | None
) -> None:
    conn.execute(
        "INSERT INTO item_versions (item_id, version, snapshot, at, actor, reason) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (item.id, item.version, rows.dumps(rows.item_to_dict(item)), time.time(), actor, reason),
    )


def _diff(old: MemoryItem, new: MemoryItem) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields that changed, before and after (bookkeeping fields left out).

    A list that only grew at its end (a segment's pages, as each page joins) is recorded as
    ``"<field>+": [the new entries]``, not twice in full: else a segment of n pages would write
    events of O(n) size n times.
    """
    a, b = rows.item_to_dict(old), rows.item_to_dict(new)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for k in a:
        if a[k] == b[k] or k in ("version", "updated_at"):
            continue
        grown = _appended(a[k], b[k])
        if grown is not None:
            after[k + "+"] = grown
        else:
            before[k], after[k] = a[k], b[k]
    return before, after


def _appended(old: Any, new: Any) -> list[Any] | None:
    """What was added at the end of a (JSON-encoded) non-empty list, or None for other changes."""
    if not (isinstance(old, str) and isinstance(new, str) and old.startswith("[")):
        return None
    was, now = json.loads(old), json.loads(new)
    if not was or not isinstance(now, list) or now[: len(was)] != was:
        return None
    return list(now[len(was) :])


def _event(
    conn: sqlite3.Connection,
    actor: str | None,
    cube_id: str | None,
    item_id: str | None,
    op: str,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    version: int | None = None,
    reason: str | None = None,
) -> None:
    conn.execute(
        "INSERT INTO events (at, actor, cube_id, item_id, op, before, after, version, reason) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (time.time(), actor, cube_id, item_id, op,
         None if before is None else rows.dumps(before),
         None if after is None else rows.dumps(after), version, reason),
    )  # fmt: skip
