"""The CrewAI adapter against the real crewai: ``MemstrataStorage`` runs the same script of
``StorageBackend`` calls as CrewAI's own ``LanceDBStorage`` with equal results (a search's ranking
and scores aside), keeps one user's records from another's, searches by the text of the vectors
its embedder made, and the docs example (a crew remembers a fact in one run and uses it in the
next, its model an OpenAI-compatible fake at the HTTP transport) runs.

crewai cannot share an environment with memstrata's MCP server (it needs ``mcp<2``): CI runs this
module in a second virtual environment (.ci/run), and it is skipped where crewai is absent."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memstrata import AsyncMemoryOS, MemoryOS
from memstrata.client import AsyncClient, Client
from memstrata.errors import PermissionDenied, ValidationError
from tests.integrations.frameworks import framework, run_example
from tests.server.conftest import Account, Server

framework("crewai.memory.storage.backend", "crewai")

from crewai.memory.storage.backend import StorageBackend  # noqa: E402
from crewai.memory.storage.lancedb_storage import LanceDBStorage  # noqa: E402
from crewai.memory.types import MemoryRecord  # noqa: E402

from memstrata.integrations.crewai import MemstrataStorage, RecallingEmbedder  # noqa: E402

pytestmark = pytest.mark.engines("sqlite", "postgres")

T0 = datetime(2026, 3, 1, 9, 0, 0)


def records() -> list[MemoryRecord]:
    """Records of distinct times in nested scopes (none at the root: see the differences)."""
    rows = [
        ("Ann lives in Porto", "/people/ann", ["home"], {"src": "chat"}, 0.9),
        ("Ann's cat is called Miso", "/people/ann/pets", ["pets"], {}, 0.4),
        ("Bob drinks green tea every morning", "/people/bob", ["drink"], {"src": "chat"}, 0.5),
        ("The Q3 launch moved to October", "/company/plans", ["plans", "dates"], {"n": 3}, 0.7),
        ("Standup is at 9:30 on weekdays", "/company", ["dates"], {}, 0.2),
    ]
    return [
        MemoryRecord(
            id=f"r{i}", content=text, scope=scope, categories=cats, metadata=meta,
            importance=imp, created_at=T0 + timedelta(hours=i),
            last_accessed=T0 + timedelta(hours=i), source="crew" if i % 2 else None,
            private=i == 1,
        )
        for i, (text, scope, cats, meta, imp) in enumerate(rows)
    ]  # fmt: skip


def dumped(found: list[MemoryRecord] | None) -> Any:
    return None if found is None else [r.model_dump() for r in found]


def hits(found: list[tuple[MemoryRecord, float]]) -> list[Any]:
    """A search's records, comparable across storages whatever their order and scores."""
    return sorted((r.model_dump_json() for r, _ in found))


def script(storage: StorageBackend, embed: RecallingEmbedder) -> list[Any]:
    """A script of StorageBackend calls; what each returns, comparable across storages."""
    out: list[Any] = [storage.count(), storage.list_records(), storage.list_scopes()]
    batch = records()
    for record, vector in zip(batch, embed([r.content for r in batch]), strict=True):
        record.embedding = vector
    storage.save(batch[:3])
    asyncio.run(storage.asave(batch[3:]))
    out += [storage.count(), storage.count("/people"), storage.count("/people/ann")]
    out += [dumped(storage.list_records()), dumped(storage.list_records("/people", 2, 1))]
    out += [dumped([storage.get_record("r3")]), storage.get_record("missing")]
    out += [storage.list_scopes("/"), storage.list_scopes("/people"), storage.list_scopes("/x")]
    for scope in ("/", "/people", "/company/plans", "/nowhere"):
        out.append(storage.get_scope_info(scope).model_dump())
    out += [storage.list_categories(), storage.list_categories("/company")]
    (query,) = embed(["where does Ann live?"])
    out.append(hits(storage.search(query, limit=50)))
    out.append(hits(storage.search(query, scope_prefix="/people", limit=50)))
    out.append(hits(storage.search(query, categories=["dates", "pets"], limit=50)))
    out.append(hits(storage.search(query, metadata_filter={"src": "chat"}, limit=50)))
    out.append(hits(asyncio.run(storage.asearch(query, scope_prefix="/company", limit=50))))
    changed = batch[0].model_copy(update={"content": "Ann lives in Lisbon", "importance": 1.0})
    storage.update(changed)
    out.append(dumped([storage.get_record("r0")]))
    out.append(storage.delete(record_ids=["r1", "nope"]))
    out.append(storage.delete(categories=["drink"]))
    out.append(asyncio.run(storage.adelete(metadata_filter={"n": 3})))
    out.append(storage.delete(scope_prefix="/company", older_than=T0 + timedelta(hours=5)))
    out += [storage.count(), dumped(storage.list_records())]
    storage.reset("/people")
    out += [storage.count(), dumped(storage.list_records())]
    storage.reset()
    out += [storage.count(), storage.list_records(), storage.list_scopes()]
    return out


