"""``memstrata.client.Client`` against the real server (uvicorn on a loopback port): every
method's answer as the core's types, and error responses raised as the in-process classes."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi import FastAPI
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from memstrata import MemoryOS
from memstrata.client import Client, ResponseError, ServerUnreachable
from memstrata.errors import (
    ConflictError,
    LLMError,
    LLMNotConfigured,
    MemCubeError,
    NotFoundError,
    PermissionDenied,
    Unauthenticated,
    ValidationError,
)
from memstrata.model import (
    ApiKey,
    Cube,
    Event,
    Grant,
    Hit,
    MemoryItem,
    Preference,
    Source,
    User,
    Version,
)
from memstrata.retrieval.pack import Context
from memstrata.scheduler import Task
from memstrata.server.rest import bootstrap, create_app

if TYPE_CHECKING:
    from tests.server.conftest import Account, Server

MESSAGES = [
    {"role": "user", "name": "Ann", "content": "I moved to Porto last spring."},
    {"role": "user", "name": "Ann", "content": "My cat is called Miso."},
]


@pytest.fixture
def connect(server: Server) -> Iterator[Callable[[str | None], Client]]:
    """Clients of the session's server, closed after the test."""
    made: list[Client] = []

    def make(key: str | None) -> Client:
        made.append(Client(server.url, key))
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.fixture
def admin_client(server: Server, connect: Callable[[str | None], Client]) -> Client:
    return connect(server.admin_key)


@pytest.fixture
def user(new_user: Callable[..., Account], connect: Callable[[str | None], Client]) -> Client:
    """A client of a new user with a cube ``notes`` of its own holding ``MESSAGES``."""
    client = connect(new_user("client").key)
    client.create_cube("notes", cube_id=f"notes-{client.me().user_id}")
    client.add(MESSAGES, cube_id=_cube(client), session_id="s1")
    return client


def _cube(client: Client) -> str:
    return f"notes-{client.me().user_id}"


# -- users and keys ------------------------------------------------------------------------------


def test_health_needs_no_key(connect: Callable[[str | None], Client]) -> None:
    health = connect(None).health()
    assert health["status"] == "ok"
    assert health["version"]


def test_an_admin_creates_and_lists_users(admin_client: Client, server: Server) -> None:
    user_id = server.unique("made")
    made = admin_client.create_user(user_id, name="Made", role="user")
    assert made == User(user_id, "Made", "user", made.created_at)
    assert user_id in [u.user_id for u in admin_client.list_users()]
    assert admin_client.me().role == "admin"


def test_keys_are_made_listed_and_revoked(
    user: Client, connect: Callable[[str | None], Client]
) -> None:
    key = user.create_key(label="laptop")
    assert isinstance(key, ApiKey)
    assert key.secret is not None and key.label == "laptop"
    second = connect(key.secret)
    assert second.me() == user.me()
    listed = {k.key_id: k for k in user.list_keys()}
    assert listed[key.key_id].secret is None and listed[key.key_id].revoked_at is None
    user.revoke_key("me", key.key_id)
    assert user.list_keys()[-1].revoked_at is not None
    with pytest.raises(Unauthenticated, match="unknown or revoked"):
        second.me()


def test_an_admin_manages_another_users_keys(admin_client: Client, user: Client) -> None:
    user_id = user.me().user_id
    key = admin_client.create_key(user_id)
    assert key.user_id == user_id
    assert key.key_id in [k.key_id for k in admin_client.list_keys(user_id)]
    admin_client.revoke_key(user_id, key.key_id)


# -- cubes and grants ----------------------------------------------------------------------------


def test_cubes_are_created_listed_got_and_deleted(user: Client) -> None:
    cube = user.create_cube("scratch", kind="agent", settings={"working_capacity": 5})
    assert isinstance(cube, Cube)
    assert cube.kind == "agent" and cube.settings["working_capacity"] == 5
    assert cube.owner == user.me().user_id
    assert [c.cube_id for c in user.list_cubes()] == [_cube(user), cube.cube_id]
    assert user.get_cube(cube.cube_id) == cube
    user.add("one thing to forget", cube_id=cube.cube_id)
    assert user.delete_cube(cube.cube_id) == 1
    with pytest.raises(NotFoundError):
        user.get_cube(cube.cube_id)


