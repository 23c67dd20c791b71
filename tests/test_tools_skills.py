"""Tool memory, skill memory and multimodal messages (issue 30), through ``MemoryOS`` on both
engines: OpenAI-format tool calls stored as schemas and calls, skills distilled, versioned and
demoted, images kept as artifacts and files as documents, round trip through a MemCube."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from memstrata import MemoryOS
from memstrata.errors import ItemNotFound, ValidationError
from memstrata.limits import MAX_IMAGE_BYTES, MAX_TOOL_SUMMARY_CHARS
from tests.conftest import row_counts
from tests.reader.test_documents import minimal_pdf

pytestmark = pytest.mark.engines("sqlite", "postgres")

#: A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    """An assistant message making one OpenAI-format tool call."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": function}
    ]}  # fmt: skip


def result(call_id: str, content: str, **metadata: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content, "metadata": metadata}


def test_tool_calls_are_stored_as_schema_and_calls(mos: MemoryOS, alice_cube: str) -> None:
    """A tool's schema once per version, each call with arguments, bounded result, status,
    duration and the turn it served; a plain search leaves them out, include=["tool"] finds them."""
    huge = json.dumps({"rows": ["x" * 100] * 1500})
    messages = [
        {"role": "user", "content": "What's the weather in Paris tomorrow?"},
        call("c1", "get_weather", city="Paris"),
        result("c1", '{"temp": 18, "sky": "sunny"}', duration_ms=120),
        {"role": "user", "content": "Export the sales table"},
        call("c2", "export_table", table="sales"),
        result("c2", huge),
        call("c3", "send_mail", to="bob@example.com"),
        result("c3", "Error: SMTP server refused the connection"),
    ]
    ids = mos.add(messages, user_id="alice", cube_id="notes", session_id="s1", tools=[WEATHER])
    items = {i: mos.get(i, user_id="alice") for i in ids}
    kinds = sorted(i.type for i in items.values())
    assert kinds.count("tool_call") == 3 and kinds.count("turn") == 2
    assert sorted(i.key for i in items.values() if i.type == "tool") == [
        "export_table", "get_weather", "send_mail",
    ]  # fmt: skip
    weather = next(i for i in items.values() if i.type == "tool_call" and i.key == "get_weather")
    asked = next(i for i in items.values() if i.type == "turn" and "Paris" in i.text)
    assert weather.metadata["arguments"] == {"city": "Paris"}
    assert weather.metadata["status"] == "success" and weather.metadata["duration_ms"] == 120
    assert weather.metadata["turn"] == asked.id
    export = next(i for i in items.values() if i.key == "export_table" and i.type == "tool_call")
    assert len(export.metadata["result_summary"]) <= MAX_TOOL_SUMMARY_CHARS
    assert export.metadata["result_chars"] == len(huge) and len(export.text) < 1000
    mail = next(i for i in items.values() if i.key == "send_mail" and i.type == "tool_call")
    assert mail.metadata["status"] == "error" and "SMTP" in mail.metadata["error"]

    hits = mos.search("how did I call the weather API for Paris", user_id="alice", include=["tool"])
    assert hits[0].item.type == "tool_call" and hits[0].item.key == "get_weather"
    failed = mos.search("which tool failed last time and why", user_id="alice", include=["tool"])
    assert "send_mail" in [h.item.key for h in failed[:3]]
    plain = mos.search("weather in Paris", user_id="alice")
    assert plain and all(h.item.type not in ("tool", "tool_call") for h in plain)
    both = mos.search("weather in Paris", user_id="alice", include=["text", "tool"])
    assert {"turn", "tool_call"} <= {h.item.type for h in both}

    again = mos.add(messages[:3], user_id="alice", cube_id="notes", tools=[WEATHER])
    schema = next(i for i in items.values() if i.type == "tool" and i.key == "get_weather")
    assert schema.id in again  # the same schema is stored once
    changed = {**WEATHER, "function": {**WEATHER["function"], "description": "Weather, v2"}}
    newer = mos.add("ok", user_id="alice", cube_id="notes", tools=[changed])
    assert mos.get(newer[0], user_id="alice").metadata["version"] == 2


