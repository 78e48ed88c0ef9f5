"""The schedules facet both SQL stores share (mixed into ``SqlStore``); tables from 0022.

A fire locks the schedule's row first (``/*FOR UPDATE*/``), checks and moves its
cursor, then records each slot's action and starts its run with the one start
path every trigger takes (``runs.start_run``), and cancels an open run under
``cancel_other``. Lock order: the ``schedules`` row, then the runs it starts or
cancels (rule 1 of ``dialect.py`` from there on); nothing locks a run and then
a schedule, so the order closes no cycle.

What each overlap policy does when a run the schedule started is still open
(Temporal's meanings):

* ``skip`` — the slot is skipped, with the open run as its reason;
* ``buffer_one`` — the slot waits for the open run to end; a slot that comes
  while one already waits is skipped;
* ``buffer_all`` — every slot waits, and they start one at a time, oldest first;
* ``cancel_other`` — the open run is cancelled and the slot starts when it ends;
* ``allow_all`` — the slot starts at once.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from keepgoing._payload import encode, loads
from keepgoing._schedule_spec import slot_iso, slot_workflow_id
from keepgoing._store import records as rec
from keepgoing._store.schedules_protocol import (
    FireOutcome,
    FireSlot,
    ScheduleAction,
    ScheduleRecord,
    ScheduleStore,
)
from keepgoing._store.sql import commands, singletons
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import every, one, value
from keepgoing.errors import (
    InvalidRequestError,
    ScheduleExistsError,
    ScheduleNotFoundError,
    WorkflowAlreadyRunningError,
    WorkflowNotRunningError,
)

__all__ = ["SqlSchedulesMixin"]

_SCHEDULE = (
    "schedule_id, workflow_name, input, task_queue, spec, overlap, catchup_window, paused, "
    "note, source, created_at, updated_at, next_slot_at, next_due_at"
)
_ACTION = "schedule_id, slot_at, kind, status, workflow_id, created_at, run_id, reason, started_at"
_OPEN = "('running', 'blocked')"


class _Schedule(NamedTuple):
    schedule_id: str
    workflow_name: str
    input: str
    task_queue: str
    spec: str
    overlap: str
    catchup_window: float
    paused: int
    note: str | None
    source: str
    created_at: float
    updated_at: float
    next_slot_at: float | None
    next_due_at: float | None

    def record(self) -> ScheduleRecord:
        return ScheduleRecord(
            schedule_id=self.schedule_id,
            workflow_name=self.workflow_name,
            input=loads(self.input),
            task_queue=self.task_queue,
            spec=json.loads(self.spec),
            overlap=self.overlap,
            catchup_window=self.catchup_window,
            paused=bool(self.paused),
            note=self.note,
            source=self.source,
            created_at=self.created_at,
            updated_at=self.updated_at,
            next_slot_at=self.next_slot_at,
            next_due_at=self.next_due_at,
        )


class _Action(NamedTuple):
    schedule_id: str
    slot_at: float
    kind: str
    status: str
    workflow_id: str
    created_at: float
    run_id: str | None
    reason: str | None
    started_at: float | None

    def record(self) -> ScheduleAction:
        return ScheduleAction(*self)  # type: ignore[arg-type]


class _RunId(NamedTuple):
    run_id: str
    workflow_id: str


def _params(s: ScheduleRecord) -> tuple[Any, ...]:
    return (
        s.workflow_name,
        encode(s.input, f"the input of schedule {s.schedule_id!r}"),
        s.task_queue,
        json.dumps(s.spec, sort_keys=True),
        s.overlap,
        s.catchup_window,
        int(s.paused),
        s.note,
        s.source,
        s.updated_at,
        s.next_slot_at,
        s.next_due_at,
    )


def create(conn: Connection, s: ScheduleRecord) -> ScheduleRecord:
    row = one(
        conn,
        _Schedule,
        "INSERT INTO schedules (workflow_name, input, task_queue, spec, overlap, catchup_window, "
        "paused, note, source, updated_at, next_slot_at, next_due_at, schedule_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        f"ON CONFLICT (schedule_id) DO NOTHING RETURNING {_SCHEDULE}",
        (*_params(s), s.schedule_id, s.created_at),
    )
    if row is None:
        raise ScheduleExistsError(
            f"schedule {s.schedule_id!r} already exists; update it or use another id"
        )
    return row.record()


def update(conn: Connection, s: ScheduleRecord) -> ScheduleRecord:
    row = one(
        conn,
        _Schedule,
        "UPDATE schedules SET workflow_name = ?, input = ?, task_queue = ?, spec = ?, "
        "overlap = ?, catchup_window = ?, paused = ?, note = ?, source = ?, updated_at = ?, "
        f"next_slot_at = ?, next_due_at = ? WHERE schedule_id = ? RETURNING {_SCHEDULE}",
        (*_params(s), s.schedule_id),
    )
    if row is None:
        raise ScheduleNotFoundError(f"no schedule {s.schedule_id!r}")
    return row.record()


def get(conn: Connection, schedule_id: str, lock: bool = False) -> ScheduleRecord | None:
    locking = " /*FOR UPDATE*/" if lock else ""
    row = one(
        conn,
        _Schedule,
        f"SELECT {_SCHEDULE} FROM schedules WHERE schedule_id = ?{locking}",
        (schedule_id,),
    )
    return row.record() if row is not None else None


def list_all(conn: Connection) -> list[ScheduleRecord]:
    rows = every(conn, _Schedule, f"SELECT {_SCHEDULE} FROM schedules ORDER BY schedule_id")
    return [r.record() for r in rows]


def delete(conn: Connection, schedule_id: str) -> bool:
    conn.execute("DELETE FROM schedule_actions WHERE schedule_id = ?", (schedule_id,))
    gone: bool = (
        conn.execute("DELETE FROM schedules WHERE schedule_id = ?", (schedule_id,)).rowcount > 0
    )
    return gone


def actions(conn: Connection, schedule_id: str, limit: int) -> list[ScheduleAction]:
    rows = every(
        conn,
        _Action,
        f"SELECT {_ACTION} FROM schedule_actions WHERE schedule_id = ? "
        "ORDER BY slot_at DESC LIMIT ?",
        (schedule_id, limit),
    )
    return [r.record() for r in rows]


def of_run(conn: Connection, run_id: str) -> ScheduleAction | None:
    row = one(conn, _Action, f"SELECT {_ACTION} FROM schedule_actions WHERE run_id = ?", (run_id,))
    return row.record() if row is not None else None


_BUFFERED = (
    "EXISTS (SELECT 1 FROM schedule_actions b "
    "WHERE b.schedule_id = s.schedule_id AND b.status = 'buffered')"
)
_RUN_OPEN = (
    "EXISTS (SELECT 1 FROM schedule_actions a JOIN runs r ON r.run_id = a.run_id "
    f"WHERE a.schedule_id = s.schedule_id AND a.status = 'started' AND r.status IN {_OPEN})"
)


def due(conn: Connection, now: float, limit: int) -> list[ScheduleRecord]:
    columns = ", ".join(f"s.{c.strip()}" for c in _SCHEDULE.split(","))
    rows = every(
        conn,
        _Schedule,
        f"SELECT {columns} FROM schedules s WHERE s.paused = 0 AND (s.next_due_at <= ? "
        f"OR ({_BUFFERED} AND NOT {_RUN_OPEN})) ORDER BY s.next_due_at LIMIT ?",
        (now, limit),
    )
    return [r.record() for r in rows]


def next_due(conn: Connection) -> float | None:
    when: float | None = value(conn, "SELECT MIN(next_due_at) FROM schedules WHERE paused = 0")
    return when


# -- firing ------------------------------------------------------------------------
def fire(
    conn: Connection,
    schedule_id: str,
    slots: Sequence[FireSlot],
    move: tuple[float | None, float | None, float | None] | None,
    now: float,
) -> FireOutcome:
    """Act on ``slots`` (see :meth:`ScheduleStore.fire_schedule`); ``move`` is
    (expected cursor, next slot, next due), or None to leave the cursor alone."""
    sched = get(conn, schedule_id, lock=True)
    if sched is None:
        raise ScheduleNotFoundError(f"no schedule {schedule_id!r}")
    if move is not None:
        expect, next_slot, next_due_at = move
        if sched.paused or sched.next_slot_at != expect:
            return FireOutcome(claimed=False)
        conn.execute(
            "UPDATE schedules SET next_slot_at = ?, next_due_at = ? WHERE schedule_id = ?",
            (next_slot, next_due_at, schedule_id),
        )
    done = [a for a in (_act(conn, sched, slot, now) for slot in slots) if a is not None]
    if not sched.paused:
        done.extend(_promote(conn, sched, now))
    return FireOutcome(claimed=True, actions=done)


def _act(
    conn: Connection, sched: ScheduleRecord, slot: FireSlot, now: float
) -> ScheduleAction | None:
    wid = slot_workflow_id(sched.schedule_id, slot.slot_at)
    acted = value(
        conn,
        "SELECT status FROM schedule_actions WHERE schedule_id = ? AND slot_at = ?",
        (sched.schedule_id, slot.slot_at),
    )
    if acted is not None:
        return None  # this slot has its action already (a backfill over fired slots)
    base = ScheduleAction(sched.schedule_id, slot.slot_at, slot.kind, "skipped", wid, now)
    if slot.missed is not None:
        return _record(conn, replace(base, reason=slot.missed))
    policy = slot.overlap or sched.overlap
    open_runs = _open_runs(conn, sched.schedule_id)
    buffered = _buffered(conn, sched.schedule_id)
    if policy == "allow_all" or (not open_runs and not buffered):
        return _start(conn, sched, base, now)
    blocker = open_runs[0].workflow_id if open_runs else "a buffered start"
    if policy == "skip":
        return _record(conn, replace(base, reason=f"overlap=skip: {blocker} is still open"))
    if policy == "buffer_one" and buffered:
        reason = f"overlap=buffer_one: {buffered} start already waits for {blocker}"
        return _record(conn, replace(base, reason=reason))
    if policy == "cancel_other":
        for run in open_runs:
            _cancel(conn, sched.schedule_id, run, slot.slot_at, now)
    reason = f"overlap={policy}: waits for {blocker} to end"
    return _record(conn, replace(base, status="buffered", reason=reason))


def _start(
    conn: Connection, sched: ScheduleRecord, action: ScheduleAction, now: float
) -> ScheduleAction:
    run_id = uuid.uuid4().hex
    request = rec.StartRequest(
        run_id=run_id,
        workflow_id=action.workflow_id,
        workflow_name=sched.workflow_name,
        input=sched.input,
        task_queue=sched.task_queue,
        code_version="",
        now=now,
    )
    try:
        run = singletons.start_run(conn, request)
    except WorkflowAlreadyRunningError:
        return _record(conn, replace(action, reason=f"{action.workflow_id} has an open run"))
    except InvalidRequestError as exc:  # a limit keyed by a function only code can compute
        return _record(conn, replace(action, reason=str(exc)))
    if run.run_id != run_id:  # a singleton's skip: its key's run is open
        return _record(conn, replace(action, reason=f"singleton: run {run.run_id} is open"))
    started = ScheduleAction(
        action.schedule_id,
        action.slot_at,
        action.kind,
        "started",
        action.workflow_id,
        action.created_at,
        run_id,
        action.reason if action.status == "buffered" else None,
        now,
    )
    return _record(conn, started)


def _promote(conn: Connection, sched: ScheduleRecord, now: float) -> list[ScheduleAction]:
    """Start the oldest buffered slot once no run of the schedule is open."""
    if _open_runs(conn, sched.schedule_id):
        return []
    row = one(
        conn,
        _Action,
        f"SELECT {_ACTION} FROM schedule_actions WHERE schedule_id = ? AND status = 'buffered' "
        "ORDER BY slot_at LIMIT 1",
        (sched.schedule_id,),
    )
    if row is None:
        return []
    return [_start(conn, sched, row.record(), now)]


def _record(conn: Connection, a: ScheduleAction) -> ScheduleAction:
    conn.execute(
        "INSERT INTO schedule_actions (schedule_id, slot_at, kind, status, workflow_id, "
        "created_at, run_id, reason, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (schedule_id, slot_at) DO UPDATE SET status = excluded.status, "
        "run_id = excluded.run_id, reason = excluded.reason, started_at = excluded.started_at",
        (
            a.schedule_id,
            a.slot_at,
            a.kind,
            a.status,
            a.workflow_id,
            a.created_at,
            a.run_id,
            a.reason,
            a.started_at,
        ),
    )
    return a


def _open_runs(conn: Connection, schedule_id: str) -> list[_RunId]:
    return every(
        conn,
        _RunId,
        "SELECT r.run_id, r.workflow_id FROM schedule_actions a JOIN runs r "
        "ON r.run_id = a.run_id WHERE a.schedule_id = ? AND a.status = 'started' "
        f"AND r.status IN {_OPEN} ORDER BY a.slot_at",
        (schedule_id,),
    )


def _buffered(conn: Connection, schedule_id: str) -> int:
    count: int = value(
        conn,
        "SELECT COUNT(*) FROM schedule_actions WHERE schedule_id = ? AND status = 'buffered'",
        (schedule_id,),
    )
    return count


def _cancel(conn: Connection, schedule_id: str, run: _RunId, slot: float, now: float) -> None:
    request = rec.CancelRequest(
        workflow_id=run.workflow_id,
        reason=f"schedule {schedule_id!r} (overlap=cancel_other) fires slot {slot_iso(slot)}",
        actor_kind="schedule",
        actor_id=schedule_id,
        now=now,
        run_id=run.run_id,
    )
    with contextlib.suppress(WorkflowNotRunningError):  # it ended meanwhile
        commands.cancel_run(conn, request)


class SqlSchedulesMixin(ScheduleStore):
    """:class:`ScheduleStore` over the shared SQL."""

    _read: Any
    _write: Any

    async def create_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        made: ScheduleRecord = await self._write(lambda c: create(c, schedule), True)
        return made

    async def update_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        updated: ScheduleRecord = await self._write(lambda c: update(c, schedule), True)
        return updated

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        found: ScheduleRecord | None = await self._read(lambda c: get(c, schedule_id))
        return found

    async def list_schedules(self) -> list[ScheduleRecord]:
        found: list[ScheduleRecord] = await self._read(list_all)
        return found

    async def delete_schedule(self, schedule_id: str) -> bool:
        gone: bool = await self._write(lambda c: delete(c, schedule_id), True)
        return gone

    async def schedule_actions(self, schedule_id: str, *, limit: int) -> list[ScheduleAction]:
        found: list[ScheduleAction] = await self._read(lambda c: actions(c, schedule_id, limit))
        return found

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
        todo = list(slots)
        cursor = (expect_slot, next_slot, next_due) if move else None
        outcome: FireOutcome = await self._write(
            lambda c: fire(c, schedule_id, todo, cursor, now),
            lambda o: any(a.status == "started" for a in o.actions),
        )
        return outcome

    async def due_schedules(self, *, now: float, limit: int) -> list[ScheduleRecord]:
        found: list[ScheduleRecord] = await self._read(lambda c: due(c, now, limit))
        return found

    async def next_schedule_due(self) -> float | None:
        when: float | None = await self._read(next_due)
        return when

    async def schedule_of_run(self, run_id: str) -> ScheduleAction | None:
        found: ScheduleAction | None = await self._read(lambda c: of_run(c, run_id))
        return found
