"""The inspector over HTTP: sign-in and CSRF, isolation, and actions that match the SDK."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape
from pathlib import Path

import httpx
import pytest

from memstrata.errors import MemstrataError
from tests.serving import ADMIN_KEY, served
from tests.ui.conftest import Inspector, Person, csrf_of, shows_nothing

Cube = tuple[Person, str, list[str]]
SignIn = Callable[[str], Person]


def item_path(cube_id: str, item_id: str, action: str = "") -> str:
    return f"/ui/cubes/{cube_id}/items/{item_id}" + (f"/{action}" if action else "")


def refused_text(page: httpx.Response) -> str:
    """The error message a refusal page shows."""
    found = re.search(r'<p class="error">(.*?)</p>', page.text)
    assert found, page.text
    return found.group(1)


# -- signing in ----------------------------------------------------------------------------------


def test_no_memory_before_sign_in(inspector: Inspector, cube: Cube) -> None:
    _, cube_id, ids = cube
    with inspector.browser() as http:
        home = http.get("/ui")
        assert home.status_code == 200
        assert 'name="key"' in home.text and 'name="csrf_token"' in home.text
        assert cube_id not in home.text and "Porto" not in home.text
        for path in (f"/ui/cubes/{cube_id}", item_path(cube_id, ids[0]), "/ui/tasks"):
            page = http.get(path)
            assert page.status_code == 303 and page.headers["location"] == "/ui"
            assert "Porto" not in page.text and "Miso" not in page.text


def test_the_session_cookie_is_httponly_and_strict(inspector: Inspector) -> None:
    with inspector.browser() as http:
        cookie = http.get("/ui").headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie


@pytest.mark.parametrize("token", [None, "", "forged-token"])
def test_sign_in_without_the_csrf_token_is_refused(inspector: Inspector, token: str | None) -> None:
    _, key = inspector.person()
    with inspector.browser() as http:
        http.get("/ui")
        form = {"key": key} if token is None else {"key": key, "csrf_token": token}
        assert http.post("/ui/sign-in", data=form).status_code == 403
        assert 'name="key"' in http.get("/ui").text  # still signed out


def test_sign_in_without_a_session_is_refused(inspector: Inspector) -> None:
    _, key = inspector.person()
    with inspector.browser() as http:
        token = csrf_of(http.get("/ui").text)
    with inspector.browser() as other:  # the token of another browser's session
        assert other.post("/ui/sign-in", data={"key": key, "csrf_token": token}).status_code == 403


def test_a_wrong_key_is_refused(inspector: Inspector) -> None:
    with inspector.browser() as http:
        token = csrf_of(http.get("/ui").text)
        page = http.post("/ui/sign-in", data={"key": "ms_not_a_key", "csrf_token": token})
        assert page.status_code == 401 and "unknown or revoked" in page.text
        assert 'name="key"' in http.get("/ui").text


def test_sign_in_starts_a_new_session(inspector: Inspector) -> None:
    _, key = inspector.person()
    with inspector.browser() as http:
        before = http.get("/ui").cookies["memstrata_ui"]
        signed = http.post(
            "/ui/sign-in", data={"key": key, "csrf_token": csrf_of(http.get("/ui").text)}
        )
        assert signed.status_code == 303
        assert signed.cookies["memstrata_ui"] != before


def test_sign_out(sign_in: SignIn) -> None:
    person = sign_in("leaver")
    assert person.http.post("/ui/sign-out", data={}).status_code == 403
    done = person.http.post("/ui/sign-out", data={"csrf_token": person.csrf()})
    assert done.status_code == 303
    assert 'name="key"' in person.http.get("/ui").text


def test_a_revoked_key_ends_the_session(inspector: Inspector, sign_in: SignIn) -> None:
    person = sign_in("revoked")
    [key] = inspector.memory.list_keys(person.user_id, by="admin")
    inspector.memory.revoke_key(person.user_id, key.key_id, by="admin")
    assert person.http.get("/ui/tasks").status_code == 303
    assert 'name="key"' in person.http.get("/ui").text


# -- what a user sees ----------------------------------------------------------------------------


def test_cubes_are_listed_with_links(cube: Cube) -> None:
    owner, cube_id, _ = cube
    home = owner.http.get("/ui")
    assert home.status_code == 200
    assert f'href="/ui/cubes/{cube_id}"' in home.text
    assert "working/turn: 3" in home.text and owner.user_id in home.text


def test_a_cube_page_shows_its_memories(cube: Cube) -> None:
    owner, cube_id, ids = cube
    page = owner.http.get(f"/ui/cubes/{cube_id}")
    assert page.status_code == 200
    assert "Porto in April 2023" in page.text and "Miso" in page.text
    assert item_path(cube_id, ids[1]) in page.text
    only = owner.http.get(f"/ui/cubes/{cube_id}", params={"tier": "mid"})
    assert "Miso" not in only.text and "No memory matches" in only.text
    bad = owner.http.get(f"/ui/cubes/{cube_id}", params={"tier": "attic"})
    assert bad.status_code == 422 and "unknown value" in refused_text(bad)


def test_search_shows_channel_ranks_and_fused_score(cube: Cube) -> None:
    owner, cube_id, _ = cube
    page = owner.http.get(f"/ui/cubes/{cube_id}", params={"q": "what is the cat called?"})
    assert page.status_code == 200 and "Miso" in page.text
    assert re.search(r"(keyword|dense) #1", page.text)
    assert re.search(r"<td>0\.\d{4}</td>", page.text)


def test_an_item_page(cube: Cube) -> None:
    owner, cube_id, ids = cube
    page = owner.http.get(item_path(cube_id, ids[0]))
    assert page.status_code == 200
    assert "I moved to Porto in April 2023." in page.text  # current text
    assert "I moved to Porto last spring." in page.text  # version 1
    assert "Roll back to 1" in page.text and ">update<" in page.text  # versions, events


def test_memory_text_is_escaped(inspector: Inspector, cube: Cube) -> None:
    owner, cube_id, _ = cube
    inspector.memory.add("<script>alert(1)</script>", user_id=owner.user_id, cube_id=cube_id)
    page = owner.http.get(f"/ui/cubes/{cube_id}")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "<script>" not in page.text


def test_context_preview_audit_and_tasks(cube: Cube) -> None:
    owner, cube_id, _ = cube
    context = owner.http.get(f"/ui/cubes/{cube_id}/context", params={"q": "cat", "budget": "200"})
    assert context.status_code == 200 and "Miso" in context.text and "of 200 tokens" in context.text
    audit = owner.http.get(f"/ui/cubes/{cube_id}/audit")
    assert audit.status_code == 200 and ">create<" in audit.text
    tasks = owner.http.get("/ui/tasks", params={"cube": cube_id})
    assert tasks.status_code == 200 and "<table>" in tasks.text


# -- isolation -----------------------------------------------------------------------------------


def test_another_users_cube_shows_nothing(
    inspector: Inspector, cube: Cube, sign_in: SignIn
) -> None:
    owner, cube_id, ids = cube
    stranger = sign_in("stranger")
    own_cube = inspector.memory.create_cube("mine", owner=stranger.user_id).cube_id
    assert cube_id not in stranger.http.get("/ui").text
    token = stranger.csrf()
    gets = [
        f"/ui/cubes/{cube_id}",
        f"/ui/cubes/{cube_id}?q=cat",
        f"/ui/cubes/{cube_id}?status=any",
        f"/ui/cubes/{cube_id}/context?q=cat",
        f"/ui/cubes/{cube_id}/audit",
        f"/ui/cubes/{cube_id}/audit?op=create&actor={owner.user_id}",
        f"/ui/tasks?cube={cube_id}",
        item_path(cube_id, ids[1]),
        item_path(cube_id, ids[1], "erase"),
        item_path(own_cube, ids[1]),  # someone else's item under one's own cube
    ]
    shows_nothing(stranger, gets)
    posts = [
        ("rollback", {"version": "1"}),
        ("transition", {"to": "activated"}),
        ("delete", {}),
        ("erase", {"confirm": "yes"}),
    ]
    for action, form in posts:
        for where in (cube_id, own_cube):
            path = item_path(where, ids[0], action)
            page = stranger.http.post(path, data={**form, "csrf_token": token})
            assert page.status_code in (403, 404), path
            assert "Porto" not in page.text
    item = inspector.memory.get(ids[0], user_id=owner.user_id)
    assert (item.text, item.version, item.status) == (
        "I moved to Porto in April 2023.",
        2,
        "generated",
    )


# -- actions -------------------------------------------------------------------------------------


def test_rollback_through_the_ui(inspector: Inspector, cube: Cube) -> None:
    owner, cube_id, ids = cube
    path = item_path(cube_id, ids[0], "rollback")
    assert owner.http.post(path, data={"version": "1"}).status_code == 403  # no CSRF token
    assert inspector.memory.get(ids[0], user_id=owner.user_id).version == 2
    done = owner.http.post(path, data={"version": "1", "csrf_token": owner.csrf()})
    assert done.status_code == 303
    item = inspector.memory.get(ids[0], user_id=owner.user_id)
    assert (item.text, item.version) == ("I moved to Porto last spring.", 3)
    shown = owner.http.get(done.headers["location"])
    assert "Rolled back to version 1" in shown.text


def test_erase_needs_a_confirmation(inspector: Inspector, cube: Cube) -> None:
    owner, cube_id, ids = cube
    confirm = owner.http.get(item_path(cube_id, ids[1], "erase"))
    assert confirm.status_code == 200 and "cannot be undone" in confirm.text
    token = csrf_of(confirm.text)
    path = item_path(cube_id, ids[1], "erase")
    again = owner.http.post(path, data={"csrf_token": token})  # not confirmed: asked again
    assert again.status_code == 200 and "cannot be undone" in again.text
    assert owner.http.post(path, data={"confirm": "yes"}).status_code == 403  # no CSRF token
    assert inspector.memory.get(ids[1], user_id=owner.user_id).text == "My cat is called Miso."
    done = owner.http.post(path, data={"confirm": "yes", "csrf_token": token})
    assert done.status_code == 303 and done.headers["location"].startswith(f"/ui/cubes/{cube_id}?")
    erased = inspector.memory.get(ids[1], user_id=owner.user_id)
    assert (erased.text, erased.status) == ("", "deleted")
    hits = inspector.memory.search("cat Miso", user_id=owner.user_id, cube_ids=[cube_id])
    assert ids[1] not in [h.item.id for h in hits]
    assert "Miso" not in owner.http.get(done.headers["location"]).text


def test_delete_through_the_ui(inspector: Inspector, cube: Cube) -> None:
    owner, cube_id, ids = cube
    done = owner.http.post(item_path(cube_id, ids[2], "delete"), data={"csrf_token": owner.csrf()})
    assert done.status_code == 303
    assert inspector.memory.get(ids[2], user_id=owner.user_id).status == "deleted"


def test_transitions_through_the_ui(inspector: Inspector, cube: Cube) -> None:
    owner, cube_id, ids = cube
    page = owner.http.get(item_path(cube_id, ids[2]))
    assert re.findall(r"Move to (\w+)", page.text) == ["activated"]  # from generated
    path = item_path(cube_id, ids[2], "transition")
    assert owner.http.post(path, data={"to": "activated"}).status_code == 403  # no CSRF token
    assert inspector.memory.get(ids[2], user_id=owner.user_id).status == "generated"
    done = owner.http.post(path, data={"to": "activated", "csrf_token": owner.csrf()})
    assert done.status_code == 303
    item = inspector.memory.get(ids[2], user_id=owner.user_id)
    assert (item.status, item.version) == ("activated", 2)
    shown = owner.http.get(done.headers["location"])
    assert "Moved to activated (version 2)." in shown.text
    assert re.findall(r"Move to (\w+)", shown.text) == ["merged", "archived", "frozen"]
    assert re.search(r'class="danger">Move to frozen<', shown.text)  # no way out of frozen


def test_a_transition_the_lifecycle_forbids_is_refused_as_in_the_sdk(
    inspector: Inspector, cube: Cube, sign_in: SignIn
) -> None:
    owner, cube_id, ids = cube
    with pytest.raises(MemstrataError) as sdk:  # generated cannot go straight to frozen
        inspector.memory.transition(ids[1], "frozen", user_id=owner.user_id, cube_id=cube_id)
    form = {"to": "frozen", "csrf_token": owner.csrf()}
    page = owner.http.post(item_path(cube_id, ids[1], "transition"), data=form)
    assert page.status_code == sdk.value.status == 409
    assert refused_text(page) == escape(sdk.value.message)
    assert escape(sdk.value.hint or "") in page.text  # "from generated it may go to: activated"
    reader = sign_in("mover")
    inspector.memory.grant(cube_id, reader.user_id, "read", by=owner.user_id)
    with pytest.raises(MemstrataError) as unwritable:
        inspector.memory.transition(ids[1], "activated", user_id=reader.user_id, cube_id=cube_id)
    form = {"to": "activated", "csrf_token": reader.csrf()}
    page = reader.http.post(item_path(cube_id, ids[1], "transition"), data=form)
    assert page.status_code == unwritable.value.status == 403
    assert refused_text(page) == escape(unwritable.value.message)
    assert inspector.memory.get(ids[1], user_id=owner.user_id).status == "generated"


def test_what_the_sdk_refuses_the_ui_refuses(
    inspector: Inspector, cube: Cube, sign_in: SignIn
) -> None:
    owner, cube_id, ids = cube
    reader = sign_in("reader")
    inspector.memory.grant(cube_id, reader.user_id, "read", by=owner.user_id)
    assert reader.http.get(item_path(cube_id, ids[0])).status_code == 200  # may read
    with pytest.raises(MemstrataError) as sdk:
        inspector.memory.delete(ids[0], user_id=reader.user_id, cube_id=cube_id)
    page = reader.http.post(
        item_path(cube_id, ids[0], "delete"), data={"csrf_token": reader.csrf()}
    )
    assert page.status_code == sdk.value.status == 403
    assert refused_text(page) == escape(sdk.value.message)
    # a rollback to a version the item does not have, asked by its owner
    with pytest.raises(MemstrataError) as missing:
        inspector.memory.rollback(ids[0], 9, user_id=owner.user_id, cube_id=cube_id)
    form = {"version": "9", "csrf_token": owner.csrf()}
    page = owner.http.post(item_path(cube_id, ids[0], "rollback"), data=form)
    assert page.status_code == missing.value.status == 404
    assert refused_text(page) == escape(missing.value.message)
    assert inspector.memory.get(ids[0], user_id=owner.user_id).version == 2


# -- from outside: memstrata serve ---------------------------------------------------------------


def test_memstrata_serve_has_the_inspector(tmp_path: Path) -> None:
    """The issue's outside check, on a real ``memstrata serve`` started with MEMSTRATA_ADMIN_KEY."""
    with served(tmp_path / "m.db", tmp_path / "serve.log") as server:
        auth = server.headers
        made = httpx.post(f"{server.url}/mem_cubes", headers=auth, json={"name": "notes"})
        cube_id = made.json()["cube_id"]
        body = {
            "cube_id": cube_id,
            "messages": [{"role": "user", "content": "Ann lives in Porto."}],
        }
        httpx.post(f"{server.url}/memories", headers=auth, json=body).raise_for_status()
        with httpx.Client(base_url=server.url, timeout=60) as http:
            home = http.get("/ui")
            assert "Porto" not in home.text and cube_id not in home.text
            form = {"key": ADMIN_KEY, "csrf_token": csrf_of(home.text)}
            assert http.post("/ui/sign-in", data=form).status_code == 303
            assert f"/ui/cubes/{cube_id}" in http.get("/ui").text
            assert "Ann lives in Porto." in http.get(f"/ui/cubes/{cube_id}").text


def test_many_sign_in_forms_never_sign_anyone_out() -> None:
    """A sign-in form's token is signed, not stored (``sessions.FormTokens``): showing the form
    any number of times keeps nothing, so it can end no session."""
    from memstrata.server.ui.sessions import Sessions

    sessions = Sessions()
    signed_in = sessions.start("a-key", "ann")
    for _ in range(2_000):
        nonce = sessions.forms.nonce(None)
        assert sessions.forms.check(nonce, sessions.forms.issue(nonce))
    assert len(sessions) == 1 and sessions.get(signed_in.session_id) == signed_in
