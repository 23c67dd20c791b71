"""memstrata: a memory operating system for LLM agents.

``from memstrata import MemoryOS`` is the whole entry point; errors live in ``memstrata.errors``
and the data model in ``memstrata.model``.
"""

from memstrata.config import Settings
from memstrata.errors import MemstrataError
from memstrata.memory.system import MemoryOS
from memstrata.model import Cube, Hit, MemoryItem, Source, User, Version

__all__ = [
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
__version__ = "0.1.0"
