"""Operation status: a step's external operation, looked up by its ``operation_id()``.

A caller that lost its connection to keepgoing reconciles against keepgoing
the way a task reconciles against a provider: by the operation id. One set of
rules, shared by ``Client.get_operation`` (both backends), the HTTP API
(``GET /api/v1/operations/{id}``), the review queue and the CLI.

An operation id is ``op-<run_id>-<cmd>``: the step ``cmd`` of the run. A step
a reviewer sent back to run again is a new step (its own ``cmd``) that keeps
the first step's operation id; the operation is then the newest of its
rounds. Its ``status``:

* ``pending``: scheduled or waiting for its retry, no attempt running;
* ``running``: an attempt is running;
* ``uncertain``: an attempt raised ``UncertainOutcome`` and no reviewer has
  decided yet (``waiting_for_review`` while the run is open and the workflow
  still waits; ``abandoned_at`` once the workflow stopped waiting, after which
  no decision is accepted);
* ``completed``: it returned ``result`` (or a reviewer approved it with ``result``);
* ``failed``: it used up its attempts, or a reviewer failed it;
* ``cancelled``: the run stopped waiting for it, or ended before it ran.

A review decision is the first valid one for the round among the
``review:<operation id>`` messages, taken in send order as the workflow takes
them (``keepgoing._workflow.review``). A decision is sent only by
:func:`review_operation`, through the store's one conditional write
(``Store.decide_review``): two reviewers deciding at once get one acceptance
and one refusal.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from keepgoing._history import events as ev
from keepgoing._payload import check_message_payload
from keepgoing._store.inspect_protocol import TaskState
from keepgoing._store.protocol import Store
from keepgoing._store.records import ReviewRequest, RunRecord
from keepgoing._workflow.review import (
    DECISIONS,
    UNCERTAIN,
    Decision,
    parse_decision,
    review_message,
)
from keepgoing.errors import (
    InvalidRequestError,
    OperationNotFoundError,
    OperationNotUncertainError,
)

__all__ = [
    "DECISIONS",
    "ID_PATTERN",
    "InvalidOperationIdError",
    "MAX_OPERATION_ID",
    "OPERATION_STATUSES",
    "Operation",
    "build_operation",
    "parse_operation_id",
    "read_operation",
    "read_reviews",
    "review_operation",
]

OPERATION_STATUSES = ("pending", "running", "uncertain", "completed", "failed", "cancelled")
#: The longest operation id: ``op-`` + a run id (at most 200) + ``-`` + a step number.
MAX_OPERATION_ID = 220
#: What an operation id looks like (the run id's characters, then the step).
ID_PATTERN = r"^op-[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}-[1-9][0-9]{0,9}$"
_ID = re.compile(r"^op-(?P<run>[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199})-(?P<cmd>[1-9][0-9]{0,9})$")
_OPEN = ("queued", "running", "blocked")


class InvalidOperationIdError(InvalidRequestError):
    """The text is not an operation id (``op-<run_id>-<step>``)."""

    code = "invalid_operation_id"


@dataclass(frozen=True)
class Operation:
    """The status of one operation, as :meth:`keepgoing.Client.get_operation` returns it."""

    operation_id: str
    #: pending | running | uncertain | completed | failed | cancelled
    status: str
    workflow_id: str
    run_id: str
    run_status: str
    task: str
    #: The step carrying the operation now (its newest round) and every round's step.
    cmd: int
    rounds: tuple[int, ...]
    attempts: int
    result: Any = None
    error: dict[str, Any] | None = None
    waiting_for_review: bool = False
    #: When the workflow stopped waiting for a review of the newest round (a timeout
    #: or a cancellation around its await): it takes no decision from then on.
    abandoned_at: float | None = None
    #: For an uncertain round: what the attempt reported, its inputs, attempts and logs.
    evidence: dict[str, Any] | None = None
    #: Every decision taken, oldest first: decision, cmd, reason, sender_kind, sender_id.
    reviews: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    updated_at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        body["rounds"] = list(self.rounds)
        body["reviews"] = [dict(r) for r in self.reviews]
        return body


def parse_operation_id(text: object) -> tuple[str, int]:
    """The run id and step of an operation id.

    Raises:
        InvalidOperationIdError: it is not one (the message says why).
    """
    if not isinstance(text, str) or not text:
        raise InvalidOperationIdError("an operation id must be a non-empty string")
    if len(text) > MAX_OPERATION_ID:
        raise InvalidOperationIdError(
            f"an operation id is at most {MAX_OPERATION_ID} characters; this one has {len(text)}"
        )
    match = _ID.match(text)
    if match is None:
        raise InvalidOperationIdError(
            f"{text[:60]!r} is not an operation id: expected op-<run_id>-<step>, "
            "as operation_id() returns inside a task"
        )
    return match.group("run"), int(match.group("cmd"))


@dataclass
class _Round:
    scheduled: ev.TaskScheduled
    attempts: list[dict[str, Any]] = field(default_factory=list)
    running: bool = False
    completed: ev.TaskCompleted | None = None
    failed: ev.TaskFailed | None = None
    cancelled: bool = False
    abandoned_at: float | None = None
    updated_at: float = 0.0


def build_operation(
    operation_id: str,
    run: RunRecord,
    events: Sequence[ev.Event],
    tasks: Sequence[TaskState] = (),
    logs: dict[int, str] | None = None,
) -> Operation:
    """The operation's status from its run's history and task rows.

    Raises:
        OperationNotFoundError: the run has no such step.
    """
    _, first = parse_operation_id(operation_id)
    rounds: dict[int, _Round] = {}
    messages: list[ev.MessageReceived] = []
    name = review_message(operation_id)
    for e in events:
        if isinstance(e, ev.TaskScheduled):
            own = e.operation_id or f"op-{run.run_id}-{e.cmd}"
            if own == operation_id:
                rounds[e.cmd] = _Round(e, updated_at=e.at)
            elif e.cmd == first:
                raise OperationNotFoundError(
                    f"step {first} of run {run.run_id} carries operation {own!r}, "
                    f"not {operation_id!r}"
                )
        elif isinstance(e, ev.MessageReceived) and e.name == name:
            messages.append(e)
        else:
            _apply(rounds, e)
    if first not in rounds:
        raise OperationNotFoundError(
            f"no operation {operation_id!r}: run {run.run_id} has no step {first}"
        )
    for row in tasks:
        if row.cmd in rounds and row.status == "running":
            rounds[row.cmd].running = True
    order = sorted(rounds)
    decisions = _decisions(order, rounds, messages)
    return _status(operation_id, run, rounds, order, decisions, logs or {})


def _apply(rounds: dict[int, _Round], e: ev.Event) -> None:
    cmd = getattr(e, "cmd", None)
    found = rounds.get(cmd) if isinstance(cmd, int) else None
    if found is None:
        return
    if isinstance(e, ev.TaskAttemptFailed):
        found.attempts.append(
            {
                "attempt": e.attempt,
                "worker": e.worker,
                "started_at": e.started_at,
                "ended_at": e.at,
                "outcome": e.reason,
                "error": dataclasses.asdict(e.error),
            }
        )
    elif isinstance(e, ev.TaskCompleted):
        found.completed = e
        found.attempts.append(
            {
                "attempt": e.attempt,
                "worker": e.worker,
                "started_at": e.started_at,
                "ended_at": e.at,
                "outcome": "completed",
                "error": None,
            }
        )
    elif isinstance(e, ev.TaskFailed):
        found.failed = e
    elif isinstance(e, ev.TaskCancelRequested):
        found.cancelled = True
    elif isinstance(e, ev.ReviewAbandoned):
        found.abandoned_at = e.at
    else:
        return
    found.updated_at = e.at


def _decisions(
    order: list[int], rounds: dict[int, _Round], messages: list[ev.MessageReceived]
) -> dict[int, tuple[Decision, float]]:
    """Each uncertain round's decision, taking messages in order as the workflow does."""
    found: dict[int, tuple[Decision, float]] = {}
    at = 0
    for cmd in order:
        failed = rounds[cmd].failed
        if failed is None or failed.reason != UNCERTAIN:
            continue
        if rounds[cmd].abandoned_at is not None:
            break  # the workflow stopped waiting: it took no decision for this round
        while at < len(messages):
            m = messages[at]
            at += 1
            decision = parse_decision(m.payload, cmd, m.sender_kind, m.sender_id)
            if decision is not None:
                found[cmd] = (decision, m.at)
                break
        if cmd not in found:
            break
    return found


