"""Any OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

OpenAI, DeepSeek, Qwen (DashScope), Ollama, vLLM and the llama.cpp servers all speak it.  The API key,
when given, is sent as a Bearer token and never appears in an error message.  A JSON schema is sent
as ``response_format = {"type": "json_object", "schema": …}``: llama.cpp turns it into a grammar
(the answer always parses and has that shape); most others treat it as plain JSON mode.  An API that
refuses the ``schema`` key (OpenAI answers HTTP 400 "Unknown parameter: 'response_format.schema'")
is asked again with plain ``{"type": "json_object"}``, and from then on only that.  ``<think>``
blocks of reasoning models are stripped from the answer.  The server formats the messages with its
chat template and may tokenise the result with control tokens recognised anywhere, so every
message's text is sent ``llm.neutral.neutralise``d: a user's text cannot become one.

Every failure (connection, timeout, non-2xx status, a body that is not a chat completion) raises
``LLMError`` naming the URL and the model.  One pooled ``httpx.Client`` serves every thread:
``OpenAIChat`` is thread-safe; call ``close()`` (or use it as a context manager) when done.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from memstrata.closing import Closing
from memstrata.errors import LLMError
from memstrata.llm.base import ChatMessage, Completion, ThinkFilter, strip_think
from memstrata.llm.neutral import neutral_messages

log = logging.getLogger(__name__)

_EXCERPT = 200


class OpenAIChat(Closing):
    """A chat model behind an OpenAI-compatible API (``base_url`` ends in ``/v1``)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "local",
        api_key: str | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self._api_key = api_key
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=timeout_s)
        self._schema_accepted = True

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion:
        """The model's answer to ``messages`` (see ``LLM.complete``); raises ``LLMError``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": neutral_messages(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_schema is None:
            return self._parse(self._post(body))
        return self._parse(self._post_json_mode(body, json_schema))

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> Iterator[str]:
        """The answer in pieces, read from the server-sent events of ``"stream": true``."""
        body = {
            "model": self.model,
            "messages": neutral_messages(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
        }
        think = ThinkFilter()
        try:
            with self._client.stream("POST", self.url, json=body) as response:
                if not response.is_success:
                    response.read()
                    self._checked(response)
                for line in response.iter_lines():
                    if piece := think.feed(self._delta(line)):
                        yield piece
        except httpx.HTTPError as exc:
            raise self._error(f"failed while streaming ({type(exc).__name__}: {exc})") from exc
        if rest := think.flush():
            yield rest

    def _delta(self, line: str) -> str:
        """The text of one ``data: {...}`` event line ("" for other lines and ``[DONE]``)."""
        if not line.startswith("data:"):
            return ""
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            return ""
        try:
            content = json.loads(data)["choices"][0]["delta"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise self._error(f"streamed an event that is not a chat chunk: {data[:80]}") from exc
        return content if isinstance(content, str) else ""

    def probe(self, timeout_s: float = 3.0) -> str | None:
        """None when ``GET {base_url}/models`` answers 2xx, else what went wrong (one line)."""
        try:
            response = self._client.get(self.base_url + "/models", timeout=timeout_s)
        except httpx.HTTPError as exc:
            return f"{self.base_url} could not be reached ({type(exc).__name__})"
        if not response.is_success:
            return f"{self.base_url}/models answered HTTP {response.status_code}"
        return None

    def close(self) -> None:
        """Close the pooled HTTP connections."""
        self._client.close()

    def _post_json_mode(self, body: dict[str, Any], schema: Mapping[str, Any]) -> Any:
        if self._schema_accepted:
            body["response_format"] = {"type": "json_object", "schema": dict(schema)}
            response = self._send(body)
            if not _refuses_schema(response):
                return self._checked(response)
            log.info("%s refuses response_format.schema; using plain JSON mode", self.url)
            self._schema_accepted = False  # a benign race: at worst another call asks twice
        body["response_format"] = {"type": "json_object"}
        return self._post(body)

    def _post(self, body: dict[str, Any]) -> Any:
        return self._checked(self._send(body))

    def _send(self, body: dict[str, Any]) -> httpx.Response:
        try:
            return self._client.post(self.url, json=body)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self._error(f"could not be reached ({type(exc).__name__}: {exc})") from exc

    def _checked(self, response: httpx.Response) -> Any:
        """The JSON body of a 2xx ``response``; raises ``LLMError`` otherwise."""
        if not response.is_success:
            excerpt = " ".join(response.text[:_EXCERPT].split())
            raise self._error(
                f"answered HTTP {response.status_code}: {excerpt}", hint=_hint(response.status_code)
            )
        try:
            return response.json()
        except ValueError as exc:
            raise self._error(f"answered HTTP {response.status_code} with invalid JSON") from exc

    def _parse(self, payload: Any) -> Completion:
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise self._error("answered without choices[0].message.content") from exc
        if not isinstance(content, str):
            raise self._error(f"answered with content of type {type(content).__name__}")
        usage = payload.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return Completion(
            text=strip_think(content),
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
        )

    def _error(self, what: str, hint: str | None = None) -> LLMError:
        message = f"chat endpoint {self.url} (model {self.model!r}) {what}"
        if self._api_key:
            message = message.replace(self._api_key, "***")
        return LLMError(message, hint=hint)


def _count(value: object) -> int:
    """A token count as reported, or 0 when missing or not a non-negative integer."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def _refuses_schema(response: httpx.Response) -> bool:
    """True for a 400/422 answer that blames the ``schema`` inside ``response_format``."""
    return response.status_code in (400, 422) and "schema" in response.text.lower()


def _hint(status: int) -> str:
    if status in (401, 403):
        return "check llm_api_key"
    if status == 404:
        return "check llm_base_url (it should end in /v1) and llm_model"
    return "check that the endpoint at llm_base_url is up and serves chat completions"
