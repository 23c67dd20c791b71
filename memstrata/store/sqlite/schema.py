"""The SQLite schema and its forward migrations.

A migration is a function decorated with ``@migration(n, name)``; ``migrate()`` applies the ones a
file lacks, in order, each inside the caller's write transaction, and records it in
``schema_migrations``.  Migrations only move forward: a file whose recorded version is newer than
``LATEST`` is refused (``SchemaTooNew``) rather than guessed at.

Version 1 is the complete data model (users, keys, cubes, grants, items with every
field, versions, vectors, full text, events, tasks, artifacts), so later features add behaviour,
not tables.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable

#: ``PRAGMA application_id`` of a memstrata file ("MEMS"); how a file is recognised as ours.
APPLICATION_ID = 0x4D454D53

Migration = Callable[[sqlite3.Connection], None]
_MIGRATIONS: dict[int, tuple[str, Migration]] = {}


def migration(version: int, name: str) -> Callable[[Migration], Migration]:
    def register(fn: Migration) -> Migration:
        _MIGRATIONS[version] = (name, fn)
        return fn

    return register


@migration(1, "data model")
def _v1(conn: sqlite3.Connection) -> None:
    _run_script(conn, _V1)


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Execute each statement of ``script`` on ``conn`` without committing.

    (``executescript`` would commit the caller's transaction first.)
    """
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if statement.strip():
        conn.execute(statement)


@migration(2, "page segments")
def _v2(conn: sqlite3.Connection) -> None:
    # A mid-tier page points at its segment (the segment lists its pages in ``sources``).
    conn.execute("ALTER TABLE items ADD COLUMN segment_id TEXT")
    conn.execute("CREATE INDEX items_cube_segment ON items (cube_id, segment_id)")


@migration(3, "llm usage")
def _v3(conn: sqlite3.Connection) -> None:
    # Calls and tokens spent on a cube's LLM work, one running total per cube.
    conn.execute(
        "CREATE TABLE llm_usage (cube_id TEXT PRIMARY KEY, calls INTEGER NOT NULL DEFAULT 0,"
        " prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,"
        " updated_at REAL NOT NULL)"
    )


@migration(4, "per-cube index terms")
def _v4(conn: sqlite3.Connection) -> None:
    # Full-text terms now carry their cube's prefix (memstrata.text.index_body): re-index.
    from memstrata.text import index_body

    conn.execute("DELETE FROM items_fts")
    rows = conn.execute("SELECT rid, cube_id, text, key, keywords FROM items").fetchall()
    for rid, cube_id, text, key, keywords in rows:
        body = index_body(" ".join([text, key or "", *json.loads(keywords)]), cube_id)
        conn.execute(
            "INSERT INTO items_fts (rowid, body, cube) VALUES (?, ?, ?)", (rid, body, cube_id)
        )


@migration(5, "speaker index")
def _v5(conn: sqlite3.Connection) -> None:
    # Search reads which of a question's words are a cube's speakers (named_speakers).
    conn.execute("CREATE INDEX items_cube_speaker ON items (cube_id, speaker COLLATE NOCASE)")


@migration(6, "session order index")
def _v6(conn: sqlite3.Connection) -> None:
    # Search reads the next turn of each hit in its session (next_turns): one seek per hit
    # instead of ordering every turn of the hits' sessions.
    conn.execute("CREATE INDEX items_cube_session_time ON items (cube_id, session_id, event_time)")


@migration(7, "llm usage per day")
def _v7(conn: sqlite3.Connection) -> None:
    # The inspector charts calls and tokens per day; the running totals have no dates, so the
    # days before this migration stay unknown (the totals still count them).
    conn.execute(
        "CREATE TABLE llm_usage_daily (cube_id TEXT NOT NULL, day TEXT NOT NULL,"
        " calls INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0,"
        " completion_tokens INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (cube_id, day))"
    )


