"""issue 26: the inspector's search pages show the parts of each hit's score (the memory
browser's search and the time machine's), escaped like any text, with no inline style or
script (the pages' CSP forbids both)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from html import escape

from memstrata.model import Hit, MemoryItem, Part
from memstrata.server.ui import parts
from memstrata.wire import part_text
from tests.ui.conftest import Inspector, Person, iso

Cube = tuple[Person, str, list[str]]
NOW = datetime(2024, 5, 8, tzinfo=timezone.utc)
ITEM = MemoryItem(id="01J", cube_id="c", text="t", event_time=NOW, created_at=NOW, updated_at=NOW)


def test_a_hits_parts_are_one_escaped_line_each() -> None:
    hostile = Part("adjustment", "<b>speaker</b>", -0.01, '<script>alert("x")</script>', factor=0.5)
    hit = Hit(ITEM, 0.02, {"dense": 1}, (Part("channel", "dense", 0.03, rank=1), hostile))
    shown = parts.score_parts(hit)
    assert shown.count("<div>") == 2 and "<div>dense #1 +0.0300</div>" in shown
    assert "<script>" not in shown and "<b>" not in shown
    assert escape(part_text(hostile)) in shown
    assert "style=" not in shown and "on" + "click" not in shown
    assert "not recorded" in parts.score_parts(Hit(ITEM, 0.02, {"dense": 1}))


def expected_lines(
    inspector: Inspector, owner: Person, cube_id: str, **search: object
) -> list[str]:
    """Every part of every hit the core gives for the page's search, as the page writes it."""
    hits = inspector.memory.search(
        "cat", user_id=owner.user_id, cube_ids=[cube_id], top_k=parts.PAGE, **search
    )
    assert hits and all(h.parts for h in hits)
    return [f"<div>{escape(part_text(p))}</div>" for h in hits for p in h.parts]


def test_the_search_pages_show_each_hits_parts(
    inspector: Inspector, cube: Cube, sign_in: Callable[[str], Person]
) -> None:
    owner, cube_id, _ = cube
    page = owner.http.get(f"/ui/cubes/{cube_id}", params={"q": "cat"})
    assert page.status_code == 200 and "<th>score parts</th>" in page.text
    assert "not recorded" not in page.text
    for line in expected_lines(inspector, owner, cube_id):
        assert line in page.text
    at = iso(datetime.now(timezone.utc))
    then = owner.http.get(f"/ui/cubes/{cube_id}/as-of", params={"at": at, "q": "cat"})
    assert then.status_code == 200 and "<th>score parts</th>" in then.text
    assert "not recorded" not in then.text
    for line in expected_lines(inspector, owner, cube_id, as_of=at):
        assert line in then.text
