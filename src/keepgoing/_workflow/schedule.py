"""``Schedule``: a schedule declared in code, beside the workflow it starts.

``@workflow(schedule="0 8 * * 1-5", schedule_timezone="Europe/Paris")`` or
``@workflow(schedule=Schedule(every="15m", overlap="buffer_one"))`` declares one;
a list declares several. The spec is checked when the module is imported. A
worker that serves the workflow, and a deploy of its file, register it in the
store (``_schedules/declared.py``); a redeploy updates it, and a declared
schedule that is no longer in the code is paused, with the reason as its note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from keepgoing._schedule_spec import OVERLAPS, parse_spec
from keepgoing.errors import InvalidScheduleError

__all__ = ["Schedule", "declared_schedules"]


@dataclass(frozen=True)
class Schedule:
    """A schedule of the workflow it is declared on (the keywords of
    :meth:`keepgoing.Client.create_schedule`). ``schedule_id`` defaults to the
    workflow's name (``<name>-<n>`` for the n-th of several)."""

    cron: str | None = None
    every: Any = None
    offset: Any = None
    timezone: str = "UTC"
    overlap: str = "skip"
    catchup_window: Any = "1h"
    jitter: Any = None
    input: Mapping[str, Any] = field(default_factory=dict)
    schedule_id: str | None = None
    task_queue: str | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        parse_spec(
            cron=self.cron,
            every=self.every,
            offset=self.offset,
            timezone=self.timezone,
            jitter=self.jitter,
        )
        if self.overlap not in OVERLAPS:
            raise InvalidScheduleError(
                f"unknown overlap policy {self.overlap!r}: use one of {', '.join(OVERLAPS)}"
            )


def declared_schedules(
    name: str, schedule: str | Schedule | Sequence[Schedule] | None, timezone: str | None
) -> tuple[Schedule, ...]:
    """The schedules ``@workflow(schedule=..., schedule_timezone=...)`` declares, with ids."""
    if schedule is None:
        if timezone is not None:
            raise InvalidScheduleError("schedule_timezone= goes with schedule=")
        return ()
    if isinstance(schedule, str):
        found: list[Schedule] = [Schedule(cron=schedule, timezone=timezone or "UTC")]
    elif isinstance(schedule, Schedule):
        found = [schedule]
    elif isinstance(schedule, Sequence) and all(isinstance(s, Schedule) for s in schedule):
        found = [s for s in schedule if isinstance(s, Schedule)]
    else:
        raise InvalidScheduleError(
            f"schedule= takes a cron string, a Schedule or a list of them, not {schedule!r}"
        )
    if timezone is not None and not isinstance(schedule, str):
        raise InvalidScheduleError(
            "schedule_timezone= goes with a cron string; give Schedule(timezone=)"
        )
    named = []
    for i, s in enumerate(found):
        sid = s.schedule_id or (name if len(found) == 1 else f"{name}-{i + 1}")
        named.append(Schedule(**{**s.__dict__, "schedule_id": sid}))
    ids = [s.schedule_id for s in named]
    if len(set(ids)) != len(ids):
        raise InvalidScheduleError(f"workflow {name!r} declares two schedules with one id")
    return tuple(named)
