"""Who said a turn: a user's message that names no speaker is the acting user's."""

from __future__ import annotations

import pytest

from memstrata import MemoryOS

pytestmark = pytest.mark.engines("sqlite", "postgres")


def test_a_users_unnamed_message_is_spoken_by_the_acting_user(mos: MemoryOS) -> None:
    mos.create_user("alice", name="Alice")
    mos.create_user("bob")
    cube = mos.create_cube("notes", owner="alice").cube_id
    mos.grant(cube, "bob", "write", by="alice")
    ids = mos.add(
        [
            {"role": "user", "content": "I moved to Lisbon in 2023"},
            {"role": "assistant", "content": "Lisbon is lovely."},
            {"role": "user", "name": "Carla", "content": "I live in Porto."},
        ],
        user_id="alice", cube_id=cube,
    )  # fmt: skip
    ids += mos.add("I moved to Faro.", user_id="bob", cube_id=cube)
    speakers = [mos.get(i, user_id="alice").speaker for i in ids]
    assert speakers == ["Alice", None, "Carla", "bob"]


def test_a_question_naming_the_user_does_not_weigh_their_unnamed_turns_down(
    mos: MemoryOS,
) -> None:
    mos.create_user("alice", name="Alice")
    cube = mos.create_cube("notes", owner="alice").cube_id
    mos.add(
        [{"role": "user", "content": "I moved to Lisbon in 2023"}],
        user_id="alice", cube_id=cube, session_id="s1",
    )  # fmt: skip
    mos.wait(cube)  # the long tier reads the profile: its subject is the speaker
    hits = mos.search("where does alice live", user_id="alice", top_k=5)
    assert {h.item.type for h in hits} >= {"turn", "profile"}
    assert not any(p.reason.startswith("other speaker") for h in hits for p in h.parts)
    assert "Alice lives in Lisbon" in [h.item.text for h in hits]
