"""``retry_on``/``give_up_on``: refused at decoration time when malformed, and which
exceptions each rule keeps from a retry."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing._store.transitions import NON_RETRYABLE, decide_failure
from keepgoing._workflow.retry_policy import (
    GIVE_UP_ON,
    NOT_IN_RETRY_ON,
    RAISED_NON_RETRYABLE,
    describe,
    not_retried,
)


def _f(x: int) -> int:
    return x


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"retry_on": ValueError("x")}, "must be an exception class or a tuple of them"),
        ({"retry_on": "ValueError"}, "not str 'ValueError'"),
        ({"give_up_on": (ValueError, 3)}, "3 is not one"),
        ({"give_up_on": (int,)}, "<class 'int'> is not one"),
        ({"retry_on": ()}, "retry_on of task 'bad' is empty"),
        ({"retry_on": (OSError,), "give_up_on": (FileNotFoundError,)}, "overlap"),
        ({"retry_on": (ValueError,), "give_up_on": ValueError}, "overlap"),
        ({"retry_on": (keepgoing.NonRetryableError,)}, "never retried"),
    ],
)
def test_bad_rules_fail_at_decoration_naming_the_problem(
    options: dict[str, object], words: str
) -> None:
    with pytest.raises(TypeError, match="bad") as caught:
        keepgoing.task(name="bad", retries=5, **options)(_f)  # type: ignore[call-overload]
    assert words in str(caught.value)


def test_good_rules_are_kept_as_tuples() -> None:
    t = keepgoing.task(name="policy_ok", retries=2, retry_on=KeyError, give_up_on=[ValueError])(_f)
    assert (t.retry_on, t.give_up_on) == ((KeyError,), (ValueError,))


class _Refused(keepgoing.NonRetryableError):
    pass


def test_the_first_rule_that_matches_decides() -> None:
    assert not_retried(_Refused("no"), None, None) == RAISED_NON_RETRYABLE
    assert not_retried(_Refused("no"), (Exception,), None) == RAISED_NON_RETRYABLE
    assert not_retried(ValueError(), None, (ValueError,)) == GIVE_UP_ON
    assert not_retried(UnicodeError(), None, (ValueError,)) == GIVE_UP_ON  # a subclass
    assert not_retried(KeyError(), (TimeoutError,), None) == NOT_IN_RETRY_ON
    assert not_retried(TimeoutError(), (TimeoutError,), (ValueError,)) is None
    assert not_retried(RuntimeError(), None, (ValueError,)) is None


def test_the_store_never_retries_a_non_retryable_attempt() -> None:
    decision = decide_failure(
        reason=NON_RETRYABLE,
        failures=0,
        worker_losses=0,
        retries=5,
        max_worker_losses=3,
        retry_delay=None,
        now=1.0,
    )
    assert (decision.retry_at, decision.failures) == (None, 1)


def test_the_words_name_the_rule_and_the_type() -> None:
    assert describe(GIVE_UP_ON, "builtins.ValueError") == (
        "not retried: ValueError is in the task's give_up_on"
    )
    assert describe(NOT_IN_RETRY_ON, "KeyError") == (
        "not retried: KeyError is not in the task's retry_on"
    )
    assert describe(None, "X").startswith("not retried")