def test_share_and_grant_let_another_user_in(
    user: Client, new_user: Callable[..., Account], connect: Callable[[str | None], Client]
) -> None:
    other = connect(new_user("friend").key)
    friend = other.me().user_id
    with pytest.raises(PermissionDenied) as denied:
        other.search("Porto", cube_ids=[_cube(user)])
    assert denied.value.hint == "ask a cube admin to grant 'read'"
    assert denied.value.status == 403 and denied.value.code == "permission_denied"
    grant = user.share(_cube(user), friend)
    assert grant == Grant(_cube(user), friend, "read", user.me().user_id, grant.granted_at)
    assert "Porto" in other.search("Porto", cube_ids=[_cube(user)])[0].item.text
    with pytest.raises(PermissionDenied):
        other.add("mine now", cube_id=_cube(user))
    assert user.grant(_cube(user), friend, "write").permission == "write"
    assert len(other.add("mine now", cube_id=_cube(user))) == 1


# -- items ---------------------------------------------------------------------------------------


def test_add_list_get_update_delete_history(user: Client) -> None:
    cube_id = _cube(user)
    when = datetime(2024, 5, 8, 13, 56, tzinfo=timezone.utc)
    (item_id,) = user.add(
        [{"content": "We adopted a greyhound.", "name": "Ann", "timestamp": when}],
        cube_id=cube_id,
        session_id="s2",
    )
    listed = user.list_memories(cube_id, filters={"session_id": "s2"})
    assert [(i.id, i.event_time, i.speaker) for i in listed] == [(item_id, when, "Ann")]
    assert len(user.list_memories(cube_id, limit=1, offset=1)) == 1
    assert user.get(item_id, cube_id=cube_id).text == "We adopted a greyhound."
    updated = user.update(
        item_id, cube_id=cube_id, text="We adopted two greyhounds.", reason="typo"
    )
    assert isinstance(updated, MemoryItem) and updated.version == 2
    deleted = user.delete(item_id, cube_id=cube_id, reason="gone")
    assert deleted.status == "deleted"
    assert item_id not in [i.id for i in user.list_memories(cube_id)]
    assert [i.id for i in user.list_memories(cube_id, filters={"status": ["deleted"]})] == [item_id]
    history = user.history(item_id, cube_id=cube_id)
    assert all(isinstance(v, Version) for v in history)
    assert [(v.version, v.reason) for v in history] == [(1, None), (2, "typo"), (3, "gone")]


def test_list_memories_refuses_filters_the_api_cannot_list_by(user: Client) -> None:
    with pytest.raises(ValidationError, match="cannot list by since"):
        user.list_memories(_cube(user), filters={"since": "2024-01-01"})


def test_add_document_from_bytes_and_from_a_path(user: Client, tmp_path: Path) -> None:
    cube_id = _cube(user)
    ids = user.add_document(
        b"Ferries to Porto leave at nine.", filename="trip.txt", cube_id=cube_id
    )
    assert len(ids) == 1
    chunk = user.get(ids[0], cube_id=cube_id)
    assert (chunk.tier, chunk.type, chunk.key) == ("long", "chunk", "trip.txt")
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nThe lighthouse opens at ten.", encoding="utf-8")
    (from_path,) = user.add_document(path=path, cube_id=cube_id, session_id="docs")
    assert user.get(from_path, cube_id=cube_id).key == "notes.md"
    with pytest.raises(ValidationError, match="either data or path"):
        user.add_document(cube_id=cube_id)
    with pytest.raises(ValidationError, match="filename"):
        user.add_document(b"text", cube_id=cube_id)


# -- lifecycle and governance --------------------------------------------------------------------


