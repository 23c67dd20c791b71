"""The PostgreSQL schema and its forward migrations.

The same data model as the SQLite file (``memstrata/store/sqlite/schema.py``), laid out
for PostgreSQL: times as epoch seconds (``double precision``), lists and objects as JSON text, so
one row mapping (``memstrata.store.rows``) serves both engines.  What differs:

* an item's vector is a column of the item (pgvector's ``vector``, any width), with ``dim``
  beside it; an HNSW index (cosine) is made per width once ``HNSW_MIN_ROWS`` vectors of that
  width are stored (``hnsw_index``), partial on ``dim`` so each width is one index;
* the full text is a ``tsvector`` column (GIN) over the same cube-prefixed terms as FTS5's body,
  with ``doclen`` (the body's term count) for BM25;
* ``cube_id`` leads every key of an item and the indexes its queries seek by (``items``:
  ``(cube_id, id)``; ``item_versions``: ``(cube_id, item_id, version)``), and every item query
  names the cube, so a sharded PostgreSQL (Citus) can distribute by it; the one exception is
  the id → cube lookup (``item_cubes``), served by the plain index ``items_id``.

Migrations run under a transaction-scoped advisory lock, so processes starting together do not
race; a database whose recorded version is newer than ``LATEST`` is refused (``SchemaTooNew``).
"""

from __future__ import annotations

import time
from typing import Any

