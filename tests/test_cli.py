"""The ``memstrata`` CLI end to end: a real SQLite file, the real default embedder, CliRunner."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memstrata.cli import cli
from memstrata.model import Part
from memstrata.wire import part_text, record_from_wire

MISO = "My sister's cat is called Miso"  # 2024-05-01, session s1, no metadata
TUNA = "The cat Miso likes tuna"  # now, session s2, metadata {"n": 2}
#: MISO's segment: its summary is MISO written as a note (reader.offline.summarise).
MISO_SEGMENT = "Alice's sister's cat is called Miso."
ADD_MISO = ["add", MISO, "--user", "alice", "--cube", "notes", "--name", "Alice",
            "--timestamp", "2024-05-01T10:00:00Z", "--id", "n1", "--session", "s1"]  # fmt: skip


@pytest.fixture(autouse=True, scope="module")
def _clean_environment() -> Iterator[None]:
    """No MEMSTRATA_* setting of the developer's shell may leak into a test."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("MEMSTRATA_"):
                patch.delenv(name)
        yield


def invoke(*args: str, stdin: str | None = None) -> Result:
    """Run the CLI in-process; an exception other than the CLI's own exit fails the test."""
    result = CliRunner().invoke(cli, list(args), input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.fixture
def ok(db_path: Path) -> Callable[..., str]:
    """Run a command against ``db_path``; it must succeed; returns its stdout."""

    def run(*args: str, stdin: str | None = None) -> str:
        result = invoke("--db", str(db_path), *args, stdin=stdin)
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
        return result.stdout

    return run


@pytest.fixture
def ok_json(ok: Callable[..., str]) -> Callable[..., Any]:
    """Run a command with ``--json``; returns the parsed output."""
    return lambda *args, stdin=None: json.loads(ok("--json", *args, stdin=stdin))


def populate(db_path: Path) -> str:
    """Users alice (owner of cube ``notes``) and bob (no grant); one item in ``notes``, its id."""
    setup = [
        ["users", "create", "alice", "--name", "Alice"],
        ["users", "create", "bob"],
        ["cubes", "create", "Notes", "--owner", "alice", "--cube-id", "notes"],
        ADD_MISO,
    ]
    for args in setup:
        result = invoke("--db", str(db_path), *args)
        assert result.exit_code == 0, result.output
    return result.stdout.strip()


@pytest.fixture
def item(db_path: Path) -> str:
    """A fresh database made by ``populate``; the id of its item."""
    return populate(db_path)


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database made by ``populate`` once, for tests that must not change it."""
    path = tmp_path_factory.mktemp("cli") / "memory.db"
    populate(path)
    return path


def assert_one_error_line(result: Result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


# -- every command ---------------------------------------------------------------------------


def test_help_lists_every_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    commands = ("users", "cubes", "add", "search", "get", "history", "update", "delete", "chat",
                "serve", "mcp", "export", "import", "eval", "demo")  # fmt: skip
    for command in commands:
        assert command in result.stdout
    assert "demo" in result.stdout


def test_bare_group_prints_its_help_and_succeeds() -> None:
    result = invoke("cubes")
    assert result.exit_code == 0
    assert "grant" in result.stdout and "reembed" in result.stdout


def test_users_create_and_list(ok: Callable[..., str], ok_json: Callable[..., Any]) -> None:
    assert ok("users", "create", "alice", "--name", "Alice").split() == ["alice", "user", "Alice"]
    created = ok_json("users", "create", "root", "--role", "admin")
    assert created["user_id"] == "root" and created["role"] == "admin"
    assert created["created_at"].startswith("20")  # ISO 8601
    assert [line.split()[0] for line in ok("users", "list").splitlines()] == ["alice", "root"]
    assert [u["user_id"] for u in ok_json("users", "list")] == ["alice", "root"]


def test_cubes_create_list_grant_reembed(
    item: str, ok: Callable[..., str], ok_json: Callable[..., Any]
) -> None:
    cube = ok_json("cubes", "create", "Team", "--owner", "alice", "--kind", "shared")
    assert cube["owner"] == "alice" and cube["kind"] == "shared" and len(cube["cube_id"]) == 26
    listed = ok("cubes", "list", "--user", "alice").splitlines()
    assert [line.split()[0] for line in listed] == ["notes", cube["cube_id"]]
    assert ok("cubes", "list", "--user", "bob") == ""
    assert ok("cubes", "grant", "notes", "bob", "read", "--by", "alice").strip() == (
        "granted read on cube notes to bob"
    )
    assert [c["cube_id"] for c in ok_json("cubes", "list", "--user", "bob")] == ["notes"]
    grant = ok_json("cubes", "grant", "notes", "bob", "write", "--by", "alice")
    assert grant["permission"] == "write" and grant["granted_by"] == "alice"
    assert ok("cubes", "reembed", "notes", "--user", "alice").strip() == (
        "re-embedded 1 items in notes"
    )
    assert ok_json("cubes", "reembed", "notes", "--user", "alice") == {
        "cube_id": "notes",
        "items": 1,
    }


def test_add_is_idempotent_for_an_external_id(item: str, ok: Callable[..., str]) -> None:
    assert ok(*ADD_MISO).strip() == item


def test_add_file_and_stdin(item: str, ok: Callable[..., str], tmp_path: Path) -> None:
    messages = [
        {"role": "user", "name": "Bo", "content": "We moved to Lisbon in 2023", "id": "m1"},
        {"role": "assistant", "content": "Lisbon is lovely in spring", "metadata": {"n": 2}},
    ]
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    from_file = ok("add", "--user", "alice", "--cube", "notes", "--file", str(path)).split()
    assert len(from_file) == 2
    from_stdin = ok(
        "add", "--user", "alice", "--cube", "notes", "--file", "-", stdin=json.dumps(messages)
    ).split()
    assert from_stdin[0] == from_file[0]  # same external id and content: not stored twice
    assert len(from_stdin) == 2


def test_search_text_and_json(
    item: str, ok: Callable[..., str], ok_json: Callable[..., Any]
) -> None:
    lines = ok("search", "What is the cat called?", "--user", "alice").splitlines()
    score, item_id, when, speaker, *text = lines[0].split()
    assert float(score) > 0 and item_id == item and when == "2024-05-01T10:00:00Z"
    assert speaker == "Alice" and "Miso" in text
    hits = ok_json("search", "cat", "--user", "alice", "--cube", "notes", "--top-k", "1")
    assert len(hits) == 1 and hits[0]["item"]["id"] == item
    assert hits[0]["item"]["event_time"] == "2024-05-01T10:00:00+00:00"


@pytest.fixture(scope="module")
def filter_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database made by ``populate`` plus the TUNA item."""
    path = tmp_path_factory.mktemp("filters") / "memory.db"
    populate(path)
    tuna = json.dumps([{"content": TUNA, "metadata": {"n": 2}}])
    args = ["--db", str(path), "add", "--user", "alice", "--cube", "notes", "--session", "s2"]
    assert invoke(*args, "--file", "-", stdin=tuna).exit_code == 0
    return path


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        # s1 went quiet long before TUNA: MISO is a mid-tier page, and its segment a hit too
        ([], [MISO_SEGMENT, MISO, TUNA]),
        (["since=2024-04-01", "until=2024-06-01", "type=turn"], [MISO]),
        (["since=2024-06-01"], [TUNA]),
        (["session_id=s1", "tier=mid", "tier=long", "type=turn"], [MISO]),
        (["session_id=s1", "tier=working"], []),
        (["session_id=s2", "status=generated"], [TUNA]),
        (["metadata.n=2"], [TUNA]),  # parsed as JSON: the integer 2
        (['metadata.n="2"'], []),  # the JSON string "2"
        (["metadata.n=two"], []),  # not JSON: kept as the string "two"
    ],
)
def test_search_filters(filter_db: Path, filters: list[str], expected: list[str]) -> None:
    args = [arg for pair in filters for arg in ("--filter", pair)]
    result = invoke(
        "--json", "--db", str(filter_db), "search", "cat Miso", "--user", "alice", *args
    )
    assert result.exit_code == 0, result.output
    assert sorted(hit["item"]["text"] for hit in json.loads(result.stdout)) == expected