def test_transition_and_rollback(user: Client) -> None:
    cube_id = _cube(user)
    first, second = (i.id for i in user.list_memories(cube_id))
    moved = user.transition(first, "activated", cube_id=cube_id, reason="checked")
    assert (moved.status, moved.version) == ("activated", 2)
    user.update(first, cube_id=cube_id, text="I moved to Lisbon.")
    restored = user.rollback(first, 1, cube_id=cube_id, reason="undo")
    assert (restored.text, restored.status, restored.version) == (
        MESSAGES[0]["content"],
        "generated",
        4,
    )
    assert user.history(first, cube_id=cube_id)[-1].reason == "undo"
    with pytest.raises(NotFoundError, match="no version 99"):
        user.rollback(first, 99, cube_id=cube_id)
    with pytest.raises(ConflictError) as illegal:
        user.transition(second, "frozen", cube_id=cube_id)
    assert illegal.value.status == 409 and "activated" in (illegal.value.hint or "")
    user.transition(second, "activated", cube_id=cube_id)
    assert user.transition(second, "frozen", cube_id=cube_id).status == "frozen"
    with pytest.raises(ConflictError, match="read-only"):
        user.update(second, cube_id=cube_id, text="no")


def test_get_and_search_as_of_a_past_time(user: Client) -> None:
    cube_id = _cube(user)
    item_id = user.search("Porto", top_k=1)[0].item.id
    time.sleep(0.01)
    user.update(item_id, cube_id=cube_id, text="I moved to Lisbon last spring.")
    first, second = (v.at for v in user.history(item_id, cube_id=cube_id))
    between = first + (second - first) / 2
    assert user.get(item_id, cube_id=cube_id, as_of=between).text == MESSAGES[0]["content"]
    assert user.get(item_id, cube_id=cube_id, as_of=second.timestamp()).version == 2
    assert user.get(item_id, cube_id=cube_id, as_of=second.isoformat()).version == 2
    hits = user.search("Porto", cube_ids=[cube_id], as_of=between)
    assert [h.item.text for h in hits if h.item.id == item_id] == [MESSAGES[0]["content"]]
    with pytest.raises(ValidationError, match="future"):
        user.get(item_id, cube_id=cube_id, as_of=datetime(2999, 1, 1, tzinfo=timezone.utc))


def test_search_include_finds_archived_items(user: Client) -> None:
    cube_id = _cube(user)
    item_id = user.search("cat", top_k=1)[0].item.id
    user.transition(item_id, "activated", cube_id=cube_id)
    user.transition(item_id, "archived", cube_id=cube_id)
    assert item_id not in [h.item.id for h in user.search("cat")]
    assert item_id in [h.item.id for h in user.search("cat", include=["archived"])]


def test_audit_and_erase(user: Client, admin_client: Client) -> None:
    cube_id = _cube(user)
    (item_id,) = user.add("A secret to forget.", cube_id=cube_id, session_id="gone")
    events = user.audit(cube_id=cube_id)
    assert all(isinstance(e, Event) for e in events)
    assert item_id in [e.item_id for e in events if e.op == "create"]
    assert [e.item_id for e in user.audit(item_id=item_id, limit=1)] == [item_id]
    assert user.audit(cube_id=cube_id, since=datetime.now(timezone.utc)) == []
    with pytest.raises(PermissionDenied):
        user.audit()
    assert admin_client.audit(cube_id=cube_id, limit=2)
    assert user.erase(item_id) == 1
    tombstone = user.get(item_id, cube_id=cube_id)
    assert (tombstone.text, tombstone.status) == ("", "deleted")
    user.add("Another one.", cube_id=cube_id, session_id="gone")
    assert user.erase(cube_id=cube_id, session_id="gone", reason="asked") == 1
    me = user.me().user_id
    assert user.erase(subject_user_id=me, cube_id=cube_id) == len(MESSAGES)
    with pytest.raises(ValidationError):
        user.erase()