#: Advisory lock key taken while migrating ("MEMS").
MIGRATION_LOCK = 0x4D454D53
#: Widths above this get no HNSW index (pgvector's limit for ``vector``); they are scanned exactly.
HNSW_MAX_DIM = 2000
#: A width's HNSW index is built once this many items have vectors of it: below, the exact scan
#: is fast and every insert would pay the graph's upkeep for nothing (bench/scale.py); at the
#: crossing the add that reaches it builds the index in bulk, which is far cheaper than row by row.
HNSW_MIN_ROWS = 10_000

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE SEQUENCE item_seq;
CREATE TABLE users (
    user_id TEXT PRIMARY KEY,
    name TEXT,
    role TEXT NOT NULL CHECK (role IN ('admin', 'user')),
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE api_keys (
    key_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (user_id),
    key_hash TEXT NOT NULL UNIQUE,
    label TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION
);
CREATE INDEX api_keys_user ON api_keys (user_id);
CREATE TABLE cubes (
    cube_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    owner TEXT NOT NULL REFERENCES users (user_id),
    kind TEXT NOT NULL CHECK (kind IN ('user', 'agent', 'session', 'shared')),
    settings TEXT NOT NULL DEFAULT '{}',
    embedder TEXT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX cubes_owner ON cubes (owner);
CREATE TABLE grants (
    cube_id TEXT NOT NULL REFERENCES cubes (cube_id),
    user_id TEXT NOT NULL REFERENCES users (user_id),
    permission TEXT NOT NULL CHECK (permission IN ('read', 'write', 'admin')),
    granted_by TEXT,
    granted_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (cube_id, user_id)
);
CREATE INDEX grants_user ON grants (user_id);
CREATE TABLE items (
    id TEXT NOT NULL,
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
    event_time DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    valid_from DOUBLE PRECISION,
    valid_to DOUBLE PRECISION,
    merged_into TEXT,
    confidence DOUBLE PRECISION,
    pinned INTEGER NOT NULL DEFAULT 0,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at DOUBLE PRECISION,
    heat DOUBLE PRECISION,
    sources TEXT NOT NULL DEFAULT '[]',
    segment_id TEXT,
    seq BIGINT NOT NULL,
    tsv TSVECTOR,
    doclen INTEGER NOT NULL DEFAULT 0,
    embedder TEXT,
    dim INTEGER,
    vector VECTOR,
    PRIMARY KEY (id)
);
CREATE UNIQUE INDEX items_external ON items (cube_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX items_cube_seq ON items (cube_id, seq);
CREATE INDEX items_cube_time ON items (cube_id, event_time);
CREATE INDEX items_cube_session ON items (cube_id, session_id, tier);
CREATE INDEX items_cube_segment ON items (cube_id, segment_id);
CREATE INDEX items_cube_speaker ON items (cube_id, lower(speaker));
CREATE INDEX items_user ON items (user_id);
CREATE INDEX items_fts ON items USING gin (tsv);
CREATE TABLE item_versions (
    item_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    snapshot TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    actor TEXT,
    reason TEXT,
    PRIMARY KEY (item_id, version)
);
CREATE TABLE events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL,
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
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'events are append-only';
    END IF;
    IF NEW.seq IS DISTINCT FROM OLD.seq OR NEW.at IS DISTINCT FROM OLD.at
        OR NEW.actor IS DISTINCT FROM OLD.actor OR NEW.cube_id IS DISTINCT FROM OLD.cube_id
        OR NEW.item_id IS DISTINCT FROM OLD.item_id OR NEW.op IS DISTINCT FROM OLD.op
        OR NEW.version IS DISTINCT FROM OLD.version
        OR (NEW.before IS NOT NULL AND NEW.before IS DISTINCT FROM OLD.before)
        OR (NEW.after IS NOT NULL AND NEW.after IS DISTINCT FROM OLD.after)
        OR (NEW.reason IS NOT NULL AND NEW.reason IS DISTINCT FROM OLD.reason) THEN
        RAISE EXCEPTION 'events are append-only (only erasure may blank their payloads)';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_append_only();
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    cube_id TEXT,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    dedupe_key TEXT UNIQUE,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    run_after DOUBLE PRECISION NOT NULL,
    lease_until DOUBLE PRECISION,
    error TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
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
    size_bytes BIGINT,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX artifacts_cube ON artifacts (cube_id, kind);
CREATE TABLE llm_usage (
    cube_id TEXT PRIMARY KEY,
    calls BIGINT NOT NULL DEFAULT 0,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    updated_at DOUBLE PRECISION NOT NULL
)
"""

_V2 = """
CREATE TABLE llm_usage_daily (
    cube_id TEXT NOT NULL,
    day TEXT NOT NULL,
    calls BIGINT NOT NULL DEFAULT 0,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (cube_id, day)
)
"""

# An item may expire (memory.expiry); the sweep reads a partial index of the items that do.
_V3 = """
ALTER TABLE items ADD COLUMN expires_at DOUBLE PRECISION;
CREATE INDEX items_expiry ON items (expires_at) WHERE expires_at IS NOT NULL
"""

# Tool, skill and image memory: new item types and an artifact kind widen two CHECKs.
_V4 = """
ALTER TABLE items DROP CONSTRAINT items_type_check;
ALTER TABLE items ADD CONSTRAINT items_type_check CHECK (type IN
    ('turn', 'segment', 'fact', 'profile', 'preference', 'knowledge', 'chunk',
     'tool', 'tool_call', 'skill', 'image'));
ALTER TABLE artifacts DROP CONSTRAINT artifacts_kind_check;
ALTER TABLE artifacts ADD CONSTRAINT artifacts_kind_check
    CHECK (kind IN ('kv_cache', 'lora', 'image'))
"""

# Item keys name the cube, so a sharded PostgreSQL can distribute items and versions by cube_id
# (a unique key of a distributed table must hold the distribution column).  Versions take their
# item's cube; a version whose item is gone keeps the cube its snapshot names.  The plain index
# on items (id) serves the one query that names no cube: which cube holds an item (item_cubes).
_V5 = """
ALTER TABLE item_versions ADD COLUMN cube_id TEXT;
UPDATE item_versions v SET cube_id = i.cube_id FROM items i WHERE i.id = v.item_id;
UPDATE item_versions SET cube_id = snapshot::json->>'cube_id' WHERE cube_id IS NULL;
ALTER TABLE item_versions ALTER COLUMN cube_id SET NOT NULL;
ALTER TABLE item_versions DROP CONSTRAINT item_versions_pkey;
ALTER TABLE item_versions ADD CONSTRAINT item_versions_pkey
    PRIMARY KEY (cube_id, item_id, version);
ALTER TABLE items DROP CONSTRAINT items_pkey;
ALTER TABLE items ADD CONSTRAINT items_pkey PRIMARY KEY (cube_id, id);
CREATE INDEX items_id ON items (id)
"""

#: version → (name, SQL statements separated by ";\n" at the end of a line).
MIGRATIONS: dict[int, tuple[str, str]] = {
    1: ("data model", _V1),
    2: ("llm usage per day", _V2),
    3: ("item expiry", _V3),
    4: ("tool, skill and image memory", _V4),
    5: ("item keys by cube", _V5),
}
LATEST = max(MIGRATIONS)


def statements(script: str) -> list[str]:
    """The statements of ``script`` (split at a ``;`` that ends a line outside a ``$$`` body)."""
    found, current, in_body = [], [], False
    for line in script.strip().splitlines():
        current.append(line)
        if line.count("$$") % 2:
            in_body = not in_body
        if line.rstrip().endswith(";") and not in_body:
            found.append("\n".join(current).rstrip().rstrip(";"))
            current = []
    if "".join(current).strip():
        found.append("\n".join(current))
    return found


def current_version(conn: Any) -> int:
    """The database's schema version (0 when it has no memstrata tables)."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]
    if not exists:
        return 0
    return int(
        conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]
    )


def migrate(conn: Any) -> list[int]:
    """Apply the pending migrations on ``conn`` inside its open transaction; return them."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
        " name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
    )
    applied = []
    for version in range(current_version(conn) + 1, LATEST + 1):
        name, script = MIGRATIONS[version]
        for statement in statements(script):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
            (version, name, time.time()),
        )
        applied.append(version)
    return applied


def hnsw_index(dim: int) -> str | None:
    """The statement creating the HNSW index for vectors of width ``dim`` (None past the limit).

    Partial on ``dim`` with the column cast to ``vector(dim)``: a search of that width orders by
    the same expression, so the planner can use it.
    """
    if not 0 < dim <= HNSW_MAX_DIM:
        return None
    return (
        f"CREATE INDEX IF NOT EXISTS items_hnsw_{dim} ON items USING hnsw "
        f"((vector::vector({dim})) vector_cosine_ops) WHERE dim = {dim}"
    )
