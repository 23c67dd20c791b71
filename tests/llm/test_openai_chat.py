"""OpenAIChat against a fake OpenAI-compatible API at the HTTP transport (pytest-httpserver)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

from memstrata.config import Settings
from memstrata.errors import ConfigurationError, LLMError
from memstrata.llm import ChatMessage, Completion, OpenAIChat, make_llm, strip_think

API_KEY = "sk-secret-123"
PATH = "/v1/chat/completions"
HELLO: list[ChatMessage] = [{"role": "user", "content": "hello"}]


def chat_answer(content: Any, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """A chat completion body as OpenAI-compatible servers send it."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3} if usage is None else usage,
    }


@pytest.fixture
def chat(httpserver: HTTPServer) -> Iterator[OpenAIChat]:
    with OpenAIChat(httpserver.url_for("/v1/"), model="tiny", api_key=API_KEY) as client:
        yield client


def sent(httpserver: HTTPServer) -> dict[str, Any]:
    request, _ = httpserver.log[-1]
    body: dict[str, Any] = json.loads(request.get_data())
    return body


def test_request_shape_auth_and_completion(httpserver: HTTPServer, chat: OpenAIChat) -> None:
    httpserver.expect_request(
        PATH, method="POST", headers={"Authorization": f"Bearer {API_KEY}"}
    ).respond_with_json(chat_answer("  Hi there.  "))
    answer = chat.complete(HELLO, max_tokens=20)
    assert answer == Completion(text="Hi there.", prompt_tokens=11, completion_tokens=3)
    assert sent(httpserver) == {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 20,
        "temperature": 0.0,
    }


def test_schema_becomes_response_format(httpserver: HTTPServer, chat: OpenAIChat) -> None:
    httpserver.expect_request(PATH).respond_with_json(chat_answer('{"a": 1}'))
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert chat.complete(HELLO, json_schema=schema).text == '{"a": 1}'
    assert sent(httpserver)["response_format"] == {"type": "json_object", "schema": schema}


def test_no_key_sends_no_authorization(httpserver: HTTPServer) -> None:
    httpserver.expect_request(PATH).respond_with_json(chat_answer("ok", usage={}))
    with OpenAIChat(httpserver.url_for("/v1")) as client:
        assert client.complete(HELLO) == Completion("ok", 0, 0)  # no usage reported: zeros
    request, _ = httpserver.log[0]
    assert "Authorization" not in request.headers


def test_think_blocks_are_stripped(httpserver: HTTPServer, chat: OpenAIChat) -> None:
    httpserver.expect_request(PATH).respond_with_json(
        chat_answer("<think>\nThe user greets me.\n</think>\n\nHello!")
    )
    assert chat.complete(HELLO).text == "Hello!"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("<think>a</think>x<THINK>b</THINK> y", "x y"),
        ("reasoning without an opening tag</think>answer", "answer"),
        ("answer<think>cut off while reasoning", "answer"),
        ("<think>only reasoning</think>", ""),
        ("plain", "plain"),
    ],
)
def test_strip_think(raw: str, clean: str) -> None:
    assert strip_think(raw) == clean


def test_http_500_is_llm_error_without_the_key(httpserver: HTTPServer, chat: OpenAIChat) -> None:
    httpserver.expect_request(PATH).respond_with_data(f"boom for key {API_KEY}", status=500)
    with pytest.raises(LLMError) as caught:
        chat.complete(HELLO)
    message = str(caught.value)
    assert httpserver.url_for(PATH) in message and "HTTP 500" in message
    assert API_KEY not in message
    assert caught.value.status == 502


def test_malformed_json_is_llm_error(httpserver: HTTPServer, chat: OpenAIChat) -> None:
    httpserver.expect_request(PATH).respond_with_data("{oops", content_type="application/json")
    with pytest.raises(LLMError, match="invalid JSON") as caught:
        chat.complete(HELLO)
    assert API_KEY not in str(caught.value)


@pytest.mark.parametrize(
    "payload",
    [{"choices": []}, {"choices": [{"message": {}}]}, chat_answer(None), ["not", "a", "dict"]],
)
def test_wrong_shaped_answer_is_llm_error(
    httpserver: HTTPServer, chat: OpenAIChat, payload: object
) -> None:
    httpserver.expect_request(PATH).respond_with_json(payload)
    with pytest.raises(LLMError, match="content"):
        chat.complete(HELLO)


def test_timeout_is_llm_error_without_the_key() -> None:
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        client = OpenAIChat(url, api_key=API_KEY, timeout_s=0.2)
        with client, pytest.raises(LLMError, match="Timeout") as caught:
            client.complete(HELLO)
    assert url in str(caught.value) and API_KEY not in str(caught.value)


def test_unreachable_is_llm_error() -> None:
    client = OpenAIChat("http://127.0.0.1:9/v1", api_key=API_KEY)
    with client, pytest.raises(LLMError, match="could not be reached") as caught:
        client.complete(HELLO)
    assert API_KEY not in str(caught.value)


def test_make_llm_follows_the_reader_setting() -> None:
    assert make_llm(Settings.from_mapping({})) is None
    llm = make_llm(
        Settings.from_mapping({"reader": "llm", "llm_base_url": "http://h/v1", "llm_model": "m"})
    )
    assert isinstance(llm, OpenAIChat)
    assert (llm.url, llm.model) == ("http://h/v1/chat/completions", "m")
    llm.close()
    with pytest.raises(ConfigurationError, match="unknown reader"):
        make_llm(Settings.from_mapping({"reader": "gpt"}))


def test_an_api_refusing_the_schema_gets_plain_json_mode(
    httpserver: HTTPServer, chat: OpenAIChat
) -> None:
    refusal = {"error": {"message": "Unknown parameter: 'response_format.schema'."}}
    httpserver.expect_ordered_request(PATH).respond_with_json(refusal, status=400)
    httpserver.expect_ordered_request(PATH).respond_with_json(chat_answer('{"a": 1}'))
    httpserver.expect_ordered_request(PATH).respond_with_json(chat_answer('{"a": 2}'))
    schema = {"type": "object"}
    assert chat.complete(HELLO, json_schema=schema).text == '{"a": 1}'
    assert chat.complete(HELLO, json_schema=schema).text == '{"a": 2}'  # asked once only
    formats = [json.loads(r.get_data())["response_format"] for r, _ in httpserver.log]
    assert formats == [{"type": "json_object", "schema": schema}] + [{"type": "json_object"}] * 2