def test_grants_and_revoke(
    user: Client, new_user: Callable[..., Account], connect: Callable[[str | None], Client]
) -> None:
    cube_id = _cube(user)
    other = connect(new_user("reader").key)
    reader = other.me().user_id
    user.share(cube_id, reader)
    held = {g.user_id: g.permission for g in user.grants(cube_id)}
    assert held == {user.me().user_id: "admin", reader: "read"}
    assert other.get_cube(cube_id).cube_id == cube_id
    user.revoke(cube_id, reader)
    with pytest.raises(PermissionDenied):
        other.get_cube(cube_id)
    with pytest.raises(NotFoundError, match="holds no grant"):
        user.revoke(cube_id, reader)
    with pytest.raises(PermissionDenied):
        other.grants(cube_id)


def test_export_then_import_a_copy(
    user: Client,
    new_user: Callable[..., Account],
    connect: Callable[[str | None], Client],
    tmp_path: Path,
) -> None:
    cube_id = _cube(user)
    archive = user.export(cube_id, tmp_path / "notes.tar.gz")
    assert archive.read_bytes()[:2] == b"\x1f\x8b"
    with pytest.raises(MemCubeError, match="exists"):
        user.export(cube_id, archive)
    bob = connect(new_user("bob").key)
    copy = bob.import_cube(archive, cube_id=f"{bob.me().user_id}-copy", keep_ids=False)
    assert isinstance(copy, Cube) and copy.owner == bob.me().user_id
    theirs = [i.text for i in bob.list_memories(copy.cube_id)]
    assert theirs == [i.text for i in user.list_memories(cube_id)]
    with pytest.raises(ConflictError):
        bob.import_cube(archive)  # the exported cube id and item ids are taken
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(archive.read_bytes()[:100])
    with pytest.raises(MemCubeError):
        bob.import_cube(broken, cube_id=f"{bob.me().user_id}-broken")
    with pytest.raises(PermissionDenied):
        bob.export(cube_id, tmp_path / "not-mine.tar.gz")
    assert not (tmp_path / "not-mine.tar.gz").exists()


# -- every field travels --------------------------------------------------------------------------


@pytest.fixture
def full_item(user: Client, server: Server) -> MemoryItem:
    """An item of ``user``'s cube with every field set to a value other than its default, as the
    core has it (written through the store: no public call sets them all)."""
    cube_id, owner = _cube(user), user.me().user_id
    memory = server.memory
    (item_id,) = memory.add(
        [{"content": "The lighthouse keeper's parrot is called Admiral Biscuit.", "id": "ext-1"}],
        user_id=owner, cube_id=cube_id, session_id="s-full",
    )  # fmt: skip
    assert memory.wait(cube_id, timeout=30, user_id=owner)
    stored = memory.get(item_id, user_id=owner)
    when = datetime(2024, 5, 8, 13, 56, 1, 123456, tzinfo=timezone.utc)
    changed = replace(
        stored, tier="long", type="fact", agent_id="agent-7", role="assistant", speaker="Keeper",
        key="parrot_name", keywords=["parrot", "admiral"], tags=["pets", "birds"],
        metadata={"n": 2, "nested": {"ok": True, "list": [1, None, "x"]}}, event_time=when,
        valid_from=when - timedelta(days=2), valid_to=when + timedelta(days=400),
        status="activated", merged_into="01J0000000000000000000MERG", confidence=0.75,
        pinned=True, access_count=7, last_accessed_at=when + timedelta(hours=3), heat=2.5,
        sources=[Source(item_id="01J0000000000000000000SRC1", role="evidence"),
                 Source(uri="file:///notes.md", span=(3, 41))],
        segment_id="01J0000000000000000000SEG1", expires_at=when + timedelta(days=9000),
    )  # fmt: skip
    memory.store.update_item(changed, None, op="update", actor=owner, reason="every field")
    item = memory.get(item_id, user_id=owner)
    defaults = MemoryItem(id="", cube_id="", text="")
    unset = [
        f.name for f in fields(MemoryItem) if getattr(item, f.name) == getattr(defaults, f.name)
    ]
    assert unset == [], "set these fields too"
    return item


