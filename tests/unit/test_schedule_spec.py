"""Fire times: cron in a time zone across both clock changes, intervals, jitter."""

from __future__ import annotations

from datetime import UTC, datetime

from keepgoing._schedule_spec import parse_spec, slot_iso, slot_workflow_id


def _at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def test_a_repeated_local_time_fires_once_at_its_first_occurrence() -> None:
    daily = parse_spec(cron="30 2 * * *", timezone="Europe/Paris")
    got = [slot_iso(s) for s in daily.next_slots(_at(2026, 10, 24), 3)]
    # 2026-10-25: 02:30 happens twice (summer time, then winter time): once, the first.
    assert got == ["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]


def test_an_hourly_schedule_has_23_and_24_slots_on_the_change_days() -> None:
    hourly = parse_spec(cron="0 * * * *", timezone="Europe/Paris")
    spring = hourly.slots(_at(2026, 3, 28, 23) - 1, _at(2026, 3, 29, 22) - 1, 100)
    autumn = hourly.slots(_at(2026, 10, 24, 22) - 1, _at(2026, 10, 25, 23) - 1, 100)
    assert (len(spring), len(autumn)) == (23, 24)
    assert len(set(spring)) == 23 and spring == sorted(spring)


def test_intervals_are_aligned_to_the_epoch_plus_the_offset() -> None:
    quarter = parse_spec(every="15m", offset="5m", timezone="Asia/Tokyo")
    got = [slot_iso(s) for s in quarter.next_slots(_at(2026, 1, 1, 10, 7), 3)]
    assert got == ["2026-01-01T10:20:00Z", "2026-01-01T10:35:00Z", "2026-01-01T10:50:00Z"]


def test_bounds_jitter_and_ids() -> None:
    bounded = parse_spec(every="1h", start_at=_at(2026, 1, 1, 5), end_at=_at(2026, 1, 1, 7))
    assert bounded.next_slots(0, 10) == [_at(2026, 1, 1, 5), _at(2026, 1, 1, 6), _at(2026, 1, 1, 7)]
    jittered = parse_spec(every="1m", jitter="10s")
    delay = jittered.delay("s", 60.0)
    assert 0 <= delay < 10 and delay == jittered.delay("s", 60.0)
    assert slot_workflow_id("s", _at(2026, 1, 5, 7)) == "s-2026-01-05T07:00:00Z"
