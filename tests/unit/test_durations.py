"""parse_duration: the one spelling of durations across the API."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from keepgoing import ConfigurationError, InvalidDurationError, KeepgoingError, parse_duration


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30s", 30.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("2d", 172_800.0),
        ("1.5h", 5400.0),
        ("1d2h3m4s5ms", 93_784.005),
        ("0s", 0.0),
        ("10", 10.0),  # a bare integer string is seconds
        (" 10 s ", 10.0),  # spaces are ignored
        ("1 h 30 m", 5400.0),
        ("90m", 5400.0),
        (timedelta(minutes=2), 120.0),
        (timedelta(milliseconds=1), 0.001),
        (timedelta(0), 0.0),
        (45, 45.0),
        (0, 0.0),
        (0.5, 0.5),
        (2.25, 2.25),
    ],
)
def test_accepted_forms(value: object, seconds: float) -> None:
    result = parse_duration(value)
    assert isinstance(result, float)
    assert result == pytest.approx(seconds)


def test_ms_is_not_read_as_minutes() -> None:
    assert parse_duration("5ms") == pytest.approx(0.005)
    assert parse_duration("5m") == 300.0
    assert parse_duration("1m5ms") == pytest.approx(60.005)


@pytest.mark.parametrize(
    "value",
    ["", "   ", "abc", "10x", "-5", "-5s", "1h30", "h", "s10", "1.5", ".5s", "1e3s", "10S", "1H"],
)
def test_malformed_strings_are_refused_naming_the_field(value: str) -> None:
    with pytest.raises(InvalidDurationError) as caught:
        parse_duration(value, what="retry_delay of task 'fetch'")
    message = str(caught.value)
    assert message.startswith("retry_delay of task 'fetch'")
    assert repr(value) in message
    assert '"30s"' in message  # shows the accepted forms


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (-1, "-1"),
        (-0.5, "-0.5"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (timedelta(seconds=-1), "timedelta"),
        ("9" * 400 + "s", "999"),
    ],
)
def test_negative_and_non_finite_values_are_refused(value: object, shown: str) -> None:
    with pytest.raises(InvalidDurationError, match=r"^timeout of task 'x' must be") as caught:
        parse_duration(value, what="timeout of task 'x'")
    assert shown in str(caught.value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, "bool"),
        (False, "bool"),
        (None, "NoneType"),
        ([], "list"),
        ({}, "dict"),
        (b"5s", "bytes"),
    ],
)
def test_other_types_are_refused_naming_the_type(value: object, shown: str) -> None:
    with pytest.raises(InvalidDurationError) as caught:
        parse_duration(value, what="timeout of task 'x'")
    message = str(caught.value)
    assert message.startswith("timeout of task 'x' must be")
    assert shown in message


def test_the_default_field_name() -> None:
    with pytest.raises(InvalidDurationError, match=r"^duration 'abc' is not a duration"):
        parse_duration("abc")


def test_invalid_duration_error_is_a_value_error() -> None:
    assert issubclass(InvalidDurationError, ValueError)
    assert issubclass(InvalidDurationError, ConfigurationError)
    assert issubclass(InvalidDurationError, KeepgoingError)
    assert InvalidDurationError.code == "invalid_duration"
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_superscript_digits_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidDurationError, match="timeout"):
        parse_duration("²", what="timeout")


def test_a_huge_int_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidDurationError, match="timeout"):
        parse_duration(10**400, what="timeout")


@pytest.mark.parametrize("text", ["1h1h", "1m1h", "30s1h", "\u0661\u0660s"])
def test_repeated_out_of_order_or_non_ascii_units_are_refused(text: str) -> None:
    with pytest.raises(InvalidDurationError, match="retry_delay"):
        parse_duration(text, what="retry_delay")
