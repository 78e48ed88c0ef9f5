"""Recovery controls the clients and the routes share: resuming and forking runs
(audited), and reading the progress a run publishes (``keepgoing.set_status``).

The store copies the reused history prefix in one transaction
(``_store/sql/prefix.py``); here the request is checked, the new run is named,
and the audit entry is written. One status reader serves the store-mode
client and the HTTP route: it finds the workflow id's newest run, reads the
value from the store's ``run_status`` table, and, asked to wait, sleeps on the store's change signal
(``Store.wait_for_change``: the doorbell on SQLite, ``LISTEN`` on PostgreSQL),
which a commit that publishes a status rings. ``SAFETY_POLL`` only covers a
wake-up lost between processes.

A fork's caller may wait for its check (``wait_for_check``): the new run's
first activation replays the prefix it reuses and either goes on past it or
fails the run with the refusal (``_runtime/prefix.py``); :func:`wait_for_check`
waits, on the same change signal, for one or the other.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

from keepgoing._clock import system_clock
from keepgoing._history import events as ev
from keepgoing._runtime.prefix import REFUSED
from keepgoing._store.doorbell import WaitKey
from keepgoing._store.protocol import Store
from keepgoing._store.records import TERMINAL, AuditEntry, RunRecord
from keepgoing._store.recovery_protocol import Origin, Origins, StatusValue
from keepgoing._views.batch import check_id
from keepgoing._views.prefix_check import check_fork, check_resume
from keepgoing._workflow.inputs import start_input
from keepgoing._workflow.status import check_status_name
from keepgoing.errors import (
    InvalidRequestError,
    ReuseRefusedError,
    RunNotFoundError,
    WorkflowBlockedError,
)

__all__ = [
    "SAFETY_POLL",
    "Actor",
    "StatusRead",
    "check_step",
    "check_wait",
    "fork",
    "origins_view",
    "read_status",
    "resume",
    "wait_for_check",
]

SAFETY_POLL = 1.0


@dataclass(frozen=True)
class StatusRead:
    """What a read found: the run read, and its values (one, for a read of one key)."""

    run: RunRecord
    values: list[StatusValue]

    def value(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` if ``key`` was published, else ``(False, None)``."""
        for found in self.values:
            if found.name == key:
                return True, found.value
        return False, None


def check_wait(wait: object) -> float | None:
    """``wait`` as seconds (None: do not wait), or ``InvalidRequestError`` naming it."""
    if wait is None:
        return None
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not math.isfinite(wait):
        raise InvalidRequestError(f"wait must be a number of seconds or None, not {wait!r}")
    if wait < 0:
        raise InvalidRequestError(f"wait must not be negative, not {wait!r}")
    return float(wait)


async def read_status(
    store: Store, workflow_id: str, key: str | None = None, wait: float | None = None
) -> StatusRead:
    """The values the newest run of ``workflow_id`` published (only ``key``'s, if given).

    With ``key`` and ``wait``, waits up to ``wait`` seconds for the value to appear,
    and returns at once when it does or when the run has ended without it.

    Raises:
        RunNotFoundError: no run has this workflow id.
        ValueError: ``key`` is not a usable status key.
    """
    if key is not None:
        check_status_name(key, "get_status()")
    waiter = WaitKey()
    deadline = None if wait is None else system_clock.monotonic() + wait
    if wait:
        await store.wait_for_change(0, waiter)  # from here on no change is missed
    while True:
        run = await store.find_run(workflow_id)
        if run is None:
            raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
        found = StatusRead(run, await store.run_status(run.run_id, key))
        if key is None or found.values or deadline is None or run.status in TERMINAL:
            return found
        left = deadline - system_clock.monotonic()
        if left <= 0:
            return found
        await store.wait_for_change(min(SAFETY_POLL, left), waiter)


@dataclass(frozen=True)
class Actor:
    """Who asks, for the audit log: ``("user", "alice")`` and where from (``"cli"``)."""

    kind: str
    id: str
    via: str = "api"


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequestError(f"{what} must be a positive int, not {value!r}")
    return value


def check_step(value: object) -> int:
    """``from_step`` as a step number (the ``#`` the timeline shows), or a clear error."""
    return _positive(value, "from_step")


def _check_revision(value: object) -> int | None:
    return None if value is None else _positive(value, "revision")


def _workflow_id(value: str, what: str) -> str:
    try:
        return check_id(value, what)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from None