def test_search_explain_shows_the_parts_of_each_score(filter_db: Path) -> None:
    """issue 26: ``--explain`` prints, under each hit, the parts its score is made of (a
    line of ``wire.part_text``s), and ``--json --explain`` gives each hit its parts, whose
    values sum to its score; without ``--explain`` the output is as before (no parts)."""
    search = ["--db", str(filter_db), "search", "cat Miso", "--user", "alice"]
    plain = invoke("--json", *search)
    assert plain.exit_code == 0, plain.output
    shown = json.loads(plain.stdout)
    assert shown and [set(hit) for hit in shown] == [{"item", "score", "ranks"}] * len(shown)
    explained = invoke("--json", *search, "--explain")
    assert explained.exit_code == 0, explained.output
    hits = json.loads(explained.stdout)
    assert [h["item"]["id"] for h in hits] == [h["item"]["id"] for h in shown]
    for hit in hits:
        assert hit["parts"], f"no parts for {hit['item']['text']!r}"
        assert sum(p["value"] for p in hit["parts"]) == pytest.approx(hit["score"], abs=1e-9)
    text = invoke(*search, "--explain")
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert len(lines) == 2 * len(hits)
    for hit, row, below in zip(hits, lines[::2], lines[1::2], strict=True):
        assert row.split()[:2] == [f"{hit['score']:.4f}", hit["item"]["id"]]
        words = [part_text(record_from_wire(Part, p)) for p in hit["parts"]]
        assert below == "    " + " · ".join(words)


