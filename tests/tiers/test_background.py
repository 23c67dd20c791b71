"""Consolidation as a background task: add returns at once; wait() sees the tiers settle."""

from __future__ import annotations

from pathlib import Path

from memstrata import MemoryOS


def test_add_schedules_consolidation_and_wait_sees_it_done(tmp_path: Path) -> None:
    with MemoryOS.open(str(tmp_path / "m.db"), workers=1) as mos:
        mos.create_user("u")
        cube = mos.create_cube("c", owner="u", settings={"working_capacity": 2}).cube_id
        ids = []
        for i in range(5):
            ids += mos.add(f"turn number {i} about gardening", user_id="u", cube_id=cube,
                           session_id="s")  # fmt: skip
        assert mos.wait(cube, timeout=60)
        tiers = [mos.get(i, user_id="u").tier for i in ids]
        assert tiers == ["mid", "mid", "mid", "working", "working"]
        done = mos.tasks(user_id="u", cube_id=cube, status="done")
        assert done and all(t.kind == "consolidate" and t.error is None for t in done)


def test_inline_mode_consolidates_within_add(mos: MemoryOS) -> None:
    mos.create_user("u")
    cube = mos.create_cube("c", owner="u", settings={"working_capacity": 1}).cube_id
    first = mos.add("first", user_id="u", cube_id=cube)
    mos.add("second", user_id="u", cube_id=cube)
    assert mos.get(first[0], user_id="u").tier == "mid"
    assert mos.wait(cube, timeout=1)
