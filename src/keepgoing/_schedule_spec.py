"""A schedule's spec and its fire times: cron in an IANA time zone, or a fixed interval.

A **slot** is the instant (UTC seconds) a schedule fires for; the run a slot
starts has the workflow id ``<schedule_id>-<slot as UTC ISO>``, so a slot starts
one run however many servers fire it.

``cron`` is a 5-field expression or an alias (``@yearly``, ``@annually``,
``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly``), parsed by
``croniter`` and read as wall-clock times in ``timezone`` (``zoneinfo``). Across
daylight-saving changes:

* a local time that does not exist (clocks jump forward over it, such as 02:30
  on the last Sunday of March in Europe/Paris) fires once, shifted forward by
  the jump: 02:30 fires at 03:30 local time (01:30 UTC);
* a local time that happens twice (clocks fall back, 02:30 on the last Sunday
  of October) fires once, at its first occurrence (00:30 UTC, still summer time).

So a daily 02:30 job runs exactly once every day, and an hourly job runs 23
times on the spring day and 24 on the autumn day (the repeated hour is not run
twice).

``every`` is a duration of at least one second; its slots are the instants
``offset + k * every`` counted from the Unix epoch (UTC), whatever the time
zone, so ``every="15m"`` fires at :00, :15, :30 and :45 of every hour.

``start_at`` and ``end_at`` bound the slots (inclusive). ``jitter`` delays each
slot's start by a fixed amount between zero and ``jitter`` derived from the
schedule id and the slot (the workflow id keeps the slot itself).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterBadDateError

from keepgoing._durations import parse_duration
from keepgoing.errors import InvalidDurationError, InvalidScheduleError

__all__ = [
    "ALIASES",
    "OVERLAPS",
    "ScheduleSpec",
    "parse_spec",
    "slot_iso",
    "slot_workflow_id",
]

OVERLAPS = ("skip", "buffer_one", "buffer_all", "cancel_other", "allow_all")
ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
#: How far back of a local instant a shifted (skipped) local time may map.
_SEARCH = timedelta(hours=3)


@dataclass(frozen=True)
class ScheduleSpec:
    """When a schedule fires (see the module docstring). Build it with :func:`parse_spec`."""

    cron: str | None = None
    every: float | None = None
    offset: float = 0.0
    timezone: str = "UTC"
    start_at: float | None = None
    end_at: float | None = None
    jitter: float = 0.0

    def next_after(self, moment: float) -> float | None:
        """The first slot strictly after ``moment``, or None when none is left."""
        floor = moment if self.start_at is None else max(moment, self.start_at - 0.001)
        slot = self._every_after(floor) if self.every is not None else self._cron_after(floor)
        if slot is None or (self.end_at is not None and slot > self.end_at):
            return None
        return slot

    def slots(self, after: float, through: float, limit: int) -> list[float]:
        """Up to ``limit`` slots in ``(after, through]``, oldest first."""
        found: list[float] = []
        slot = self.next_after(after)
        while slot is not None and slot <= through and len(found) < limit:
            found.append(slot)
            slot = self.next_after(slot)
        return found

    def next_slots(self, after: float, count: int) -> list[float]:
        """The next ``count`` slots after ``after`` (fewer when the schedule ends)."""
        return self.slots(after, math.inf, count)

    def delay(self, schedule_id: str, slot: float) -> float:
        """The jitter of ``slot``: fixed for the slot, in ``[0, jitter)``."""
        if self.jitter <= 0:
            return 0.0
        digest = hashlib.sha256(f"{schedule_id}/{slot!r}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 * self.jitter

    def describe(self) -> str:
        """In words: ``cron 0 8 * * 1-5 (Europe/Paris)`` or ``every 15m``."""
        if self.cron is not None:
            return f"cron {self.cron} ({self.timezone})"
        offset = f" + {_words(self.offset)}" if self.offset else ""
        return f"every {_words(self.every or 0)}{offset}"

    # -- the two kinds ------------------------------------------------------------
    def _every_after(self, moment: float) -> float:
        assert self.every is not None
        k = math.floor((moment - self.offset) / self.every) + 1
        slot = self.offset + k * self.every
        return slot if slot > moment else slot + self.every

    def _cron_after(self, moment: float) -> float | None:
        assert self.cron is not None
        zone = ZoneInfo(self.timezone)
        # Every wall-clock time whose instant is after ``moment`` is after the local
        # reading of ``moment`` with the smallest offset around it, less the search.
        here = datetime.fromtimestamp(moment, zone)
        before = datetime.fromtimestamp(moment - _SEARCH.total_seconds(), zone)
        local = here.replace(tzinfo=None)
        if before.utcoffset() != here.utcoffset():
            local -= _SEARCH  # a clock change just passed: a skipped time may map after it
        it = croniter(self.cron, local)
        for _ in range(10_000):
            try:
                wall: datetime = it.get_next(datetime)
            except CroniterBadDateError:
                return None
            instant = _instant(wall, zone)
            if instant > moment:
                return instant
        return None


def _instant(wall: datetime, zone: ZoneInfo) -> float:
    """The UTC instant of a wall-clock time: a repeated time's first occurrence, a
    skipped time shifted forward by the jump (``fold=0`` gives both)."""
    return wall.replace(tzinfo=zone, fold=0).timestamp()


def _words(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def parse_spec(
    *,
    cron: str | None = None,
    every: object = None,
    offset: object = None,
    timezone: str = "UTC",
    start_at: datetime | float | None = None,
    end_at: datetime | float | None = None,
    jitter: object = None,
) -> ScheduleSpec:
    """A checked :class:`ScheduleSpec`.

    Raises:
        InvalidScheduleError: naming what is wrong (both or neither of ``cron`` and
            ``every``, a bad expression, an unknown zone, a zero interval, ...).
    """
    if (cron is None) == (every is None):
        raise InvalidScheduleError("a schedule needs exactly one of cron= and every=")
    zone = _check_zone(timezone)
    begin, end = _moment(start_at, "start_at"), _moment(end_at, "end_at")
    if begin is not None and end is not None and end < begin:
        raise InvalidScheduleError("end_at is before start_at: the schedule would never fire")
    spread = _seconds(jitter, "jitter") if jitter is not None else 0.0
    if cron is not None:
        if offset is not None:
            raise InvalidScheduleError("offset= goes with every=, not with cron=")
        spec = ScheduleSpec(
            cron=_check_cron(cron), timezone=zone, start_at=begin, end_at=end, jitter=spread
        )
    else:
        interval = _seconds(every, "every")
        if interval < 1:
            raise InvalidScheduleError(
                f"every={every!r} is shorter than one second; use a duration such as '15m'"
            )
        shift = _seconds(offset, "offset") if offset is not None else 0.0
        if shift >= interval:
            raise InvalidScheduleError(f"offset {offset!r} must be shorter than every={every!r}")
        spec = ScheduleSpec(
            every=interval, offset=shift, timezone=zone, start_at=begin, end_at=end, jitter=spread
        )
    if begin is None and end is None:
        return spec
    if spec.next_after((begin if begin is not None else 0) - 1) is None:
        raise InvalidScheduleError("the schedule has no fire time between start_at and end_at")
    return spec


def _check_zone(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidScheduleError(f"timezone must be an IANA zone name, not {name!r}")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidScheduleError(
            f"unknown time zone {name!r}: use an IANA name such as 'Europe/Paris' or 'UTC'"
        ) from None
    return name


def _check_cron(expr: object) -> str:
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidScheduleError(f"cron must be a string such as '0 8 * * 1-5', not {expr!r}")
    text = " ".join(expr.split())
    if text.startswith("@"):
        if text.lower() not in ALIASES:
            raise InvalidScheduleError(
                f"unknown cron alias {expr!r}: use one of {', '.join(ALIASES)}"
            )
        return text.lower()
    if len(text.split()) != 5:
        raise InvalidScheduleError(
            f"cron {expr!r} has {len(text.split())} fields; a cron expression has 5 "
            "(minute hour day-of-month month day-of-week)"
        )
    if not croniter.is_valid(text):
        raise InvalidScheduleError(f"cron {expr!r} is not a valid cron expression")
    try:
        croniter(text, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidScheduleError(f"cron {expr!r} never fires") from None
    return text


def _seconds(value: object, what: str) -> float:
    try:
        return parse_duration(value, what=what)
    except InvalidDurationError as exc:
        raise InvalidScheduleError(str(exc)) from None


def _moment(value: datetime | float | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidScheduleError(f"{what} must be an aware datetime (give it a tzinfo)")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidScheduleError(f"{what} must be a datetime or UTC seconds, not {value!r}")
    return float(value)


def slot_iso(slot: float) -> str:
    """A slot as UTC ISO 8601, to the second (milliseconds when it has them)."""
    moment = datetime.fromtimestamp(slot, UTC)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def slot_workflow_id(schedule_id: str, slot: float) -> str:
    """The workflow id of the run ``slot`` of ``schedule_id`` starts."""
    return f"{schedule_id}-{slot_iso(slot)}"
