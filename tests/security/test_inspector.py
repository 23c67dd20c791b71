"""Findings 6, 11, 12 and 13 of issue 24 (an outside attack on the service): the inspector.

6. Anyone could sign everyone out of the inspector: 1,001 anonymous ``GET /ui`` evicted every
   open sign-in form's token from a bounded store, and one user signing in again and again
   evicted every other user's session from one global table.
11. A page showed its query's ``done`` as the inspector's own notice, so a link could make it
    say anything ("Your session expired. Paste your API key at …").
12. Bidirectional controls (U+202E…) in names and texts were sent raw, reordering what a page
    shows.
13. ``/docs`` loaded Swagger UI's script from a CDN onto the inspector's origin.

The inspector does not touch the engine (its sessions live in the server's memory), so these
replays run on the SQLite server of ``tests/ui``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memstrata.server.rest import create_app
from memstrata.server.ui import markup
from memstrata.server.ui import sessions as ui_sessions
from tests.server.conftest import serving
from tests.ui.conftest import Inspector, Person, csrf_of, inspector

__all__ = ["inspector"]  # the fixture, shared with tests/ui

#: Anonymous visits in the replay of finding 6: one more than the old store of sign-in forms.
ANONYMOUS_VISITS = 1_001
SPOOF = "Your session expired. Paste your API key at https://evil.example/login"
#: The bidirectional controls of finding 12: embeddings, overrides, isolates and marks.
CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


@dataclass
class Served:
    """An app of its own over the inspector's ``MemoryOS`` (so a test may look at its state)."""

    url: str
    app: FastAPI

    def browser(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)

    def sign_in(self, key: str, http: httpx.Client | None = None) -> httpx.Client:
        """``http`` (a new browser by default) signed in with ``key`` through the form."""
        http = http or self.browser()
        token = csrf_of(http.get("/ui").text)
        signed = http.post("/ui/sign-in", data={"key": key, "csrf_token": token})
        assert signed.status_code == 303, signed.text
        return http


@pytest.fixture
def served(inspector: Inspector) -> Iterator[Served]:
    app = create_app(inspector.memory)
    with serving(app) as url:
        yield Served(url, app)


def signed_in(http: httpx.Client) -> bool:
    """Whether ``http``'s session is live: the tasks page answers instead of sending to /ui."""
    return http.get("/ui/tasks").status_code == 200


# -- finding 6: nobody signs anybody else out ----------------------------------------------------


def test_anonymous_visits_do_not_break_an_open_sign_in_form(
    inspector: Inspector, served: Served
) -> None:
    """Finding 6 of issue 24: 1,001 anonymous GET /ui evicted the token of a sign-in form shown
    before them (a bounded store of 1,000 anonymous sessions); the form must still work, and
    showing it must keep nothing on the server."""
    _, key = inspector.person("patient")
    # the crowd calls the same app in process: over loopback each request waits ~40 ms for a
    # delayed ACK, and a thousand of them would take a minute
    with served.browser() as waiting, TestClient(served.app) as crowd:
        token = csrf_of(waiting.get("/ui").text)
        for _ in range(ANONYMOUS_VISITS):
            crowd.cookies.clear()  # a new anonymous visitor each time
            assert crowd.get("/ui").status_code == 200
        signed = waiting.post("/ui/sign-in", data={"key": key, "csrf_token": token})
        assert signed.status_code == 303
        assert signed_in(waiting)
    sessions: ui_sessions.Sessions = served.app.state.ui_sessions
    assert len(sessions) == 1  # the one sign-in; no visitor left state behind


def test_the_sign_in_token_is_tied_to_its_browser_and_signed(
    inspector: Inspector, served: Served
) -> None:
    """Finding 6 of issue 24: the sign-in form's token, now kept by no server table, must still
    be refused from another browser, altered, or signed by another server process."""
    _, key = inspector.person("tied")
    with served.browser() as mine, served.browser() as other:
        token = csrf_of(mine.get("/ui").text)
        other.get("/ui")  # a form nonce of its own
        assert other.post("/ui/sign-in", data={"key": key, "csrf_token": token}).status_code == 403
        made, mac = token.split(".", 1)
        for forged in (f"{int(made) + 1}.{mac}", f"{made}.{'0' * len(mac)}", made, ""):
            form = {"key": key, "csrf_token": forged}
            assert mine.post("/ui/sign-in", data=form).status_code == 403
        assert not signed_in(mine)
        nonce = mine.cookies["memstrata_ui"]
    # the same cookie and token at another server (another secret): refused
    with httpx.Client(base_url=inspector.url, cookies={"memstrata_ui": nonce}) as elsewhere:
        form = {"key": key, "csrf_token": token}
        assert elsewhere.post("/ui/sign-in", data=form).status_code == 403


