"""Fuzz every REST operation with hostile values: no answer is ever a 5xx (issue 11).

Schemathesis generates a request that fits each operation of the OpenAPI description; then one of
its strings (a body value or key, a query or path parameter) is replaced by a hostile one from
``tests.nasty`` — a lone surrogate, NUL or another control character, a line separator, a
bidirectional mark, a forged context line, a time outside the calendar, a value far over a
bound — or a body value by JSON nested hundreds of levels deep.  Every answer must be below 500.
A few raw bodies no JSON encoder writes (a lone surrogate escape, deep nesting) are sent to every
JSON route as well.

Bounded: ``EXAMPLES`` requests per operation (about 40 s in all on 2 cores), against a
server and database of its own, as the admin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core import NotSet
from schemathesis.core.result import Ok

from tests.nasty import NESTED, TEXT, URL_TEXT
from tests.server.conftest import fuzz_target, generated

#: Requests per operation.
EXAMPLES = 15
#: Bodies that no JSON encoder writes but any client can send.
RAW_BODIES = [
    b'{"query": "\\ud800", "name": "\\udfff", "user_id": "\\ud800x"}',
    b"[" * 5000 + b"]" * 5000,
    b'{"a": ' * 3000 + b"1" + b"}" * 3000,
    b'{"query": NaN, "top_k": Infinity}',
    b'{"query": "\xed\xa0\x80"}',  # a surrogate encoded as if it were UTF-8
    b"\xff\xfe{}",
]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    with fuzz_target(tmp_path_factory.mktemp("fuzz"), max_request_bytes=200_000) as target:
        yield target


def _strings(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The paths of the string leaves (and keys, marked ``"key"``) of a JSON value."""
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield (*path, ("key", key))
            yield from _strings(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _strings(inner, (*path, i))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """``value`` with the leaf (or key) at ``path`` replaced by ``new``."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(head, tuple):  # a key
        return {(new if k == head[1] and isinstance(new, str) else k): v for k, v in value.items()}
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replaced(value[head], rest, new)
    return copy


@st.composite
def hostile(draw: st.DrawFn, operation: Any) -> Any:
    """A valid case of ``operation`` with one string made hostile (see the module docstring)."""
    case = draw(operation.as_strategy(GenerationMode.POSITIVE))
    places: list[tuple[str, tuple[Any, ...]]] = []
    if isinstance(case.body, (dict, list)):
        places += [("body", p) for p in _strings(case.body)]
    for where in ("query", "path_parameters"):
        places += [(where, (name,)) for name in getattr(case, where) or {}]
    if not places:
        return case
    where, path = draw(st.sampled_from(places))
    if where == "body" and case.media_type and "json" not in case.media_type:
        case.body = _replaced(case.body, path, draw(URL_TEXT))  # a form field: no surrogates
    elif where == "body":
        new = draw(st.one_of(TEXT, NESTED) if not isinstance(path[-1], tuple) else TEXT)
        case.body = _replaced(case.body, path, new)
    else:
        getattr(case, where)[path[0]] = draw(URL_TEXT)
    return case


def send(http: httpx.Client, case: Any) -> int:
    """``case`` sent as is, its status: a JSON body encoded by ``json.dumps`` (a lone surrogate
    becomes a ``\\ud800`` escape, as a hostile client would send it), path parameters quoted; a
    multipart body as schemathesis encodes it."""
    path = case.path
    for name, value in (case.path_parameters or {}).items():
        path = path.replace("{" + name + "}", quote(str(value), safe=""))
    if case.media_type and "json" not in case.media_type:
        return int(case.call(base_url=str(http.base_url), headers=dict(http.headers)).status_code)
    body: dict[str, Any] = {}
    if case.media_type and not isinstance(case.body, NotSet):
        body = {"content": json.dumps(case.body), "headers": {"Content-Type": case.media_type}}
    return http.request(case.method, path, params=case.query or None, **body).status_code


def test_no_operation_answers_5xx_to_hostile_values(fuzzed: tuple[str, str]) -> None:
    url, key = fuzzed
    api = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = [r.ok() for r in api.get_all_operations() if isinstance(r, Ok)]
    assert len(operations) > 20
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        for operation in operations:

            @given(case=hostile(operation))
            @generated(EXAMPLES)
            def check(case: Any) -> None:
                assert send(http, case) < 500, (case.method, case.path)

            check()


def test_raw_bodies_are_refused_alike_on_every_json_route(fuzzed: tuple[str, str]) -> None:
    url, key = fuzzed
    described = httpx.get(f"{url}/openapi.json").json()
    routes = [
        (method.upper(), path.replace("{cube_id}", "notes").replace("{user_id}", "me"))
        for path, operations in described["paths"].items()
        for method, operation in operations.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]
    assert len(routes) > 10
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        for method, path in routes:
            for body in RAW_BODIES:
                answer = http.request(method, path, content=body)
                assert (answer.status_code, answer.json()["error"]["code"]) in {
                    (422, "invalid_input"),
                    (404, "not_found"),  # a path parameter no item has, checked first
                }, (method, path, body[:40], answer.text)
