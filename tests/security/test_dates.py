"""Finding 3 of the second hardening round: dates at the calendar's edge in a query.

``"what did I do on 9999-12-31"`` (also ``0001-01-01``, ``December 9999``, ``February 0000``)
overflowed the date arithmetic of the time channel: a 500 on REST search, context and chat,
the inspector, and MCP search and retrieve (all of which read the query through
``retrieval.question``).
"""

from __future__ import annotations

from datetime import date

import httpx
import pytest

from memstrata import MemoryOS
from memstrata.retrieval.question import dates, periods
from tests.server.conftest import Account

pytestmark = pytest.mark.engines("sqlite", "postgres")

EDGES = [
    "what did I do on 9999-12-31",
    "what did I do on 0001-01-01",
    "what happened on 31 December 9999?",
    "what happened on January 1, 1000?",
    "what happened in December 9999",
    "what happened in February 0000",
    "what happened in January 1000",
    "and on 0000-00-00 or 9999-99-99?",
]


def test_the_calendars_edges_are_days_like_any_other() -> None:
    assert dates("on 9999-12-31") == [date(9999, 12, 31)]
    assert periods("on 9999-12-31") == [(date(9999, 12, 30), date(9999, 12, 31))]
    assert periods("in December 9999") == [(date(9999, 11, 30), date(9999, 12, 31))]
    assert periods("in January 1000") == [(date(999, 12, 31), date(1000, 2, 1))]
    # No event is before the year 1000: such a date is not read as one.
    assert dates("on 0001-01-01") == [] and periods("in February 0000") == []


@pytest.mark.parametrize("query", EDGES)
def test_search_and_context_answer_at_the_edges(mos: MemoryOS, alice_cube: str, query: str) -> None:
    mos.add(
        [{"role": "user", "content": "I went hiking.", "timestamp": "9999-12-31T10:00:00Z"}],
        user_id="alice",
        cube_id=alice_cube,
    )
    hits = mos.search(query, user_id="alice", cube_ids=[alice_cube], top_k=3)
    assert hits and "hiking" in hits[0].item.text  # the turn, or what was read from it
    assert "hiking" in mos.context(query, user_id="alice", cube_ids=[alice_cube]).text


def test_rest_search_and_context_answer_at_the_edges(
    owner_cube: tuple[Account, str],
) -> None:
    owner, _ = owner_cube
    for query in EDGES:
        for path in ("/search", "/context"):
            answer: httpx.Response = owner.http.post(path, json={"query": query})
            assert answer.status_code == 200, (path, query, answer.text)
