"""The background task that builds a large cube's approximate index (``memory/indexing.py``)."""

from __future__ import annotations

from pathlib import Path

from memstrata import MemoryOS


def test_adds_queue_the_index_build_and_search_uses_it(db_path: Path) -> None:
    with MemoryOS.open(str(db_path), workers=0, vector_index_min_items=40) as mos:
        mos.create_user("alice")
        cube = mos.create_cube("notes", owner="alice").cube_id
        messages = [
            {"role": "user", "content": f"note {i}: I planted tomato {i}"} for i in range(30)
        ]
        mos.add(messages, user_id="alice", cube_id=cube)
        mos.wait(cube, timeout=60, user_id="alice")
        assert not Path(f"{db_path}.vindex").exists()  # below the minimum: exact scans only
        messages = [
            {"role": "user", "content": f"I walked my dog Rex on day {i}"} for i in range(20)
        ]
        mos.add(messages, user_id="alice", cube_id=cube)
        assert mos.wait(cube, timeout=60, user_id="alice")
        kinds = [t.kind for t in mos.tasks(user_id="alice", cube_id=cube)]
        assert kinds.count("index_vectors") == 1
        assert list(Path(f"{db_path}.vindex").glob("*.usearch"))
        hits = mos.search("walking the dog", user_id="alice", cube_ids=[cube], top_k=3)
        assert hits and all("Rex" in h.item.text for h in hits)