def test_the_storage_answers_as_crewais_lancedb_storage(mos: MemoryOS, tmp_path: Path) -> None:
    ours = MemstrataStorage(mos, user_id="ann")
    reference = LanceDBStorage(path=tmp_path / "lance")
    assert script(ours, ours.embedder) == script(reference, ours.embedder)


def test_it_is_a_storage_backend_over_an_async_memory(mos: MemoryOS) -> None:
    async def run() -> list[str]:
        async with AsyncMemoryOS(mos) as amos:
            storage = MemstrataStorage(amos, user_id="ann", name="facts")
            assert isinstance(storage, StorageBackend)
            await storage.asave(records()[:1])
            (query,) = storage.embedder(["Porto"])
            return [r.content for r, _ in await storage.asearch(query)]

    assert asyncio.run(run()) == ["Ann lives in Porto"]
    cube = mos.default_cube("ann").cube_id
    items = mos.list_memories(cube, user_id="ann", filters={"session_id": "facts"})
    assert [i.text for i in items] == ["Ann lives in Porto"]


def test_search_is_ours_by_text_and_scores_are_similarities(mos: MemoryOS) -> None:
    storage = MemstrataStorage(mos, user_id="ann")
    storage.save(records())
    (query,) = storage.embedder(["which city is Ann's home?"])
    found = storage.search(query, limit=2)
    assert found[0][0].content == "Ann lives in Porto" and len(found) == 2
    assert all(0.0 <= score <= 1.0 for _, score in found)
    best = found[0][1]
    assert [r.content for r, _ in storage.search(query, min_score=best)] == ["Ann lives in Porto"]
    # a keyword the dense channel alone would not rank first: the hybrid search does
    (miso,) = storage.embedder(["Miso"])
    assert storage.search(miso, limit=1)[0][0].id == "r1"


def test_a_vector_the_embedder_did_not_make_is_refused(mos: MemoryOS) -> None:
    storage = MemstrataStorage(mos, user_id="ann")
    storage.save(records())
    (vector,) = storage.embedder(["Porto"])
    with pytest.raises(ValidationError, match="embedder"):
        storage.search([x + 0.001 for x in vector])


def test_the_embedders_memory_is_bounded(mos: MemoryOS) -> None:
    embed = RecallingEmbedder(mos.embedder, size=4)
    vectors = embed([f"fact number {i}" for i in range(10)])
    assert embed.text_of(vectors[-1]) == "fact number 9"
    assert embed.text_of(vectors[0]) is None  # forgotten: at most four are kept
    assert len(embed._texts) == 4 and len(embed._vectors) == 4


def test_saving_an_id_again_replaces_it(mos: MemoryOS) -> None:
    """LanceDBStorage would keep both rows; one id is one record here (a new version)."""
    storage = MemstrataStorage(mos, user_id="ann")
    first = records()[0]
    storage.save([first])
    storage.save([first.model_copy(update={"content": "Ann lives in Braga"})])
    assert [r.content for r in storage.list_records()] == ["Ann lives in Braga"]
    item = mos.list_memories(mos.default_cube("ann").cube_id, user_id="ann")[0]
    assert item.version == 2


def test_scopes_are_paths_and_a_scoped_delete_keeps_the_root(mos: MemoryOS) -> None:
    """LanceDBStorage matches scope prefixes as strings and deletes root records with any
    scoped delete; here a scope is a path and a delete removes only what it names."""
    storage = MemstrataStorage(mos, user_id="ann")
    root = MemoryRecord(id="root", content="Ann prefers short answers", scope="/")
    near = MemoryRecord(id="near", content="Anna is Ann's sister", scope="/people/anna")
    storage.save([*records(), root, near])
    assert storage.count("/people/ann") == 2
    assert storage.delete(scope_prefix="/people/ann") == 2
    assert {r.id for r in storage.list_records()} == {"r2", "r3", "r4", "root", "near"}


def test_bad_records_change_nothing(mos: MemoryOS) -> None:
    storage = MemstrataStorage(mos, user_id="ann")
    huge = MemoryRecord(id="big", content="x" * 40_000)
    nul = MemoryRecord(id="nul", content="a\x00b")
    for bad in (huge, nul):
        with pytest.raises(ValidationError):
            storage.save([records()[0], bad])
    assert storage.count() == 0