def test_get_update_history_delete(
    item: str, ok: Callable[..., str], ok_json: Callable[..., Any]
) -> None:
    shown = ok("get", item, "--user", "alice")
    assert f"id:         {item}" in shown and f"text:       {MISO}" in shown
    updated = ok_json("update", item, "--user", "alice", "--text", "The cat is called Tofu")
    assert updated["version"] == 2 and updated["text"] == "The cat is called Tofu"
    assert "text:       The cat is Tofu" in ok(
        "update", item, "--user", "alice", "--text", "The cat is Tofu", "--reason", "renamed"
    )
    assert ok("delete", item, "--user", "alice").strip() == f"deleted {item} (version 4)"
    assert ok_json("delete", item, "--user", "alice")["status"] == "deleted"
    rows = ok("history", item, "--user", "alice").splitlines()
    assert [row.split()[0] for row in rows] == ["v1", "v2", "v3", "v4"]
    assert rows[2].endswith("(renamed)") and "deleted" in rows[3]
    versions = ok_json("history", item, "--user", "alice")
    assert [v["version"] for v in versions] == [1, 2, 3, 4]
    assert versions[0]["item"]["text"] == MISO
    assert ok_json("get", item, "--user", "alice")["status"] == "deleted"


# -- demo ------------------------------------------------------------------------------------


def test_demo_prints_hits_for_each_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("demo")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "37 messages in 3 sessions" in out and "to demo.db." in out
    # The command it suggests searches the database it wrote (issue 28 §4: it named a demo.db
    # that was never written, and a `memstrata` that is not on PATH after the quickstart).
    suggested = out.rstrip().splitlines()[-1].removeprefix("Try: ")
    assert (tmp_path / "demo.db").exists() and " --db demo.db search " in suggested
    args = shlex.split(suggested)
    again = invoke(*args[args.index("--db") :])
    assert again.exit_code == 0 and "cycling" in again.stdout.lower()
    assert out.count("search: ") == 4
    assert "called Pepper" in out  # the dog's name, found by a question about it
    assert "在大理我每天早上都吃一碗米线" in out  # Chinese keyword search
    assert "[since 2024-09-01]" in out
    assert "2024-09-15  Exhausting and wonderful. I teach three Year 9" in out


