"""Property: whatever several users do, in whatever order, nobody sees, changes or erases what
their grants do not allow, and nothing fails except as a refusal.

A hypothesis state machine plays random sequences of add, search, get, update, share, revoke,
export + import (re-signed to claim someone else, or not), erase (an item, or a data subject)
and transition, by three users and an administrator, and keeps its own model of the grants and
of every item (cube, author, text, state).  After every step the store must hold exactly what the
model says; every call the grants forbid must be refused, and every call they allow must work.
A refusal is a ``MemstrataError`` through the SDK, a 4xx over REST: anything else (another
exception, a 5xx) fails the test.  The same machine runs through the SDK (a fresh database per
example) and, with fewer examples, over HTTP against the real server (uvicorn on loopback).

Issue 11's "property-based test"; what each rule expects is written in docs/lifecycle.md and
docs/memcube.md.  The cubes keep every turn in the working tier (``SETTINGS``), so no tier task
derives items the model would have to guess at.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memstrata import MemoryOS
from memstrata.errors import MemstrataError
from memstrata.filters import Filters
from memstrata.lifecycle.states import READ_ONLY, TRANSITIONS
from memstrata.memcube import open_cube, write_cube
from memstrata.model import SEARCHABLE_STATUSES, STATUSES, MemoryItem, permits
from memstrata.server.rest import bootstrap, create_app

#: Users of each example (each gets the example's prefix); ``root`` is an administrator.
USERS = ("u0", "u1", "u2", "root")
WORDS = ("apple", "river", "violin", "copper")
PERMISSIONS = ("read", "write", "admin")
TARGETS = ("activated", "archived", "frozen", "merged")
SETTINGS = {"working_capacity": 10_000}
users = st.sampled_from(USERS)
picks = st.integers(min_value=0, max_value=10**6)  # an index into whatever list is current
#: whether to pick among what the user may touch (when there is any) rather than among everything
mine = st.booleans()


class Refused(Exception):
    """The system said no: a ``MemstrataError`` (SDK) or a 4xx answer (REST)."""


class Stored(NamedTuple):
    """An item as the store holds it (read past every grant: the ground truth)."""

    id: str
    cube_id: str
    text: str
    status: str
    user_id: str | None


class Driver(Protocol):
    """One surface, seen as the machine's calls; a refusal raises ``Refused``."""

    def create_user(self, user_id: str, admin: bool) -> None: ...
    def create_cube(self, owner: str, cube_id: str) -> None: ...
    def add(self, user: str, cube_id: str, text: str) -> str: ...
    def search(self, user: str, query: str) -> list[tuple[str, str, str]]: ...
    def get(self, user: str, cube_id: str, item_id: str) -> tuple[str, str]: ...
    def update(self, user: str, cube_id: str, item_id: str, text: str) -> None: ...
    def share(self, by: str, cube_id: str, user: str, permission: str) -> None: ...
    def revoke(self, by: str, cube_id: str, user: str) -> None: ...
    def export(self, user: str, cube_id: str, path: Path) -> None: ...
    def import_(self, user: str, path: Path, cube_id: str, keep_ids: bool) -> None: ...
    def erase_item(self, user: str, item_id: str) -> int: ...
    def erase_subject(self, user: str, subject: str) -> int: ...
    def transition(self, user: str, cube_id: str, item_id: str, to: str) -> None: ...
    def truth(self) -> MemoryOS: ...


@dataclass
class Item:
    """What the model expects of one item."""

    cube: str
    author: str | None
    text: str
    status: str = "generated"


@dataclass
class Model:
    owner: dict[str, str] = field(default_factory=dict)
    grants: dict[str, dict[str, str]] = field(default_factory=dict)
    items: dict[str, Item] = field(default_factory=dict)

    def may(self, user: str, cube_id: str, needed: str) -> bool:
        return permits(self.grants[cube_id].get(user), needed)

    def new_cube(self, cube_id: str, owner: str) -> None:
        self.owner[cube_id] = owner
        self.grants[cube_id] = {owner: "admin"}