def test_signing_in_again_and_again_ends_only_ones_own_oldest_sessions(
    inspector: Inspector, served: Served
) -> None:
    """Finding 6 of issue 24: one user signing in 10,000 times evicted every other user's session
    from one global table; a user's new session must end only that user's own oldest."""
    _, victim_key = inspector.person("victim")
    _, eager_key = inspector.person("eager")
    extra, bound = 4, ui_sessions.MAX_SESSIONS_PER_USER
    victim = served.sign_in(victim_key)
    eager: list[httpx.Client] = []
    try:
        eager += [served.sign_in(eager_key) for _ in range(bound + extra)]
        assert signed_in(victim)
        assert [signed_in(b) for b in eager] == [False] * extra + [True] * bound
    finally:
        for browser in (victim, *eager):
            browser.close()


def test_a_full_session_table_ends_a_session_of_the_user_holding_the_most() -> None:
    """Finding 6 of issue 24: when every session the server keeps is taken, the one ended is the
    oldest of the user holding the most, not the oldest of all (which would be another user's)."""
    sessions = ui_sessions.Sessions(most=6, per_user=3)
    first = sessions.start("key-a", "ann")
    others = [sessions.start("key-b", "bob"), sessions.start("key-c", "cy")]
    heavy = [sessions.start("key-d", "dee") for _ in range(3)]  # dee holds the most
    assert len(sessions) == 6
    sessions.start("key-e", "eve")  # the table is full
    assert sessions.get(first.session_id) == first
    assert all(sessions.get(s.session_id) == s for s in others)
    assert sessions.get(heavy[0].session_id) is None
    assert [sessions.get(s.session_id) for s in heavy[1:]] == heavy[1:]
    assert len(sessions) == 6


# -- finding 11: notices come from a fixed set ---------------------------------------------------


@pytest.fixture
def owner(inspector: Inspector, served: Served) -> Iterator[tuple[Person, str, str]]:
    """A signed-in owner of a cube with one item: (person, cube id, item id)."""
    user_id, key = inspector.person("owner")
    cube_id = inspector.memory.create_cube("notes", owner=user_id).cube_id
    [item_id] = inspector.memory.add(
        [{"role": "user", "content": "I moved to Porto."}], user_id=user_id, cube_id=cube_id
    )
    http = served.sign_in(key)
    yield Person(user_id, key, http), cube_id, item_id
    http.close()


def test_a_query_cannot_write_the_pages_notice(owner: tuple[Person, str, str]) -> None:
    """Finding 11 of issue 24: /ui/tasks?done=<text> showed the text as the inspector's own
    notice; a page must show only the fixed message of a known code, and nothing for another."""
    person, cube_id, item_id = owner
    item = f"/ui/cubes/{cube_id}/items/{item_id}"
    spoofs = [
        ("/ui/tasks", {"done": SPOOF}),
        ("/ui/tasks", {"done": "retried", "task": SPOOF}),
        (f"/ui/cubes/{cube_id}", {"done": SPOOF}),
        (f"/ui/cubes/{cube_id}", {"done": "erased", "n": SPOOF}),
        (item, {"done": SPOOF}),
        (item, {"done": "rolled-back", "n": SPOOF}),
    ]
    for path, query in spoofs:
        page = person.http.get(path, params=query)
        assert page.status_code == 200, path
        assert "evil.example" not in page.text and "session expired" not in page.text, path
    assert "Deleted." in person.http.get(item, params={"done": "deleted"}).text
    erased = person.http.get(f"/ui/cubes/{cube_id}", params={"done": "erased", "n": "3"})
    assert "Erased 3 item(s) for good." in erased.text


# -- finding 12: bidi controls are shown, not obeyed ---------------------------------------------


