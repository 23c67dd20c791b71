"""``memstrata demo``: the Quickstart's first use, on a sample conversation shipped in the package."""

from __future__ import annotations

import contextlib
import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import click

from memstrata.cli.app import emit, options
from memstrata.cli.render import short, table, who
from memstrata.errors import AlreadyExists
from memstrata.memory.system import MemoryOS

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
    with contextlib.suppress(AlreadyExists):
        memory.create_user(DEMO_USER, name="Demo user")
    with contextlib.suppress(AlreadyExists):
        memory.create_cube("Maya and Tomás", owner=DEMO_USER, cube_id=DEMO_CUBE)
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


def demo_lines(
    kept: str | None, added: list[list[str]], results: list[dict[str, Any]]
) -> list[str]:
    count = sum(map(len, added))
    where = kept or "a temporary database (removed afterwards)"
    lines = [f"Added a sample conversation ({count} messages in {len(added)} sessions) to {where}."]
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
    again = f"--db {kept}" if kept else "--db demo.db"
    return [*lines, "", f'Try: memstrata {again} search "Where did Maya go cycling?" --user demo']


def temporary_db(stack: contextlib.ExitStack) -> str:
    """A database path in a new temporary directory, removed when ``stack`` closes."""
    folder = stack.enter_context(tempfile.TemporaryDirectory(ignore_cleanup_errors=True))
    return str(Path(folder) / "demo.db")


@click.command()
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    help="Keep the demo in this file  [default: the global --db, else a temporary file]",
)
def demo(db_path: str | None) -> None:
    """Ingest a sample conversation, then run a few searches and show the top 3 hits of each.

    Writes user and cube ``demo``; without any --db the database is temporary (MEMSTRATA_DB is
    deliberately not used, so a demo never lands in your real memory).
    """
    given = options()
    kept = db_path or given.db
    with contextlib.ExitStack() as stack:
        memory = stack.enter_context(given.open(kept or temporary_db(stack)))
        added = ingest_sample(memory)
        results = [demo_search(memory, query, filters) for query, filters in DEMO_SEARCHES]
        emit(
            {"db": kept, "added": added, "searches": results},
            demo_lines(kept, added, results),
        )
