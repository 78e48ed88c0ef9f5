"""Limits: rates parsed, bad limits refused at decoration time naming the problem,
named limits, and the key's value for one call."""

from __future__ import annotations

from typing import Any

import pytest

import keepgoing
from keepgoing import Concurrency, InvalidLimitError, RateLimit
from keepgoing._limits import (
    check_concurrency,
    check_rate_limit,
    declared_limits,
    defined,
    key_value,
    named,
    parse_rate,
    resolve,
)
from keepgoing.limits import define


def _lookup(customer_id: str, region: str = "eu") -> str:
    return customer_id


def _loose(**kwargs: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10/s", (10, 1.0)),
        ("100/m", (100, 60.0)),
        ("5/h", (5, 3600.0)),
        ("2/500ms", (2, 0.5)),
        ("3/2s", (3, 2.0)),
        (" 20 / s ", (20, 1.0)),
        ("1/d", (1, 86400.0)),
    ],
)
def test_rates_parse_to_tokens_and_period(text: str, expected: tuple[int, float]) -> None:
    assert parse_rate(text) == expected


@pytest.mark.parametrize(
    "text", ["ten per second", "10", "10/", "/s", "0/s", "10/0s", "10/x", "-1/s", "1.5/s", ""]
)
def test_bad_rates_are_refused_naming_the_text(text: str) -> None:
    with pytest.raises(InvalidLimitError) as caught:
        parse_rate(text)
    assert repr(text) in str(caught.value)


def test_invalid_limit_error_is_a_configuration_and_value_error() -> None:
    assert issubclass(InvalidLimitError, keepgoing.ConfigurationError)
    assert issubclass(InvalidLimitError, ValueError)
    assert InvalidLimitError.code == "invalid_limit"


def test_rate_limit_carries_its_parsed_fields() -> None:
    limit = RateLimit("100/m", key="customer_id", burst=10)
    assert (limit.tokens, limit.period, limit.capacity) == (100, 60.0, 10)
    assert RateLimit("5/s").capacity == 1
    assert RateLimit("5/s") == RateLimit("5/s")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: Concurrency(0), "at least 1, not 0"),
        (lambda: Concurrency(-2), "at least 1, not -2"),
        (lambda: Concurrency(True), "not True"),
        (lambda: Concurrency(2.5), "not 2.5"),  # type: ignore[arg-type]
        (lambda: Concurrency(2, key=3), "key must be"),  # type: ignore[arg-type]
        (lambda: RateLimit("5/s", burst=0), "burst must be an int of at least 1"),
        (lambda: RateLimit("five"), "'five' is not a rate"),
    ],
)
def test_bad_limit_values_are_refused(make: Any, words: str) -> None:
    with pytest.raises(InvalidLimitError, match=words):
        make()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"concurrency": 0}, "concurrency of task 'bad_limit': concurrency must be .* not 0"),
        ({"concurrency": -1}, "not -1"),
        ({"concurrency": True}, "not bool True"),
        ({"concurrency": 1.5}, "not float 1.5"),
        ({"rate_limit": "ten per second"}, "rate_limit of task 'bad_limit': rate 'ten per"),
        ({"rate_limit": 10}, "not int 10"),
        ({"rate_limit": "nosuchlimit"}, "no limit named 'nosuchlimit'"),
        ({"concurrency": "nosuchlimit"}, "no limit named 'nosuchlimit'"),
        (
            {"concurrency": Concurrency(2, key="customer")},
            "key 'customer' names no argument of '_lookup' .*customer_id, region",
        ),
        ({"rate_limit": RateLimit("5/s", key="nope")}, "key 'nope' names no argument"),
    ],
)
def test_bad_task_limits_fail_at_decoration_naming_them(
    options: dict[str, object], words: str
) -> None:
    with pytest.raises(InvalidLimitError, match=words):
        keepgoing.task(name="bad_limit", **options)(_lookup)  # type: ignore[call-overload]


def test_good_task_limits_are_kept_on_the_definition() -> None:
    plain = keepgoing.task(name="limits_plain")(_lookup)
    assert plain.concurrency is None and plain.rate_limit is None
    capped = keepgoing.task(name="limits_capped", concurrency=3, rate_limit="10/s")(_lookup)
    assert capped.concurrency == Concurrency(3)
    assert capped.rate_limit == RateLimit("10/s")
    keyed = keepgoing.task(
        name="limits_keyed",
        concurrency=Concurrency(2, key="customer_id"),
        rate_limit=RateLimit("100/m", key=lambda customer_id, region="eu": region, burst=10),
    )(_lookup)
    assert isinstance(keyed.concurrency, Concurrency) and keyed.concurrency.key == "customer_id"


