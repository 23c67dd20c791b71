"""The inspector under test: the real REST app (with ``/ui``) served by uvicorn on loopback.

One server and database (SQLite, e5, tasks run inline) serve the session; each test makes its
own users and cubes (``people``), so tests do not see each other's data.  ``sign_in`` drives the
sign-in form as a browser would: GET ``/ui`` for the cookie and the CSRF token, then POST.
``tiered`` makes a cube with all three tiers filled (turns, a segment, a profile and facts).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from memstrata import MemoryOS
from memstrata.server.rest import bootstrap, create_app
from tests.server.conftest import serving

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class Inspector:
    """The running server: its URL and the ``MemoryOS`` behind it (the SDK the UI must match)."""

    url: str
    memory: MemoryOS
    ids: Iterator[int]

    def person(self, prefix: str = "user") -> tuple[str, str]:
        """A new user with a key: (user id, API key)."""
        user_id = f"{prefix}-{next(self.ids)}"
        self.memory.create_user(user_id)
        secret = self.memory.create_key(user_id, by="admin").secret
        assert secret is not None
        return user_id, secret

    def browser(self) -> httpx.Client:
        """A client that keeps cookies and does not follow redirects (tests look at them)."""
        return httpx.Client(base_url=self.url, timeout=60)


@dataclass(frozen=True)
class Person:
    """A signed-in user: id, key, and a client holding the session cookie."""

    user_id: str
    key: str
    http: httpx.Client

    def csrf(self, path: str = "/ui") -> str:
        """The CSRF token on the page at ``path``."""
        return csrf_of(self.http.get(path).text)


#: every turn but the last leaves the working tier at once, joins a segment and is promoted
HOT = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 0.0}
TURNS = [
    "My name is Ann and I live in Porto. I really love hiking.",
    "I work as a nurse at the clinic.",
    "I prefer tea over coffee.",
    "I <b>adore</b> cats.",
]


def iso(at: datetime) -> str:
    """A time as a query value (naive UTC, to the microsecond)."""
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")


def tiered(inspector: Inspector, owner: str) -> str:
    """A cube of user ``owner`` with working turns in two sessions, a segment and a long tier."""
    memory = inspector.memory
    cube_id = memory.create_cube("tiers", owner=owner, settings=HOT).cube_id
    turns = [{"role": "user", "name": "Ann", "content": c} for c in TURNS]
    memory.add(turns, user_id=owner, cube_id=cube_id, session_id="s1")
    hello = [{"role": "user", "name": "Ann", "content": "Hello again"}]
    memory.add(hello, user_id=owner, cube_id=cube_id, session_id="s2")
    assert memory.wait(cube_id, timeout=120)
    memory.consolidate(cube_id, user_id=owner, promote_all=True)
    return cube_id


#: Words of the ``cube`` fixture's memories: a refused page must show none of them.
SECRETS = ("Miso", "Porto")


def shows_nothing(person: Person, paths: list[str]) -> None:
    """Each of ``paths`` is refused to ``person`` (403/404) with none of ``SECRETS`` on it."""
    for path in paths:
        page = person.http.get(path)
        assert page.status_code in (403, 404), path
        assert not any(secret in page.text for secret in SECRETS), path


def csrf_of(page: str) -> str:
    """The ``csrf_token`` of the first form on ``page``."""
    found = CSRF.search(page)
    assert found, page
    return found.group(1)


@pytest.fixture(scope="session")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspector]:
    db = Path(tmp_path_factory.mktemp("ui")) / "ui.db"
    with MemoryOS.open(str(db), workers=0) as memory:
        assert bootstrap(memory) is not None
        with serving(create_app(memory)) as url:
            yield Inspector(url, memory, itertools.count())


@pytest.fixture
def sign_in(inspector: Inspector) -> Iterator[Callable[[str], Person]]:
    """Make a user and sign them in through the form; closes the clients afterwards."""
    clients: list[httpx.Client] = []

    def make(prefix: str = "user") -> Person:
        user_id, key = inspector.person(prefix)
        http = inspector.browser()
        clients.append(http)
        token = csrf_of(http.get("/ui").text)
        signed = http.post("/ui/sign-in", data={"key": key, "csrf_token": token})
        assert signed.status_code == 303, signed.text
        return Person(user_id, key, http)

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def cube(inspector: Inspector, sign_in: Callable[[str], Person]) -> tuple[Person, str, list[str]]:
    """A signed-in owner of a new cube with three turns, the first updated once (2 versions)."""
    owner = sign_in("owner")
    memory = inspector.memory
    cube_id = memory.create_cube("notes", owner=owner.user_id).cube_id
    ids = memory.add(
        [
            {"role": "user", "name": "Ann", "content": "I moved to Porto last spring."},
            {"role": "user", "name": "Ann", "content": "My cat is called Miso."},
            {"role": "user", "name": "Ann", "content": "I work as a nurse at the clinic."},
        ],
        user_id=owner.user_id,
        cube_id=cube_id,
        session_id="s1",
    )
    memory.update(ids[0], user_id=owner.user_id, text="I moved to Porto in April 2023.")
    return owner, cube_id, ids
