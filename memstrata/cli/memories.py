"""``memstrata add | search | chat | get | history | update | delete | end-task | image``: memory
items, the end of an agent's task (skill memory) and the images messages sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

import click

from memstrata.cli import render
from memstrata.cli.app import emit, options, reason_option, user_option, with_memory
from memstrata.memory.kinds import SEARCH_INCLUDE
from memstrata.memory.skills import OUTCOMES
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
    return _json_file(file, "--file")


def _json_file(file: IO[str], option: str) -> Any:
    """The JSON an option's file holds (the core validates what it is)."""
    try:
        return json.load(file)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=f"'{option}'") from exc


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
    help="JSON list of messages (role, content, name, timestamp, id, metadata; OpenAI tool_calls, "
    "tool results and content parts); - for stdin.",
)
@click.option(
    "--tools",
    type=click.File("r", encoding="utf-8"),
    metavar="FILE",
    help="JSON list of OpenAI tool definitions, stored as the tools' schemas.",
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
    tools: IO[str] | None,
    document: str | None,
) -> None:
    """Remember TEXT (or every message of --file, or the chunks of --document); prints the new
    item ids in order."""
    if document is not None:
        if text is not None or file is not None or tools is not None:
            raise click.UsageError("give one of TEXT, --file or --document")
        path = Path(document)
        ids = memory.add_document(
            path.read_bytes(), filename=path.name, user_id=user_id, cube_id=cube_id,
            session_id=session_id,
        )  # fmt: skip
        emit(ids, ids)
        return
    messages = _messages(text, file, role=role, name=name, timestamp=timestamp, id=external_id)
    definitions = None if tools is None else _json_file(tools, "--tools")
    ids = memory.add(
        messages, user_id=user_id, cube_id=cube_id, session_id=session_id, tools=definitions
    )
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
@click.option(
    "--include",
    multiple=True,
    type=click.Choice(SEARCH_INCLUDE),
    help="Repeatable. A state to search too (merged, archived, frozen), or the kinds of memory "
    "to search: text (the default), tool (tool schemas and calls), skill.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Under each hit, the parts of its score: each channel's rank and share, then each "
    "boost or penalty with its reason (in --json: each hit's parts).",
)
@with_memory
def search(
    memory: MemoryOS,
    query: str,
    user_id: str,
    cube_ids: tuple[str, ...],
    top_k: int,
    filters: dict[str, Any],
    include: tuple[str, ...],
    explain: bool,
) -> None:
    """Hybrid (keyword + vector) search for QUERY, best first: score, id, when, who, text."""
    hits = memory.search(
        query, user_id=user_id, cube_ids=list(cube_ids) or None, top_k=top_k, filters=filters,
        include=list(include) or None,
    )  # fmt: skip
    emit(render.hits_json(hits, explain=explain), render.hit_lines(hits, explain=explain))


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


@click.command("end-task")
@click.argument("session_id")
@user_option
@click.option("--cube", "cube_id", required=True, metavar="CUBE", help="Cube (needs write).")
@click.option(
    "--outcome",
    type=click.Choice(OUTCOMES),
    default="success",
    show_default=True,
    help="success: learn a skill from the session; failure: demote the skills it followed.",
)
@click.option("--goal", metavar="TEXT", help="What the task was for  [default: its first turn]")
@click.option(
    "--skill", "skill_ids", multiple=True, metavar="ID", help="On failure: a skill it followed."
)
@with_memory
def end_task(
    memory: MemoryOS,
    session_id: str,
    user_id: str,
    cube_id: str,
    outcome: str,
    goal: str | None,
    skill_ids: tuple[str, ...],
) -> None:
    """Say how the agent's task of SESSION_ID ended (skill memory); prints the skills written."""
    skills = memory.end_task(
        user_id=user_id, cube_id=cube_id, session_id=session_id, outcome=outcome, goal=goal,
        skill_ids=list(skill_ids) or None,
    )  # fmt: skip
    lines = [f"{s.id}  v{s.version}  {s.status}  {render.short(s.text)}" for s in skills]
    emit(skills, lines or ["no skill: the session made no successful tool call"])


@click.command("image")
@click.argument("item_id")
@user_option
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    metavar="PATH",
    help="The file to write the image to (replaced if it exists).",
)
@with_memory
def image(memory: MemoryOS, item_id: str, user_id: str, out: str) -> None:
    """Write the image a message sent (an item of type image) to a file."""
    media, data = memory.get_image(item_id, user_id=user_id)
    Path(out).write_bytes(data)
    emit({"path": out, "media_type": media, "bytes": len(data)}, [f"{media}, {len(data)} bytes"])


#: Every command of this module, as ``memstrata.cli`` adds them.
COMMANDS = (add, search, chat, get, history, update, delete, end_task, image)
