"""The store's schedules facet: schedule rows, their actions, and firing a slot.

A schedule row holds its spec as JSON (``_schedule_spec.py`` reads it) and a
cursor: ``next_slot_at``, the next slot to act on, and ``next_due_at``, when
(the slot plus its jitter). Firing is a compare-and-set on the cursor in the
same transaction that records each slot's action and starts its run, so one
server acts per slot however many race, and an action's primary key
``(schedule_id, slot_at)`` keeps it to one action per slot.

An action is ``started`` (with its run), ``skipped`` (with the reason),
``buffered`` (waiting for the open run to end, under ``buffer_one``,
``buffer_all`` or ``cancel_other``) or ``failed`` (the start was refused).

``tests/contract/test_schedules.py`` checks every backend.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ACTION_STATUSES",
    "FireSlot",
    "FireOutcome",
    "ScheduleAction",
    "ScheduleRecord",
    "ScheduleStore",
]

ActionStatus = Literal["started", "skipped", "buffered", "failed"]
ACTION_STATUSES: tuple[str, ...] = ("started", "skipped", "buffered", "failed")


@dataclass(frozen=True)
class ScheduleRecord:
    """One schedule. ``spec`` is the JSON form of a ``ScheduleSpec``; ``source`` is
    ``api`` or ``code`` (declared with ``@workflow(schedule=...)``)."""

    schedule_id: str
    workflow_name: str
    input: dict[str, Any]
    task_queue: str
    spec: dict[str, Any]
    overlap: str
    catchup_window: float
    paused: bool
    note: str | None
    source: str
    created_at: float
    updated_at: float
    next_slot_at: float | None = None
    next_due_at: float | None = None


@dataclass(frozen=True)
class ScheduleAction:
    """What a schedule did for one slot."""

    schedule_id: str
    slot_at: float
    kind: str  # scheduled, catchup, trigger, backfill
    status: ActionStatus
    workflow_id: str
    created_at: float
    run_id: str | None = None
    reason: str | None = None
    started_at: float | None = None


@dataclass(frozen=True)
class FireSlot:
    """One slot to act on: ``missed`` gives the reason it is recorded as skipped."""

    slot_at: float
    kind: str = "scheduled"
    missed: str | None = None
    overlap: str | None = None  # a backfill's own policy; None: the schedule's


@dataclass(frozen=True)
class FireOutcome:
    """What a fire did: ``claimed`` is False when the cursor had moved (another
    server acted on these slots) and nothing was done."""

    claimed: bool
    actions: list[ScheduleAction] = field(default_factory=list)


class ScheduleStore(abc.ABC):
    """Schedules and the actions they took."""

    @abc.abstractmethod
    async def create_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """Insert ``schedule``.

        Raises:
            ScheduleExistsError: its id is taken.
        """

    @abc.abstractmethod
    async def update_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """Replace the row of ``schedule.schedule_id`` (spec, state and cursor).

        Raises:
            ScheduleNotFoundError: no such schedule.
        """

    @abc.abstractmethod
    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule, or None."""

    @abc.abstractmethod
    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by id."""

    @abc.abstractmethod
    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete the schedule and its actions (its runs stay); False if there was none."""

    @abc.abstractmethod
    async def schedule_actions(self, schedule_id: str, *, limit: int) -> list[ScheduleAction]:
        """Its newest ``limit`` actions, newest slot first."""

    @abc.abstractmethod
    async def fire_schedule(
        self,
        schedule_id: str,
        slots: Sequence[FireSlot],
        *,
        expect_slot: float | None,
        next_slot: float | None,
        next_due: float | None,
        now: float,
        move: bool = True,
    ) -> FireOutcome:
        """Act on ``slots`` and move the cursor to ``next_slot``/``next_due``, if the
        cursor is still ``expect_slot`` and the schedule is not paused (else nothing is
        done: ``claimed`` is False). With ``move=False`` (a trigger, a backfill, a
        buffered start) the cursor is left alone. Starts the oldest buffered slot
        whose way is clear, too.

        Raises:
            ScheduleNotFoundError: no such schedule.
        """

    @abc.abstractmethod
    async def due_schedules(self, *, now: float, limit: int) -> list[ScheduleRecord]:
        """Unpaused schedules whose next slot is due, or whose buffered action may start."""

    @abc.abstractmethod
    async def next_schedule_due(self) -> float | None:
        """The earliest ``next_due_at`` of an unpaused schedule."""

    @abc.abstractmethod
    async def schedule_of_run(self, run_id: str) -> ScheduleAction | None:
        """The action that started ``run_id``, or None for a run no schedule started."""
