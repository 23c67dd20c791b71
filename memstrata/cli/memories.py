"""``memstrata add | search | chat | get | history | update | delete``: memory items."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

import click

from memstrata.cli import render
from memstrata.cli.app import emit, options, reason_option, user_option, with_memory
from memstrata.memory.system import MemoryOS

#: The ``--filter`` keys besides ``metadata.KEY`` (see ``search``).
FILTER_KEYS = ("session_id", "tier", "type", "status", "since", "until")
#: The filter keys that may repeat (their values form a list).
LIST_FILTERS = ("tier", "type", "status")


def _json_or_text(value: str) -> object:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _parse_filters(
    ctx: click.Context, param: click.Parameter, pairs: tuple[str, ...]
) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a filter mapping (tier/type/status may repeat; see ``search``)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE")
        if key.startswith("metadata."):
            out.setdefault("metadata", {})[key.removeprefix("metadata.")] = _json_or_text(value)
        elif key in LIST_FILTERS:
            out.setdefault(key, []).append(value)
        elif key not in FILTER_KEYS:
            known = ", ".join([*FILTER_KEYS, "metadata.KEY"])
            raise click.BadParameter(f"unknown filter key {key!r} (known: {known})")
        elif key in out:
            raise click.BadParameter(f"filter key {key!r} given twice")
        else:
            out[key] = value
    return out


def _messages(text: str | None, file: IO[str] | None, **fields: str | None) -> Any:
    """What ``MemoryOS.add`` gets: TEXT as one message with ``fields``, or the --file's JSON.

    The core validates the result; this only refuses ambiguous or unreadable input.
    """
    given = {key: value for key, value in fields.items() if value is not None}
    if (text is None) == (file is None):
        raise click.UsageError("give either TEXT or --file")
    if file is None:
        return [{"content": text, **given}] if given else text
    if given:
        raise click.UsageError("--role, --name, --timestamp and --id apply to TEXT, not --file")
    try:
        return json.load(file)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="'--file'") from exc


@click.command()
@click.argument("text", required=False)
@user_option
@click.option(
    "--cube", "cube_id", required=True, metavar="CUBE", help="Cube to add to (needs write)."
)
@click.option("--session", "session_id", metavar="ID", help="Session id for the new items.")
@click.option("--role", metavar="ROLE", help="Role of TEXT's speaker  [default: user]")
@click.option("--name", metavar="NAME", help="Speaker of TEXT.")
@click.option("--timestamp", metavar="TIME", help="When TEXT was said (ISO 8601)  [default: now]")
@click.option(
    "--id", "external_id", metavar="ID", help="Your own id for TEXT (re-adding it is a no-op)."
)
@click.option(
    "--file",
    type=click.File("r", encoding="utf-8"),
    metavar="FILE",
    help="JSON list of messages (role, content, name, timestamp, id, metadata); - for stdin.",
)
@click.option(
    "--document",
    type=click.Path(exists=True, dir_okay=False),
    metavar="PATH",
    help="A .txt, .md, .json or .pdf file, stored as chunks.",
)
@with_memory
def add(
    memory: MemoryOS,
    text: str | None,
    user_id: str,
    cube_id: str,
    session_id: str | None,
    role: str | None,
    name: str | None,
    timestamp: str | None,
    external_id: str | None,
    file: IO[str] | None,
    document: str | None,
) -> None:
    """Remember TEXT (or every message of --file, or the chunks of --document); prints the new
    item ids in order."""
    if document is not None:
        if text is not None or file is not None:
            raise click.UsageError("give one of TEXT, --file or --document")
        path = Path(document)
        ids = memory.add_document(
            path.read_bytes(), filename=path.name, user_id=user_id, cube_id=cube_id,
            session_id=session_id,
        )  # fmt: skip
        emit(ids, ids)
        return
    messages = _messages(text, file, role=role, name=name, timestamp=timestamp, id=external_id)
    ids = memory.add(messages, user_id=user_id, cube_id=cube_id, session_id=session_id)
    emit(ids, ids)


@click.command()
@click.argument("query")
@user_option
@click.option(
    "--cube",
    "cube_ids",
    multiple=True,
    metavar="CUBE",
    help="Cube to search (repeatable)  [default: all readable]",
)
@click.option("--top-k", default=10, metavar="N", show_default=True, help="Number of hits.")
@click.option(
    "--filter",
    "filters",
    multiple=True,
    callback=_parse_filters,
    metavar="KEY=VALUE",
    help="Repeatable. KEY: session_id, tier, type, status, since, until (ISO 8601), or "
    "metadata.KEY for equality (VALUE parsed as JSON when it parses).",
)
@with_memory
def search(
    memory: MemoryOS,
    query: str,
    user_id: str,
    cube_ids: tuple[str, ...],
    top_k: int,
    filters: dict[str, Any],
) -> None:
    """Hybrid (keyword + vector) search for QUERY, best first: score, id, when, who, text."""
    hits = memory.search(
        query, user_id=user_id, cube_ids=list(cube_ids) or None, top_k=top_k, filters=filters
    )
    emit(hits, render.table(map(render.hit_row, hits)))


@click.command()
@click.argument("query")
@user_option
@click.option(
    "--cube", "cube_id", required=True, metavar="CUBE", help="Cube that keeps the exchange."
)
@click.option("--session", "session_id", metavar="ID", help="Session of the exchange.")
@click.option("--budget", default=1000, show_default=True, metavar="TOKENS", help="Context size.")
@click.option("--stream/--no-stream", default=True, show_default=True, help="Print as it comes.")
@with_memory
def chat(
    memory: MemoryOS,
    query: str,
    user_id: str,
    cube_id: str,
    session_id: str | None,
    budget: int,
    stream: bool,
) -> None:
    """Ask the chat model QUERY with memory as context; the exchange is remembered.

    Needs a chat model (MEMSTRATA_LLM_PROVIDER=openai|local, see docs/configuration.md).
    """
    kwargs: dict[str, Any] = {"user_id": user_id, "cube_id": cube_id, "session_id": session_id}
    if stream and not options().as_json:
        for piece in memory.chat_stream(query, budget_tokens=budget, **kwargs):
            click.echo(piece, nl=False)
        click.echo()
        return
    reply = memory.chat(query, budget_tokens=budget, **kwargs)
    emit({"answer": reply.answer, "ids": reply.ids}, [reply.answer])


@click.command()
@click.argument("item_id")
@user_option
@with_memory
def get(memory: MemoryOS, item_id: str, user_id: str) -> None:
    """Show the current version of ITEM_ID."""
    item = memory.get(item_id, user_id=user_id)
    emit(item, render.item_lines(item))


@click.command()
@click.argument("item_id")
@user_option
@with_memory
def history(memory: MemoryOS, item_id: str, user_id: str) -> None:
    """Every version of ITEM_ID, oldest first: version, when, who, status, text."""
    versions = memory.history(item_id, user_id=user_id)
    emit(versions, render.table(map(render.version_row, versions)))


@click.command()
@click.argument("item_id")
@user_option
@click.option("--text", required=True, help="The new text.")
@reason_option
@with_memory
def update(memory: MemoryOS, item_id: str, user_id: str, text: str, reason: str | None) -> None:
    """Write a new version of ITEM_ID with new text."""
    item = memory.update(item_id, user_id=user_id, text=text, reason=reason)
    emit(item, render.item_lines(item))


@click.command()
@click.argument("item_id")
@user_option
@reason_option
@with_memory
def delete(memory: MemoryOS, item_id: str, user_id: str, reason: str | None) -> None:
    """Soft-delete ITEM_ID: out of search, history kept."""
    item = memory.delete(item_id, user_id=user_id, reason=reason)
    emit(item, [f"deleted {item.id} (version {item.version})"])


#: Every command of this module, as ``memstrata.cli`` adds them.
COMMANDS = (add, search, chat, get, history, update, delete)
