"""A cube's tier settings: capacities, thresholds and the heat formula's weights.

They live in ``Cube.settings`` under these names; a cube created without them gets the defaults.
``TierSettings.parse`` validates a mapping and names the allowed range of any bad value, so a
cube can never hold settings its tiers cannot use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memstrata.errors import ValidationError

#: name → (minimum, maximum, description); bounds are inclusive.
_RANGES: dict[str, tuple[float, float, str]] = {
    "working_capacity": (1, 10_000, "turns kept per session in the working tier"),
    "session_idle_hours": (
        0.0,
        1e6,
        "a session this much older (event time) than the cube's newest turn leaves "
        "the working tier whole; 0: never",
    ),
    "mid_capacity": (1, 10_000_000, "segments kept active in the mid tier"),
    "similarity_threshold": (0.0, 2.0, "cos + λ·Jaccard a page needs to join a segment"),
    "keyword_weight": (0.0, 1.0, "λ: weight of keyword overlap in the join rule"),
    "heat_threshold": (0.0, 1e9, "heat at which a segment is promoted to the long tier"),
    "alpha": (0.0, 1e6, "heat weight of visits"),
    "beta": (0.0, 1e6, "heat weight of pages"),
    "gamma": (0.0, 1e6, "heat weight of recency"),
    "tau_hours": (1e-3, 1e6, "recency time constant in hours"),
    "ttl_days_turn": (0.0, 1e5, "days an added turn lives before it expires; 0: never"),
    "ttl_days_chunk": (0.0, 1e5, "days a document's chunk lives before it expires; 0: never"),
}


@dataclass(frozen=True)
class TierSettings:
    working_capacity: int = 10
    session_idle_hours: float = 6.0
    mid_capacity: int = 2000
    similarity_threshold: float = 0.6
    keyword_weight: float = 0.5
    heat_threshold: float = 5.0
    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 1.0
    tau_hours: float = 24.0
    #: a default lifetime for what ``add`` and ``add_document`` store (``memory.expiry``);
    #: derived items need none: they go with their sources
    ttl_days_turn: float = 0.0
    ttl_days_chunk: float = 0.0

    @classmethod
    def parse(cls, values: Mapping[str, Any] | None) -> TierSettings:
        """Validated settings from a cube's ``settings`` mapping (missing keys take defaults).

        Raises ``ValidationError`` for an unknown key, a non-number, or a value out of range.
        """
        values = dict(values or {})
        unknown = sorted(set(values) - set(_RANGES))
        if unknown:
            raise ValidationError(
                f"unknown cube setting(s): {', '.join(unknown)}",
                hint=f"known: {', '.join(_RANGES)}",
            )
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        checked: dict[str, Any] = {k: _check(k, v, types[k] == "int") for k, v in values.items()}
        return cls(**checked)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check(name: str, value: Any, integral: bool) -> float | int:
    low, high, meaning = _RANGES[name]
    kind = "an integer" if integral else "a number"
    ok_type = isinstance(value, int) if integral else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not low <= value <= high:
        raise ValidationError(
            f"cube setting {name}={value!r} must be {kind} from {low:g} to {high:g} ({meaning})"
        )
    return float(value) if not integral else int(value)
