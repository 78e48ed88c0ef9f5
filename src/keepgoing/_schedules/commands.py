"""Schedule operations on a store: create, update, pause, trigger, backfill, describe.

The client in store mode and the server's ``/api/v1/schedules`` routes both call
these, so a schedule is checked and audited once. Every change is written to the
audit log with its actor (``schedule.create``, ``schedule.update``,
``schedule.pause``, ``schedule.unpause``, ``schedule.trigger``,
``schedule.backfill``, ``schedule.delete``).

Pausing stops new slots; unpausing moves the cursor to the first slot after
now, so the slots passed while paused are neither started nor recorded (no
burst). Updating a spec moves the cursor the same way.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from keepgoing._durations import parse_duration
from keepgoing._schedule_spec import OVERLAPS, ScheduleSpec, parse_spec, slot_iso
from keepgoing._schedules.service import spec_of
from keepgoing._store.protocol import Store
from keepgoing._store.records import AuditEntry
from keepgoing._store.schedules_protocol import FireSlot, ScheduleAction, ScheduleRecord
from keepgoing._workflow.inputs import start_input
from keepgoing.errors import (
    InvalidDurationError,
    InvalidScheduleError,
    ScheduleNotFoundError,
)

__all__ = [
    "Actor",
    "ScheduleInfo",
    "ScheduleRequest",
    "backfill",
    "create",
    "delete",
    "describe",
    "list_all",
    "pause",
    "trigger",
    "unpause",
    "update",
]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,150}$")
#: Slots one backfill may start.
MAX_BACKFILL = 1000
DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class Actor:
    """Who asked (recorded in the audit log)."""

    kind: str
    id: str


@dataclass(frozen=True)
class ScheduleRequest:
    """What ``create_schedule`` (and, field by field, ``update_schedule``) takes."""

    workflow: str
    #: The workflow's input as ``trigger_workflow`` takes it by name: a mapping of
    #: parameter names, a list of positional values, or None.
    input: Any = None
    cron: str | None = None
    every: Any = None
    offset: Any = None
    timezone: str = "UTC"
    overlap: str = "skip"
    catchup_window: Any = "1h"
    jitter: Any = None
    task_queue: str | None = None
    start_at: Any = None
    end_at: Any = None
    paused: bool = False
    note: str | None = None


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as ``get_schedule`` returns it: its spec and state, its next five
    fire times (UTC seconds) and its last ten actions, each with its run."""

    schedule_id: str
    workflow: str
    input: dict[str, Any]
    task_queue: str
    spec: ScheduleSpec
    overlap: str
    catchup_window: float
    paused: bool
    note: str | None
    source: str
    created_at: float
    updated_at: float
    next_fire_times: list[float]
    recent_actions: list[ScheduleAction]

    @property
    def description(self) -> str:
        return self.spec.describe()

    def to_body(self) -> dict[str, Any]:
        """The JSON the HTTP API returns."""
        body = dataclasses.asdict(self)
        body["spec"] = dataclasses.asdict(self.spec)
        body["description"] = self.description
        body["next_fire_times_iso"] = [slot_iso(t) for t in self.next_fire_times]
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ScheduleInfo:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in body.items() if k in fields}
        values["spec"] = ScheduleSpec(**body["spec"])
        values["recent_actions"] = [ScheduleAction(**a) for a in body["recent_actions"]]
        return cls(**values)


def _check_id(schedule_id: object) -> str:
    if not isinstance(schedule_id, str) or not _ID.match(schedule_id):
        raise InvalidScheduleError(
            f"schedule id {schedule_id!r} is not valid: use 1-151 letters, digits and "
            "._:@+=- starting with a letter or digit"
        )
    return schedule_id


def _window(value: object) -> float:
    try:
        seconds = parse_duration(value, what="catchup_window")
    except InvalidDurationError as exc:
        raise InvalidScheduleError(str(exc)) from None
    return seconds


def _spec(req: ScheduleRequest) -> ScheduleSpec:
    return parse_spec(
        cron=req.cron,
        every=req.every,
        offset=req.offset,
        timezone=req.timezone,
        start_at=req.start_at,
        end_at=req.end_at,
        jitter=req.jitter,
    )


async def _served_queue(store: Store, name: str, queue: str | None) -> str:
    """The queue the schedule's runs go to, once something serves ``name`` there."""
    known = await store.known_workflows()
    groups = {g.task_queue for g in await store.list_groups()}
    queues = known.get(name)
    if queue is None:
        if queues:
            return DEFAULT_QUEUE if DEFAULT_QUEUE in queues else sorted(queues)[0]
        queue = DEFAULT_QUEUE
    if (queues is not None and queue in queues) or queue in groups:
        return queue
    if queues:
        raise InvalidScheduleError(
            f"workflow {name!r} is served on queue(s) {', '.join(sorted(queues))}, "
            f"not on {queue!r}; pass one of them as task_queue"
        )
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    raise InvalidScheduleError(
        f"no worker or deploy of this store serves a workflow named {name!r}{hint}; "
        "serve or deploy it first (a schedule declared in code is registered when it is)"
    )


