"""Fuzz the API from its own OpenAPI spec with schemathesis, bounded in time.

Every operation gets generated requests, valid (positive) and invalid
(negative), with an admin token. No answer may be a 5xx, and every answer
must match the spec: status code, content type, body schema, headers. An
invalid request must be refused with a 4xx.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi import checks as openapi_checks

from keepgoing._server.app import create_app
from keepgoing._store.sqlite import SqliteStore

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
    for path, methods in create_app(SqliteStore(":memory:")).openapi()["paths"].items()
    for method, operation in methods.items()
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode.is_positive or operation.get("parameters") or operation.get("requestBody")
]


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("fuzz"))
    try:
        stack.admin = stack.token("fuzzer", "admin")
        # A start by a name no worker serves waits for one, so long polls on such runs
        # would each take the default 30 s, and event streams run for 10 minutes:
        # keep them short.
        stack.start_server("--long-poll-max", "2", "--stream-max", "0.1")
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


# -- the conformance run --------------------------------------------------------------------
#: Every check that applies to a single API (not the stateful ones): among them
#: ST202 (a schema-valid request must not be refused with 400) and ST205 (an
#: OPTIONS answer's `Allow` lists exactly the methods of the path).
CONFORMANCE = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "ignored_auth",
]


@pytest.mark.timeout(420)
def test_schemathesis_conformance_run_finds_nothing(fuzz_stack: Stack, tmp_path: Path) -> None:
    """`st run` over the whole spec: examples, coverage (unexpected methods, missing
    headers, boundary values) and fuzzing, with a fixed seed and a fixed number of
    examples, so it is bounded (about half a minute here) and repeatable."""
    # A deploy's groups have rules across fields (a per-task group is named after the
    # main one, the routes name its queues, an image's steps parse) that a schema cannot
    # say: a schema-valid deploy may rightly be refused with 400 (`group_error`).
    config = tmp_path / "schemathesis.toml"
    # The checks are named here rather than with --checks, which would override the
    # operation's own setting.
    config.write_text(
        "[checks]\nenabled = false\n"
        + "".join(f"{name}.enabled = true\n" for name in CONFORMANCE)
        + "\n[[operations]]\n"
        'include-path-regex = "^/api/v1/groups$"\n'
        'include-method = "POST"\n'
        # An operation's own settings replace the run's, the token header included.
        f'headers = {{ Authorization = "Bearer {fuzz_stack.admin}" }}\n'
        "checks.positive_data_acceptance.enabled = false\n"
        # Fuzzing revokes tokens by the ids GET /api/v1/tokens lists, this run's own among
        # them, after which every later operation answers 401: its fuzzing phase is off
        # (its coverage phase still runs).
        "\n[[operations]]\n"
        'include-path-regex = "^/api/v1/tokens/"\n'
        'include-method = "DELETE"\n'
        f'headers = {{ Authorization = "Bearer {fuzz_stack.admin}" }}\n'
        "phases.fuzzing.enabled = false\n"
        # The runs list refuses, with 400, what its schema cannot say is wrong: a cursor
        # it did not hand out, and `since` after `until` (a range that holds nothing).
        "\n[[operations]]\n"
        'include-operation-id = ["list_runs_api_v1_runs_get", "counts_api_v1_run_counts_get"]\n'
        f'headers = {{ Authorization = "Bearer {fuzz_stack.admin}" }}\n'
        "checks.positive_data_acceptance.expected-statuses = [200, 400, 401, 403, 404]\n"
        # A status key must be printable text (`str.isprintable`: no control, format,
        # private-use or unassigned characters), which no schema pattern can say: a
        # schema-valid key may rightly be refused with 400.
        "\n[[operations]]\n"
        'include-path-regex = "^/api/v1/runs/.workflow_id./status$"\n'
        'include-method = "GET"\n'
        f'headers = {{ Authorization = "Bearer {fuzz_stack.admin}" }}\n'
        "checks.positive_data_acceptance.expected-statuses = [200, 400, 401, 403, 404]\n"
    )
    argv = [
        str(Path(sys.executable).with_name("st")),
        "--config-file",
        str(config),
        "run",
        f"{fuzz_stack.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {fuzz_stack.admin}",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        "25",
        "--workers",
        "1",
        "--seed",
        "20260101",
        "--request-timeout",
        "15",
        "--no-color",
        # The volume path's pattern has lookaheads (no `..` segment, not absolute), so
        # hypothesis filters many candidates; that is expected, not a problem.
        "--suppress-health-check",
        "filter_too_much",
    ]
    done = subprocess.run(
        argv, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-4000:]
    assert "passed" in done.stdout and "failed" not in done.stdout.split("SUMMARY")[-1]


# -- lone surrogates --------------------------------------------------------------------------
_LONE = st.sampled_from(["\ud800", "\udfff", "a\udc00b", "\ud83d"])  # unpaired halves
_TEXT = st.text(max_size=8)
_SCALAR = st.none() | st.booleans() | st.integers(-(2**31), 2**31) | _TEXT


def _with_a_surrogate(value: Any) -> st.SearchStrategy[Any]:
    """``value`` (JSON data) wrapped so that one string or key holds a lone surrogate."""
    return st.one_of(
        _LONE.map(lambda bad: {"k": value, "x": bad}),
        _LONE.map(lambda bad: {bad: value}),
        _LONE.map(lambda bad: [value, [bad]]),
    )


_PAYLOADS = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
).flatmap(_with_a_surrogate)


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/events", "payload"),
        ("/api/v1/runs/fuzzed/messages", "payload"),
        ("/api/v1/runs", "input"),
    ],
)
def test_a_lone_surrogate_anywhere_in_a_payload_is_400(
    fuzz_stack: Stack, path: str, field: str
) -> None:
    base = {
        "/api/v1/events": {"event_type": "t", "correlation_id": "c"},
        "/api/v1/runs/fuzzed/messages": {"name": "m"},
        "/api/v1/runs": {"workflow": "sum_two"},
    }[path]
    with fuzz_stack.api(fuzz_stack.admin) as api:

        @given(payload=_PAYLOADS)
        @settings(max_examples=30, deadline=None, database=None)
        def fuzz(payload: Any) -> None:
            text = json.dumps({**base, field: payload})  # ensure_ascii: `\ud800` escapes
            response = api.post(
                path, content=text.encode(), headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 400, response.text
            assert response.json()["code"] == "invalid_payload", response.text
            assert field in response.json()["message"]

        fuzz()
