"""The ADK adapter against the real google-adk: ``MemstrataMemoryService`` runs the same script
as ADK's ``InMemoryMemoryService`` with equal results (a search's ranking aside), keeps one
user's and one app's memories from another's, and the docs example (remembered in one session,
used in another, through ADK's ``Runner`` and ``preload_memory``) runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memstrata import AsyncMemoryOS, MemoryOS
from memstrata.errors import PermissionDenied, ValidationError
from tests.integrations.frameworks import framework, run_example

framework("google.adk.memory", "adk")

from google.adk.events.event import Event  # noqa: E402
from google.adk.memory import BaseMemoryService, InMemoryMemoryService  # noqa: E402
from google.adk.memory.memory_entry import MemoryEntry  # noqa: E402
from google.adk.sessions.session import Session  # noqa: E402
from google.genai import types  # noqa: E402

from memstrata.integrations.adk import MemstrataMemoryService  # noqa: E402

pytestmark = pytest.mark.engines("sqlite", "postgres")


def event(author: str, text: str, ts: float, event_id: str) -> Event:
    role = "user" if author == "user" else "model"
    content = types.Content(role=role, parts=[types.Part(text=text)])
    return Event(id=event_id, author=author, content=content, timestamp=ts, invocation_id="i1")


MONDAY = [
    event("user", "Ann lives in Porto", 1_700_000_000.0, "e1"),
    event("helper", "Noted: Ann lives in Porto", 1_700_000_001.5, "e2"),
    Event(id="e3", author="helper", invocation_id="i1", timestamp=1_700_000_002.0),  # no content
    event("user", "Ann's cat is called Miso", 1_700_000_003.0, "e4"),
]
TUESDAY = [event("user", "Ann drinks green tea", 1_700_086_400.0, "e5")]


def found(response: Any) -> list[tuple[Any, ...]]:
    """A search's memories, comparable across services whatever their order."""
    return sorted(
        (m.id, m.author, m.timestamp, m.content.model_dump(), m.custom_metadata)
        for m in response.memories
    )


async def script(
    service: BaseMemoryService, *, user: str = "ann", stranger: str | None = "bob"
) -> list[Any]:
    """A script of ADK memory calls as ``user`` (and a search as ``stranger``, when given);
    what each returns, comparable across services."""
    out: list[Any] = []
    search = service.search_memory
    out.append(found(await search(app_name="app", user_id=user, query="Ann")))
    session = Session(id="monday", app_name="app", user_id=user, events=MONDAY)
    await service.add_session_to_memory(session)
    await service.add_session_to_memory(session)  # again: nothing twice
    await service.add_events_to_memory(
        app_name="app", user_id=user, events=TUESDAY, session_id="tuesday"
    )
    out.append(found(await search(app_name="app", user_id=user, query="Ann")))
    out.append(found(await search(app_name="other-app", user_id=user, query="Ann")))
    if stranger is not None:
        out.append(found(await search(app_name="app", user_id=stranger, query="Ann")))
    await service.delete_memory(app_name="app", user_id=user, memory_id="e1")
    await service.delete_memory(app_name="app", user_id=user, memory_id="never-there")
    await service.delete_memory(app_name="app", user_id=user, memory_id=None)
    out.append(found(await search(app_name="app", user_id=user, query="Ann")))
    await service.add_session_to_memory(session)  # a deleted event is not added again
    out.append(found(await search(app_name="app", user_id=user, query="Ann")))
    return out


def test_the_service_answers_as_adks_in_memory_service(mos: MemoryOS) -> None:
    ours = asyncio.run(script(MemstrataMemoryService(mos)))
    assert ours == asyncio.run(script(InMemoryMemoryService()))
    assert [m[0] for m in ours[1]] == ["e1", "e2", "e4", "e5"]


