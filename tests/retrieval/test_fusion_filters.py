from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memstrata.errors import ValidationError
from memstrata.filters import Filters, parse_filters
from memstrata.retrieval.fusion import reciprocal_rank_fusion


def test_rrf_rewards_agreement_and_records_ranks() -> None:
    fused = reciprocal_rank_fusion(
        {"keyword": [("a", 9.0), ("b", 5.0)], "dense": [("b", 0.9), ("c", 0.8)]},
        {"keyword": 1.0, "dense": 1.0},
        k=60,
    )
    assert [f[0] for f in fused] == ["b", "a", "c"]
    assert fused[0][2] == {"keyword": 2, "dense": 1}
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)


def test_rrf_weights() -> None:
    fused = reciprocal_rank_fusion({"k": [("a", 1.0)], "d": [("b", 1.0)]}, {"k": 0.5, "d": 1.0})
    assert fused[0][0] == "b"


def test_parse_filters_full() -> None:
    f = parse_filters(
        {
            "session_id": "s1",
            "tier": "working",
            "type": ["turn", "fact"],
            "status": ["generated", "archived"],
            "since": "2024-05-01T00:00:00Z",
            "until": 1717200000,
            "metadata": {"topic": "pets", "n": 2, "ok": True, "x": None},
        }
    )
    assert f.session_id == "s1"
    assert f.tiers == ("working",)
    assert f.types == ("turn", "fact")
    assert f.statuses == ("generated", "archived")
    assert f.since == datetime(2024, 5, 1, tzinfo=timezone.utc)
    assert f.until is not None and f.until.year == 2024
    assert parse_filters(None) == Filters()
    assert parse_filters(f) is f


@pytest.mark.parametrize(
    "bad",
    [
        {"sesion_id": "typo"},
        {"tier": "short"},
        {"type": []},
        {"status": 3},
        {"since": "last tuesday"},
        {"since": "2024-06-01", "until": "2024-05-01"},
        {"metadata": {"k": [1, 2]}},
        {"metadata": ["k"]},
        {"metadata": {'a"b': 1}},
        {"session_id": 5},
        ["tier", "working"],
    ],
)
def test_malformed_filters_are_validation_errors(bad: object) -> None:
    with pytest.raises(ValidationError):
        parse_filters(bad)  # type: ignore[arg-type]