def _cursor(spec: ScheduleSpec, schedule_id: str, now: float) -> tuple[float | None, float | None]:
    slot = spec.next_after(now)
    return slot, (slot + spec.delay(schedule_id, slot) if slot is not None else None)


async def create(
    store: Store,
    schedule_id: str,
    req: ScheduleRequest,
    *,
    actor: Actor,
    now: float,
    source: str = "api",
    check_served: bool = True,
) -> ScheduleInfo:
    """Check and store a new schedule.

    Raises:
        InvalidScheduleError: a bad spec, or a workflow nothing serves.
        ScheduleExistsError: the id is taken.
    """
    schedule_id = _check_id(schedule_id)
    record = await _record(store, schedule_id, req, now, source, check_served)
    made = await store.create_schedule(record)
    await _audit(store, actor, "schedule.create", made, now, {"spec": made.spec})
    return await _info(store, made, now)


async def _record(
    store: Store,
    schedule_id: str,
    req: ScheduleRequest,
    now: float,
    source: str,
    check_served: bool,
    created_at: float | None = None,
) -> ScheduleRecord:
    spec = _spec(req)
    if req.overlap not in OVERLAPS:
        raise InvalidScheduleError(
            f"unknown overlap policy {req.overlap!r}: use one of {', '.join(OVERLAPS)}"
        )
    if not isinstance(req.workflow, str) or not req.workflow:
        raise InvalidScheduleError(f"workflow must be a workflow or its name, not {req.workflow!r}")
    if check_served:
        queue = await _served_queue(store, req.workflow, req.task_queue)
    else:
        queue = req.task_queue or DEFAULT_QUEUE
    slot, due = _cursor(spec, schedule_id, now)
    return ScheduleRecord(
        schedule_id=schedule_id,
        workflow_name=req.workflow,
        input=start_input(req.workflow, req.input)[1],
        task_queue=queue,
        spec=dataclasses.asdict(spec),
        overlap=req.overlap,
        catchup_window=_window(req.catchup_window),
        paused=bool(req.paused),
        note=req.note,
        source=source,
        created_at=now if created_at is None else created_at,
        updated_at=now,
        next_slot_at=slot,
        next_due_at=due,
    )


async def update(
    store: Store,
    schedule_id: str,
    req: ScheduleRequest,
    *,
    actor: Actor,
    now: float,
    source: str | None = None,
    check_served: bool = True,
) -> ScheduleInfo:
    """Replace a schedule's spec (its actions are kept; the cursor moves to after now)."""
    old = await _get(store, schedule_id)
    new = await _record(
        store, schedule_id, req, now, source or old.source, check_served, old.created_at
    )
    updated = await store.update_schedule(new)
    await _audit(store, actor, "schedule.update", updated, now, {"spec": updated.spec})
    return await _info(store, updated, now)


def request_of(record: ScheduleRecord) -> ScheduleRequest:
    """The request that would make ``record`` again (to change some fields of it)."""
    spec = record.spec
    return ScheduleRequest(
        workflow=record.workflow_name,
        input=_given(record.input),
        cron=spec.get("cron"),
        every=spec.get("every"),
        offset=spec.get("offset") if spec.get("every") is not None else None,
        timezone=spec.get("timezone", "UTC"),
        overlap=record.overlap,
        catchup_window=record.catchup_window,
        jitter=spec.get("jitter") or None,
        task_queue=record.task_queue,
        start_at=spec.get("start_at"),
        end_at=spec.get("end_at"),
        paused=record.paused,
        note=record.note,
    )


def _given(doc: Mapping[str, Any]) -> Any:
    """The input a stored input document was made from (a list, a mapping or None)."""
    args, kwargs = doc.get("args") or [], doc.get("kwargs") or {}
    if args and not kwargs:
        return list(args)
    return dict(kwargs) if kwargs or not args else {"args": args, "kwargs": kwargs}


async def pause(
    store: Store, schedule_id: str, *, note: str | None, actor: Actor, now: float
) -> ScheduleInfo:
    """Stop starting slots (``note`` says why)."""
    old = await _get(store, schedule_id)
    paused = dataclasses.replace(old, paused=True, note=note, updated_at=now)
    done = await store.update_schedule(paused)
    await _audit(store, actor, "schedule.pause", done, now, {"note": note})
    return await _info(store, done, now)


