"""A run's steps as the checkpoint inspector shows them, derived from its history.

One set of rules, shared by the HTTP API (``GET /api/v1/runs/{id}/steps``), the
web UI and the CLI. Each task step (one ``TaskScheduled``) becomes a
:class:`StepView`: its inputs, output, every attempt (worker, start, end,
duration, error with traceback, and why it ended), its operation id, the
volume versions it wrote, and whether a replacement worker reused its saved
output. The history says how each attempt ended; the task rows add the
attempt running now; ``worker.kill`` audit entries tell a worker that was
killed on request from one that died.

Rules:

* an attempt ends at its ``TaskAttemptFailed`` (``reason``: ``error``,
  ``timeout``, ``worker_lost``, ``released``) or its ``TaskCompleted``;
* ``cause`` is why a lost or released attempt's worker stopped, as its
  ``TaskAttemptFailed`` records it (``_store/worker_stops.py``: ``killed_by_request``
  with ``killed_by`` the actor and ``via`` where from, ``scaled_down``,
  ``unexplained``, ...), ``cause_text`` says it in words ("worker killed from
  the UI by alice") and ``counted`` whether the loss counted against
  ``max_worker_losses``; for other attempts ``cause`` is the reason. A loss
  recorded before causes were kept is ``killed_by_request`` when a
  ``worker.kill`` audit entry named its worker, else ``worker_lost``;
* ``reused_output`` is true for a completed step whose worker was lost later
  in the run while another worker carried the run on: that replacement read
  the step's saved output from history instead of running it again
  (``reused_by``: the first such worker);
* ``usage`` is what the step's model calls cost, read from the gateway's usage
  ledger (grouped by attempt): on each attempt its own calls, tokens and cost,
  whatever became of the attempt (a killed attempt's calls were paid for too),
  and on the step their sum; None where no call was made. An attempt the ledger
  knows that the history does not (its loss is not reaped yet) gets a row of
  its own only on the step's sum.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from keepgoing._history import events as ev
from keepgoing._store import worker_stops
from keepgoing._store.gateway_protocol import UsageQuery, UsageRow
from keepgoing._store.inspect_protocol import TaskState
from keepgoing._store.records import AuditEntry
from keepgoing._store.transitions import NON_RETRYABLE
from keepgoing._workflow import retry_policy

__all__ = [
    "AttemptView",
    "MemoryWrite",
    "StepUsage",
    "StepView",
    "StepsPage",
    "build_steps",
    "page",
    "usage_query",
]

_FOREVER = 1e12  # a finite "until" later than any call
MAX_POINTS = 10_000  # the ledger read's row limit: a run's attempts with model calls


@dataclass
class StepUsage:
    """The model calls of an attempt (or of every attempt of a step), from the ledger."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    errors: int = 0
    latency: float = 0.0  # seconds, summed over the calls

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, row: UsageRow) -> None:
        self.calls += row.calls
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens
        self.cost += row.cost
        self.errors += row.errors + row.refused
        self.latency += row.latency_sum

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "tokens": self.tokens}


@dataclass
class AttemptView:
    attempt: int
    worker: str
    started_at: float | None
    ended_at: float | None
    #: running | completed | error | timeout | worker_lost | released
    outcome: str
    error: dict[str, Any] | None = None
    cause: str | None = None
    killed_by: str | None = None
    via: str | None = None
    cause_text: str | None = None
    counted: bool | None = None
    retry_at: float | None = None
    usage: StepUsage | None = None
    #: The seq of the event that ended it (None while it runs); not in the API's view.
    seq: int | None = None

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0.0, self.ended_at - self.started_at)

    def as_dict(self) -> dict[str, Any]:
        body = {**dataclasses.asdict(self), "duration": self.duration}
        body["usage"] = self.usage.as_dict() if self.usage is not None else None
        del body["seq"]
        return body


@dataclass
class MemoryWrite:
    volume: str
    version: int
    ref: str
    paths: list[str]
    attempt: int
    seq: int


