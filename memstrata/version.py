"""The version every surface reports (``memstrata.__version__``, ``/health``, OpenAPI, MCP).

Read from the installed distribution's metadata, as ``memstrata --version`` reads it (click's
``version_option``), so every surface reports one number: the one ``pyproject.toml`` sets.  Read
on first use, not at import.
"""

from __future__ import annotations

import functools
from importlib import metadata

#: What is reported when memstrata runs from a source tree that was never installed.
UNKNOWN = "0+unknown"


@functools.cache
def version() -> str:
    """The installed memstrata's version; ``UNKNOWN`` when it is not installed."""
    try:
        return metadata.version("memstrata")
    except metadata.PackageNotFoundError:
        return UNKNOWN