def test_bad_tool_messages_write_nothing(mos: MemoryOS, alice_cube: str, database: str) -> None:
    before = row_counts(database)
    bad = [
        [{"role": "tool", "content": "no call id"}],
        [{"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]}],
        [{"role": "assistant", "tool_calls": "not a list"}],
        [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]}],
        [{"role": "user", "content": [{"type": "input_file", "file_url": "http://169.254.169.254/"}]}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,bm90IGFuIGltYWdl"}}]}],
    ]  # fmt: skip
    for messages in bad:
        with pytest.raises(ValidationError):
            mos.add(messages, user_id="alice", cube_id="notes")
    too_big = "data:image/png;base64," + "A" * (MAX_IMAGE_BYTES // 3 * 4 + 8)
    with pytest.raises(ValidationError, match="at most"):
        mos.add([{"role": "user", "content": [{"type": "input_image", "image_url": too_big}]}],
                user_id="alice", cube_id="notes")  # fmt: skip
    with pytest.raises(ValidationError):
        mos.add("hi", user_id="alice", cube_id="notes", tools=[{"function": {"name": ""}}])
    assert row_counts(database) == before


def test_a_skill_is_distilled_versioned_found_and_demoted(mos: MemoryOS, alice_cube: str) -> None:
    """A successful task becomes a skill; a better run of the same goal is its version 2; a new
    task in other words finds it first; a failure of it archives it."""

    def run(session: str, ask: str, city: str, fail_first: bool) -> None:
        messages = [{"role": "user", "content": ask}]
        if fail_first:
            messages += [call(f"{session}-0", "search_flights", to=city),
                         result(f"{session}-0", "Error: missing departure date")]  # fmt: skip
        messages += [
            call(f"{session}-1", "search_flights", to=city, date="2025-06-01"),
            result(f"{session}-1", '{"flights": ["AF12"]}'),
            call(f"{session}-2", "book_flight", flight="AF12"),
            result(f"{session}-2", '{"booking": "OK"}'),
        ]
        mos.add(messages, user_id="alice", cube_id="notes", session_id=session)

    run("t1", "Book me a flight to Rome for June", "Rome", fail_first=True)
    first = mos.end_task(user_id="alice", cube_id="notes", session_id="t1")
    assert len(first) == 1 and first[0].type == "skill" and first[0].version == 1
    skill = first[0]
    assert [s["tool"] for s in skill.metadata["steps"]] == ["search_flights", "book_flight"]
    assert "missing departure date" in skill.metadata["pitfalls"][0]
    assert skill.metadata["evidence"]

    run("t2", "Please book a flight to Lisbon in June", "Lisbon", fail_first=False)
    second = mos.end_task(user_id="alice", cube_id="notes", session_id="t2")
    assert second[0].id == skill.id and second[0].version == 2
    assert second[0].metadata["successes"] == 2 and second[0].metadata["pitfalls"] == []

    hits = mos.search("I need plane tickets to Madrid", user_id="alice", include=["skill"])
    assert hits[0].item.id == skill.id and hits[0].item.type == "skill"

    run("t3", "Book a flight to Oslo in June", "Oslo", fail_first=False)
    mos.end_task(user_id="alice", cube_id="notes", session_id="t3", outcome="failure")
    mos.end_task(user_id="alice", cube_id="notes", session_id="t3", outcome="failure",
                 skill_ids=[skill.id])  # fmt: skip
    assert mos.get(skill.id, user_id="alice").status == "archived"
    assert not mos.search("plane tickets to Madrid", user_id="alice", include=["skill"])
    kept = mos.search("plane tickets", user_id="alice", include=["skill", "archived"])
    assert kept[0].item.id == skill.id
    with pytest.raises(ValidationError):
        mos.end_task(user_id="alice", cube_id="notes", session_id="t3", outcome="maybe")


def test_images_and_files_round_trip(database: str, tmp_path: Path) -> None:
    """An image part is an artifact with its caption searchable, a PDF part a document, a
    remote image a reference never fetched; both survive export and import; erasure removes
    the image's artifact."""
    with MemoryOS.open(database, workers=0, artifacts_dir=str(tmp_path / "art")) as mos:
        mos.create_user("alice")
        mos.create_user("bob")
        mos.create_cube("notes", owner="alice", cube_id="notes")
        _round_trip(mos, tmp_path)


def _round_trip(mos: MemoryOS, tmp_path: Path) -> None:
    png = "data:image/png;base64," + base64.b64encode(PNG).decode()
    pdf = base64.b64encode(minimal_pdf(["The lighthouse keeper logs the tides."])).decode()
    messages = [{"role": "user", "content": [
        {"type": "input_text", "text": "Photo of my red bicycle"},
        {"type": "image_url", "image_url": {"url": png}},
        {"type": "input_image", "image_url": "https://example.invalid/cat.jpg", "alt": "a cat"},
        {"type": "input_file", "filename": "keeper.pdf", "file_data": pdf},
    ]}]  # fmt: skip
    ids = mos.add(messages, user_id="alice", cube_id="notes", session_id="m1")
    types = [mos.get(i, user_id="alice").type for i in ids]
    assert types[:3] == ["turn", "image", "image"] and "chunk" in types
    image = mos.search("red bicycle photo", user_id="alice", filters={"type": "image"})[0].item
    assert image.metadata["image"]["media_type"] == "image/png"
    assert mos.get_image(image.id, user_id="alice") == ("image/png", PNG)
    remote = next(
        mos.get(i, user_id="alice") for i in ids if "cat" in mos.get(i, user_id="alice").text
    )
    assert remote.metadata["image"] == {"url": "https://example.invalid/cat.jpg"}
    with pytest.raises(ItemNotFound):
        mos.get_image(remote.id, user_id="alice")
    assert mos.search("lighthouse tides", user_id="alice")[0].item.type == "chunk"
    with pytest.raises(ItemNotFound):
        mos.get_image(image.id, user_id="bob")

    path = tmp_path / "notes.tar.gz"
    mos.export("notes", str(path), user_id="alice")
    mos.create_user("carol")
    copy = mos.import_cube(str(path), owner="carol", cube_id="copy", keep_ids=False).cube_id
    found = mos.search("red bicycle", user_id="carol", cube_ids=[copy], filters={"type": "image"})
    assert mos.get_image(found[0].item.id, user_id="carol") == ("image/png", PNG)

    assert mos.artifacts("notes", user_id="alice")
    mos.erase(user_id="alice", session_id="m1", cube_id="notes")
    assert not [a for a in mos.artifacts("notes", user_id="alice") if a.kind == "image"]
    assert mos.artifacts(copy, user_id="carol")


def test_too_many_skill_ids_are_refused(mos: MemoryOS, alice_cube: str) -> None:
    """A failure may name at most ``MAX_FEEDBACK_TARGETS`` skills: more is refused, not cut."""
    many = [f"01SKILL{n:019d}" for n in range(21)]
    with pytest.raises(ValidationError, match="at most 20"):
        mos.end_task(user_id="alice", cube_id=alice_cube, session_id="t1", outcome="failure",
                     skill_ids=many)  # fmt: skip
