"""Progress of long work: the core's ``progress(n, total)`` callbacks (re-embedding, export,
import) and the command line's bars, drawn on a terminal only."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata import MemoryOS
from memstrata.cli import cli
from memstrata.cli.progress import progress_bar
from memstrata.memcube import records
from memstrata.memory import embedding

Steps = list[tuple[int, int]]
TEXTS = ("Ann moved to Porto", "Ann's cat is called Miso", "Miso likes tuna",
         "Ann works as a nurse", "Ann plays the cello")  # fmt: skip


def recorder() -> tuple[Steps, Callable[[int, int], None]]:
    steps: Steps = []
    return steps, lambda n, total: steps.append((n, total))


def assert_counts(steps: Steps, total: int) -> None:
    """The contract: first ``(0, total)``, the same total throughout, the ``n`` adding up."""
    assert steps[0] == (0, total)
    assert {t for _, t in steps} == {total}
    assert sum(n for n, _ in steps) == total


@pytest.fixture
def notes(mos: MemoryOS) -> str:
    """User ``ann`` owning cube ``notes`` with a few memories."""
    mos.create_user("ann")
    mos.create_cube("notes", owner="ann", cube_id="notes")
    mos.add([{"role": "user", "content": t} for t in TEXTS], user_id="ann", cube_id="notes")
    return "notes"


# -- the bar ---------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_bar_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", Terminal())
    with progress_bar("exporting notes") as progress:
        for n in (0, 2, 2):
            progress(n, 4)
    drawn = sys.stderr.getvalue()
    assert "exporting notes" in drawn and "100%" in drawn


def test_a_bar_that_hears_nothing_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An import without re-embedding reports nothing: no empty bar either."""
    monkeypatch.setattr(sys, "stderr", Terminal())
    with progress_bar("re-embedding x"):
        pass
    assert sys.stderr.getvalue() == ""


def test_off_a_terminal_nothing_is_written(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar("LoCoMo") as progress:
        progress(0, 3)
        progress(3, 3)
    assert capsys.readouterr() == ("", "")


# -- the core's callbacks --------------------------------------------------------------------


def test_reembed_tells_each_chunk_embedded(
    mos: MemoryOS, notes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "CHUNK", 2)
    steps, progress = recorder()
    count = mos.reembed(notes, user_id="ann", progress=progress)
    assert count >= len(TEXTS)
    assert_counts(steps, count)
    assert len(steps) == 1 + (count + 1) // 2


def test_export_tells_the_items_written(
    mos: MemoryOS, notes: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records, "ITEMS_TOLD_EVERY", 2)
    steps, progress = recorder()
    manifest = mos.export(notes, tmp_path / "notes", user_id="ann", progress=progress)
    assert_counts(steps, manifest.counts["items"])
    assert max(n for n, _ in steps) == 2


def test_import_tells_the_items_reembedded_only(mos: MemoryOS, notes: str, tmp_path: Path) -> None:
    mos.export(notes, tmp_path / "notes", user_id="ann")
    steps, progress = recorder()
    mos.import_cube(tmp_path / "notes", owner="ann", cube_id="copy", keep_ids=False,
                    reembed=True, progress=progress)  # fmt: skip
    with_text = [i for i in mos.store.iter_items("copy") if i.text.strip()]
    assert_counts(steps, len(with_text))
    steps.clear()
    mos.import_cube(tmp_path / "notes", owner="ann", cube_id="plain", keep_ids=False,
                    progress=progress)  # fmt: skip
    assert steps == []  # reading and storing are not followed: see import_cube


def test_embedding_nothing_tells_an_empty_total(mos: MemoryOS) -> None:
    steps, progress = recorder()
    assert embedding.embed_items(mos.embedder, [], progress).shape == (0, mos.embedder.dim)
    assert steps == [(0, 0)]


# -- the commands, off a terminal: only their result -----------------------------------------


def test_long_commands_print_only_their_result(
    mos: MemoryOS, notes: str, db_path: Path, tmp_path: Path
) -> None:
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, ["--db", str(db_path), *args])
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
        return result.stdout

    count = len(list(mos.store.iter_items(notes)))
    assert run("cubes", "reembed", notes, "--user", "ann") == (
        f"re-embedded {count} items in {notes}\n"
    )
    folder = tmp_path / "notes-cube"
    exported = json.loads(run("--json", "export", notes, str(folder), "--user", "ann"))
    assert exported["counts"]["items"] == count
    imported = run("import", str(folder), "--owner", "ann", "--cube-id", "copy", "--remap-ids",
                   "--reembed")  # fmt: skip
    assert imported.startswith(f"imported {folder} as cube copy\n")
    copied = run("migrate", "--from", str(db_path), "--to", str(tmp_path / "copy.db"))
    assert copied.startswith("copied 1 user(s)") and copied.endswith("(2 cube(s))\n")
