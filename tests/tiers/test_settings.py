from __future__ import annotations

import pytest

from memstrata.errors import ValidationError
from memstrata.tiers.settings import TierSettings


def test_defaults_are_design_defaults() -> None:
    s = TierSettings.parse(None)
    assert (s.working_capacity, s.mid_capacity, s.similarity_threshold, s.heat_threshold) == (
        10, 2000, 0.6, 5.0,
    )  # fmt: skip
    assert (s.alpha, s.beta, s.gamma, s.tau_hours) == (1.0, 1.0, 1.0, 24.0)


def test_partial_settings_fill_defaults() -> None:
    s = TierSettings.parse({"working_capacity": 4, "similarity_threshold": 0.75})
    assert s.working_capacity == 4 and s.similarity_threshold == 0.75 and s.mid_capacity == 2000
    assert TierSettings.parse(s.as_dict()) == s


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"working_capacity": -1}, "from 1 to 10000"),
        ({"working_capacity": 2.5}, "an integer"),
        ({"similarity_threshold": 3}, "from 0 to 2"),
        ({"heat_threshold": "hot"}, "a number"),
        ({"tau_hours": 0}, "tau_hours"),
        ({"alpha": True}, "alpha"),
        ({"capacity": 3}, "unknown cube setting"),
    ],
)
def test_bad_settings_name_the_allowed_range(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TierSettings.parse(values)
