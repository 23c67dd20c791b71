"""PostgreSQL's WHERE clause for ``Filters`` (``%s`` placeholders; metadata compared as JSON)."""

from __future__ import annotations

import json
from typing import Any

from memstrata.filters import Filters


def filter_sql(filters: Filters) -> tuple[str, list[Any]]:
    """A WHERE fragment over ``items i`` for every filter, with its parameters.

    A metadata value matches the stored JSON value equal to it; ``None`` matches a JSON null or
    a missing key (as SQLite's ``json_extract(…) IS NULL`` does).
    """
    clauses = ["i.status = ANY(%s)"]
    params: list[Any] = [list(filters.statuses)]
    for column, values in (("tier", filters.tiers), ("type", filters.types)):
        if values is not None:
            clauses.append(f"i.{column} = ANY(%s)")
            params.append(list(values))
    if filters.session_id is not None:
        clauses.append("i.session_id = %s")
        params.append(filters.session_id)
    if filters.since is not None:
        clauses.append("i.event_time >= %s")
        params.append(filters.since.timestamp())
    if filters.until is not None:
        clauses.append("i.event_time <= %s")
        params.append(filters.until.timestamp())
    for key, value in filters.metadata.items():
        if value is None:
            clauses.append("coalesce(i.metadata::jsonb -> %s, 'null'::jsonb) = 'null'::jsonb")
            params.append(key)
        else:
            clauses.append("i.metadata::jsonb -> %s = %s::jsonb")
            params.extend([key, json.dumps(value)])
    return " AND ".join(clauses), params