@dataclass
class StepView:
    cmd: int
    name: str
    operation_id: str
    scheduled_at: float
    scheduled_seq: int
    args: list[Any]
    kwargs: dict[str, Any]
    #: scheduled | running | retrying | completed | failed | uncertain | cancelled
    status: str = "scheduled"
    output: Any = None
    error: dict[str, Any] | None = None
    attempts: list[AttemptView] = field(default_factory=list)
    memory: list[MemoryWrite] = field(default_factory=list)
    completed_by: str | None = None
    completed_seq: int | None = None
    reused_output: bool = False
    reused_by: str | None = None
    usage: StepUsage | None = None
    # What the web UI's model draws too (``run_model.py``); not in the API's view.
    retries: int = 0
    timeout: float | None = None
    #: When it completed, failed or was cancelled.
    ended_at: float | None = None
    #: The ``TaskFailed`` that ended it: its reason (``uncertain``, ``error``, ...) and seq.
    fail_reason: str | None = None
    failed_seq: int | None = None

    def as_dict(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        for name in ("retries", "timeout", "ended_at", "fail_reason", "failed_seq"):
            del body[name]
        body["attempts"] = [a.as_dict() for a in self.attempts]
        body["usage"] = self.usage.as_dict() if self.usage is not None else None
        body["inputs"] = {"args": body.pop("args"), "kwargs": body.pop("kwargs")}
        return body


@dataclass
class StepsPage:
    steps: list[StepView]
    total: int
    next_offset: int | None


def _error(info: ev.ErrorInfo | None) -> dict[str, Any] | None:
    return dataclasses.asdict(info) if info is not None else None


def build_steps(
    run_id: str,
    events: Iterable[ev.Event],
    tasks: Sequence[TaskState] = (),
    kills: Sequence[AuditEntry] = (),
    usage: Sequence[UsageRow] = (),
) -> list[StepView]:
    """Every task step of the run, by ``cmd``; ``usage``: the run's ledger rows grouped
    by attempt (``Store.gateway_usage`` with ``group_by="attempt"``)."""
    steps: dict[int, StepView] = {}
    lost: list[tuple[int, str]] = []  # (seq, worker) of attempts lost with their worker
    activations: list[tuple[int, str]] = []  # (seq, worker) of activation markers
    for e in events:
        if isinstance(e, ev.TaskScheduled):
            steps[e.cmd] = StepView(
                cmd=e.cmd,
                name=e.name,
                operation_id=e.operation_id or f"op-{run_id}-{e.cmd}",
                scheduled_at=e.at,
                scheduled_seq=e.seq,
                args=list(e.args),
                kwargs=dict(e.kwargs),
                retries=e.retries,
                timeout=e.timeout,
            )
        elif isinstance(e, ev.ActivationCompleted):
            activations.append((e.seq, e.worker))
        elif isinstance(e, ev.TaskAttemptFailed | ev.TaskCompleted | ev.TaskFailed):
            step = steps.get(e.cmd)
            if step is None:
                continue
            if isinstance(e, ev.TaskAttemptFailed):
                step.attempts.append(_failed_attempt(e))
                step.status = "retrying" if e.retry_at is not None else step.status
                if e.reason == "worker_lost":
                    lost.append((e.seq, e.worker))
            elif isinstance(e, ev.TaskCompleted):
                step.attempts.append(
                    AttemptView(
                        attempt=e.attempt,
                        worker=e.worker,
                        started_at=e.started_at,
                        ended_at=e.at,
                        outcome="completed",
                        seq=e.seq,
                    )
                )
                step.status, step.output, step.ended_at = "completed", e.result, e.at
                step.completed_by, step.completed_seq = e.worker, e.seq
            else:
                # An attempt that raised UncertainOutcome: the step waits for a review.
                status = "uncertain" if e.reason == "uncertain" else "failed"
                step.status, step.error, step.ended_at = status, _error(e.error), e.at
                step.fail_reason, step.failed_seq = e.reason, e.seq
        elif isinstance(e, ev.TaskCancelRequested):
            step = steps.get(e.cmd)
            if step is not None and step.status not in ("completed", "failed", "uncertain"):
                step.status, step.ended_at = "cancelled", e.at
        elif isinstance(e, ev.MemoryCommitted):
            step = steps.get(e.cmd)
            if step is not None:
                step.memory.append(
                    MemoryWrite(e.volume, e.version, e.ref, list(e.paths), e.attempt, e.seq)
                )
    for row in tasks:
        step = steps.get(row.cmd)
        if step is None or row.status != "running":
            continue
        if not any(a.attempt == row.attempt for a in step.attempts):
            step.attempts.append(
                AttemptView(
                    attempt=row.attempt,
                    worker=row.lease_owner or "",
                    started_at=row.started_at,
                    ended_at=None,
                    outcome="running",
                )
            )
        step.status = "running"
    killed = {
        str(k.detail.get("worker_id")): k.actor_id for k in kills if k.action == "worker.kill"
    }
    for step in steps.values():
        for a in step.attempts:
            # A loss recorded before causes were kept: the audit log may know.
            if a.outcome == "worker_lost" and a.cause == "worker_lost" and a.worker in killed:
                a.cause, a.killed_by = "killed_by_request", killed[a.worker]
                a.cause_text, a.counted = f"worker killed on request by {a.killed_by}", True
        _reuse(step, lost, activations)
    _add_usage(steps, usage)
    return [steps[cmd] for cmd in sorted(steps)]


def _add_usage(steps: dict[int, StepView], rows: Sequence[UsageRow]) -> None:
    for row in rows:
        step = steps.get(row.step) if row.step is not None else None
        if step is None:
            continue
        step.usage = step.usage or StepUsage()
        step.usage.add(row)
        for attempt in step.attempts:
            if attempt.attempt == row.attempt:
                attempt.usage = attempt.usage or StepUsage()
                attempt.usage.add(row)


def _failed_attempt(e: ev.TaskAttemptFailed) -> AttemptView:
    view = AttemptView(
        attempt=e.attempt,
        worker=e.worker,
        started_at=e.started_at,
        ended_at=e.at,
        outcome=e.reason,
        error=_error(e.error),
        cause=e.cause or e.reason,
        retry_at=e.retry_at,
        cause_text=worker_stops.describe(e.reason, e.cause, e.actor, e.via) or _not_retried(e),
        seq=e.seq,
    )
    if e.cause == worker_stops.KILLED_BY_REQUEST:
        view.killed_by = e.actor
    if e.reason in ("worker_lost", "released"):
        view.via = e.via
        view.counted = worker_stops.counts_as_loss(e.reason, e.cause)
    return view


def _not_retried(e: ev.TaskAttemptFailed) -> str | None:
    """Why an attempt the task's retry rules stopped was not retried (``retry_policy``)."""
    return retry_policy.describe(e.cause, e.error.type) if e.reason == NON_RETRYABLE else None


def _reuse(step: StepView, lost: list[tuple[int, str]], activations: list[tuple[int, str]]) -> None:
    if step.completed_seq is None or not step.completed_by:
        return
    died = [seq for seq, worker in lost if worker == step.completed_by and seq > step.completed_seq]
    if not died:
        return
    for seq, worker in activations:
        if seq > died[0] and worker and worker != step.completed_by:
            step.reused_output, step.reused_by = True, worker
            return


def usage_query(run_id: str) -> UsageQuery:
    """The ledger read that :func:`build_steps` takes as ``usage``: every call of the
    run, by attempt."""
    return UsageQuery(
        since=0.0, until=_FOREVER, group_by="attempt", run_id=run_id, limit=MAX_POINTS
    )


def page(steps: list[StepView], offset: int, limit: int) -> StepsPage:
    """Steps ``offset`` to ``offset + limit``."""
    chunk = steps[offset : offset + limit]
    more = offset + limit < len(steps)
    return StepsPage(chunk, len(steps), offset + limit if more else None)
