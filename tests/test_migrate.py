"""``memstrata migrate``: a whole memory copied to another database (PostgreSQL, or another SQLite
file when no test server is running), keys still working, and a second run resuming where an
interrupted one stopped."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import MemoryOS
from memstrata.config import Settings
from memstrata.errors import Unauthenticated
from memstrata.memory.migration import migrate, opened
from tests.services import fresh_database

pytestmark = pytest.mark.engines("sqlite", "postgres")


@pytest.fixture
def target(engine: str, tmp_path: Path) -> Iterator[str]:
    if engine == "sqlite":
        yield str(tmp_path / "target.db")
    else:
        with fresh_database() as dsn:
            yield dsn


@pytest.fixture
def source(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """An SQLite memory: two users with keys (one revoked), two cubes, a grant, live, deleted
    and erased items."""
    path = str(tmp_path / "source.db")
    with MemoryOS.open(path, workers=0) as m:
        m.create_user("ann")
        m.create_user("bob")
        live = m.create_key("ann", by="ann").secret
        gone = m.create_key("bob", by="bob")
        m.revoke_key("bob", gone.key_id, by="bob")
        m.create_cube("notes", owner="ann", cube_id="notes")
        m.create_cube("bobs", owner="bob", cube_id="bobs")
        m.share("notes", "bob", "write", by="ann")
        ids = m.add([{"role": "user", "name": "Ann", "content": f"Note {n}: tulips in May."}
                     for n in range(12)], user_id="ann", cube_id="notes")  # fmt: skip
        m.add("Bob keeps bees on the roof.", user_id="bob", cube_id="bobs")
        m.delete(ids[0], user_id="ann")
        m.erase(ids[1], user_id="ann")
    assert live is not None and gone.secret is not None
    return path, {"live": live, "revoked": gone.secret}


def test_a_memory_moves_whole_and_its_keys_keep_working(
    source: tuple[str, dict[str, str]], target: str
) -> None:
    path, keys = source
    with MemoryOS.open(path) as before:
        sealing = before.store.artifact_key()  # made when the first KV cache or adapter is
    done = subprocess.run(
        [sys.executable, "-m", "memstrata", "migrate", "--from", f"sqlite://{path}", "--to", target],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "copied 2 user(s), 2 key(s), 2 cube(s)" in done.stdout
    assert "checked: every cube has as many items in the target (2 cube(s))" in done.stdout
    with MemoryOS.open(path) as before, MemoryOS.open(target, workers=0) as after:
        assert after.authenticate(keys["live"]).user_id == "ann"
        with pytest.raises(Unauthenticated):
            after.authenticate(keys["revoked"])
        for cube, owner in (("notes", "ann"), ("bobs", "bob")):
            assert after.grants(cube, by=owner) == before.grants(cube, by=owner)
        listed = {"status": ["generated", "activated", "merged", "archived", "frozen", "deleted"]}
        old = before.list_memories("notes", user_id="ann", filters=listed, limit=100)
        new = after.list_memories("notes", user_id="ann", filters=listed, limit=100)
        assert [(i.id, i.text, i.status, i.version) for i in new] == [
            (i.id, i.text, i.status, i.version) for i in old
        ]
        hit = after.search("Where are the bees kept?", user_id="bob", cube_ids=["bobs"])[0]
        assert hit.item.text == "Bob keeps bees on the roof."
        assert after.settings.embedder == before.settings.embedder
        # The key that seals KV caches and adapters moves too: copied artifacts stay valid.
        assert after.store.artifact_key() == sealing


def test_an_interrupted_migration_resumes(source: tuple[str, dict[str, str]], target: str) -> None:
    path, _ = source

    def stop_after_the_first(cube_id: str) -> None:
        raise KeyboardInterrupt

    settings = Settings.load(environ={})
    with opened(path, target, settings) as (src, dst), pytest.raises(KeyboardInterrupt):
        migrate(src, dst, on_cube=stop_after_the_first)
    with opened(path, target, settings) as (src, dst):
        again = migrate(src, dst)
        assert (again.users, again.keys, again.cubes, again.skipped_cubes) == (0, 0, 1, 1)
        assert again.mismatches == {}
        twice = migrate(src, dst)
        assert (twice.cubes, twice.skipped_cubes, twice.grants) == (0, 2, 0)
