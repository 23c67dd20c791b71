"""Property-based: schemathesis sends generated requests to every operation of the OpenAPI
description, as the admin, and checks that the server never fails (5xx) and always answers as the
description says (status code, content type, body schema).

A bounded run (a few examples per operation) against its own server and database, so that the
settings it changes and the cubes it deletes touch no other test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from memstrata import MemoryOS
from memstrata.server.rest import bootstrap, create_app

#: Generated requests per operation and mode (valid, invalid): a bounded run (about 10 s on 2 cores).
EXAMPLES = 20
#: Valid requests, and requests that break the schema (which must be refused with a 4xx).
MODES = ("positive", "negative")
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzzed(
    tmp_path_factory: pytest.TempPathFactory,
    start_server: Callable[[FastAPI], AbstractContextManager[str]],
) -> Iterator[tuple[str, str]]:
    """A server of its own, with a cube and a memory for the generated requests to find."""
    db = Path(tmp_path_factory.mktemp("schema")) / "fuzzed.db"
    with MemoryOS.open(str(db), workers=0) as memory:
        key = bootstrap(memory)
        assert key is not None
        memory.create_cube("notes", owner="admin", cube_id="notes")
        memory.add("Ann moved to Porto.", user_id="admin", cube_id="notes")
        with start_server(create_app(memory)) as url:
            yield url, key


def test_every_operation_conforms_to_the_schema(fuzzed: tuple[str, str]) -> None:
    url, key = fuzzed
    api = schemathesis.openapi.from_url(f"{url}/openapi.json")
    headers = {"Authorization": f"Bearer {key}"}
    operations = []
    for result in api.get_all_operations():
        assert isinstance(result, Ok), result
        operations.append(result.ok())
    assert len(operations) > 20
    for operation in operations:
        cases = st.one_of(*(operation.as_strategy(GenerationMode(m)) for m in MODES))

        @given(case=cases)
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        check()  # a failure's report names the operation (its curl line)