@migration(8, "item expiry")
def _v8(conn: sqlite3.Connection) -> None:
    # An item may expire (memory.expiry): the sweep finds the due ones through a partial index
    # holding only the items that have an expiry, so it costs nothing for the rest.
    conn.execute("ALTER TABLE items ADD COLUMN expires_at REAL")
    conn.execute("CREATE INDEX items_expiry ON items (expires_at) WHERE expires_at IS NOT NULL")


#: The item types and artifact kinds before migration 9, as version 1 wrote their CHECKs.
_V1_TYPES = "('turn', 'segment', 'fact', 'profile', 'preference', 'knowledge', 'chunk')"
_V1_KINDS = "('kv_cache', 'lora')"


@migration(9, "tool, skill and image memory")
def _v9(conn: sqlite3.Connection) -> None:
    # New item types (tool, tool_call, skill, image) and an artifact kind (image) widen two
    # CHECK constraints.  SQLite cannot alter a constraint; a wider CHECK changes nothing on disk
    # (every stored row passes it), so the table's recorded SQL is rewritten in place, the way
    # SQLite's ALTER TABLE documentation describes for constraint changes, instead of copying
    # every item into a new table (whose rowids the full text and the vectors name).
    from memstrata.memcube.records import ARTIFACT_KINDS
    from memstrata.model import ITEM_TYPES

    wider = {
        "items": (_V1_TYPES, _sql_list(ITEM_TYPES)),
        "artifacts": (_V1_KINDS, _sql_list(ARTIFACT_KINDS)),
    }
    schema_version = conn.execute("PRAGMA schema_version").fetchone()[0]
    conn.execute("PRAGMA writable_schema = ON")
    try:
        for table, (old, new) in wider.items():
            (sql,) = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            flat = " ".join(sql.split())
            if " ".join(old.split()) not in flat:
                raise RuntimeError(f"migration 9: the {table} table's CHECK is not version 1's")
            conn.execute(
                "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?",
                (flat.replace(old, new), table),
            )
        conn.execute(f"PRAGMA schema_version = {int(schema_version) + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")


def _sql_list(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


@migration(10, "item versions by cube")
def _v10(conn: sqlite3.Connection) -> None:
    # Every item query names its cube, on both engines (one SQL layer): a version row holds its
    # item's cube, as PostgreSQL's keys it.  One file is never sharded, so the keys stay.  A
    # version whose item is gone keeps the cube its snapshot names.
    conn.execute("ALTER TABLE item_versions ADD COLUMN cube_id TEXT NOT NULL DEFAULT ''")
    conn.execute(
        "UPDATE item_versions SET cube_id = coalesce((SELECT i.cube_id FROM items i "
        "WHERE i.id = item_versions.item_id), json_extract(snapshot, '$.cube_id'), '')"
    )


LATEST = max(_MIGRATIONS)


def current_version(conn: sqlite3.Connection) -> int:
    """The file's schema version (0 for a file without our tables)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if not exists:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply every pending migration on ``conn`` (inside an open transaction); return them."""
    applied = []
    if current_version(conn) == 0:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
    for version in range(current_version(conn) + 1, LATEST + 1):
        name, fn = _MIGRATIONS[version]
        fn(conn)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (version, name, time.time()),
        )
        applied.append(version)
    return applied