def test_events_are_turns_of_the_session(mos: MemoryOS) -> None:
    service = MemstrataMemoryService(mos)
    session = Session(id="a session/with odd chars", app_name="app", user_id="ann", events=MONDAY)
    asyncio.run(service.add_session_to_memory(session))
    cube = mos.default_cube("ann").cube_id
    turns = mos.list_memories(cube, user_id="ann")
    assert [(t.role, t.speaker, t.text) for t in turns] == [
        ("user", "ann", "Ann lives in Porto"),
        ("assistant", "helper", "Noted: Ann lives in Porto"),
        ("user", "ann", "Ann's cat is called Miso"),
    ]
    assert {t.session_id for t in turns} == {turns[0].session_id}
    assert str(turns[0].session_id).startswith("adk-")
    assert turns[0].event_time.timestamp() == 1_700_000_000.0


def test_a_search_ranks_by_meaning(mos: MemoryOS) -> None:
    service = MemstrataMemoryService(mos, k=2)
    session = Session(id="monday", app_name="app", user_id="ann", events=MONDAY + TUESDAY)
    asyncio.run(service.add_session_to_memory(session))
    got = asyncio.run(service.search_memory(app_name="app", user_id="ann", query="Which city?"))
    assert len(got.memories) == 2
    assert "Porto" in str(got.memories[0].content.parts[0].text)  # type: ignore[index]


def test_add_memory_and_an_async_memory(mos: MemoryOS) -> None:
    async def run() -> list[Any]:
        async with AsyncMemoryOS(mos) as amos:
            service = MemstrataMemoryService(amos)
            entry = MemoryEntry(
                content=types.Content(role="user", parts=[types.Part(text="Ann is vegetarian")]),
                author="user",
                custom_metadata={"source": "form"},
            )
            await service.add_memory(app_name="app", user_id="ann", memories=[entry, entry])
            response = await service.search_memory(app_name="app", user_id="ann", query="diet")
            memory_id = response.memories[0].id
            await service.delete_memory(app_name="app", user_id="ann", memory_id=memory_id)
            after = await service.search_memory(app_name="app", user_id="ann", query="diet")
            return [response.memories, after.memories]

    before, after = asyncio.run(run())
    assert len(before) == 1 and before[0].custom_metadata == {"source": "form"}
    assert after == []


def test_delete_erases_for_good(mos: MemoryOS) -> None:
    service = MemstrataMemoryService(mos)
    pin = [event("user", "my PIN is 4321", 1_700_000_000.0, "p1")]
    asyncio.run(service.add_events_to_memory(app_name="app", user_id="ann", events=pin))
    asyncio.run(service.delete_memory(app_name="app", user_id="ann", memory_id="p1"))
    cube = mos.default_cube("ann").cube_id
    every = mos.list_memories(
        cube, user_id="ann", filters={"status": ["deleted", "generated", "activated", "frozen"]}
    )
    assert not any("4321" in i.text or "4321" in str(i.metadata) for i in every)


def test_one_users_memory_never_reads_anothers(mos: MemoryOS) -> None:
    service = MemstrataMemoryService(mos)
    pin = [event("user", "Ann's PIN is 4321", 1_700_000_000.0, "p1")]
    asyncio.run(service.add_events_to_memory(app_name="app", user_id="ann", events=pin))
    got = asyncio.run(service.search_memory(app_name="app", user_id="bob", query="PIN 4321"))
    assert got.memories == []
    asyncio.run(service.delete_memory(app_name="app", user_id="bob", memory_id="p1"))
    got = asyncio.run(service.search_memory(app_name="app", user_id="ann", query="PIN"))
    assert [m.id for m in got.memories] == ["p1"]
    shared = MemstrataMemoryService(mos, cube_id=mos.default_cube("ann").cube_id)
    with pytest.raises(PermissionDenied):
        asyncio.run(shared.search_memory(app_name="app", user_id="bob", query="PIN"))


def test_bad_input_writes_nothing(mos: MemoryOS) -> None:
    service = MemstrataMemoryService(mos)
    events = [event("user", "fine", 1.0, "a"), event("user", "x" * 40_000, 2.0, "b")]
    with pytest.raises(ValidationError):
        asyncio.run(service.add_events_to_memory(app_name="app", user_id="ann", events=events))
    assert mos.list_memories(mos.default_cube("ann").cube_id, user_id="ann") == []
    with pytest.raises(ValidationError):
        MemstrataMemoryService(mos, k=0)


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens memory.db in the working directory
    for _ in range(2):  # run again on the same file: it must work the second time too
        run_example("adk.md")
