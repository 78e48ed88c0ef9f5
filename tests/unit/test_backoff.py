"""The one retry delay (keepgoing._backoff): doubling, capped, jittered within its bounds."""

from __future__ import annotations

import pytest

from keepgoing._backoff import backoff


@pytest.mark.parametrize("attempt", range(8))
def test_full_jitter_stays_between_zero_and_the_capped_delay(attempt: int) -> None:
    ceiling = min(2.0, 0.05 * 2**attempt)
    for _ in range(200):
        assert 0.0 <= backoff(attempt, base=0.05, cap=2.0) <= ceiling


@pytest.mark.parametrize("attempt", range(8))
def test_half_jitter_keeps_at_least_half_the_delay(attempt: int) -> None:
    ceiling = min(5.0, 0.1 * 2**attempt)
    for _ in range(200):
        assert ceiling / 2 <= backoff(attempt, base=0.1, cap=5.0, jitter=0.5) <= ceiling


def test_no_jitter_is_exactly_the_doubling_delay_up_to_the_cap() -> None:
    delays = [backoff(n, base=1.0, cap=30.0, jitter=0.0) for n in range(7)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_huge_or_negative_attempt_neither_overflows_nor_goes_below_the_base() -> None:
    assert backoff(10**9, base=0.1, cap=3.0, jitter=0.0) == 3.0
    assert backoff(-5, base=0.1, cap=3.0, jitter=0.0) == 0.1


def test_jitter_spreads_the_delays() -> None:
    assert len({backoff(3, base=0.1, cap=5.0) for _ in range(50)}) > 1


@pytest.mark.parametrize(
    ("base", "cap", "jitter"),
    [(-0.1, 1.0, 1.0), (0.1, -1.0, 1.0), (0.1, 1.0, 1.5), (0.1, 1.0, -0.1)],
)
def test_bad_arguments_are_refused_by_name(base: float, cap: float, jitter: float) -> None:
    with pytest.raises(ValueError, match="base >= 0, cap >= 0 and jitter in"):
        backoff(1, base=base, cap=cap, jitter=jitter)