_V1 = """
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('item_seq', 0);
CREATE TABLE users (
    user_id TEXT PRIMARY KEY,
    name TEXT,
    role TEXT NOT NULL CHECK (role IN ('admin', 'user')),
    created_at REAL NOT NULL
);
CREATE TABLE api_keys (
    key_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (user_id),
    key_hash TEXT NOT NULL UNIQUE,
    label TEXT,
    created_at REAL NOT NULL,
    revoked_at REAL
);
CREATE INDEX api_keys_user ON api_keys (user_id);
CREATE TABLE cubes (
    cube_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    owner TEXT NOT NULL REFERENCES users (user_id),
    kind TEXT NOT NULL CHECK (kind IN ('user', 'agent', 'session', 'shared')),
    settings TEXT NOT NULL DEFAULT '{}',
    embedder TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX cubes_owner ON cubes (owner);
CREATE TABLE grants (
    cube_id TEXT NOT NULL REFERENCES cubes (cube_id),
    user_id TEXT NOT NULL REFERENCES users (user_id),
    permission TEXT NOT NULL CHECK (permission IN ('read', 'write', 'admin')),
    granted_by TEXT,
    granted_at REAL NOT NULL,
    PRIMARY KEY (cube_id, user_id)
);
CREATE INDEX grants_user ON grants (user_id);
CREATE TABLE items (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    cube_id TEXT NOT NULL REFERENCES cubes (cube_id),
    version INTEGER NOT NULL,
    tier TEXT NOT NULL CHECK (tier IN ('working', 'mid', 'long')),
    type TEXT NOT NULL CHECK (type IN
        ('turn', 'segment', 'fact', 'profile', 'preference', 'knowledge', 'chunk')),
    status TEXT NOT NULL CHECK (status IN
        ('generated', 'activated', 'merged', 'archived', 'frozen', 'deleted')),
    session_id TEXT,
    user_id TEXT,
    agent_id TEXT,
    role TEXT,
    speaker TEXT,
    text TEXT NOT NULL,
    key TEXT,
    keywords TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}',
    external_id TEXT,
    event_time REAL NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    valid_from REAL,
    valid_to REAL,
    merged_into TEXT,
    confidence REAL,
    pinned INTEGER NOT NULL DEFAULT 0,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at REAL,
    heat REAL,
    sources TEXT NOT NULL DEFAULT '[]',
    seq INTEGER NOT NULL
);
CREATE UNIQUE INDEX items_external ON items (cube_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX items_cube_seq ON items (cube_id, seq);
CREATE INDEX items_cube_time ON items (cube_id, event_time);
CREATE INDEX items_cube_session ON items (cube_id, session_id, tier);
CREATE TABLE item_versions (
    item_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    snapshot TEXT NOT NULL,
    at REAL NOT NULL,
    actor TEXT,
    reason TEXT,
    PRIMARY KEY (item_id, version)
);
CREATE TABLE vectors (
    rid INTEGER PRIMARY KEY REFERENCES items (rid),
    embedder TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE VIRTUAL TABLE items_fts USING fts5 (
    body, cube, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    actor TEXT,
    cube_id TEXT,
    item_id TEXT,
    op TEXT NOT NULL,
    before TEXT,
    after TEXT,
    version INTEGER,
    reason TEXT
);
CREATE INDEX events_item ON events (item_id, seq);
CREATE INDEX events_cube ON events (cube_id, seq);
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
WHEN NEW.seq IS NOT OLD.seq OR NEW.at IS NOT OLD.at OR NEW.actor IS NOT OLD.actor
    OR NEW.cube_id IS NOT OLD.cube_id OR NEW.item_id IS NOT OLD.item_id OR NEW.op IS NOT OLD.op
    OR NEW.version IS NOT OLD.version
    OR (NEW.before IS NOT NULL AND NEW.before IS NOT OLD.before)
    OR (NEW.after IS NOT NULL AND NEW.after IS NOT OLD.after)
    OR (NEW.reason IS NOT NULL AND NEW.reason IS NOT OLD.reason)
BEGIN
    SELECT RAISE(ABORT, 'events are append-only (only erasure may blank their payloads)');
END;
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    cube_id TEXT,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    dedupe_key TEXT UNIQUE,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    run_after REAL NOT NULL,
    lease_until REAL,
    error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX tasks_ready ON tasks (status, run_after);
CREATE INDEX tasks_cube ON tasks (cube_id, status);
CREATE TABLE artifacts (
    artifact_id TEXT PRIMARY KEY,
    cube_id TEXT NOT NULL REFERENCES cubes (cube_id),
    kind TEXT NOT NULL CHECK (kind IN ('kv_cache', 'lora')),
    path TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    sha256 TEXT,
    size_bytes INTEGER,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL
);
CREATE INDEX artifacts_cube ON artifacts (cube_id, kind)
"""
