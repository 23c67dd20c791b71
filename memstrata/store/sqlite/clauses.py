"""SQLite's WHERE clause for ``Filters`` (the PostgreSQL engine has its own: JSON and
placeholders differ)."""

from __future__ import annotations

from typing import Any

from memstrata.filters import Filters


def filter_sql(filters: Filters) -> tuple[str, list[Any]]:
    """A WHERE fragment over ``items i`` for every filter, with its parameters."""
    clauses = [f"i.status IN ({', '.join('?' * len(filters.statuses))})"]
    params: list[Any] = list(filters.statuses)
    for column, values in (("tier", filters.tiers), ("type", filters.types)):
        if values is not None:
            clauses.append(f"i.{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    if filters.session_id is not None:
        clauses.append("i.session_id = ?")
        params.append(filters.session_id)
    if filters.since is not None:
        clauses.append("i.event_time >= ?")
        params.append(filters.since.timestamp())
    if filters.until is not None:
        clauses.append("i.event_time <= ?")
        params.append(filters.until.timestamp())
    for key, value in filters.metadata.items():
        clause, args = _metadata(f'$."{key}"', value)
        clauses.append(clause)
        params.extend(args)
    return " AND ".join(clauses), params


def _metadata(path: str, value: Any) -> tuple[str, list[Any]]:
    """A metadata comparison as JSON values compare (``filters.same_json``), with its
    parameters: SQLite's ``json_extract`` reads ``true`` as 1, so the JSON type is compared too
    (a boolean only equals a boolean, a number a number, a string a string)."""
    if value is None:
        return "json_extract(i.metadata, ?) IS NULL", [path]
    if isinstance(value, bool):
        kinds = "'true'" if value else "'false'"
    elif isinstance(value, int | float):
        kinds = "'integer', 'real'"
    else:
        kinds = "'text'"
    clause = f"(json_type(i.metadata, ?) IN ({kinds}) AND json_extract(i.metadata, ?) IS ?)"
    return clause, [path, path, value]
