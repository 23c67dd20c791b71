"""The inspector's audit page: filters by op, actor and time, pages, and who may read it."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape

import pytest

from memstrata.errors import MemstrataError
from tests.ui.conftest import Inspector, Person, iso, shows_nothing

Cube = tuple[Person, str, list[str]]
SignIn = Callable[[str], Person]
ROW = re.compile(r"<tr><td>(\d+)</td><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td>")


def shown(page: str) -> list[tuple[int, str, str]]:
    """The events on an audit page: (seq, actor, op), in the order shown."""
    return [(int(seq), actor, op) for seq, actor, op in ROW.findall(page)]


def test_audit_filters_by_op_actor_and_time(
    inspector: Inspector, cube: Cube, sign_in: SignIn
) -> None:
    owner, cube_id, ids = cube
    writer = sign_in("writer")
    memory = inspector.memory
    memory.grant(cube_id, writer.user_id, "write", by=owner.user_id)
    memory.update(ids[2], user_id=writer.user_id, text="I work as a nurse at the hospital.")
    events = memory.audit(by=owner.user_id, cube_id=cube_id)
    path = f"/ui/cubes/{cube_id}/audit"

    everything = owner.http.get(path)
    assert everything.status_code == 200
    # the background work's events have no actor: shown empty
    assert shown(everything.text) == [(e.seq, e.actor or "", e.op) for e in reversed(events)]
    assert f"{len(events)} of the {len(events)} events read match" in everything.text
    assert '<option value="update">' in everything.text  # the ops read are the choices
    assert f'<option value="{writer.user_id}">' in everything.text

    updates = shown(owner.http.get(path, params={"op": "update"}).text)
    assert updates == [
        (e.seq, e.actor or "", "update") for e in reversed(events) if e.op == "update"
    ]
    assert len(updates) == 2  # the owner's update (the fixture's) and the writer's
    by_writer = shown(owner.http.get(path, params={"actor": writer.user_id}).text)
    assert by_writer == [(events[-1].seq, writer.user_id, "update")]
    both = shown(owner.http.get(path, params={"op": "create", "actor": writer.user_id}).text)
    assert both == []

    creates = [e for e in events if e.op == "create"]
    window = {"from": iso(creates[0].at), "to": iso(creates[-1].at)}
    timed = shown(owner.http.get(path, params=window).text)
    assert timed == [(e.seq, e.actor or "", e.op) for e in reversed(events)
                     if creates[0].at <= e.at <= creates[-1].at]  # fmt: skip
    assert {op for _, _, op in timed} == {"create"} and len(timed) == len(creates)
    since = memory.audit(by=owner.user_id, cube_id=cube_id, since=events[-1].at)
    later = shown(owner.http.get(path, params={"from": iso(events[-1].at)}).text)
    assert later == [(e.seq, e.actor or "", e.op) for e in reversed(since)]  # the core's `since`


def test_audit_pages_newest_first(inspector: Inspector, cube: Cube) -> None:
    owner, cube_id, _ = cube
    lines = [{"role": "user", "content": f"Note number {n}."} for n in range(50)]
    inspector.memory.add(lines, user_id=owner.user_id, cube_id=cube_id)
    creates = [e.seq for e in inspector.memory.audit(by=owner.user_id, cube_id=cube_id)
               if e.op == "create"]  # fmt: skip
    assert 50 < len(creates) <= 100  # the turns, and the segments their overflow made
    path = f"/ui/cubes/{cube_id}/audit"
    first = owner.http.get(path, params={"op": "create"}).text
    assert [seq for seq, _, _ in shown(first)] == creates[::-1][:50]
    assert "next →" in first and "← previous" not in first
    assert "/audit?op=create&amp;page=2" in first  # the filters stay on the next page
    second = owner.http.get(path, params={"op": "create", "page": "2"}).text
    assert [seq for seq, _, _ in shown(second)] == creates[::-1][50:]
    assert "next →" not in second and "← previous" in second


def test_audit_parameters_are_bounded(cube: Cube) -> None:
    owner, cube_id, _ = cube
    path = f"/ui/cubes/{cube_id}/audit"
    for params in (
        {"from": "yesterday"},
        {"to": "2026-13-45T99:00"},
        {"from": "9" * 5000},
        {"actor": "x" * 300},
        {"op": "a\nb"},
        {"page": "²"},
        {"page": "0"},
    ):
        page = owner.http.get(path, params=params)
        assert page.status_code == 422, params
        assert "Miso" not in page.text


def test_only_the_cubes_admins_read_its_audit(
    inspector: Inspector, cube: Cube, sign_in: SignIn
) -> None:
    owner, cube_id, _ = cube
    reader = sign_in("auditreader")
    inspector.memory.grant(cube_id, reader.user_id, "write", by=owner.user_id)
    with pytest.raises(MemstrataError) as sdk:
        inspector.memory.audit(by=reader.user_id, cube_id=cube_id)
    page = reader.http.get(f"/ui/cubes/{cube_id}/audit", params={"op": "create"})
    assert page.status_code == sdk.value.status == 403
    assert escape(sdk.value.message) in page.text and "Miso" not in page.text
    stranger = sign_in("auditstranger")
    query = f"op=create&actor={owner.user_id}&from=2020-01-01T00:00&to=2100-01-01T00:00"
    shows_nothing(stranger, [f"/ui/cubes/{cube_id}/audit?{query}"])
