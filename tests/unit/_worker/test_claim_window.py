"""The claim window: the instant up to which a worker knows every lease granted to it."""

from __future__ import annotations

from keepgoing._worker.claims import ClaimWindow


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t


def test_with_nothing_pending_it_is_now() -> None:
    clock = _Clock()
    window = ClaimWindow(clock)
    assert window.known_through() == 100.0
    clock.t = 105.0
    assert window.known_through() == 105.0


def test_it_stays_at_the_oldest_pending_call_until_its_claims_are_started() -> None:
    clock = _Clock()
    window = ClaimWindow(clock)
    with window.pending():  # issued at 100
        clock.t = 101.0
        with window.pending():  # issued at 101
            clock.t = 110.0  # the process was frozen meanwhile
            assert window.known_through() == 100.0
        assert window.known_through() == 100.0
    assert window.known_through() == 110.0


def test_a_call_that_failed_stops_being_pending() -> None:
    clock = _Clock()
    window = ClaimWindow(clock)
    try:
        with window.pending():
            clock.t = 103.0
            raise ConnectionError("the commit's answer was lost")
    except ConnectionError:
        pass
    assert window.known_through() == 103.0


def test_a_call_that_stamps_its_claims_earlier_holds_the_window_from_then() -> None:
    # A completion claims the next step at the outcome's time, taken when the body ended.
    clock = _Clock()
    window = ClaimWindow(clock)
    clock.t = 104.0
    with window.pending(since=101.5):
        assert window.known_through() == 101.5
    assert window.known_through() == 104.0