def test_an_item_with_every_field_round_trips_unchanged(
    user: Client, server: Server, full_item: MemoryItem
) -> None:
    cube_id = _cube(user)
    assert user.get(full_item.id, cube_id=cube_id) == full_item
    listed = user.list_memories(cube_id, filters={"session_id": "s-full"})
    assert listed == [full_item]
    assert user.history(full_item.id, cube_id=cube_id)[-1].item == full_item
    only = {"session_id": "s-full"}
    (hit,) = user.search("What is the parrot called?", cube_ids=[cube_id], top_k=1, filters=only)
    assert hit.item == full_item and hit.score > 0 and hit.ranks
    # The search counted a read: once the count is written, the item has new read counts.
    server.memory.tiers.flush_reads(force=True)
    assert server.memory.wait(timeout=30)
    counted = server.memory.get(full_item.id, user_id=user.me().user_id)
    packed = user.context("parrot Admiral Biscuit", cube_ids=[cube_id], chain=False,
                          expand_sources=False, filters=only)  # fmt: skip
    assert [h.item for h in packed.hits] == [counted] and packed.recent == []


def test_an_answer_missing_a_field_is_a_bad_response(
    httpserver: HTTPServer, full_item: MemoryItem
) -> None:
    shown = {"id": full_item.id, "cube_id": full_item.cube_id, "text": full_item.text}
    httpserver.expect_request("/memories/c/i").respond_with_json(shown)
    with Client(httpserver.url_for("/"), "ms_key") as client, pytest.raises(ResponseError) as bad:
        client.get("i", cube_id="c")
    assert (bad.value.status, bad.value.code) == (502, "bad_response")
    assert "MemoryItem has no version" in bad.value.message


# -- reading memory ------------------------------------------------------------------------------


def test_search_returns_hits_with_their_items(user: Client) -> None:
    hits = user.search("Where did Ann move?", top_k=1, filters={"session_id": "s1"})
    assert len(hits) == 1 and isinstance(hits[0], Hit)
    (hit,) = hits
    assert hit.score > 0 and hit.cube_id == _cube(user)
    assert (hit.item.text, hit.item.speaker, hit.item.session_id) == (
        MESSAGES[0]["content"],
        "Ann",
        "s1",
    )


def test_context_packs_the_memories(user: Client) -> None:
    packed = user.context("What is the cat called?", budget_tokens=200, session_id="s1")
    assert isinstance(packed, Context)
    assert "Miso" in packed.text and packed.tokens <= packed.budget == 200
    assert {i.text for i in packed.recent} == {m["content"] for m in MESSAGES}
    assert packed.items[: len(packed.recent)] == packed.recent


def test_profile_is_a_list_of_attributes(user: Client) -> None:
    assert user.wait(_cube(user), timeout=30)
    assert isinstance(user.get_profile(cube_id=_cube(user)), list)
    assert isinstance(user.get_profile(), list)


def test_preferences_come_back_as_the_cores(
    new_user: Callable[..., Account], connect: Callable[[str | None], Client]
) -> None:
    owner, other = connect(new_user("prefs").key), connect(new_user("nosy").key)
    hot = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 0.0}
    cube = owner.create_cube("tastes", settings=hot).cube_id
    said = [{"role": "user", "name": "Ann", "content": "I can't stand loud music."},
            {"role": "user", "name": "Bob", "content": "ok"}]  # fmt: skip
    turn = owner.add(said, cube_id=cube)[0]
    assert owner.wait(cube, timeout=30)
    (found,) = owner.get_preferences(cube_id=cube)
    assert isinstance(found, Preference) and owner.get_preferences() == [found]
    assert (found.key, found.polarity, found.evidence, found.cube_id) == (
        "loud music", -1, [turn], cube
    )  # fmt: skip
    assert other.get_preferences() == []
    with pytest.raises(PermissionDenied):
        other.get_preferences(cube_id=cube)


def test_chat_without_a_chat_model_is_llm_not_configured(user: Client) -> None:
    with pytest.raises(LLMNotConfigured) as raised:
        user.chat("Where do I live?", cube_id=_cube(user))
    assert raised.value.status == 503 and "MEMSTRATA_LLM_PROVIDER" in (raised.value.hint or "")
    with pytest.raises(LLMNotConfigured):
        user.chat_stream("Where do I live?", cube_id=_cube(user))


