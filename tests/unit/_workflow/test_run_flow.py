"""``@workflow(concurrency=, singleton=, on_conflict=)``: checked at decoration, and the
spec the store computes a start's key from without the code."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing import Concurrency, InvalidLimitError
from keepgoing._run_flow import RunFlow, UncomputableKeyError


def test_concurrency_becomes_a_spec_with_the_parameter_names() -> None:
    @keepgoing.workflow(name="rf_plain", concurrency=Concurrency(2, key="account"))
    async def plain(account: str, n: int = 1) -> None: ...

    assert plain.flow == RunFlow(limit=2, key="account", params=("account", "n"))
    assert plain.flow.key_of({"args": ["a"], "kwargs": {}}) == '"a"'
    assert plain.flow.key_of({"args": [], "kwargs": {"account": {"id": 1}}}) == '{"id":1}'


def test_a_singleton_is_a_limit_of_one_per_key() -> None:
    @keepgoing.workflow(name="rf_single", singleton="account", on_conflict="skip")
    async def single(account: str) -> None: ...

    assert single.flow == RunFlow(
        limit=1, key="account", singleton=True, on_conflict="skip", params=("account",)
    )
    assert RunFlow.from_json(single.flow.to_json()) == single.flow


def test_a_callable_key_is_computed_by_the_definition_only() -> None:
    @keepgoing.workflow(name="rf_callable", concurrency=Concurrency(1, key=lambda a, b: a + b))
    async def summed(a: int, b: int) -> None: ...

    assert summed.flow is not None and summed.flow.callable_key
    assert summed.flow_key({"args": [1, 2], "kwargs": {}}) == "3"
    with pytest.raises(UncomputableKeyError, match="only a process with the workflow's code"):
        summed.flow.key_of({"args": [1, 2], "kwargs": {}})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"singleton": "account", "on_conflict": "replace"}, "on_conflict of workflow 'bad'"),
        ({"singleton": "nobody"}, "singleton of workflow 'bad': key 'nobody' names no argument"),
        ({"concurrency": 0}, "concurrency of workflow 'bad'"),
        ({"concurrency": Concurrency(1, key="nobody")}, "key 'nobody' names no argument"),
        ({"on_conflict": "skip"}, "needs singleton="),
        ({"singleton": "account", "concurrency": 2}, "not both"),
        ({"concurrency": "crm"}, "named limits are for tasks"),
    ],
)
def test_bad_limits_fail_at_decoration_naming_the_problem(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidLimitError, match=message):

        @keepgoing.workflow(name="bad", **options)  # type: ignore[call-overload]
        async def bad(account: str) -> None: ...
