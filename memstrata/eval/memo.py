"""``PassageMemo``: an embedder that embeds each passage text once, for harnesses.

A harness that writes the same turns into many cubes (PrefEval's filler turns, once per item)
would embed them again for every cube; the vectors would be the same each time, since an
embedder is a function of the text.  Wrapping it in a ``PassageMemo`` makes every text after
the first cost a lookup.  Same name, model and dimension as the wrapped embedder, so cubes
record the same fingerprint.  The memo grows with the distinct texts of the run and is never
emptied: meant for a run of bounded size, not for a server.  Thread-safe: the wrapped embedder
is, and a text embedded twice at once is only wasted work.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memstrata.embed.base import Embedder, Vectors


class PassageMemo:
    """``inner`` with its passage vectors remembered by text (queries are passed through)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.model_id = inner.model_id
        self._vectors: dict[str, Vectors] = {}

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """``inner.embed_passages(texts)``, embedding only texts not seen before."""
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if new:
            self._vectors.update(zip(new, self.inner.embed_passages(new), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def embed_query(self, text: str) -> Vectors:
        return self.inner.embed_query(text)