def _status(
    operation_id: str,
    run: RunRecord,
    rounds: dict[int, _Round],
    order: list[int],
    decisions: dict[int, tuple[Decision, float]],
    logs: dict[int, str],
) -> Operation:
    last = rounds[order[-1]]
    cmd = order[-1]
    attempts = sum(len(r.attempts) for r in rounds.values())
    reviews = tuple(
        {
            "cmd": d.cmd,
            "decision": d.decision,
            "reason": d.reason,
            "sender_kind": d.sender_kind,
            "sender_id": d.sender_id,
            "at": at,
        }
        for d, at in (decisions[c] for c in order if c in decisions)
    )
    updated = max([r.updated_at for r in rounds.values()] + [at for _, at in decisions.values()])
    base: dict[str, Any] = {
        "operation_id": operation_id,
        "workflow_id": run.workflow_id,
        "run_id": run.run_id,
        "run_status": run.status,
        "task": last.scheduled.name,
        "cmd": cmd,
        "rounds": tuple(order),
        "attempts": attempts,
        "reviews": reviews,
        "updated_at": updated,
    }
    open_run = run.status in _OPEN
    if last.completed is not None:
        return Operation(status="completed", result=last.completed.result, **base)
    if last.failed is not None:
        error = dataclasses.asdict(last.failed.error)
        if last.failed.reason != UNCERTAIN:
            return Operation(status="failed", error=error, **base)
        decided = decisions.get(cmd)
        if decided is None:
            evidence: dict[str, Any] = {
                "error": error,
                "inputs": {"args": last.scheduled.args, "kwargs": last.scheduled.kwargs},
                "attempts": last.attempts,
                "logs": logs.get(cmd, ""),
            }
            if last.abandoned_at is not None:
                evidence["note"] = (
                    "the workflow stopped waiting for a review (a timeout or a cancellation "
                    "around the step); the write may or may not have happened, and no "
                    "decision reaches the run any more"
                )
            return Operation(
                status="uncertain",
                error=error,
                waiting_for_review=open_run and last.abandoned_at is None,
                abandoned_at=last.abandoned_at,
                evidence=evidence,
                **base,
            )
        decision = decided[0]
        if decision.decision == "approve":
            return Operation(status="completed", result=decision.result, **base)
        if decision.decision == "fail":
            return Operation(status="failed", error=error, **base)
        # retry: the next round is scheduled by the workflow's next activation.
        return Operation(status="pending" if open_run else "cancelled", **base)
    if last.cancelled or not open_run:
        return Operation(status="cancelled", **base)
    return Operation(status="running" if last.running else "pending", **base)


