"""Schedules declared in code (``@workflow(schedule=...)``), kept in step with the store.

:func:`sync_declared` runs when a worker starts serving a file and when a file is
deployed. For each declared schedule it creates the store's schedule (``source``
``code``), or updates it when the code changed it; a user's pause is kept. A
``code`` schedule of one of the file's workflows that the code no longer
declares is paused, never deleted, with :data:`DROPPED` and the time in its note;
declaring it again unpauses it. A schedule made through the API with the same id
is left alone (a warning says so).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Sequence
from typing import Any

from keepgoing._durations import parse_duration
from keepgoing._schedule_spec import parse_spec, slot_iso
from keepgoing._schedules import commands as ops
from keepgoing._schedules.commands import Actor, ScheduleRequest
from keepgoing._store.protocol import Store
from keepgoing._store.schedules_protocol import ScheduleRecord
from keepgoing._workflow.inputs import start_input
from keepgoing._workflow.schedule import Schedule

__all__ = ["DROPPED", "Declared", "declared_from_body", "declared_to_body", "sync_declared"]

log = logging.getLogger("keepgoing.schedules")

DROPPED = "dropped from the code"
#: A declared schedule: the workflow it starts and its ``Schedule``.
Declared = tuple[str, Schedule]


def declared_to_body(declared: Sequence[Declared]) -> list[dict[str, Any]]:
    """JSON for a deploy's request."""
    return [
        {"workflow": name, **{k: v for k, v in dataclasses.asdict(s).items()}}
        for name, s in declared
    ]


def declared_from_body(body: Sequence[dict[str, Any]]) -> list[Declared]:
    fields = {f.name for f in dataclasses.fields(Schedule)}
    return [(b["workflow"], Schedule(**{k: v for k, v in b.items() if k in fields})) for b in body]


def _request(name: str, s: Schedule, queue: str, paused: bool, note: str | None) -> ScheduleRequest:
    return ScheduleRequest(
        workflow=name,
        input=dict(s.input) if s.input else None,
        cron=s.cron,
        every=s.every,
        offset=s.offset,
        timezone=s.timezone,
        overlap=s.overlap,
        catchup_window=s.catchup_window,
        jitter=s.jitter,
        task_queue=queue,
        paused=paused,
        note=note,
    )


def _same(old: ScheduleRecord, req: ScheduleRequest) -> bool:
    spec = parse_spec(
        cron=req.cron, every=req.every, offset=req.offset, timezone=req.timezone, jitter=req.jitter
    )
    return (
        old.spec == dataclasses.asdict(spec)
        and old.workflow_name == req.workflow
        and old.overlap == req.overlap
        and old.catchup_window == parse_duration(req.catchup_window)
        and old.task_queue == req.task_queue
        and old.input == start_input(req.workflow, req.input)[1]
    )


async def sync_declared(
    store: Store,
    declared: Sequence[Declared],
    *,
    workflows: Collection[str] | None,
    queue: str,
    actor: Actor,
    now: float,
) -> list[str]:
    """Bring the store's ``code`` schedules of ``workflows`` (None: of every workflow
    on ``queue``, a deployed group's own) in step with ``declared``; what was done,
    in words (one line per change)."""
    existing = {r.schedule_id: r for r in await store.list_schedules()}
    done: list[str] = []
    wanted = set()
    for name, s in declared:
        sid = s.schedule_id or name
        wanted.add(sid)
        old = existing.get(sid)
        where = s.task_queue or queue
        if old is None:
            req = _request(name, s, where, False, s.note)
            await ops.create(
                store, sid, req, actor=actor, now=now, source="code", check_served=False
            )
            done.append(f"created schedule {sid}")
            continue
        if old.source != "code":
            log.warning("schedule %s was made through the API; the code's is not applied", sid)
            continue
        dropped = old.paused and (old.note or "").startswith(DROPPED)
        paused = old.paused and not dropped
        req = _request(name, s, where, paused, old.note if paused else s.note)
        if _same(old, req) and not dropped:
            continue
        await ops.update(store, sid, req, actor=actor, now=now, source="code", check_served=False)
        done.append(f"updated schedule {sid}")
    for sid, old in existing.items():
        if (
            old.source == "code"
            and (
                old.workflow_name in workflows if workflows is not None else old.task_queue == queue
            )
            and sid not in wanted
            and not old.paused
        ):
            note = (
                f"{DROPPED} (no longer declared by the code deployed or served at {slot_iso(now)})"
            )
            await ops.pause(store, sid, note=note, actor=actor, now=now)
            done.append(f"paused schedule {sid}: {DROPPED}")
    return done
