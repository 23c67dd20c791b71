"""Any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint (OpenAI, Ollama, llama.cpp, vLLM…).

Configured by ``Settings.openai_base_url`` (ending in ``/v1``), ``openai_api_key`` (sent as a
Bearer token when set), ``openai_model`` and ``openai_timeout_s``.  The width of the vectors is
learned from the first answer; reading ``dim`` before any call embeds a one-word probe.  Every
failure (network, timeout, non-2xx status, malformed or inconsistent answer) raises
``EmbeddingError`` naming the URL (and the HTTP status, if any); the API key never appears in an
error message.  The HTTP client is thread-safe and pooled: call ``close()`` (or use the embedder
as a context manager) when done.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from memstrata.closing import Closing
from memstrata.config import Settings
from memstrata.embed.base import (
    QueryCache,
    Vectors,
    batched,
    check_texts,
    concat_rows,
    normalise,
)
from memstrata.errors import EmbeddingError

_PROBE = "dimension"
_EXCERPT = 200


class OpenAIEmbedder(Closing):
    """Embeddings from a hosted or local OpenAI-compatible API; symmetric query/passage."""

    name = "openai"

    def __init__(self, settings: Settings) -> None:
        self.model = settings.openai_model
        self.model_id = f"openai:{self.model}"
        self.url = settings.openai_base_url.rstrip("/") + "/embeddings"
        self._api_key = settings.openai_api_key
        self._batch_size = settings.embed_batch_size
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._client = httpx.Client(headers=headers, timeout=settings.openai_timeout_s)
        self._dim: int | None = None
        self._lock = threading.Lock()
        self._queries = QueryCache()

    @property
    def dim(self) -> int:
        """Width of the vectors; learned from the first answer (probing the endpoint if needed)."""
        if self._dim is not None:
            return self._dim
        return int(self.embed_query(_PROBE).shape[0])

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """``(len(texts), dim)`` unit-norm float32 rows in input order, one request per batch."""
        items = check_texts(texts)
        parts = [self._request(list(batch)) for batch in batched(items, self._batch_size)]
        return concat_rows(parts, self.dim)

    def embed_query(self, text: str) -> Vectors:
        """``(dim,)`` unit-norm float32 vector for a search query (remembered: ``QueryCache``,
        so a repeated question costs no request)."""
        return self._queries.get(text, lambda one: self._request(check_texts([one]))[0])

    def close(self) -> None:
        """Close the pooled HTTP connections."""
        self._client.close()

    def _request(self, texts: list[str]) -> Vectors:
        response = self._post({"model": self.model, "input": texts})
        try:
            payload = response.json()
        except ValueError as exc:
            raise self._error(f"answered HTTP {response.status_code} with invalid JSON") from exc
        matrix = self._parse(payload, len(texts))
        self._learn_dim(matrix.shape[1])
        return normalise(matrix)

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            response = self._client.post(self.url, json=body)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self._error(f"could not be reached ({type(exc).__name__}: {exc})") from exc
        if not response.is_success:
            excerpt = " ".join(response.text[:_EXCERPT].split())
            raise self._error(
                f"answered HTTP {response.status_code}: {excerpt}", hint=_hint(response.status_code)
            )
        return response

    def _parse(self, payload: object, count: int) -> npt.NDArray[np.float64]:
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or len(data) != count:
            raise self._error(f"answered without a 'data' list of {count} embeddings")
        try:
            rows = sorted(data, key=lambda row: int(row["index"]))
            if [int(row["index"]) for row in rows] != list(range(count)):
                raise ValueError("indices are not 0..n-1")
            matrix = np.array([row["embedding"] for row in rows], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise self._error(f"answered with malformed embeddings ({exc})") from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise self._error("answered with embeddings that are not equal-length finite vectors")
        return matrix

    def _learn_dim(self, width: int) -> None:
        with self._lock:
            if self._dim is None:
                self._dim = width
            elif width != self._dim:
                raise self._error(f"answered {width}-d vectors after {self._dim}-d ones")

    def _error(self, what: str, hint: str | None = None) -> EmbeddingError:
        message = f"embedding endpoint {self.url} (model {self.model!r}) {what}"
        if self._api_key:
            message = message.replace(self._api_key, "***")
        return EmbeddingError(message, hint=hint)


def _hint(status: int) -> str:
    if status in (401, 403):
        return "check openai_api_key"
    if status == 404:
        return "check openai_base_url (it should end in /v1) and openai_model"
    return "check that the endpoint at openai_base_url is up and serves embeddings"
