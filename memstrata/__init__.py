"""memstrata: a memory operating system for LLM agents.

``from memstrata import MemoryOS`` is the whole entry point (``AsyncMemoryOS`` is its form for
``async`` code); errors live in ``memstrata.errors`` and the data model in ``memstrata.model``.
"""

from memstrata.config import Settings
from memstrata.errors import MemstrataError
from memstrata.memory.aio import AsyncMemoryOS
from memstrata.memory.system import MemoryOS
from memstrata.model import Cube, Hit, MemoryItem, Source, User, Version
from memstrata.version import version

__all__ = [
    "AsyncMemoryOS",
    "Cube",
    "Hit",
    "MemoryItem",
    "MemoryOS",
    "MemstrataError",
    "Settings",
    "Source",
    "User",
    "Version",
]


def __getattr__(name: str) -> str:
    # ``__version__`` is read from the installed distribution (``memstrata.version``) on first
    # use, so pyproject.toml holds the only copy of the number.
    if name == "__version__":
        return version()
    raise AttributeError(f"module 'memstrata' has no attribute {name!r}")