async def resume(
    store: Store, workflow_id: str, revision: int | None, actor: Actor
) -> tuple[RunRecord, RunRecord]:
    """Resume the newest run of ``workflow_id``; returns ``(new run, resumed run)``."""
    _workflow_id(workflow_id, "workflow_id")
    pinned = _check_revision(revision)
    if pinned is not None:
        await check_resume(store, workflow_id, pinned)
    now = system_clock.now()
    new, old = await store.resume_run(
        workflow_id, run_id=uuid.uuid4().hex, revision=pinned, now=now
    )
    detail: dict[str, Any] = {"resumed_run_id": old.run_id, "via": actor.via}
    if pinned is not None:
        detail["revision"] = pinned
    await store.append_audit(
        AuditEntry(now, actor.kind, actor.id, "workflow.resume", workflow_id, new.run_id, detail)
    )
    return new, old


async def fork(
    store: Store,
    source_id: str,
    from_step: object,
    input: Any,
    workflow_id: str | None,
    revision: int | None,
    actor: Actor,
) -> tuple[RunRecord, RunRecord]:
    """Fork the newest run of ``source_id`` from step ``from_step``; ``(new run, source)``."""
    _workflow_id(source_id, "workflow_id")
    step = check_step(from_step)
    pinned = _check_revision(revision)
    if workflow_id is not None:
        _workflow_id(workflow_id, "the fork's workflow_id")
    source = await store.find_run(source_id)
    if source is None:
        raise RunNotFoundError(f"no run has workflow id {source_id!r}")
    stored = None if input is None else start_input(source.workflow_name, input)[1]
    await check_fork(store, source, step, stored, pinned)
    run_id = uuid.uuid4().hex
    now = system_clock.now()
    new, old = await store.fork_run(
        source_id,
        from_step=step,
        input=stored,
        new_workflow_id=workflow_id or f"{source_id}-fork-{run_id[:8]}",
        run_id=run_id,
        revision=pinned,
        now=now,
    )
    detail: dict[str, Any] = {
        "forked_from": old.workflow_id,
        "forked_run_id": old.run_id,
        "from_step": step,
        "new_input": input is not None,
        "via": actor.via,
    }
    await store.append_audit(
        AuditEntry(now, actor.kind, actor.id, "workflow.fork", new.workflow_id, new.run_id, detail)
    )
    return new, old


def _checked(run: RunRecord, after: list[ev.Event]) -> bool:
    """Whether the events after a copied run's reused prefix show its check done;
    raises the refusal (or the block) the first activation recorded."""
    for event in after:
        if isinstance(event, ev.WorkflowFailed) and event.error.type == REFUSED:
            raise ReuseRefusedError(event.error.message, run.workflow_id, run.run_id)
    if any(isinstance(e, ev.ActivationCompleted) for e in after):
        return True
    blocked = next((e for e in after if isinstance(e, ev.WorkflowBlocked)), None)
    if blocked is not None:
        raise WorkflowBlockedError(
            f"run {run.run_id} of {run.workflow_id!r} was blocked replaying the steps it "
            f"reuses: {blocked.reason}"
        )
    return run.status in TERMINAL  # ended before any activation: nothing left to check


async def wait_for_check(store: Store, run: RunRecord, wait: float | None = None) -> bool:
    """Wait until the resumed or forked run ``run`` has passed the check of the steps
    it reuses (an activation past them committed); False if ``wait`` seconds passed
    first (None: no limit).

    Raises:
        ReuseRefusedError: the run was refused (it failed with the message naming
            the step and argument that differ).
        WorkflowBlockedError: its code failed while replaying the reused steps.
    """
    waiter = WaitKey()
    deadline = None if wait is None else system_clock.monotonic() + wait
    await store.wait_for_change(0, waiter)  # from here on no change is missed
    first = await store.read_history(run.run_id)
    started = next((e for e in first if isinstance(e, ev.WorkflowStarted)), None)
    upto = started.reused_upto if started is not None and started.reused_upto else 1
    while True:
        current = await store.get_run(run.run_id) or run  # before its events: no end missed
        if _checked(current, await store.read_history(run.run_id, upto)):
            return True
        left = None if deadline is None else deadline - system_clock.monotonic()
        if left is not None and left <= 0:
            return False
        await store.wait_for_change(SAFETY_POLL if left is None else min(SAFETY_POLL, left), waiter)


def _origin(o: Origin, *, own: bool) -> dict[str, Any]:
    """One link of a run's lineage: the other run, how it was made, from which step."""
    if own:
        return {
            "workflow_id": o.origin_workflow_id,
            "run_id": o.origin_run_id,
            "kind": o.kind,
            "step": o.step,
        }
    return {"workflow_id": o.workflow_id, "run_id": o.run_id, "kind": o.kind, "step": o.step}


def origins_view(found: Origins) -> dict[str, Any]:
    """``{"origin": ... or None, "derived": [...]}``: the run this one was resumed or
    forked from, and the runs resumed or forked from this one."""
    return {
        "origin": None if found.origin is None else _origin(found.origin, own=True),
        "derived": [_origin(d, own=False) for d in found.derived],
    }