def test_demo_json_and_rerun_on_a_kept_database(db_path: Path) -> None:
    first = json.loads(invoke("--json", "demo", "--db", str(db_path)).stdout)
    again = json.loads(invoke("--json", "--db", str(db_path), "demo").stdout)
    assert first["db"] == str(db_path) and db_path.exists()
    assert again["added"] == first["added"]  # the sample's ids make re-ingesting a no-op
    assert [len(s["hits"]) for s in first["searches"]] == [3, 3, 3, 3]
    top = first["searches"][0]["hits"][0]["item"]
    assert "Pepper" in top["text"]  # the turn, or the fact the offline reader made of it
    since = first["searches"][2]
    assert all(h["item"]["event_time"] >= "2024-09-01" for h in since["hits"])


# -- errors: one line on stderr, non-zero exit, no traceback --------------------------------


def test_artifacts_activation_and_adapt_on_a_cube_with_nothing_stable(
    item: str, db_path: Path, ok: Callable[..., str], ok_json: Callable[..., Any]
) -> None:
    # one working turn: nothing in the long tier, so no KV cache and nothing to train
    assert ok("cubes", "artifacts", "notes", "--user", "alice") == ""
    assert ok_json("cubes", "artifacts", "notes", "--user", "alice") == []
    assert "no KV cache" in ok("cubes", "activation", "notes", "--user", "alice")
    assert "no adapter" in ok("adapt", "notes", "--user", "alice")
    assert ok_json("adapt", "notes", "--user", "alice") is None
    refused = invoke("--db", str(db_path), "adapt", "notes", "--user", "bob")
    assert refused.exit_code == 1 and refused.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["cubes", "list", "--user", "nobody"], 1, "unknown user 'nobody'"),
        (["search", "cat", "--user", "alice", "--cube", "nope"], 1, "unknown cube 'nope'"),
        (["add", "hi", "--user", "bob", "--cube", "notes"], 1, "may not write cube 'notes'"),
        (["cubes", "grant", "notes", "bob", "read", "--by", "bob"], 1, "may not admin"),
        (["add", "", "--user", "alice", "--cube", "notes"], 1, "content is empty"),
        (["add", " \n ", "--user", "alice", "--cube", "notes"], 1, "content is empty"),
        (["search", "cat", "--user", "alice", "--top-k", "0"], 1, "top_k"),
        (["search", "cat", "--user", "alice", "--filter", "since"], 2, "'since' is not KEY=VALUE"),
        (["search", "cat", "--user", "alice", "--filter", "colour=red"], 2, "unknown filter key"),
        (
            ["search", "cat", "--user", "alice", "--filter", "since=x", "--filter", "since=y"],
            2,
            "given twice",
        ),
        (["search", "cat", "--user", "alice", "--filter", "since=yesterday"], 1, "not a time"),
        (["search", "cat", "--user", "alice", "--filter", "tier=hot"], 1, "tier"),
        (["add", "--user", "alice", "--cube", "notes"], 2, "either TEXT or --file"),
        (["add", "x", "--user", "alice", "--cube", "notes", "--file", "-"], 2, "either TEXT"),
        (["get", "01NOSUCHITEM", "--user", "alice"], 1, "no memory item"),
        (["users", "create", "alice"], 1, "already exists"),
        (["users", "create", "bad id!"], 1, "not a valid id"),
        (["frobnicate"], 2, "No such command 'frobnicate'"),
        (["search", "cat", "--user", "alice", "--colour"], 2, "No such option"),
        (["search", "cat"], 2, "Missing option '--user'"),
        (["cubes", "grant", "notes", "bob", "own", "--by", "alice"], 2, "'own' is not one of"),
    ],
)
def test_bad_input_is_one_error_line(
    shared_db: Path, args: list[str], code: int, fragment: str
) -> None:
    assert_one_error_line(invoke("--db", str(shared_db), *args), code, fragment)


def test_bad_json_file_is_a_usage_error(shared_db: Path) -> None:
    args = ["--db", str(shared_db), "add", "--user", "alice", "--cube", "notes", "--file", "-"]
    assert_one_error_line(invoke(*args, stdin="not json"), 2, "not valid JSON")
    assert_one_error_line(invoke(*args, stdin='{"content": "x"}'), 1, "must be a string or a list")