def _completions(request: Request) -> Response:
    """A stand-in OpenAI-compatible chat model: two pieces, or one and then a broken chunk."""
    body = request.get_json()
    question = body["messages"][-1]["content"]
    if not body.get("stream"):
        reply = {"choices": [{"message": {"content": "You live in Porto."}}], "usage": {}}
        return Response(json.dumps(reply), content_type="application/json")
    chunks = [f"data: {json.dumps({'choices': [{'delta': {'content': 'You live '}}]})}\n\n"]
    chunks.append("data: {broken\n\n" if "break" in question else "")
    chunks.append(f"data: {json.dumps({'choices': [{'delta': {'content': 'in Porto.'}}]})}\n\n")
    return Response("".join(chunks) + "data: [DONE]\n\n", content_type="text/event-stream")


@pytest.fixture
def chatty(
    httpserver: HTTPServer,
    tmp_path: Path,
    start_server: Callable[[FastAPI], AbstractContextManager[str]],
) -> Iterator[Client]:
    """A client of a server whose MemoryOS has the stand-in chat model, with cube ``notes``."""
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(
        _completions
    )
    with MemoryOS.open(
        str(tmp_path / "chat.db"),
        workers=0,
        llm_provider="openai",
        llm_base_url=httpserver.url_for("/v1"),
    ) as memory:
        key = bootstrap(memory)
        memory.create_cube("notes", owner="admin", cube_id="notes")
        memory.add("I moved to Porto last spring.", user_id="admin", cube_id="notes")
        with start_server(create_app(memory)) as url, Client(url, key) as client:
            yield client


def test_chat_answers_and_stores_the_exchange(chatty: Client) -> None:
    reply = chatty.chat("Where do I live?", cube_id="notes", session_id="c1")
    assert reply.answer == "You live in Porto."
    assert reply.context is not None and "Porto" in reply.context.text
    stored = chatty.list_memories("notes", filters={"session_id": "c1"})
    assert [i.id for i in stored] == reply.ids


def test_chat_stream_yields_the_pieces_and_stores_the_exchange(chatty: Client) -> None:
    pieces = chatty.chat_stream("Where do I live?", cube_id="notes", session_id="c2")
    assert list(pieces) == ["You live ", "in Porto."]
    stored = chatty.list_memories("notes", filters={"session_id": "c2"})
    assert [i.text for i in stored] == ["Where do I live?", "You live in Porto."]


def test_a_failure_inside_the_stream_is_raised_by_the_iterator(chatty: Client) -> None:
    pieces = chatty.chat_stream("please break", cube_id="notes", session_id="c3")
    assert next(pieces) == "You live "
    with pytest.raises(LLMError, match="not a chat chunk"):
        next(pieces)
    assert chatty.list_memories("notes", filters={"session_id": "c3"}) == []


# -- running the service -------------------------------------------------------------------------


def test_tasks_and_wait(user: Client) -> None:
    assert user.wait(_cube(user), timeout=30) is True
    assert user.wait() is True
    tasks = user.tasks(cube_id=_cube(user), status="done")
    assert tasks and all(isinstance(t, Task) and t.status == "done" for t in tasks)
    assert user.tasks(limit=1)[0].cube_id == _cube(user)


def test_artifacts_activation_and_adapter_over_http(
    user: Client, new_user: Callable[..., Account], connect: Callable[[str | None], Client]
) -> None:
    cube = user.create_cube("artifacts").cube_id  # nothing stable, nothing to learn
    assert user.artifacts(cube) == []
    assert user.build_activation(cube) is None  # and no local chat model on this server
    task = user.queue_adapter(cube)
    assert isinstance(task, Task) and (task.kind, task.cube_id) == ("train_adapter", cube)
    assert user.wait(cube, timeout=60)
    assert user.tasks(cube_id=cube, status="failed") == [] and user.artifacts(cube) == []
    other = connect(new_user("nosy").key)
    for call in (other.artifacts, other.build_activation, other.queue_adapter):
        with pytest.raises((PermissionDenied, NotFoundError)):
            call(cube)


