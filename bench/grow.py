"""Grow a benchmark cube to a million turns by copying it, without embedding anything.

Run from the repository root, in the project's virtual environment, on a copy of a SQLite
database that ``bench/core.py`` built (``--no-tiers``: one cube of turns and profile items)::

    cp /tmp/b100k.db /tmp/b1m.db
    python bench/grow.py --db /tmp/b1m.db --n 1000000
    python bench/core.py --embedder e5 --n 1000000 --no-tiers --db /tmp/b1m.db --queries 100 --adds 0 --out core-1m.json

Embedding a million turns with e5 takes days on two cores, so each copy of the cube's items is
made in SQL: every item again with a new id, its session ids suffixed with the copy's number,
its times moved past the cube's last (so each copy is a later stretch of the same life), its
``merged_into`` and ``sources`` pointing at the copy's own items, its full-text row copied, and
its vector the original's plus Gaussian noise of σ ``--noise`` per coordinate, normalised (as
``bench/crossover.py`` grows 1M vectors).  Copies are added until the cube holds ``--n``
items (the last one partial), counted as ``bench/core.py --n`` counts them.  Versions and
events are not copied (a search reads neither).

What this makes is a cube whose *costs* are real (ten times the rows, postings and vectors) but
whose texts repeat every 100k turns and whose dense rankings mean nothing: ``bench/core.py``'s
latency and floor figures hold, its recall figures do not.  The vector index, if any, is left as
it was: ``bench/core.py`` extends it before it measures.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from collections.abc import Sequence

import numpy as np

from memstrata.model import new_id

#: items copied per transaction
BATCH = 20_000


def _remap_sources(text: str, ids: dict[str, str]) -> str:
    if text == "[]":
        return text
    sources = json.loads(text)
    for source in sources:
        if source.get("item_id") in ids:
            source["item_id"] = ids[source["item_id"]]
    return json.dumps(sources, ensure_ascii=False, separators=(",", ":"))


def grow(db: str, target: int, noise: float, seed: int) -> int:
    """Copy the cube's items until it holds ``target`` items (as ``bench/core.py`` counts a
    cube's size: turns and the profile items made from them); the number of items added."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    columns = [r[1] for r in conn.execute("PRAGMA table_info(items)") if r[1] != "rid"]
    held = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    if held == 0:
        raise SystemExit(f"{db}: no items to copy")
    first, last = conn.execute("SELECT min(event_time), max(event_time) FROM items").fetchone()
    span = last - first + 86_400.0
    originals = [r[0] for r in conn.execute("SELECT rid FROM items ORDER BY rid")]
    rng = np.random.default_rng(seed)
    at = {c: n for n, c in enumerate(columns)}
    added, copy = 0, 0
    while held < target:
        copy += 1
        ids: dict[str, str] = {}
        floor_rid = conn.execute("SELECT max(rid) FROM items").fetchone()[0]
        for start in range(0, len(originals), BATCH):
            if held >= target:
                break
            rids = originals[start : start + BATCH]
            got = _copy_batch(conn, rids, columns, at, copy, span, ids, target - held, noise, rng)
            added += got
            held += got
            print(f"  … copy {copy}: {held:,} items", file=sys.stderr, flush=True)
        _remap_merged(conn, ids, floor_rid)
    seq = conn.execute("SELECT max(seq) FROM items").fetchone()[0]
    conn.execute("UPDATE counters SET value = ? WHERE name = 'item_seq'", (seq,))
    conn.commit()
    conn.close()
    return added


def _copy_batch(
    conn: sqlite3.Connection,
    rids: Sequence[int],
    columns: list[str],
    at: dict[str, int],
    copy: int,
    span: float,
    ids: dict[str, str],
    room: int,
    noise: float,
    rng: np.random.Generator,
) -> int:
    """Copy the items of ``rids`` (at most ``room`` of them); how many were added."""
    marks = ",".join("?" * len(rids))
    rows = conn.execute(
        f"SELECT rid, {', '.join(columns)} FROM items WHERE rid IN ({marks}) ORDER BY rid", rids
    ).fetchall()
    seq = conn.execute("SELECT max(seq) FROM items").fetchone()[0]
    out, olds = [], []
    for row in rows:
        values = list(row[1:])
        if len(out) >= room:
            break
        old_id = values[at["id"]]
        ids[old_id] = values[at["id"]] = new_id()
        for name in ("session_id", "segment_id"):
            if values[at[name]] is not None:
                values[at[name]] = f"{values[at[name]]}-{copy}"
        for name in ("event_time", "created_at", "updated_at", "valid_from", "valid_to"):
            if values[at[name]] is not None:
                values[at[name]] += copy * span
        values[at["sources"]] = _remap_sources(values[at["sources"]], ids)
        if values[at["external_id"]] is not None:
            values[at["external_id"]] = f"{values[at['external_id']]}-{copy}"
        seq += 1
        values[at["seq"]] = seq
        out.append(values)
        olds.append(row[0])
    insert = f"INSERT INTO items ({', '.join(columns)}) VALUES ({','.join('?' * len(columns))})"
    with conn:
        for old_rid, values in zip(olds, out, strict=True):
            new_rid = conn.execute(insert, values).lastrowid
            body = conn.execute("SELECT c0, c1 FROM items_fts_content WHERE id = ?", (old_rid,))
            found = body.fetchone()
            if found is not None:
                conn.execute("INSERT INTO items_fts (rowid, body, cube) VALUES (?, ?, ?)",
                             (new_rid, *found))  # fmt: skip
            vec = conn.execute("SELECT embedder, vector FROM vectors WHERE rid = ?", (old_rid,))
            stored = vec.fetchone()
            if stored is not None:
                vector = np.frombuffer(stored[1], np.float32)
                vector = vector + rng.normal(0.0, noise, vector.shape).astype(np.float32)
                vector = (vector / np.linalg.norm(vector)).astype(np.float32)
                conn.execute("INSERT INTO vectors (rid, embedder, vector) VALUES (?, ?, ?)",
                             (new_rid, stored[0], vector.tobytes()))  # fmt: skip
    return len(out)


def _remap_merged(conn: sqlite3.Connection, ids: dict[str, str], floor_rid: int) -> None:
    """Point the copy's superseded items (rows past ``floor_rid``) at the copy's successors
    (a successor is newer, so usually copied after the item it replaced)."""
    with conn:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS remap (old TEXT PRIMARY KEY, new TEXT)")
        conn.execute("DELETE FROM remap")
        conn.executemany("INSERT INTO remap VALUES (?, ?)", ids.items())
        conn.execute(
            "UPDATE items SET merged_into = (SELECT new FROM remap WHERE old = merged_into) "
            "WHERE rid > ? AND merged_into IN (SELECT old FROM remap)",
            (floor_rid,),
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--db", required=True, help="the SQLite file to grow (a copy: it is changed)"
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="items to reach (1,000,000)")
    parser.add_argument("--noise", type=float, default=0.02, help="σ per vector coordinate")
    parser.add_argument("--seed", type=int, default=7, help="of the noise (7)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    added = grow(args.db, args.n, args.noise, args.seed)
    print(f"{added:,} items added in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
