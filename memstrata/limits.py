"""Limits and allowed ranges, defined once: the core enforces them, the surfaces derive from them.

The REST schemas, the MCP tool signatures and the client take their bounds from here (a test
checks that they agree), so a value one surface accepts is never refused by another.
"""

from __future__ import annotations

#: Most hits a search returns, items a page lists, tasks a listing shows.
MAX_TOP_K = 1000
#: Most items a listing may skip (``offset``).
MAX_OFFSET = 2**31 - 1
#: Largest context budget, in tokens.
MAX_BUDGET = 1_000_000
#: Most events one audit call returns.
MAX_AUDIT_LIMIT = 10_000
#: Most tokens a chat answer may be asked to have.
MAX_CHAT_TOKENS = 8192
#: Longest label of an API key.
MAX_KEY_LABEL = 200
#: Longest a surface blocks waiting for background tasks, in seconds.
MAX_WAIT_S = 60.0

#: The settings an administrator may change while running (``MemoryOS.configure``) and the
#: closed range each accepts.
RUNTIME_RANGES: dict[str, tuple[float, float]] = {
    "rrf_k": (1, 10_000),
    "search_candidates": (1, 10_000),
    "keyword_max_postings": (1, 10_000_000),
    "keyword_weight": (0.0, 100.0),
    "dense_weight": (0.0, 100.0),
}
