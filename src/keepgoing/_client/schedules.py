"""Schedules from a client: :class:`ScheduleMethods`, mixed into :class:`keepgoing.Client`.

In store mode each method runs :mod:`keepgoing._schedules.commands` on the
store; with a server it calls ``/api/v1/schedules`` (permissions
``schedules.read`` and ``schedules.write``). Both record the change in the
audit log with its actor.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import logging
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keepgoing._schedules import commands as ops
from keepgoing._schedules.commands import Actor, ScheduleInfo, ScheduleRequest
from keepgoing._schedules.declared import (
    Declared,
    declared_from_body,
    declared_to_body,
    sync_declared,
)
from keepgoing._store.schedules_protocol import ScheduleAction
from keepgoing._worker.inprocess import local_clock
from keepgoing._workflow.registry import registry
from keepgoing._workflow.workflow import WorkflowDefinition
from keepgoing.errors import InvalidScheduleError

if TYPE_CHECKING:
    from keepgoing._client.backend import Backend

__all__ = ["ScheduleMethods", "declared_in_file", "request_body"]

API = "/api/v1/schedules"
log = logging.getLogger("keepgoing.schedules")
Moment = datetime | float


def _now() -> float:
    """Now, on the fake clock of a ``keepgoing.testing.fake_clock()`` block too."""
    return local_clock().now()


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _seconds(value: Moment, what: str) -> float:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidScheduleError(f"{what} must be an aware datetime (give it a tzinfo)")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidScheduleError(f"{what} must be a datetime or UTC seconds, not {value!r}")
    return float(value)


def request_body(req: ScheduleRequest) -> dict[str, Any]:
    """``req`` as the JSON body of ``POST /api/v1/schedules``."""
    body = dataclasses.asdict(req)
    for key in ("start_at", "end_at"):
        if isinstance(body[key], datetime):
            body[key] = body[key].timestamp()
    for key in ("every", "offset", "catchup_window", "jitter"):
        if body[key] is not None and not isinstance(body[key], str | int | float):
            body[key] = float(body[key].total_seconds())
    return body


class ScheduleMethods:
    """The schedule half of :class:`keepgoing.Client` (documented there as a whole)."""

    _backend: Backend

    # -- transport ----------------------------------------------------------------
    @property
    def _http(self) -> Any:
        return self._backend if not hasattr(self._backend, "run") else None

    def _run(self, coro: Any) -> Any:
        return self._backend.run(coro)  # type: ignore[attr-defined]

    @property
    def _actor(self) -> Actor:
        try:
            return Actor("user", getpass.getuser())
        except (KeyError, OSError):
            return Actor("user", "unknown")

    # -- the methods ----------------------------------------------------------------
    def create_schedule(
        self,
        schedule_id: str,
        workflow: WorkflowDefinition[..., Any] | str,
        input: Any = None,
        *,
        cron: str | None = None,
        every: Any = None,
        timezone: str = "UTC",
        overlap: str = "skip",
        catchup_window: Any = "1h",
        jitter: Any = None,
        task_queue: str | None = None,
        start_at: Moment | None = None,
        end_at: Moment | None = None,
        paused: bool = False,
        note: str | None = None,
        offset: Any = None,
    ) -> ScheduleInfo:
        """Create a schedule that starts ``workflow`` with ``input`` on each slot.

        Give ``cron`` (5 fields or ``@daily`` and friends, read in ``timezone``)
        or ``every`` (a duration of at least 1s, slots at ``offset + k * every``
        from the Unix epoch). Each slot starts one run, with workflow id
        ``<schedule_id>-<slot, UTC ISO>``. ``overlap`` says what a slot does while
        the schedule's previous run is open: ``skip``, ``buffer_one``,
        ``buffer_all``, ``cancel_other`` or ``allow_all``. Slots missed while no
        server ran are started when they are within ``catchup_window`` of now,
        else recorded as skipped. ``jitter`` delays each start by up to that long.
        Returns its :class:`ScheduleInfo` (spec, next fire times, actions).

        Raises:
            InvalidScheduleError: a bad cron or duration, an unknown time zone or
                overlap policy, or a workflow no worker or deploy serves.
            ScheduleExistsError: ``schedule_id`` is taken.
        """
        req = _request(
            workflow,
            input,
            cron=cron,
            every=every,
            offset=offset,
            timezone=timezone,
            overlap=overlap,
            catchup_window=catchup_window,
            jitter=jitter,
            task_queue=task_queue,
            start_at=None if start_at is None else _seconds(start_at, "start_at"),
            end_at=None if end_at is None else _seconds(end_at, "end_at"),
            paused=paused,
            note=note,
        )
        if self._http is not None:
            body = {"schedule_id": schedule_id, **request_body(req)}
            return ScheduleInfo.from_body(self._http.call("POST", API, idempotent=False, json=body))
        store = self._backend.store
        info: ScheduleInfo = self._run(
            ops.create(store, schedule_id, req, actor=self._actor, now=_now())
        )
        return info

    def update_schedule(self, schedule_id: str, **changes: Any) -> ScheduleInfo:
        """Change some of a schedule's fields (the keywords of :meth:`create_schedule`);
        its cursor moves to the first slot after now.

        Raises:
            ScheduleNotFoundError: no such schedule.
            InvalidScheduleError: as for :meth:`create_schedule`; nothing changes.
        """
        names = {f.name for f in dataclasses.fields(ScheduleRequest)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise InvalidScheduleError(f"update_schedule takes no {', '.join(unknown)}")
        if "workflow" in changes and isinstance(changes["workflow"], WorkflowDefinition):
            changes["workflow"] = changes["workflow"].name
        if self._http is not None:
            named = {**changes, "workflow": changes.get("workflow", "")}
            body = request_body(ScheduleRequest(**named))
            sent = {k: v for k, v in body.items() if k in changes}
            path = f"{API}/{_quote(schedule_id)}"
            return ScheduleInfo.from_body(
                self._http.call("PATCH", path, idempotent=True, json=sent)
            )
        store = self._backend.store

        async def change() -> ScheduleInfo:
            old = await ops.describe(store, schedule_id, _now())
            record = await store.get_schedule(old.schedule_id)
            assert record is not None
            if "cron" in changes and changes["cron"] is not None:
                changes.setdefault("every", None)
                changes.setdefault("offset", None)
            if "every" in changes and changes["every"] is not None:
                changes.setdefault("cron", None)
            req = dataclasses.replace(ops.request_of(record), **changes)
            now = _now()
            return await ops.update(store, schedule_id, req, actor=self._actor, now=now)

        info: ScheduleInfo = self._run(change())
        return info

    def pause_schedule(self, schedule_id: str, *, note: str | None = None) -> ScheduleInfo:
        """Stop starting slots until :meth:`unpause_schedule`; ``note`` says why."""
        if self._http is not None:
            path = f"{API}/{_quote(schedule_id)}/pause"
            body = self._http.call("POST", path, idempotent=True, json={"note": note})
            return ScheduleInfo.from_body(body)
        store = self._backend.store
        info: ScheduleInfo = self._run(
            ops.pause(store, schedule_id, note=note, actor=self._actor, now=_now())
        )
        return info

    def unpause_schedule(self, schedule_id: str, *, note: str | None = None) -> ScheduleInfo:
        """Start slots again, from the first after now (the paused ones are not made up)."""
        if self._http is not None:
            path = f"{API}/{_quote(schedule_id)}/unpause"
            body = self._http.call("POST", path, idempotent=True, json={"note": note})
            return ScheduleInfo.from_body(body)
        store = self._backend.store
        info: ScheduleInfo = self._run(
            ops.unpause(store, schedule_id, note=note, actor=self._actor, now=_now())
        )
        return info

    def trigger_schedule(self, schedule_id: str) -> ScheduleAction:
        """Act on a slot now (under the overlap policy); the action, with its run."""
        if self._http is not None:
            path = f"{API}/{_quote(schedule_id)}/trigger"
            return ScheduleAction(**self._http.call("POST", path, idempotent=False, json={}))
        store = self._backend.store
        action: ScheduleAction = self._run(
            ops.trigger(store, schedule_id, actor=self._actor, now=_now())
        )
        return action

    def backfill_schedule(
        self, schedule_id: str, start: Moment, end: Moment, *, overlap: str | None = None
    ) -> list[ScheduleAction]:
        """Act on every slot in ``[start, end]`` that has no action yet, oldest first:
        one run per slot (``overlap`` default ``allow_all``). At most 1000 slots."""
        begin, finish = _seconds(start, "start"), _seconds(end, "end")
        if self._http is not None:
            path = f"{API}/{_quote(schedule_id)}/backfill"
            body = {"start": begin, "end": finish, "overlap": overlap}
            found = self._http.call("POST", path, idempotent=False, json=body)
            return [ScheduleAction(**a) for a in found["actions"]]
        store = self._backend.store
        actions: list[ScheduleAction] = self._run(
            ops.backfill(
                store,
                schedule_id,
                begin,
                finish,
                overlap=overlap,
                actor=self._actor,
                now=_now(),
            )
        )
        return actions

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule and its actions; the runs it started stay.

        Raises:
            ScheduleNotFoundError: no such schedule.
        """
        if self._http is not None:
            self._http.call("DELETE", f"{API}/{_quote(schedule_id)}", idempotent=True)
            return
        store = self._backend.store
        self._run(ops.delete(store, schedule_id, actor=self._actor, now=_now()))

    def get_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Its spec and state, next five fire times and last ten actions with their runs.

        Raises:
            ScheduleNotFoundError: no such schedule.
        """
        if self._http is not None:
            path = f"{API}/{_quote(schedule_id)}"
            return ScheduleInfo.from_body(self._http.call("GET", path, idempotent=True))
        info: ScheduleInfo = self._run(ops.describe(self._backend.store, schedule_id, _now()))
        return info

    def _sync_declared(self, declared: Sequence[Declared], queue: str) -> list[str]:
        """Register a deployed file's declared schedules (``_schedules/declared.py``);
        the group's queue is its own, so its other ``code`` schedules are paused."""
        if self._http is not None:
            body = {"declared": declared_to_body(declared), "queue": queue}
            found = self._http.call(
                "POST", "/api/v1/declared-schedules", idempotent=True, json=body
            )
            return list(found["changes"])
        changes: list[str] = self._run(
            sync_declared(
                self._backend.store,
                declared,
                workflows=None,
                queue=queue,
                actor=self._actor,
                now=_now(),
            )
        )
        return changes

    def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by id."""
        if self._http is not None:
            found = self._http.call("GET", API, idempotent=True)
            return [ScheduleInfo.from_body(s) for s in found["schedules"]]
        infos: list[ScheduleInfo] = self._run(ops.list_all(self._backend.store, _now()))
        return infos


def _request(
    workflow: WorkflowDefinition[..., Any] | str, input: Any, **fields: Any
) -> ScheduleRequest:
    if isinstance(workflow, WorkflowDefinition):
        workflow.bind_input(input)  # checked against its signature here
        return ScheduleRequest(workflow=workflow.name, input=input, **fields)
    if not isinstance(workflow, str) or not workflow:
        raise InvalidScheduleError(f"workflow must be a @workflow or its name, not {workflow!r}")
    return ScheduleRequest(workflow=workflow, input=input, **fields)


_LIST_DECLARED = """
import json, os, sys
from keepgoing._schedules.declared import declared_to_body
from keepgoing._worker.loader import load_file
from keepgoing._workflow.registry import registry
load_file(sys.argv[1])
here = [d for d in registry.workflows.values()
        if os.path.abspath(d.fn.__code__.co_filename) == os.path.abspath(sys.argv[1])]
print(json.dumps(declared_to_body([(d.name, s) for d in here for s in d.schedules])))
"""


def declared_in_file(path: Path) -> list[Declared] | None:
    """The schedules the workflows of ``path`` declare (read from this process when it
    imported the file, else imported in a child process; none without the word), or
    None when the file does not import here (its replicas register them instead)."""
    if "schedule" not in path.read_text(encoding="utf-8"):
        return []
    here = []
    for d in registry.workflows.values():
        code = getattr(d.fn, "__code__", None)
        if code is not None and os.path.abspath(code.co_filename) == str(path):
            here.append(d)
    if here:
        return [(d.name, s) for d in here for s in d.schedules]
    done = subprocess.run(
        [sys.executable, "-c", _LIST_DECLARED, str(path)],
        capture_output=True,
        text=True,
        cwd=path.parent,
        check=False,
    )
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        log.warning("importing %s for its schedules failed here: %s", path.name, detail[0])
        return None
    return declared_from_body(json.loads(done.stdout.strip().splitlines()[-1]))