def test_bidi_controls_are_never_sent_raw(inspector: Inspector, served: Served) -> None:
    """Finding 12 of issue 24: U+202E in a cube's name, an item's text, a speaker's name and a
    document's file name was sent raw, so a page could show "invoiceexe.pdf" for
    "invoice<U+202E>fdp.exe"; it must be shown as a visible escape on every page showing them."""
    user_id, key = inspector.person("bidi")
    memory, rlo, shown = inspector.memory, "\u202e", "\u27e8U+202E\u27e9"
    cube_id = memory.create_cube(f"notes{rlo}gnp.exe", owner=user_id).cube_id
    said = {"role": "user", "name": f"Ann{rlo}", "content": f"invoice{rlo}fdp.exe"}
    [turn] = memory.add([said], user_id=user_id, cube_id=cube_id, session_id="s1")
    [chunk, *_] = memory.add_document(
        b"The contract is signed.", filename=f"report{rlo}txt.md", user_id=user_id,
        cube_id=cube_id,
    )  # fmt: skip
    http = served.sign_in(key)
    try:
        pages = {
            "/ui": [f"notes{shown}gnp.exe"],
            f"/ui/cubes/{cube_id}": [f"notes{shown}gnp.exe", f"invoice{shown}fdp.exe"],
            f"/ui/cubes/{cube_id}/items/{turn}": [f"invoice{shown}fdp.exe", f"Ann{shown}"],
            f"/ui/cubes/{cube_id}/items/{chunk}": [f"report{shown}txt.md"],
            f"/ui/cubes/{cube_id}/tiers": [f"invoice{shown}fdp.exe"],
        }
        for path, expected in pages.items():
            page = http.get(path)
            assert page.status_code == 200, path
            assert rlo not in page.text, path
            for text in expected:
                assert text in page.text, (path, text)
        search = http.get(f"/ui/cubes/{cube_id}", params={"q": f"invoice{rlo}"})
        assert f'value="invoice{rlo}"' in search.text  # a form field keeps what was typed
        assert rlo not in search.text.replace(f'value="invoice{rlo}"', "")
    finally:
        http.close()


def test_every_bidi_control_is_shown_in_text_and_attributes() -> None:
    """Finding 12 of issue 24: each bidi control (U+202A–U+202E, U+2066–U+2069, U+200E,
    U+200F, U+061C) is escaped visibly by the one escaping helper, in text and in attributes
    (but a form field's ``value``, which a form must send back as it was)."""
    for control in CONTROLS:
        visible = f"\u27e8U+{ord(control):04X}\u27e9"
        made = markup.tag("a", f"x{control}y", title=f"t{control}", href="/ui")
        assert control not in made and made.count(visible) == 2, repr(control)
        assert control not in markup.join(["a", "b"], control)
        field = markup.tag("input", name="q", value=f"q{control}")
        assert f'value="q{control}"' in field


# -- finding 13: no third-party script on the inspector's origin ---------------------------------


def test_the_api_docs_load_no_script(served: Served) -> None:
    """Finding 13 of issue 24: /docs loaded Swagger UI from a CDN on the inspector's origin; it
    must load no script at all, under a Content-Security-Policy naming no other host."""
    with served.browser() as http:
        docs = http.get("/docs")
        assert docs.status_code == 200
        assert "<script" not in docs.text.lower()
        assert 'href="http' not in docs.text and 'src="' not in docs.text
        policy = docs.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy
        assert "http" not in policy and "*" not in policy
        assert 'id="op-post--search"' in docs.text and 'id="schema-SearchIn"' in docs.text
        assert 'href="/openapi.json"' in docs.text
        assert http.get("/redoc").status_code == 404
        assert "/memories" in http.get("/openapi.json").json()["paths"]


def test_the_api_docs_escape_what_the_description_holds() -> None:
    """Finding 13 of issue 24: the page that replaces Swagger UI renders the description as
    text: markup in a summary or a field's description is escaped, never run."""
    from memstrata.server.ui.apidocs import api_page

    evil = '<script src="https://cdn.example/x.js"></script>'
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1", "description": evil},
        "paths": {"/x": {"get": {"summary": evil, "responses": {"200": {"description": evil}}}}},
        "components": {"schemas": {"S": {"properties": {"f": {"description": evil}}}}},
    }
    rendered = str(api_page(spec))
    assert "<script" not in rendered and "&lt;script" in rendered