def test_an_item_that_is_no_record_is_passed_over(mos: MemoryOS) -> None:
    """An item carrying the storage's marker but no valid record (written by another surface)
    neither stops a listing nor shows up in it."""
    storage = MemstrataStorage(mos, user_id="ann")
    storage.save(records()[:2])
    forged = {"crew.storage": "crewai", "crew.id": "x", "crew.record": {"importance": 7}}
    mos.add(
        [{"content": "not a record", "metadata": forged}], user_id="ann", cube_id=storage.cube_id
    )
    assert storage.count() == 2 and storage.get_record("x") is None
    assert [r.id for r in storage.list_records()] == ["r1", "r0"]
    (query,) = storage.embedder(["not a record"])
    assert {r.id for r, _ in storage.search(query)} == {"r0", "r1"}


def test_one_users_storage_never_reads_anothers(mos: MemoryOS) -> None:
    ann = MemstrataStorage(mos, user_id="ann")
    ann.save([MemoryRecord(id="pin", content="Ann's PIN is 4321", scope="/secrets")])
    bob = MemstrataStorage(mos, user_id="bob")  # the same storage name, another user
    (query,) = bob.embedder(["PIN"])
    assert bob.search(query) == [] and bob.count() == 0 and bob.get_record("pin") is None
    assert bob.list_scopes() == [] and bob.delete(record_ids=["pin"]) == 0
    bob.reset()
    (query,) = ann.embedder(["PIN"])
    assert [r.content for r, _ in ann.search(query)] == ["Ann's PIN is 4321"]
    with pytest.raises(PermissionDenied):
        MemstrataStorage(mos, user_id="bob", cube_id=ann.cube_id)


def test_reset_erases_for_good(mos: MemoryOS) -> None:
    storage = MemstrataStorage(mos, user_id="ann")
    storage.save([MemoryRecord(content="my PIN is 4321", scope="/secrets")])
    other = MemstrataStorage(mos, user_id="ann", name="other")
    other.save([MemoryRecord(content="the other storage's record")])
    storage.reset()
    cube = mos.default_cube("ann").cube_id
    every = mos.list_memories(
        cube, user_id="ann", filters={"status": ["deleted", "generated", "activated"]}
    )
    assert not any("4321" in i.text for i in every)
    assert other.count() == 1  # another storage in the same cube is untouched


def test_the_storage_over_a_client_answers_the_same(
    server: Server, new_user: Any, tmp_path: Path
) -> None:
    """Over the REST API (the storage embeds with the default local model), acting as the
    key's owner: the reference script's results, and no other user's records."""
    ann, bob = new_user("ann"), new_user("bob")
    with Client(server.url, ann.key, timeout=120) as memory:
        ours = MemstrataStorage(memory)
        assert script(ours, ours.embedder) == script(
            LanceDBStorage(path=tmp_path / "lance"), ours.embedder
        )
        ours.save([MemoryRecord(id="pin", content="Ann's PIN is 4321")])
        with pytest.raises(ValidationError):
            MemstrataStorage(memory, user_id=bob.user_id)
    with Client(server.url, bob.key, timeout=120) as memory:
        theirs = MemstrataStorage(memory, embedder=ours.embedder.embedder)
        assert theirs.count() == 0 and theirs.get_record("pin") is None


def test_the_storage_over_an_async_client(server: Server, new_user: Any) -> None:
    ann: Account = new_user("ann")
    embedder = server.memory.embedder

    async def run() -> list[Any]:
        async with AsyncClient(server.url, ann.key, timeout=120) as memory:
            storage = MemstrataStorage(memory, embedder=embedder)
            await storage.asave(records())
            (query,) = storage.embedder(["where does Ann live?"])
            found = await storage.asearch(query, scope_prefix="/people", limit=1)
            erased = await storage.adelete(categories=["dates"])
            left = await storage.acount()
            await storage.areset()
            return [[r.content for r, _ in found], erased, left, await storage.acount()]

    assert asyncio.run(run()) == [["Ann lives in Porto"], 2, 3, 0]


# CrewAI reads its own deprecated fields (function_calling_llm, allow_code_execution) while it
# builds and runs an agent (crewai/agent/core.py): its warnings, not the example's.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens memory.db in the working directory
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp_path / "crewai"))
    monkeypatch.setenv("CREWAI_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    for _ in range(2):  # run again on the same file: it must work the second time too
        run_example("crewai.md")