def test_configure_is_for_admins(admin_client: Client, user: Client) -> None:
    settings = admin_client.configure()
    assert settings["rrf_k"] == admin_client.configure(rrf_k=settings["rrf_k"])["rrf_k"]
    with pytest.raises(ValidationError, match="cannot be changed at run time"):
        admin_client.configure(db=1)
    with pytest.raises(PermissionDenied, match="not an administrator"):
        user.configure(rrf_k=20)


def test_metrics_are_prometheus_text(user: Client) -> None:
    text = user.metrics()
    assert "memstrata_http_requests_total" in text
    assert f'cube_id="{_cube(user)}"' in text


def test_one_client_serves_many_threads(user: Client) -> None:
    found: list[int] = []

    def search() -> None:
        for _ in range(5):
            found.append(len(user.search("Porto", top_k=2)))

    threads = [threading.Thread(target=search) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert found == [2] * 20


# -- errors --------------------------------------------------------------------------------------


def test_error_responses_raise_the_in_process_classes(
    user: Client, connect: Callable[[str | None], Client]
) -> None:
    cube_id = _cube(user)
    with pytest.raises(NotFoundError) as missing:
        user.get("01J0000000000000000000000X", cube_id=cube_id)
    assert missing.value.status == 404 and "no memory item" in missing.value.message
    with pytest.raises(ConflictError, match="already exists") as taken:
        user.create_cube("again", cube_id=cube_id)
    assert taken.value.hint == "choose another cube id"
    with pytest.raises(ValidationError) as invalid:
        user.search("Porto", top_k=0)
    assert invalid.value.status == 422 and "top_k" in invalid.value.message
    with pytest.raises(ValidationError, match="query must be a non-empty string"):
        user.search("   ")
    with pytest.raises(PermissionDenied):
        user.list_users()
    with pytest.raises(Unauthenticated):
        connect("ms_not-a-key").me()
    with pytest.raises(Unauthenticated, match="API key is required"):
        connect(None).list_cubes()


def test_a_code_without_a_class_is_a_response_error(user: Client, server: Server) -> None:
    too_big = b"x" * (server.memory.settings.max_request_bytes + 1)
    with pytest.raises(ResponseError) as raised:
        user.add_document(too_big, filename="big.txt", cube_id=_cube(user))
    assert (raised.value.status, raised.value.code) == (413, "payload_too_large")


def test_values_json_cannot_carry_are_refused_before_sending(user: Client) -> None:
    with pytest.raises(ValidationError, match="cannot send as JSON"):
        user.add([{"content": "x", "metadata": {"n": float("nan")}}], cube_id=_cube(user))


def test_no_server_is_server_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        Client(f"http://127.0.0.1:{port}", "ms_key", timeout=5) as client,
        pytest.raises(ServerUnreachable, match="is the server running") as raised,
    ):
        client.health()
    assert raised.value.status == 503


def test_create_cube_exist_ok_is_a_get_or_create_of_the_callers_own_cube(
    new_user: Callable[..., Account], connect: Callable[[str | None], Client]
) -> None:
    """Issue 28 §4: docs/rest.md's example run twice made a second cube called "notes"; with
    ``exist_ok`` the client returns the caller's cube (by id, or the oldest by name) and, like
    ``MemoryOS.create_cube``, never hands out another owner's cube, even a shared one."""
    ann, bob = connect(new_user("ann").key), connect(new_user("bob").key)
    first = ann.create_cube("notes", exist_ok=True)
    assert ann.create_cube("notes", exist_ok=True) == first
    assert [c.name for c in ann.list_cubes()] == ["notes"]
    by_id = ann.create_cube("trips", cube_id=f"trips-{first.owner}", exist_ok=True)
    assert ann.create_cube("other name", cube_id=by_id.cube_id, exist_ok=True) == by_id
    ann.grant(by_id.cube_id, bob.me().user_id, "read")
    with pytest.raises(ConflictError):
        bob.create_cube("trips", cube_id=by_id.cube_id, exist_ok=True)
    assert bob.create_cube("notes", exist_ok=True).owner == bob.me().user_id
