"""Property-based: schemathesis sends generated requests to every operation of the OpenAPI
description, as the admin, and checks that the server never fails (5xx) and always answers as the
description says (status code, content type, body schema).

A bounded run (a few examples per operation) against its own server and database, so that the
settings it changes and the cubes it deletes touch no other test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.server.conftest import fuzz_target, generated

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
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server of its own, with a cube and a memory for the generated requests to find."""
    with fuzz_target(tmp_path_factory.mktemp("schema")) as target:
        yield target


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
        @generated(EXAMPLES)
        def check(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        check()  # a failure's report names the operation (its curl line)