async def read_operation(store: Store, operation_id: str) -> Operation:
    """The operation's status, read from the store.

    Raises:
        InvalidOperationIdError: not an operation id.
        OperationNotFoundError: no run has that step.
    """
    run_id, _ = parse_operation_id(operation_id)
    run = await store.get_run(run_id)
    if run is None:
        raise OperationNotFoundError(f"no operation {operation_id!r}: no run {run_id!r}")
    events = await store.read_history(run.run_id)
    tasks = await store.run_tasks(run.run_id)
    found = build_operation(operation_id, run, events, tasks)
    if found.status != "uncertain":
        return found
    logs = await store.attempt_logs(run.run_id, cmd=found.cmd)
    text = "\n".join(log.text for log in logs)
    return build_operation(operation_id, run, events, tasks, {found.cmd: text})


async def read_reviews(store: Store, *, limit: int = 100) -> list[Operation]:
    """Operations waiting for a reviewer, oldest run first, at most ``limit``."""
    seen: set[str] = set()
    found: list[Operation] = []
    for row in await store.uncertain_steps(limit=max(limit * 4, 200)):
        operation_id = row.operation_id or f"op-{row.run_id}-{row.cmd}"
        if operation_id in seen:
            continue
        seen.add(operation_id)
        try:
            operation = await read_operation(store, operation_id)
        except OperationNotFoundError:  # the run was removed meanwhile
            continue
        if operation.waiting_for_review:
            found.append(operation)
            if len(found) >= limit:
                break
    return found


async def review_operation(
    store: Store,
    operation_id: str,
    decision: str,
    *,
    result: Any = None,
    reason: str | None = None,
    sender_kind: str,
    sender_id: str,
    now: float,
) -> Operation:
    """Send a reviewer's decision on an uncertain operation (as a message, audited).

    Returns the operation as it stood when the decision was sent.

    Raises:
        InvalidOperationIdError, OperationNotFoundError: as :func:`read_operation`.
        InvalidRequestError: ``decision`` is not approve, retry or fail, or ``reason``
            is not text.
        PayloadError: ``result`` is not JSON a store can carry.
        OperationNotUncertainError: the operation is not waiting for review.
    """
    if decision not in DECISIONS:
        raise InvalidRequestError(
            f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}"
        )
    if reason is not None and (not isinstance(reason, str) or len(reason) > 2000):
        raise InvalidRequestError("reason must be text of at most 2000 characters")
    if decision != "approve" and result is not None:
        raise InvalidRequestError(f"only approve takes a result, not {decision}")
    operation = await read_operation(store, operation_id)
    if not operation.waiting_for_review:
        raise OperationNotUncertainError(_not_waiting(operation_id, operation))
    payload = {"decision": decision, "cmd": operation.cmd, "result": result, "reason": reason or ""}
    check_message_payload(payload, f"the review of operation {operation_id!r}")
    # The read above gives the round and a clear refusal; the store decides, in one
    # transaction: a reviewer who raced us, or a workflow that stopped waiting
    # meanwhile, makes this a refusal and nothing is sent.
    await store.decide_review(
        ReviewRequest(
            operation_id=operation_id,
            workflow_id=operation.workflow_id,
            run_id=operation.run_id,
            cmd=operation.cmd,
            decision=decision,
            payload=payload,
            reason=reason or "",
            actor_kind=sender_kind,
            actor_id=sender_id,
            now=now,
        )
    )
    return operation


def _not_waiting(operation_id: str, operation: Operation) -> str:
    if operation.status == "uncertain" and operation.abandoned_at is not None:
        return (
            f"operation {operation_id!r} is uncertain but its workflow stopped waiting for a "
            "review (a timeout or a cancellation around the step): a decision can no longer "
            "reach it"
        )
    if operation.status == "uncertain":
        return (
            f"operation {operation_id!r} is uncertain but its run is {operation.run_status}, "
            "not waiting for review"
        )
    return f"operation {operation_id!r} is {operation.status}, not waiting for review"
