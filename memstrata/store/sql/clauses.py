"""The WHERE clause of ``Filters`` over ``items i``, for both engines (positional parameters;
the JSON comparison of metadata is the dialect's)."""

from __future__ import annotations

from typing import Any

from memstrata.filters import Filters
from memstrata.model import SEARCHABLE_STATUSES
from memstrata.store import rows
from memstrata.store.sql.dialect import Dialect

#: The item columns, qualified (never ``*``: an engine's row holds more, its full text, vector…).
SELECT = ", ".join("i." + c for c in rows.ITEM_COLUMNS)
#: Searchable statuses as an SQL list (constants, so safe to inline; the planner sees them).
LIVE = ", ".join(f"'{s}'" for s in SEARCHABLE_STATUSES)


def filter_sql(d: Dialect, filters: Filters) -> tuple[str, list[Any]]:
    """A WHERE fragment over ``items i`` for every filter, with its parameters in order."""
    clause, params = d.one_of("i.status", list(filters.statuses))
    clauses = [clause]
    for column, values in (("tier", filters.tiers), ("type", filters.types)):
        if values is not None:
            clause, args = d.one_of(f"i.{column}", list(values))
            clauses.append(clause)
            params.extend(args)
    for condition, value in (
        ("i.session_id =", filters.session_id),
        ("i.event_time >=", None if filters.since is None else filters.since.timestamp()),
        ("i.event_time <=", None if filters.until is None else filters.until.timestamp()),
    ):
        if value is not None:
            clauses.append(f"{condition} {d.mark}")
            params.append(value)
    for key, value in filters.metadata.items():
        clause, args = d.json_equals("i.metadata", key, value)
        clauses.append(clause)
        params.extend(args)
    return " AND ".join(clauses), params
