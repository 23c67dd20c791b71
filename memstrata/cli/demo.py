"""``memstrata demo``: the Quickstart's first use, on a sample conversation shipped in the package."""

from __future__ import annotations

import json
import shlex
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import click

from memstrata.cli.app import emit, options
from memstrata.cli.render import short, table, who
from memstrata.memory.system import MemoryOS

DEMO_DB = "demo.db"
DEMO_USER = "demo"
DEMO_CUBE = "demo"
DEMO_SEARCHES: tuple[tuple[str, dict[str, str]], ...] = (
    ("What is Maya's dog called?", {}),
    ("When does Tomás start teaching?", {}),
    ("What does Tomás teach now?", {"since": "2024-09-01"}),
    ("米线", {}),
)


def ingest_sample(memory: MemoryOS) -> list[list[str]]:
    """Add the packaged sample conversation as user/cube ``demo``; the item ids, per session.

    Idempotent: the user and cube are reused and the messages carry ids, so re-running is safe.
    """
    data = resources.files("memstrata").joinpath("data/sample_conversation.json")
    sessions = json.loads(data.read_text(encoding="utf-8"))["sessions"]
    memory.create_user(DEMO_USER, name="Demo user", exist_ok=True)
    memory.create_cube("Maya and Tomás", owner=DEMO_USER, cube_id=DEMO_CUBE, exist_ok=True)
    ids = []
    for session in sessions:
        added = memory.add(
            session["messages"],
            user_id=DEMO_USER,
            cube_id=DEMO_CUBE,
            session_id=session["session_id"],
        )
        ids.append(added)
    return ids


def demo_search(memory: MemoryOS, query: str, filters: dict[str, str]) -> dict[str, Any]:
    hits = memory.search(query, user_id=DEMO_USER, filters=filters, top_k=3)
    return {"query": query, "filters": filters, "hits": hits}


def demo_lines(kept: str, added: list[list[str]], results: list[dict[str, Any]]) -> list[str]:
    count = sum(map(len, added))
    lines = [f"Added a sample conversation ({count} messages in {len(added)} sessions) to {kept}."]
    for result in results:
        scope = "".join(f"  [{key} {value}]" for key, value in result["filters"].items())
        lines += ["", f"search: {result['query']}{scope}"]
        rows = (
            (
                f"{h.score:.4f}",
                who(h.item),
                h.item.event_time.date().isoformat(),
                short(h.item.text),
            )
            for h in result["hits"]
        )
        lines += ["  " + line for line in table(rows)]
    try_it = f'{invoked()} --db {shlex.quote(kept)} search "Where did Maya go cycling?" --user demo'
    return [*lines, "", f"Try: {try_it}"]


def invoked() -> str:
    """The command as this process was started, to be typed again: the console script by the
    path it was called with (``.venv/bin/memstrata``: it may not be on PATH), else
    ``python -m memstrata`` with this interpreter."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "memstrata":
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m memstrata"


@click.command()
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    help=f"Keep the demo in this file  [default: the global --db, else {DEMO_DB}]",
)
def demo(db_path: str | None) -> None:
    """Ingest a sample conversation, then run a few searches and show the top 3 hits of each.

    Writes user and cube ``demo`` into ./demo.db (or --db), and prints a command to search it
    again.  MEMSTRATA_DB is deliberately not used, so a demo never lands in your real memory;
    running it again adds nothing (the sample's messages carry ids).
    """
    given = options()
    kept = db_path or given.db or DEMO_DB
    with given.open(kept) as memory:
        added = ingest_sample(memory)
        results = [demo_search(memory, query, filters) for query, filters in DEMO_SEARCHES]
        emit(
            {"db": kept, "added": added, "searches": results},
            demo_lines(kept, added, results),
        )
