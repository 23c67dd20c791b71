"""Text embedders: the ``Embedder`` Protocol (see ``base``) and a registry of implementations.

``make_embedder(name, settings)`` builds one by registry name; the implementation module is imported
only then, so optional backends cost nothing until used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from memstrata.config import Settings
from memstrata.embed.base import Closeable, Embedder, Vectors, fingerprint
from memstrata.errors import ConfigurationError

__all__ = [
    "DEFAULT_EMBEDDER",
    "EMBEDDERS",
    "Closeable",
    "Embedder",
    "Vectors",
    "fingerprint",
    "make_embedder",
]

#: Registry names, the default (``e5``) first.
EMBEDDERS = ("e5", "use", "minilm", "nomic", "openai")
#: The embedder of a new database when none is configured.
DEFAULT_EMBEDDER = EMBEDDERS[0]

_CLASSES = {
    "e5": ("memstrata.embed.e5", "E5Embedder"),
    "use": ("memstrata.embed.use", "USEEmbedder"),
    "minilm": ("memstrata.embed.minilm", "MiniLMEmbedder"),
    "nomic": ("memstrata.embed.nomic", "NomicEmbedder"),
    "openai": ("memstrata.embed.openai", "OpenAIEmbedder"),
}


def make_embedder(name: str, settings: Settings) -> Embedder:
    """The embedder registered as ``name``, configured from ``settings``; models load on first use.

    Raises ``ConfigurationError`` for an unknown name.
    """
    if name not in _CLASSES:
        raise ConfigurationError(
            f"unknown embedder {name!r}", hint=f"choose one of: {', '.join(EMBEDDERS)}"
        )
    module, attribute = _CLASSES[name]
    factory: Callable[[Settings], Embedder] = getattr(importlib.import_module(module), attribute)
    return factory(settings)
