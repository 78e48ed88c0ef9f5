"""Firing schedules: which slots are due, and the loop a server runs.

:func:`plan` reads a schedule's cursor and spec and returns the slots due now:
the ones within ``catchup_window`` of now to start (oldest first, under the
overlap policy), the older ones recorded as skipped with the reason. A pass
handles at most :data:`BATCH` slots per schedule; when the cursor is further
behind than that and beyond the window, the rest is recorded as one skipped
action naming the range, and the cursor jumps to the window's start.

:class:`Scheduler` fires every due schedule, then sleeps until the earliest
``next_due_at`` or a change in the store (a schedule created, paused or
updated, a run ended that a buffered slot waits for); it has no polling
interval. Any number of schedulers may share a store: the store's fire is a
compare-and-set on the cursor, so each slot is acted on once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from keepgoing._clock import Clock, system_clock
from keepgoing._schedule_spec import ScheduleSpec, slot_iso
from keepgoing._store.protocol import Store
from keepgoing._store.schedules_protocol import FireSlot, ScheduleRecord
from keepgoing.errors import ScheduleNotFoundError, StoreError

__all__ = ["BATCH", "Plan", "Scheduler", "fire_due", "plan", "spec_of"]

log = logging.getLogger("keepgoing.schedules")

#: Slots one pass acts on per schedule.
BATCH = 100
#: The longest sleep when no schedule is due (a change in the store wakes it sooner).
IDLE = 3600.0


def spec_of(record: ScheduleRecord) -> ScheduleSpec:
    """The spec a schedule row holds."""
    return ScheduleSpec(**record.spec)


@dataclass(frozen=True)
class Plan:
    """The slots to act on now and where the cursor goes after them."""

    slots: list[FireSlot]
    next_slot: float | None
    next_due: float | None


def plan(record: ScheduleRecord, now: float) -> Plan:
    """The slots of ``record`` due at ``now`` (see the module docstring)."""
    spec = spec_of(record)
    window_start = now - record.catchup_window
    slots: list[FireSlot] = []
    slot = record.next_slot_at
    while slot is not None and len(slots) < BATCH:
        if slot + spec.delay(record.schedule_id, slot) > now:
            break
        slots.append(_slot(slot, now, record.catchup_window, window_start))
        slot = spec.next_after(slot)
    if slot is not None and len(slots) >= BATCH and slot < window_start:
        # Far behind: one action stands for the rest of the missed range.
        resume = spec.next_after(window_start - 0.001)
        reason = (
            f"missed, with every slot up to {slot_iso(window_start)}: "
            f"older than the catch-up window ({record.catchup_window:g}s)"
        )
        slots.append(FireSlot(slot, "catchup", missed=reason))
        slot = resume
    due = slot + spec.delay(record.schedule_id, slot) if slot is not None else None
    return Plan(slots, slot, due)


def _slot(slot: float, now: float, window: float, window_start: float) -> FireSlot:
    if slot < window_start:
        late = now - slot
        return FireSlot(
            slot,
            "catchup",
            missed=f"missed: {late:.0f}s late, older than the catch-up window ({window:g}s)",
        )
    return FireSlot(slot, "scheduled" if now - slot < 1.0 else "catchup")


async def fire_due(store: Store, now: float, limit: int = 100) -> int:
    """Fire every schedule due at ``now``; the runs started."""
    started = 0
    for record in await store.due_schedules(now=now, limit=limit):
        started += await fire_one(store, record, now)
    return started


async def fire_one(store: Store, record: ScheduleRecord, now: float) -> int:
    """Act on one schedule's due slots (or only its buffered slot); the runs started."""
    due = record.next_due_at is not None and record.next_due_at <= now
    try:
        if due:
            todo = plan(record, now)
            outcome = await store.fire_schedule(
                record.schedule_id,
                todo.slots,
                expect_slot=record.next_slot_at,
                next_slot=todo.next_slot,
                next_due=todo.next_due,
                now=now,
            )
        else:
            outcome = await store.fire_schedule(
                record.schedule_id,
                [],
                expect_slot=None,
                next_slot=None,
                next_due=None,
                now=now,
                move=False,
            )
    except ScheduleNotFoundError:
        return 0  # deleted meanwhile
    return sum(a.status == "started" for a in outcome.actions)


class Scheduler:
    """Fires schedules until :meth:`request_stop` (see the module docstring)."""

    def __init__(self, store: Store, *, clock: Clock = system_clock) -> None:
        self.store = store
        self.clock = clock
        self.started = 0
        self.errors = 0
        self._stopping = asyncio.Event()

    def request_stop(self) -> None:
        self._stopping.set()

    async def tick(self) -> int:
        """One pass: fire what is due now; the runs started."""
        started = await fire_due(self.store, self.clock.now())
        self.started += started
        return started

    async def run(self) -> None:
        """Serve until :meth:`request_stop`; a failing pass is logged and retried."""
        while not self._stopping.is_set():
            try:
                await self.tick()
                timeout = await self._idle_time()
            except Exception as exc:
                self.errors += 1
                if isinstance(exc, StoreError):
                    log.warning("schedules pass failed (%s); retrying", exc)
                else:
                    log.exception("schedules pass failed; retrying")
                timeout = 1.0
            if timeout > 0:
                await self._wait(timeout)

    async def _idle_time(self) -> float:
        wake = await self.store.next_schedule_due()
        if wake is None:
            return IDLE
        return max(0.0, min(IDLE, wake - self.clock.now()))

    async def _wait(self, timeout: float) -> None:
        stop = asyncio.ensure_future(self._stopping.wait())
        change = asyncio.ensure_future(self.store.wait_for_change(timeout, key=self))
        try:
            await asyncio.wait({stop, change}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (stop, change):
                fut.cancel()
            await asyncio.gather(stop, change, return_exceptions=True)
