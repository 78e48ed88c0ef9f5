"""Fuzz the API from its own OpenAPI spec with schemathesis, bounded in time.

Every operation gets generated requests, valid (positive) and invalid
(negative), with an admin token. No answer may be a 5xx, and every answer
must match the spec: status code, content type, body schema, headers. An
invalid request must be refused with a 4xx.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi import checks as openapi_checks

from keepgoing._server.app import create_app
from keepgoing._store.memory import MemoryStore

from ._support import Stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

EXAMPLES = 20  # per operation and mode: bounded, about 20 s for the whole spec

CHECKS = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
    openapi_checks.response_headers_conformance,
    openapi_checks.negative_data_rejection,
]

# The operations, read from the spec the app generates (no server needed to list
# them); an operation without parameters or body has no invalid input to make.
CASES = [
    (method.upper(), path, mode)
    for path, methods in create_app(MemoryStore()).openapi()["paths"].items()
    for method, operation in methods.items()
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode.is_positive or operation.get("parameters") or operation.get("requestBody")
]


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("fuzz"))
    try:
        stack.admin = stack.token("fuzzer", "admin")
        stack.start_server()
        stack.start_worker()  # so starts of known workflows get past 404
        yield stack
    finally:
        stack.cleanup()


@pytest.fixture(scope="module")
def api_schema(fuzz_stack: Stack) -> Any:
    return schemathesis.openapi.from_url(f"{fuzz_stack.url}/openapi.json")


@pytest.mark.parametrize(
    ("method", "path", "mode"), CASES, ids=[f"{m} {p} {mode}" for m, p, mode in CASES]
)
def test_no_server_error_and_no_answer_outside_the_spec(
    fuzz_stack: Stack, api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]
    auth = {"Authorization": f"Bearer {fuzz_stack.admin}"}

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: Any) -> None:
        # A case whose negative part is the Authorization header keeps its bad
        # header (and must get a 401); every other case carries the admin token.
        components = case.meta.components if case.meta else {}
        header = components.get(ParameterLocation.HEADER)
        headers = None if header is not None and header.mode.is_negative else auth
        case.call_and_validate(base_url=fuzz_stack.url, headers=headers, checks=CHECKS, timeout=15)

    fuzz()