class Machine(RuleBasedStateMachine):
    """The model of grants and items, and the rules that check the system against it."""

    def __init__(
        self, driver: Driver, prefix: str, folder: Path, done: Callable[[], None] | None = None
    ) -> None:
        super().__init__()
        self.driver, self.prefix, self.folder, self.done = driver, prefix, folder, done
        self.model = Model()
        self.cubes: list[str] = []
        self.count = 0

    def teardown(self) -> None:
        if self.done is not None:
            self.done()

    def uid(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def fresh(self, what: str) -> str:
        self.count += 1
        return f"{self.prefix}-{what}{self.count}"

    def pick(self, n: int, among: list[str]) -> str:
        return among[n % len(among)]

    def cube_for(self, user: str, needed: str, n: int, own: bool) -> str:
        """A cube: one ``user`` holds ``needed`` on when ``own`` (and there is one), else any."""
        allowed = [c for c in self.cubes if self.model.may(user, c, needed)]
        return self.pick(n, allowed if own and allowed else self.cubes)

    def item_for(self, user: str, needed: str, n: int, own: bool) -> str:
        """An item: one in a cube ``user`` holds ``needed`` on when ``own``, else any."""
        everything = sorted(self.model.items)
        cube = {i: self.model.items[i].cube for i in everything}
        allowed = [i for i in everything if self.model.may(user, cube[i], needed)]
        return self.pick(n, allowed if own and allowed else everything)

    def truth(self, cube_id: str) -> list[Stored]:
        everything = Filters(statuses=STATUSES)
        found = self.driver.truth().store.list_items(cube_id, everything)
        return sorted(Stored(i.id, i.cube_id, i.text, i.status, i.user_id) for i in found)

    def refused(self, call: Callable[[], object]) -> None:
        with pytest.raises(Refused):
            call()

    @initialize()
    def people(self) -> None:
        for name in USERS:
            self.driver.create_user(self.uid(name), admin=name == "root")
        for n in range(3):
            owner, cube_id = self.uid(f"u{n}"), self.uid(f"c{n}")
            self.driver.create_cube(owner, cube_id)
            self.model.new_cube(cube_id, owner)
            self.cubes.append(cube_id)
            self.add(f"u{n}", n, own=True, word=WORDS[n])

    # -- items ---------------------------------------------------------------------------------

    @rule(user=users, cube=picks, own=mine, word=st.sampled_from(WORDS))
    def add(self, user: str, cube: int, own: bool, word: str) -> None:
        user = self.uid(user)
        cube_id = self.cube_for(user, "write", cube, own)
        text = f"{word} note {self.fresh('n')}"
        if not self.model.may(user, cube_id, "write"):
            before = self.truth(cube_id)
            self.refused(lambda: self.driver.add(user, cube_id, text))
            assert self.truth(cube_id) == before
            return
        item_id = self.driver.add(user, cube_id, text)
        self.model.items[item_id] = Item(cube_id, user, text)

    @rule(user=users, word=st.sampled_from(WORDS))
    def search(self, user: str, word: str) -> None:
        user = self.uid(user)
        for item_id, cube_id, text in self.driver.search(user, f"{word} note"):
            assert self.model.may(user, cube_id, "read"), f"{user} found {item_id} of {cube_id}"
            expected = self.model.items[item_id]
            assert (cube_id, text) == (expected.cube, expected.text)
            assert expected.status in SEARCHABLE_STATUSES

    @precondition(lambda self: self.model.items)
    @rule(user=users, item=picks, own=mine)
    def get(self, user: str, item: int, own: bool) -> None:
        user = self.uid(user)
        item_id = self.item_for(user, "read", item, own)
        expected = self.model.items[item_id]
        if not self.model.may(user, expected.cube, "read"):
            self.refused(lambda: self.driver.get(user, expected.cube, item_id))
            return
        assert self.driver.get(user, expected.cube, item_id) == (expected.text, expected.status)

    @precondition(lambda self: self.model.items)
    @rule(user=users, item=picks, own=mine, word=st.sampled_from(WORDS))
    def update(self, user: str, item: int, own: bool, word: str) -> None:
        user = self.uid(user)
        item_id = self.item_for(user, "write", item, own)
        expected, text = self.model.items[item_id], f"{word} note {self.fresh('v')}"
        call = partial(self.driver.update, user, expected.cube, item_id, text)
        if not self.model.may(user, expected.cube, "write") or expected.status in READ_ONLY:
            self.refused(call)
            return
        call()
        expected.text = text

    @precondition(lambda self: self.model.items)
    @rule(user=users, item=picks, own=mine, to=st.sampled_from(TARGETS))
    def transition(self, user: str, item: int, own: bool, to: str) -> None:
        user = self.uid(user)
        item_id = self.item_for(user, "write", item, own)
        expected = self.model.items[item_id]
        call = partial(self.driver.transition, user, expected.cube, item_id, to)
        if (
            not self.model.may(user, expected.cube, "write")
            or to not in TRANSITIONS[expected.status]
        ):
            self.refused(call)
            return
        call()
        expected.status = to

    # -- grants --------------------------------------------------------------------------------

    @rule(by=users, cube=picks, own=mine, user=users, permission=st.sampled_from(PERMISSIONS))
    def share(self, by: str, cube: int, own: bool, user: str, permission: str) -> None:
        by, user = self.uid(by), self.uid(user)
        cube_id = self.cube_for(by, "admin", cube, own)
        owner = self.model.owner[cube_id]
        call = partial(self.driver.share, by, cube_id, user, permission)
        if not self.model.may(by, cube_id, "admin") or (user == owner and permission != "admin"):
            self.refused(call)
            return
        call()
        self.model.grants[cube_id][user] = permission

    @rule(by=users, cube=picks, own=mine, user=users)
    def revoke(self, by: str, cube: int, own: bool, user: str) -> None:
        by, user = self.uid(by), self.uid(user)
        cube_id = self.cube_for(by, "admin", cube, own)
        held = self.model.grants[cube_id]
        call = partial(self.driver.revoke, by, cube_id, user)
        if (
            not self.model.may(by, cube_id, "admin")
            or user == self.model.owner[cube_id]  # the owner always keeps admin
            or user not in held
        ):
            self.refused(call)
            return
        call()
        del held[user]

    # -- MemCubes --------------------------------------------------------------------------------

    @rule(
        exporter=users,
        cube=picks,
        own=mine,
        importer=users,
        claim=st.none() | users,
        keep_ids=st.booleans(),
    )
    def copy(
        self,
        exporter: str,
        cube: int,
        own: bool,
        importer: str,
        claim: str | None,
        keep_ids: bool,
    ) -> None:
        """``exporter`` exports a cube and hands the file to ``importer`` (re-signed first to
        claim ``claim`` everywhere, when given), who imports it as a new cube."""
        administrator = importer == "root"
        exporter, importer = self.uid(exporter), self.uid(importer)
        cube_id = self.cube_for(exporter, "admin", cube, own)
        path = self.folder / f"{self.fresh('x')}.tar.gz"
        if not self.model.may(exporter, cube_id, "admin"):
            self.refused(lambda: self.driver.export(exporter, cube_id, path))
            return
        self.driver.export(exporter, cube_id, path)
        if claim is not None:
            path = forge(path, self.uid(claim))
        source, target = self.truth(cube_id), self.fresh("k")
        if administrator and keep_ids and source:  # a restore keeps ids, all taken here
            self.refused(lambda: self.driver.import_(importer, path, target, keep_ids))
            return
        self.driver.import_(importer, path, target, keep_ids)
        self.model.new_cube(target, importer)
        self.cubes.append(target)
        copied = self.truth(target)
        assert len(copied) == len(source)
        for old, new in zip(source, copied, strict=True):  # new ids keep the old order
            said = old.user_id if claim is None or old.user_id is None else self.uid(claim)
            author = said if administrator or said is None else importer
            assert (new.text, new.status, new.user_id) == (old.text, old.status, author)
            self.model.items[new.id] = Item(target, author, new.text, new.status)

    # -- erasure ---------------------------------------------------------------------------------

    @precondition(lambda self: self.model.items)
    @rule(user=users, item=picks, own=mine)
    def erase_item(self, user: str, item: int, own: bool) -> None:
        user = self.uid(user)
        item_id = self.item_for(user, "write", item, own)
        expected = self.model.items[item_id]
        if not self.model.may(user, expected.cube, "write"):
            self.refused(lambda: self.driver.erase_item(user, item_id))
            return
        assert self.driver.erase_item(user, item_id) == int(expected.status != "deleted")
        self.model.items[item_id] = replace(expected, text="", status="deleted")

    @rule(user=users, subject=users)
    def erase_subject(self, user: str, subject: str) -> None:
        administrator = user == "root"
        user, subject = self.uid(user), self.uid(subject)
        if not administrator and user != subject:
            self.refused(lambda: self.driver.erase_subject(user, subject))
            return
        reached = [
            item_id
            for item_id, item in self.model.items.items()
            if item.author == subject
            and item.status != "deleted"
            and (administrator or self.model.may(user, item.cube, "write"))
        ]
        assert self.driver.erase_subject(user, subject) == len(reached)
        for item_id in reached:
            self.model.items[item_id] = replace(
                self.model.items[item_id], text="", status="deleted"
            )

    # -- the store holds what the model says -------------------------------------------------

    @invariant()
    def everything_is_as_the_model_says(self) -> None:
        store = self.driver.truth().store
        cubes = sorted({i.cube for i in self.model.items.values()})
        found = {i.id: i for i in store.get_items(list(self.model.items), cubes)}
        for item_id, expected in self.model.items.items():
            item = found[item_id]
            got = (item.cube_id, item.user_id, item.text, item.status)
            assert got == (expected.cube, expected.author, expected.text, expected.status), item_id
        for cube_id, held in self.model.grants.items():
            assert {g.user_id: g.permission for g in store.list_grants(cube_id)} == held


def forge(path: Path, claim: str) -> Path:
    """The MemCube at ``path`` re-signed so that every item, version and event claims ``claim``."""
    target = path.with_name(f"forged-{path.name}")
    with open_cube(path) as data:

        def claimed(item: MemoryItem) -> MemoryItem:
            return replace(item, user_id=claim if item.user_id is not None else None)

        versions = {
            k: [replace(v, item=claimed(v.item), actor=claim) for v in stored]
            for k, stored in data.versions.items()
        }
        events = [replace(e, actor=claim) for e in data.events]
        items = [claimed(i) for i in data.items]
        write_cube(replace(data, items=items, versions=versions, events=events), target)
    return target


# -- the SDK ---------------------------------------------------------------------------------------


class SDK:
    """``Driver`` over a ``MemoryOS``: a ``MemstrataError`` is a refusal, anything else a bug."""

    def __init__(self, memory: MemoryOS) -> None:
        self.memory = memory

    @contextmanager
    def _refusals(self) -> Iterator[None]:
        try:
            yield
        except MemstrataError as exc:
            raise Refused(type(exc).__name__) from exc

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with self._refusals():
            return getattr(self.memory, name)(*args, **kwargs)

    def create_user(self, user_id: str, admin: bool) -> None:
        self._call("create_user", user_id, role="admin" if admin else "user")

    def create_cube(self, owner: str, cube_id: str) -> None:
        self._call("create_cube", cube_id, owner=owner, cube_id=cube_id, settings=SETTINGS)

    def add(self, user: str, cube_id: str, text: str) -> str:
        said = [{"role": "user", "content": text}]
        (item_id,) = self._call("add", said, user_id=user, cube_id=cube_id)
        return str(item_id)

    def search(self, user: str, query: str) -> list[tuple[str, str, str]]:
        hits = self._call("search", query, user_id=user, top_k=20)
        return [(h.item.id, h.item.cube_id, h.item.text) for h in hits]

    def get(self, user: str, cube_id: str, item_id: str) -> tuple[str, str]:
        item = self._call("get", item_id, user_id=user, cube_id=cube_id)
        return item.text, item.status

    def update(self, user: str, cube_id: str, item_id: str, text: str) -> None:
        self._call("update", item_id, user_id=user, text=text, cube_id=cube_id)

    def share(self, by: str, cube_id: str, user: str, permission: str) -> None:
        self._call("share", cube_id, user, permission, by=by)

    def revoke(self, by: str, cube_id: str, user: str) -> None:
        self._call("revoke", cube_id, user, by=by)

    def export(self, user: str, cube_id: str, path: Path) -> None:
        self._call("export", cube_id, path, user_id=user)

    def import_(self, user: str, path: Path, cube_id: str, keep_ids: bool) -> None:
        self._call("import_cube", path, owner=user, cube_id=cube_id, keep_ids=keep_ids)

    def erase_item(self, user: str, item_id: str) -> int:
        return int(self._call("erase", item_id, user_id=user))

    def erase_subject(self, user: str, subject: str) -> int:
        return int(self._call("erase", user_id=user, subject_user_id=subject))

    def transition(self, user: str, cube_id: str, item_id: str, to: str) -> None:
        self._call("transition", item_id, to, user_id=user, cube_id=cube_id)

    def truth(self) -> MemoryOS:
        return self.memory


RUN = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_no_user_reaches_past_their_grants_through_the_sdk(tmp_path: Path) -> None:
    runs = iter(range(10**6))

    def machine() -> Machine:
        n = next(runs)
        folder = tmp_path / f"run{n}"
        folder.mkdir()
        memory = MemoryOS.open(str(folder / "memory.db"), workers=0)
        return Machine(SDK(memory), "p", folder, done=memory.close)

    run_state_machine_as_test(
        machine, settings=settings(RUN, max_examples=12, stateful_step_count=25)
    )


# -- REST --------------------------------------------------------------------------------------


class REST:
    """``Driver`` over HTTP: a 4xx is a refusal, a 5xx fails the test."""

    def __init__(self, url: str, memory: MemoryOS, admin_key: str) -> None:
        self.url, self.memory = url, memory
        self.clients = {"admin": httpx.Client(base_url=url, headers=_bearer(admin_key), timeout=60)}

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def _ask(self, user: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self.clients[user].request(method, path, **kwargs)
        assert response.status_code < 500, f"{method} {path}: {response.text}"
        if response.status_code >= 400:
            raise Refused(response.json()["error"]["code"])
        return response

    def create_user(self, user_id: str, admin: bool) -> None:
        body = {"user_id": user_id, "role": "admin" if admin else "user"}
        self._ask("admin", "POST", "/users", json=body)
        made = self._ask("admin", "POST", f"/users/{user_id}/keys", json={"label": "property"})
        key = made.json()["key"]
        self.clients[user_id] = httpx.Client(base_url=self.url, headers=_bearer(key), timeout=60)

    def create_cube(self, owner: str, cube_id: str) -> None:
        body = {"name": cube_id, "cube_id": cube_id, "settings": SETTINGS}
        self._ask(owner, "POST", "/mem_cubes", json=body)

    def add(self, user: str, cube_id: str, text: str) -> str:
        body = {"cube_id": cube_id, "messages": [{"role": "user", "content": text}]}
        (item_id,) = self._ask(user, "POST", "/memories", json=body).json()["ids"]
        return str(item_id)

    def search(self, user: str, query: str) -> list[tuple[str, str, str]]:
        hits = self._ask(user, "POST", "/search", json={"query": query, "top_k": 20}).json()
        return [(h["id"], h["cube_id"], h["text"]) for h in hits["hits"]]

    def get(self, user: str, cube_id: str, item_id: str) -> tuple[str, str]:
        item = self._ask(user, "GET", f"/memories/{cube_id}/{item_id}").json()
        return item["text"], item["status"]

    def update(self, user: str, cube_id: str, item_id: str, text: str) -> None:
        self._ask(user, "PUT", f"/memories/{cube_id}/{item_id}", json={"text": text})

    def share(self, by: str, cube_id: str, user: str, permission: str) -> None:
        body = {"user_id": user, "permission": permission}
        self._ask(by, "POST", f"/mem_cubes/{cube_id}/share", json=body)

    def revoke(self, by: str, cube_id: str, user: str) -> None:
        self._ask(by, "DELETE", f"/mem_cubes/{cube_id}/share/{user}")

    def export(self, user: str, cube_id: str, path: Path) -> None:
        path.write_bytes(self._ask(user, "POST", f"/mem_cubes/{cube_id}/export").content)

    def import_(self, user: str, path: Path, cube_id: str, keep_ids: bool) -> None:
        files = {"file": ("cube.tar.gz", path.read_bytes(), "application/gzip")}
        data = {"cube_id": cube_id, "remap_ids": str(not keep_ids).lower()}
        self._ask(user, "POST", "/mem_cubes/import", files=files, data=data)

    def erase_item(self, user: str, item_id: str) -> int:
        return int(self._ask(user, "POST", "/erase", json={"item_id": item_id}).json()["erased"])

    def erase_subject(self, user: str, subject: str) -> int:
        body = {"subject_user_id": subject}
        return int(self._ask(user, "POST", "/erase", json=body).json()["erased"])

    def transition(self, user: str, cube_id: str, item_id: str, to: str) -> None:
        self._ask(user, "POST", f"/memories/{cube_id}/{item_id}/transition", json={"to": to})

    def truth(self) -> MemoryOS:
        return self.memory


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@contextmanager
def _serving(memory: MemoryOS) -> Iterator[str]:
    """The real app on uvicorn, in a thread, on a free loopback port; yields its URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(memory), log_level="warning", ws="none", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def test_no_user_reaches_past_their_grants_over_rest(tmp_path: Path) -> None:
    runs = iter(range(10**6))
    with MemoryOS.open(str(tmp_path / "server.db"), workers=0) as memory:
        key = bootstrap(memory)
        assert key is not None
        with _serving(memory) as url:
            rest = REST(url, memory, key)

            def machine() -> Machine:
                n = next(runs)
                folder = Path(tempfile.mkdtemp(dir=tmp_path))
                return Machine(rest, f"r{n}", folder)

            try:
                run_state_machine_as_test(
                    machine, settings=settings(RUN, max_examples=4, stateful_step_count=20)
                )
            finally:
                rest.close()