def test_named_limits_are_defined_once_and_named_by_tasks() -> None:
    define("limits_test_crm", rate="20/s", burst=5)
    define("limits_test_crm", rate="20/s", burst=5)  # the same again: a module imported twice
    define("limits_test_db", concurrency=4)
    assert named("limits_test_crm").rate == RateLimit("20/s", burst=5)
    assert named("limits_test_db").concurrency == 4
    assert {"limits_test_crm", "limits_test_db"} <= set(defined())
    crm = keepgoing.task(name="limits_named", rate_limit="limits_test_crm")(_lookup)
    assert crm.rate_limit == "limits_test_crm"
    db = keepgoing.task(name="limits_named_db", concurrency="limits_test_db")(_lookup)
    assert db.concurrency == "limits_test_db"
    with pytest.raises(InvalidLimitError, match="'limits_test_db' has no rate="):
        keepgoing.task(name="bad_limit", rate_limit="limits_test_db")(_lookup)
    with pytest.raises(InvalidLimitError, match="'limits_test_crm' has no concurrency="):
        keepgoing.task(name="bad_limit", concurrency="limits_test_crm")(_lookup)


@pytest.mark.parametrize(
    ("args", "kwargs", "words"),
    [
        (("",), {"rate": "1/s"}, "a limit's name must be"),
        (("has space",), {"rate": "1/s"}, "a limit's name must be"),
        (("limits_test_empty",), {}, "needs rate=..., concurrency=..., or both"),
        (("limits_test_b",), {"burst": 3, "concurrency": 1}, "burst= needs rate="),
        (("limits_test_r",), {"rate": "lots"}, "limit 'limits_test_r': rate 'lots'"),
        (("limits_test_c",), {"concurrency": 0}, "limit 'limits_test_c': concurrency must"),
    ],
)
def test_bad_definitions_are_refused(
    args: tuple[Any, ...], kwargs: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidLimitError, match=words):
        define(*args, **kwargs)


def test_a_name_defined_otherwise_is_refused() -> None:
    define("limits_test_twice", rate="1/s")
    with pytest.raises(InvalidLimitError, match="already defined as rate='1/s'"):
        define("limits_test_twice", rate="2/s")


def test_check_functions_pass_none_through() -> None:
    assert check_concurrency(None, _lookup, where="task 'x'") is None
    assert check_rate_limit(None, _lookup, where="task 'x'") is None


def test_a_key_may_come_in_var_keywords() -> None:
    assert check_concurrency(Concurrency(1, key="tenant"), _loose, where="x") is not None
    assert key_value("tenant", _loose, (), {"tenant": "a"}) == '"a"'
    assert key_value("tenant", _loose, (), {}) == "null"


def test_key_value_is_canonical_json_of_the_bound_argument() -> None:
    assert key_value(None, _lookup, ("c1",), {}) is None
    assert key_value("customer_id", _lookup, ("c1",), {}) == '"c1"'
    assert key_value("customer_id", _lookup, (), {"customer_id": "c1"}) == '"c1"'
    assert key_value("region", _lookup, ("c1",), {}) == '"eu"'  # a default applies
    both = key_value(lambda customer_id, region="eu": {"r": region, "c": customer_id}, _lookup,
                     ("c1",), {"region": "us"})  # fmt: skip
    assert both == '{"c":"c1","r":"us"}'


def test_key_value_refuses_what_is_not_json() -> None:
    with pytest.raises(InvalidLimitError, match="not JSON"):
        key_value(lambda customer_id, region="eu": object(), _lookup, ("c1",), {})
    with pytest.raises(InvalidLimitError, match="arguments of '_lookup'"):
        key_value("customer_id", _lookup, (), {})


def test_a_call_resolves_its_limits_into_the_rows_columns() -> None:
    define("limits_test_shared", rate="20/s", burst=5, concurrency=4)
    keyed = Concurrency(2, key="customer_id")
    assert resolve("lookup", None, None, _lookup, ("c1",), {}) is None
    assert resolve("lookup", keyed, RateLimit("2/500ms"), _lookup, ("c1",), {}) == {
        "limit_name": "lookup",
        "limit_key": '"c1"',
        "concurrency_cap": 2,
        "rate_name": "lookup",
        "rate_key": "",
        "rate_tokens": 2,
        "rate_period": 0.5,
        "rate_burst": 1,
    }
    shared = resolve("lookup", "limits_test_shared", "limits_test_shared", _lookup, ("c1",), {})
    assert shared is not None
    assert (shared["limit_name"], shared["concurrency_cap"], shared["limit_key"]) == (
        "limits_test_shared",
        4,
        "",
    )
    assert (shared["rate_name"], shared["rate_tokens"], shared["rate_burst"]) == (
        "limits_test_shared",
        20,
        5,
    )


def test_a_named_limit_is_declared_once_however_many_tasks_share_it() -> None:
    define("limits_test_crm2", rate="10/s")
    tasks = [
        ("a", None, "limits_test_crm2"),
        ("b", None, "limits_test_crm2"),
        ("c", Concurrency(3, key="customer_id"), None),
        ("d", None, None),
    ]
    assert declared_limits(tasks) == [
        {"name": "c", "concurrency_cap": 3, "keyed": True},
        {
            "name": "limits_test_crm2",
            "rate_tokens": 10,
            "rate_period": 1.0,
            "rate_burst": 1,
            "keyed": False,
        },
    ]