def test_a_file_that_is_not_a_memstrata_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"these bytes are no SQLite header at all\n" * 10)
    result = invoke("--db", str(junk), "users", "list")
    assert_one_error_line(result, 1, "is not a memstrata database")
    assert junk.read_bytes().startswith(b"these bytes")  # left as it was


def test_an_unreadable_config_file(tmp_path: Path) -> None:
    result = invoke("--config", str(tmp_path / "missing.toml"), "users", "list")
    assert_one_error_line(result, 1, "cannot read settings file")


def test_the_default_database_comes_from_the_environment(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSTRATA_DB", str(db_path))
    assert invoke("users", "create", "carol").exit_code == 0
    assert db_path.exists()


# -- the real console script -----------------------------------------------------------------


def _launchers() -> list[Any]:
    script = Path(sys.executable).parent / "memstrata"
    launchers = [pytest.param([sys.executable, "-m", "memstrata"], id="python-m")]
    if script.exists():  # the console script of the environment running the tests
        launchers.append(pytest.param([str(script)], id="console-script"))
    return launchers


@pytest.mark.parametrize("launcher", _launchers())
def test_console_script(launcher: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    env["MEMSTRATA_DB"] = str(tmp_path / "memory.db")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [*launcher, *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)

    shown = run("--help")
    assert shown.returncode == 0 and "Usage:" in shown.stdout and shown.stderr == ""
    failed = run("cubes", "list", "--user", "nobody")
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.splitlines() == ["error: unknown user 'nobody' (create the user first)"]
    usage = run("--no-such-option")
    assert usage.returncode == 2 and len(usage.stderr.splitlines()) == 1


# -- keys, documents, chat -------------------------------------------------------------------


def test_api_keys_are_created_listed_and_revoked(
    item: str, db_path: Path, ok: Callable[..., str], ok_json: Callable[..., Any]
) -> None:
    created = ok_json("users", "create-key", "alice", "--label", "laptop")
    assert created["key"].startswith("ms_")
    [listed] = ok_json("users", "keys", "alice")
    assert (listed["key_id"], listed["label"], listed["revoked_at"]) == (
        created["key_id"], "laptop", None,
    )  # fmt: skip
    assert "key" not in listed and "secret" not in listed
    assert ok("users", "revoke-key", "alice", created["key_id"]).strip() == (
        f"revoked key {created['key_id']}"
    )
    assert "revoked" in ok("users", "keys", "alice")
    result = invoke("--db", str(db_path), "users", "revoke-key", "alice", created["key_id"])
    assert_one_error_line(result, 1, "no active key")


def test_add_document_stores_its_chunks(
    item: str, tmp_path: Path, ok_json: Callable[..., Any], db_path: Path
) -> None:
    doc = tmp_path / "garden.md"
    doc.write_text("# Garden\n\nThe tomatoes go in the south bed.\n\nWater them at dawn.\n")
    ids = ok_json("add", "--user", "alice", "--cube", "notes", "--document", str(doc))
    assert len(ids) >= 1
    hits = ok_json("search", "where do tomatoes go", "--user", "alice", "--top-k", "1")
    assert "south bed" in hits[0]["item"]["text"] and hits[0]["item"]["type"] == "chunk"
    result = invoke("--db", str(db_path), "add", "x", "--user", "alice", "--cube", "notes",
                    "--document", str(doc))  # fmt: skip
    assert_one_error_line(result, 2, "one of TEXT, --file or --document")
    bad = tmp_path / "photo.png"
    bad.write_bytes(b"\x89PNG")
    result = invoke("--db", str(db_path), "add", "--user", "alice", "--cube", "notes",
                    "--document", str(bad))  # fmt: skip
    assert_one_error_line(result, 1, "unsupported document type")


def test_chat_without_a_model_says_how_to_configure_one(item: str, db_path: Path) -> None:
    result = invoke("--db", str(db_path), "chat", "hi", "--user", "alice", "--cube", "notes")
    assert_one_error_line(result, 1, "needs a chat model", "MEMSTRATA_LLM_PROVIDER")
