"""Finding 17 of the second hardening round: SQLite erasure needed a manual ``VACUUM``.

An erasure removes the content from every row at once, but SQLite kept it in the write-ahead
log (and PostgreSQL in old row versions) until someone ran ``VACUUM`` by hand, and no
``memstrata`` command did.  ``MemoryOS.vacuum`` / ``memstrata vacuum`` does, and says so in the
audit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata import MemoryOS
from memstrata.cli import cli
from memstrata.errors import AdminRequired
from tests.test_postgres import tables_and_files

pytestmark = pytest.mark.engines("sqlite", "postgres")

MARKER = "qvxmarker5519"


def files_holding(engine: str, database: str, needle: str) -> list[Path]:
    """The database's files (SQLite: main, WAL; PostgreSQL: relations, after a checkpoint)
    whose bytes hold ``needle``."""
    if engine == "sqlite":
        path = Path(database)
        files = list(path.parent.glob(path.name + "*"))
    else:
        import psycopg

        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute("CHECKPOINT")  # the pages in shared buffers, written to the files
        files = tables_and_files(database)[1]
    return [f for f in files if f.is_file() and needle.encode() in f.read_bytes()]


def test_vacuum_makes_erased_text_leave_the_files(
    engine: str, database: str, mos: MemoryOS, alice_cube: str
) -> None:
    filler = [{"content": f"filler turn {n} about the weather"} for n in range(20)]
    said = {"content": f"My code word is {MARKER}.", "name": "Ann"}
    ids = mos.add([said, *filler], user_id="alice", cube_id=alice_cube, session_id="s1")
    mos.update(ids[0], user_id="alice", text=f"My code word is {MARKER}, still.")
    mos.erase(ids[0], user_id="alice", reason="GDPR request")
    assert files_holding(engine, database, MARKER)  # the check can fail: the text is still there

    mos.create_user("root", role="admin")
    sizes = mos.vacuum(user_id="root")

    assert files_holding(engine, database, MARKER) == []
    assert set(sizes) == {"bytes_before", "bytes_after"} and sizes["bytes_after"] > 0
    (event,) = [e for e in mos.audit(by="root") if e.op == "vacuum"]
    assert event.actor == "root" and event.cube_id is None and event.after == sizes


def test_vacuum_is_an_administrators(mos: MemoryOS, alice_cube: str) -> None:
    with pytest.raises(AdminRequired):
        mos.vacuum(user_id="alice")
    mos.create_user("root", role="admin")
    assert [e for e in mos.audit(by="root") if e.op == "vacuum"] == []


def test_the_vacuum_command(engine: str, database: str, mos: MemoryOS) -> None:
    mos.create_user("root", role="admin")
    mos.create_user("bob")
    runner = CliRunner()
    done = runner.invoke(cli, ["--db", database, "vacuum", "--user", "root"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("vacuumed: ")
    refused = runner.invoke(cli, ["--db", database, "vacuum", "--user", "bob"])
    assert refused.exit_code == 1
    assert refused.output.count("\n") == 1 and "error:" in refused.output
