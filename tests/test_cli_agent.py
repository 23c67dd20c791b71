"""Tool memory, skill memory and images on the command line (issue 30's surfaces): ``memstrata add
--file --tools``, ``memstrata search --include``, ``memstrata end-task`` and ``memstrata image``,
against a real SQLite file with the real embedder (CliRunner, as tests/test_cli.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from memstrata.cli import cli
from tests.test_tools_skills import PNG, WEATHER, call, result


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args])


def ok_json(db: Path, *args: str) -> Any:
    done = run(db, "--json", *args)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_add_tools_search_include_end_task_and_image(tmp_path: Path) -> None:
    """The CLI takes what MemoryOS.add takes (a --file of OpenAI messages, --tools), searches
    tool and skill memory with --include, ends a task with end-task (a skill learnt; failure
    demotes it; a bad outcome is a usage error) and writes an image to a file."""
    db = tmp_path / "m.db"
    for setup in (("users", "create", "alice"), ("cubes", "create", "agent", "--owner", "alice",
                                                  "--cube-id", "agent")):  # fmt: skip
        assert run(db, *setup).exit_code == 0
    photo = "data:image/png;base64," + base64.b64encode(PNG).decode()
    messages = [
        {"role": "user", "content": [
            {"type": "text", "text": "What's the weather in Paris?"},
            {"type": "image_url", "image_url": {"url": photo}, "alt": "the Seine at noon"},
        ]},
        call("c1", "get_weather", city="Paris"),
        result("c1", '{"temp": 18}'),
    ]  # fmt: skip
    (tmp_path / "m.json").write_text(json.dumps(messages), encoding="utf-8")
    (tmp_path / "t.json").write_text(json.dumps([WEATHER]), encoding="utf-8")
    common = ("--user", "alice", "--cube", "agent")
    ids = ok_json(db, "add", *common, "--session", "s1", "--file", str(tmp_path / "m.json"),
                  "--tools", str(tmp_path / "t.json"))  # fmt: skip
    assert len(ids) == 4  # the turn, its image, the tool's schema and the call
    hits = ok_json(db, "search", "weather API call for Paris", "--user", "alice",
                   "--include", "tool")  # fmt: skip
    assert hits[0]["item"]["type"] == "tool_call"
    plain = ok_json(db, "search", "weather API call for Paris", "--user", "alice")
    assert all(h["item"]["type"] not in ("tool", "tool_call") for h in plain)
    (skill,) = ok_json(db, "end-task", "s1", *common)
    assert skill["type"] == "skill"
    found = ok_json(db, "search", "forecast for Rome", "--user", "alice", "--include", "skill")
    assert found[0]["item"]["id"] == skill["id"]
    (demoted,) = ok_json(db, "end-task", "s1", *common, "--outcome", "failure",
                         "--skill", skill["id"])  # fmt: skip
    assert demoted["version"] == 2
    bad = run(db, "end-task", "s1", *common, "--outcome", "maybe")
    assert bad.exit_code == 2 and "maybe" in bad.output
    image = next(i for i in ids if ok_json(db, "get", i, "--user", "alice")["type"] == "image")
    out = tmp_path / "photo.png"
    shown = ok_json(db, "image", image, "--user", "alice", "--out", str(out))
    assert out.read_bytes() == PNG and shown["media_type"] == "image/png"
    missing = run(db, "image", ids[0] if ids[0] != image else ids[1], "--user", "alice",
                  "--out", str(tmp_path / "no.png"))  # fmt: skip
    assert missing.exit_code == 1 and "no memory item" in missing.output
    bad_tools = tmp_path / "bad.json"
    bad_tools.write_text("{", encoding="utf-8")
    refused = run(db, "add", "hi", *common, "--tools", str(bad_tools))
    assert refused.exit_code == 2 and "--tools" in refused.output
