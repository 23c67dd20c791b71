"""``bench/peers.py``'s own-work figures (issue 29): a search's time less its query embedding,
per system, and the ratio of the two.  Mem0 is not installed here, so its system is not run;
the embedder wrapper it is given and the arithmetic are, with the real e5 embedder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memstrata.config import Settings
from memstrata.embed import make_embedder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import peers


@pytest.fixture(scope="module")
def embedder():  # type: ignore[no-untyped-def]
    return make_embedder("e5", Settings.load(environ={}))


def test_memstrata_search_reports_the_time_it_spent_embedding(embedder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    system = peers.Memstrata(str(tmp_path / "m.db"), embedder)
    try:
        system.prepare("u")
        turns = [{"role": "user", "name": "Ann", "content": "I went hiking in Banff.", "id": "D1:1"},
                 {"role": "user", "name": "Bo", "content": "I baked bread.", "id": "D1:2"}]  # fmt: skip
        system.add("u", "s1", turns)
        took, embedding, found = system.search("u", "Where did Ann go hiking?")
    finally:
        system.close()
    assert 0 < embedding < took
    assert found[0] == "D1:1"


def test_the_mem0_wrapper_sums_its_query_embedding_time(embedder) -> None:  # type: ignore[no-untyped-def]
    wrapper = peers.E5ForMem0(embedder)
    wrapper.embed_batch(["a passage"], "add")
    assert wrapper.query_s == 0.0
    wrapper.embed("a question?", "search")
    first = wrapper.query_s
    wrapper.embed("another question?", "search")
    assert 0 < first < wrapper.query_s


def test_own_work_is_search_less_embedding_and_its_ratio_is_mem0_over_ours() -> None:
    question = peers.Question("q", "single-hop", {"D1:1"})
    ours, theirs = peers.Tally(turns=10, ingest_s=1.0), peers.Tally(turns=10, ingest_s=2.0)
    for took, embedded in ((0.010, 0.006), (0.012, 0.006), (0.020, 0.006)):
        ours.asked(question, took, embedded, ["D1:1"])
    for took, embedded in ((0.030, 0.006), (0.036, 0.006), (0.040, 0.006)):
        theirs.asked(question, took, embedded, [])
    mine, peer = ours.summary(), theirs.summary()
    assert mine["own_work_p50_ms"] == pytest.approx(6.0)
    assert peer["own_work_p50_ms"] == pytest.approx(30.0)
    found = peers.ratios(mine, peer)
    assert found["own_work_p50"] == pytest.approx(5.0)
    assert found["search_p50"] == pytest.approx(3.0)
    assert found["ingest"] == pytest.approx(2.0)