async def unpause(
    store: Store, schedule_id: str, *, note: str | None = None, actor: Actor, now: float
) -> ScheduleInfo:
    """Start slots again from the first one after now (the paused ones are not made up)."""
    old = await _get(store, schedule_id)
    slot, due = _cursor(spec_of(old), schedule_id, now)
    resumed = dataclasses.replace(
        old, paused=False, note=note, updated_at=now, next_slot_at=slot, next_due_at=due
    )
    done = await store.update_schedule(resumed)
    await _audit(store, actor, "schedule.unpause", done, now, {"note": note})
    return await _info(store, done, now)


async def trigger(store: Store, schedule_id: str, *, actor: Actor, now: float) -> ScheduleAction:
    """Act on a slot at ``now`` at once, under the schedule's overlap policy."""
    record = await _get(store, schedule_id)
    slot = math.floor(now * 1000) / 1000
    outcome = await store.fire_schedule(
        schedule_id,
        [FireSlot(slot, "trigger")],
        expect_slot=None,
        next_slot=None,
        next_due=None,
        now=now,
        move=False,
    )
    action = next((a for a in outcome.actions if a.slot_at == slot), None)
    if action is None:
        raise InvalidScheduleError(f"schedule {schedule_id!r} already acted on {slot_iso(slot)}")
    await _audit(store, actor, "schedule.trigger", record, now, {"slot": slot_iso(slot)})
    return action


async def backfill(
    store: Store,
    schedule_id: str,
    start: float,
    end: float,
    *,
    overlap: str | None,
    actor: Actor,
    now: float,
) -> list[ScheduleAction]:
    """Act on every slot in ``[start, end]`` not acted on yet, oldest first, under
    ``overlap`` (default: the schedule's). At most 1000 slots."""
    record = await _get(store, schedule_id)
    if overlap is not None and overlap not in OVERLAPS:
        raise InvalidScheduleError(
            f"unknown overlap policy {overlap!r}: use one of {', '.join(OVERLAPS)}"
        )
    if not (math.isfinite(start) and math.isfinite(end)) or end < start:
        raise InvalidScheduleError("backfill needs a start before its end")
    if end > now:
        raise InvalidScheduleError("a backfill ends in the past (at now at the latest)")
    slots = spec_of(record).slots(start - 0.001, end, MAX_BACKFILL + 1)
    if len(slots) > MAX_BACKFILL:
        raise InvalidScheduleError(
            f"the range holds more than {MAX_BACKFILL} slots; backfill it in parts"
        )
    policy = overlap or "allow_all"
    outcome = await store.fire_schedule(
        schedule_id,
        [FireSlot(s, "backfill", overlap=policy) for s in slots],
        expect_slot=None,
        next_slot=None,
        next_due=None,
        now=now,
        move=False,
    )
    detail = {"start": slot_iso(start), "end": slot_iso(end), "slots": len(slots)}
    await _audit(store, actor, "schedule.backfill", record, now, detail)
    return [a for a in outcome.actions if a.kind == "backfill"]


async def delete(store: Store, schedule_id: str, *, actor: Actor, now: float) -> None:
    """Delete a schedule and its actions; the runs it started stay."""
    record = await _get(store, schedule_id)
    await store.delete_schedule(schedule_id)
    await _audit(store, actor, "schedule.delete", record, now, {})


async def describe(store: Store, schedule_id: str, now: float) -> ScheduleInfo:
    """Its spec, state, next five fire times and last ten actions."""
    return await _info(store, await _get(store, schedule_id), now)


async def list_all(store: Store, now: float) -> list[ScheduleInfo]:
    """Every schedule, by id."""
    return [await _info(store, r, now) for r in await store.list_schedules()]


async def _get(store: Store, schedule_id: str) -> ScheduleRecord:
    found = await store.get_schedule(schedule_id)
    if found is None:
        raise ScheduleNotFoundError(f"no schedule {schedule_id!r}")
    return found


async def _info(store: Store, record: ScheduleRecord, now: float) -> ScheduleInfo:
    spec = spec_of(record)
    upcoming: list[float] = []
    if not record.paused and record.next_slot_at is not None:
        upcoming = [record.next_slot_at, *spec.next_slots(record.next_slot_at, 4)]
    return ScheduleInfo(
        schedule_id=record.schedule_id,
        workflow=record.workflow_name,
        input=record.input,
        task_queue=record.task_queue,
        spec=spec,
        overlap=record.overlap,
        catchup_window=record.catchup_window,
        paused=record.paused,
        note=record.note,
        source=record.source,
        created_at=record.created_at,
        updated_at=record.updated_at,
        next_fire_times=upcoming,
        recent_actions=await store.schedule_actions(record.schedule_id, limit=10),
    )


async def _audit(
    store: Store,
    actor: Actor,
    action: str,
    record: ScheduleRecord,
    now: float,
    detail: dict[str, Any],
) -> None:
    entry = AuditEntry(
        now, actor.kind, actor.id, action, None, None, {"schedule_id": record.schedule_id, **detail}
    )
    await store.append_audit(entry)
