"""PostgreSQL's WHERE clause for ``Filters``: named parameters (``%(f0)s``…), so it joins any
query's own named ones; metadata compared as JSON."""

from __future__ import annotations

import json
from typing import Any

from memstrata.filters import Filters


def filter_sql(filters: Filters) -> tuple[str, dict[str, Any]]:
    """A WHERE fragment over ``items i`` for every filter, with its parameters by name.

    A metadata value matches the stored JSON value equal to it; ``None`` matches a JSON null or
    a missing key (as SQLite's ``json_extract(…) IS NULL`` does).
    """
    params: dict[str, Any] = {}

    def param(value: Any) -> str:
        name = f"f{len(params)}"
        params[name] = value
        return f"%({name})s"

    clauses = [f"i.status = ANY({param(list(filters.statuses))})"]
    for column, values in (("tier", filters.tiers), ("type", filters.types)):
        if values is not None:
            clauses.append(f"i.{column} = ANY({param(list(values))})")
    if filters.session_id is not None:
        clauses.append(f"i.session_id = {param(filters.session_id)}")
    if filters.since is not None:
        clauses.append(f"i.event_time >= {param(filters.since.timestamp())}")
    if filters.until is not None:
        clauses.append(f"i.event_time <= {param(filters.until.timestamp())}")
    for key, value in filters.metadata.items():
        if value is None:
            clauses.append(
                f"coalesce(i.metadata::jsonb -> {param(key)}, 'null'::jsonb) = 'null'::jsonb"
            )
        else:
            clauses.append(f"i.metadata::jsonb -> {param(key)} = {param(json.dumps(value))}::jsonb")
    return " AND ".join(clauses), params
