"""Search of a past state: the scratch index ranks as the live store does (one search engine).

Real default embedder (e5) and a real SQLite file; ``search_as_of`` at "now" must give exactly
the live ``hybrid_search`` ranking, decomposition, fusion, neighbour smoothing and filters
included.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memstrata.config import Settings
from memstrata.embed import Embedder, fingerprint, make_embedder
from memstrata.filters import Filters
from memstrata.model import Cube, Hit, MemoryItem, User, new_id, utcnow
from memstrata.retrieval.history import search_as_of
from memstrata.retrieval.search import hybrid_search
from memstrata.store.sqlite import SQLiteStore
from memstrata.text import embedding_text

SETTINGS = Settings()
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
TURNS = [
    ("s1", "Jon", "I lost my job at the bank last week."),
    ("s1", "Gina", "Oh no! What will you do now, Jon?"),
    ("s1", "Jon", "I want to open a dance studio downtown."),
    ("s1", "Gina", "I opened an online clothing store after my job ended."),
    ("s2", "Jon", "The studio needs a wooden floor for the dancers."),
    ("s2", "Gina", "My store sells jackets and summer dresses."),
    ("s2", "Jon", "We took part in a dance competition in Paris."),
    ("s2", "Gina", "I used to compete in dance contests as a teenager."),
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return make_embedder("e5", SETTINGS)


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> Iterator[SQLiteStore]:
    backend = SQLiteStore(tmp_path / "m.db")
    backend.put_user(User("u1"))
    backend.put_cube(Cube("c1", "talk", owner="u1", embedder=fingerprint(embedder)))
    items = [
        MemoryItem(
            id=new_id(), cube_id="c1", text=text, speaker=speaker, session_id=session,
            user_id="u1", event_time=T0 + timedelta(minutes=n), metadata={"n": n % 2},
        )
        for n, (session, speaker, text) in enumerate(TURNS)
    ]  # fmt: skip
    vectors = embedder.embed_passages([embedding_text(i) for i in items])
    backend.add_items(items, vectors, fingerprint(embedder))
    gone = backend.get_items([items[5].id], ["c1"])[0]
    backend.update_item(_with(gone, status="deleted"), None, op="delete", actor="u1")
    yield backend
    backend.close()


def _with(item: MemoryItem, **fields: object) -> MemoryItem:
    return replace(item, **fields)  # type: ignore[arg-type]


def _ranking(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.item.id, round(h.score, 12)) for h in hits]


@pytest.mark.parametrize(
    "query",
    [
        "Did Jon and Gina both take part in dance competitions?",  # decomposed per name
        "What did Jon lose?",  # smoothing: the answer is the next turn
        "clothing store",
    ],
)
def test_as_of_now_ranks_exactly_as_the_live_search(
    store: SQLiteStore, embedder: Embedder, query: str
) -> None:
    live = hybrid_search(store, embedder, SETTINGS, query, ["c1"], Filters(), 5)
    then = search_as_of(store, embedder, SETTINGS, query, ["c1"], Filters(), 5, utcnow())
    assert _ranking(then) == _ranking(live)
    assert len(live) == 5


@pytest.mark.parametrize(
    "filters",
    [
        Filters(session_id="s2"),
        Filters(metadata={"n": 1}),
        Filters(until=T0 + timedelta(minutes=3)),
        Filters(statuses=("generated", "deleted")),
    ],
)
def test_filters_mean_the_same_in_the_past(
    store: SQLiteStore, embedder: Embedder, filters: Filters
) -> None:
    query = "dance studio job"
    live = hybrid_search(store, embedder, SETTINGS, query, ["c1"], filters, 8)
    then = search_as_of(store, embedder, SETTINGS, query, ["c1"], filters, 8, utcnow())
    assert _ranking(then) == _ranking(live)
    assert all(filters.matches(h.item) for h in then)


def test_the_past_is_searched_by_its_own_words(store: SQLiteStore, embedder: Embedder) -> None:
    [first] = store.list_items("c1", Filters(), limit=1)
    before = utcnow()
    store.update_item(
        _with(first, text="I won the lottery yesterday."),
        embedder.embed_passages(["Jon: I won the lottery yesterday."])[0],
        op="update",
        actor="u1",
    )
    then = search_as_of(store, embedder, SETTINGS, "lost job bank", ["c1"], Filters(), 1, before)
    assert [h.item.text for h in then] == ["I lost my job at the bank last week."]
    now = search_as_of(store, embedder, SETTINGS, "lottery", ["c1"], Filters(), 1, utcnow())
    assert [h.item.text for h in now] == ["I won the lottery yesterday."]


def test_a_scratch_index_lives_in_memory_and_is_gone_after_use(
    store: SQLiteStore, tmp_path: Path
) -> None:
    items = store.list_items("c1", Filters())
    vectors = store.get_vectors([i.id for i in items], ["c1"])
    vectors[0] = 0.0  # no vector: left out of the dense channel
    files = sorted(tmp_path.iterdir())
    with store.scratch_index(items, vectors) as index:
        assert [i.id for i in index.get_items([items[1].id], ["c1"])] == [items[1].id]
        dense = index.vector_search(vectors[1], ["c1"], Filters(), 20)
        assert dense[0][0] == items[1].id and items[0].id not in {i for i, _ in dense}
        assert index.keyword_search("wooden floor", ["c1"], Filters(), 3)[0][0] == items[4].id
        assert index.next_turns("c1", [items[0].id]) == {items[0].id: items[1].id}
        uri = index.path  # type: ignore[attr-defined]
        assert sorted(tmp_path.iterdir()) == files
        assert not list(Path.cwd().glob("*memstrata-scratch*"))
    again = SQLiteStore(uri)  # the same name now opens a new, empty database
    try:
        assert again.get_items([i.id for i in items], ["c1"]) == []
    finally:
        again.close()
