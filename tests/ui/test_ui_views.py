"""The inspector's tiers page, time machine, version diff and grants column, and their isolation."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from html import escape

from memstrata.server.ui.diff import word_diff
from tests.ui.conftest import Inspector, Person, iso, shows_nothing, tiered

Cube = tuple[Person, str, list[str]]
SignIn = Callable[[str], Person]
# -- tiers ---------------------------------------------------------------------------------------


def test_the_tiers_page(inspector: Inspector, sign_in: SignIn) -> None:
    owner = sign_in("tiered")
    cube_id = tiered(inspector, owner.user_id)
    assert f'href="/ui/cubes/{cube_id}/tiers"' in owner.http.get(f"/ui/cubes/{cube_id}").text
    page = owner.http.get(f"/ui/cubes/{cube_id}/tiers")
    assert page.status_code == 200
    text = page.text
    assert "session s1" in text and "session s2" in text and "Hello again" in text
    assert "I &lt;b&gt;adore&lt;/b&gt; cats." in text and "<b>adore" not in text
    [segment] = inspector.memory.list_memories(
        cube_id, user_id=owner.user_id, filters={"tier": "mid", "type": "segment"}
    )
    assert segment.heat is not None and f"<td>{segment.heat:.3f}</td>" in text
    pages = [s.item_id for s in segment.sources if s.item_id]
    assert len(pages) == 3 and all(f"/items/{p}" in text for p in pages)
    assert "α·visits + β·pages" in text
    profile = inspector.memory.get_profile(user_id=owner.user_id, cube_id=cube_id)
    assert profile and all(escape(a.text) in text for a in profile)
    assert all(f"/items/{e}" in text for a in profile for e in a.evidence)
    assert "lives_in" in text and "Ann likes tea over coffee" in text  # profile, preference
    assert "Ann works as a nurse at the clinic." in text  # a fact


def test_an_empty_cube_has_empty_tiers(cube: Cube) -> None:
    owner, cube_id, _ = cube
    page = owner.http.get(f"/ui/cubes/{cube_id}/tiers")
    assert page.status_code == 200 and "Miso" in page.text
    assert "No segment in the mid tier." in page.text
    assert "Ann lives in Porto" in page.text  # the rules read the working turns at once


# -- time machine --------------------------------------------------------------------------------


def test_the_time_machine(inspector: Inspector, cube: Cube) -> None:
    owner, cube_id, ids = cube
    first = inspector.memory.history(ids[0], user_id=owner.user_id)[0].at
    later = inspector.memory.add("I bought a red bicycle.", user_id=owner.user_id, cube_id=cube_id)
    assert later
    path = f"/ui/cubes/{cube_id}/as-of"
    form = owner.http.get(path)
    assert form.status_code == 200 and 'type="datetime-local"' in form.text
    assert "Porto" not in form.text  # nothing shown before a time is chosen
    then = owner.http.get(path, params={"at": iso(first)})
    assert then.status_code == 200
    assert f"As of {first.strftime('%Y-%m-%d %H:%M:%S')} UTC" in then.text
    assert "Porto last spring" in then.text and "April 2023" not in then.text
    assert "bicycle" not in then.text
    now = owner.http.get(path, params={"at": iso(datetime.now(timezone.utc))})
    assert "April 2023" in now.text and "bicycle" in now.text
    hits = owner.http.get(path, params={"at": iso(first), "q": "where did Ann move?"})
    assert hits.status_code == 200 and "Porto last spring" in hits.text
    assert "April 2023" not in hits.text
    before = owner.http.get(path, params={"at": "2001-01-01T00:00"})
    assert before.status_code == 422 and "before the cube existed" in before.text
    assert owner.http.get(path, params={"at": "yesterday"}).status_code == 422


# -- version diff --------------------------------------------------------------------------------


def test_word_diff_marks_and_escapes() -> None:
    shown = word_diff("I moved to Porto last spring.", "I moved to Porto in April 2023.")
    assert shown.startswith("I moved to Porto ")
    assert re.search(r"<del>[^<]*last[^<]*</del>", shown)
    assert re.search(r"<ins>[^<]*April[^<]*</ins>", shown)
    escaped = word_diff("a <b>x</b>", "a <script>y</script>")
    assert "<b>" not in escaped and "<script>" not in escaped
    assert "<del>&lt;b&gt;x&lt;/b&gt;</del>" in escaped
    assert "<ins>&lt;script&gt;y&lt;/script&gt;</ins>" in escaped


def test_the_version_diff(cube: Cube) -> None:
    owner, cube_id, ids = cube
    item = owner.http.get(f"/ui/cubes/{cube_id}/items/{ids[0]}")
    assert f'action="/ui/cubes/{cube_id}/items/{ids[0]}/diff"' in item.text
    path = f"/ui/cubes/{cube_id}/items/{ids[0]}/diff"
    page = owner.http.get(path, params={"a": "1", "b": "2"})
    assert page.status_code == 200
    assert re.search(r"<del>[^<]*last[^<]*</del>", page.text)
    assert re.search(r"<ins>[^<]*April[^<]*</ins>", page.text)
    assert owner.http.get(path).text.count("<ins>") >= 1  # the last two versions by default
    assert owner.http.get(path, params={"a": "9"}).status_code == 404
    assert owner.http.get(path, params={"a": "one"}).status_code == 422


# -- grants --------------------------------------------------------------------------------------


def test_grants_only_for_who_may_see_them(
    inspector: Inspector, cube: Cube, sign_in: SignIn
) -> None:
    owner, cube_id, _ = cube
    reader = sign_in("grantee")
    inspector.memory.grant(cube_id, reader.user_id, "read", by=owner.user_id)
    mine = owner.http.get("/ui").text
    assert ">grants<" in mine and f"{reader.user_id}: read" in mine
    assert f"{owner.user_id}: admin" in mine
    theirs = reader.http.get("/ui").text
    assert f"/ui/cubes/{cube_id}" in theirs  # the reader sees the cube…
    assert f"{reader.user_id}: read" not in theirs  # …but not who holds what on it
    assert f"{owner.user_id}: admin" not in theirs


# -- isolation -----------------------------------------------------------------------------------


def test_new_pages_show_nothing_of_another_users_cube(
    inspector: Inspector, cube: Cube, sign_in: SignIn
) -> None:
    owner, cube_id, ids = cube
    stranger = sign_in("outsider")
    own_cube = inspector.memory.create_cube("mine", owner=stranger.user_id).cube_id
    now = iso(datetime.now(timezone.utc))
    home = stranger.http.get("/ui").text
    assert cube_id not in home and owner.user_id not in home
    gets = [
        f"/ui/cubes/{cube_id}/tiers",
        f"/ui/cubes/{cube_id}/as-of",
        f"/ui/cubes/{cube_id}/as-of?at={now}",
        f"/ui/cubes/{cube_id}/as-of?at={now}&q=cat",
        f"/ui/cubes/{cube_id}/items/{ids[0]}/diff",
        f"/ui/cubes/{cube_id}/items/{ids[0]}/diff?a=1&b=2",
        f"/ui/cubes/{own_cube}/items/{ids[0]}/diff?a=1&b=2",  # someone else's item, own cube
    ]
    shows_nothing(stranger, gets)
    with inspector.browser() as anonymous:  # and nothing before sign-in
        for path in gets:
            page = anonymous.get(path)
            assert page.status_code == 303 and page.headers["location"] == "/ui", path


def test_numbers_in_forms_and_queries_are_bounded(cube: Cube) -> None:
    """A number that is not plain ASCII digits, or too long to be one, is a 422, never a 500."""
    owner, cube_id, ids = cube
    for bad in ("²", "9" * 5000, "-1", "1e3"):
        for path, params in (
            (f"/ui/cubes/{cube_id}", {"page": bad}),
            (f"/ui/cubes/{cube_id}/context", {"q": "cat", "budget": bad}),
            (f"/ui/cubes/{cube_id}/items/{ids[0]}/diff", {"a": bad, "b": "2"}),
        ):
            assert owner.http.get(path, params=params).status_code == 422, (path, bad[:5])
        path = f"/ui/cubes/{cube_id}/items/{ids[0]}/rollback"
        done = owner.http.post(path, data={"version": bad, "csrf_token": owner.csrf()})
        assert done.status_code == 422, bad[:5]


# -- an item's citing items, and the browser's time filter ---------------------------------------


def test_an_item_page_lists_the_items_citing_it(inspector: Inspector, sign_in: SignIn) -> None:
    owner = sign_in("cited")
    cube_id = tiered(inspector, owner.user_id)
    memory = inspector.memory
    facts = memory.list_memories(cube_id, user_id=owner.user_id, filters={"tier": "long"})
    fact = next(f for f in facts if f.sources and f.sources[0].item_id)
    turn_id = fact.sources[0].item_id
    assert turn_id is not None
    citing = memory.cited_by(turn_id, user_id=owner.user_id)
    assert fact.id in {c.id for c in citing}
    page = owner.http.get(f"/ui/cubes/{cube_id}/items/{turn_id}").text
    for item in citing:  # each linked from the turn's page
        assert f'href="/ui/cubes/{cube_id}/items/{item.id}"' in page
    stranger = sign_in("uncited")
    shows_nothing(stranger, [f"/ui/cubes/{cube_id}/items/{turn_id}"])


def test_the_browser_filters_by_event_time(cube: Cube) -> None:
    owner, cube_id, ids = cube
    today = datetime.now(timezone.utc).date().isoformat()
    listed = owner.http.get(f"/ui/cubes/{cube_id}?since={today}&until={today}").text
    assert all(i in listed for i in ids)  # today's memories, the whole day included
    later = owner.http.get(f"/ui/cubes/{cube_id}?since=2999-01-01").text
    assert not any(i in later for i in ids)
    refused = owner.http.get(f"/ui/cubes/{cube_id}?since=2025-02-01&until=2025-01-01")
    assert refused.status_code == 422 and "since is after until" in refused.text
