"""A run's history as a timeline: steps with their attempts, timers, messages.

:func:`build` folds the events into :class:`Timeline`; :func:`steps_table` and
:func:`render` draw it with rich (``keepgoing show``, ``keepgoing run --wait``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from keepgoing._history import events as ev
from keepgoing._payload import dumps
from keepgoing._store.stops import counts_as_loss, describe
from keepgoing._store.transitions import NON_RETRYABLE
from keepgoing._workflow import retry_policy
from keepgoing.cli._common import add_row

__all__ = ["Attempt", "Step", "Timeline", "build", "render", "steps_table"]

_STYLE = {
    "completed": "green",
    "failed": "red",
    "uncertain": "magenta",
    "cancelled": "yellow",
    "retrying": "yellow",
    "running": "cyan",
    "scheduled": "dim",
    "blocked": "red",
    "continued": "blue",
    "waiting_for_review": "magenta",
}


@dataclass
class Attempt:
    number: int
    worker: str
    started_at: float | None
    ended_at: float
    outcome: str  # "ok" | "error" | "timeout" | "worker_lost" | "released"
    error: str = ""
    #: Why its worker stopped, in words, for a lost or released attempt.
    why: str = ""

    @property
    def duration(self) -> float | None:
        return None if self.started_at is None else max(0.0, self.ended_at - self.started_at)


@dataclass
class Step:
    cmd: int
    name: str
    scheduled_at: float
    retries: int
    status: str = "scheduled"
    attempts: list[Attempt] = field(default_factory=list)
    error: str = ""
    retry_at: float | None = None


@dataclass
class Timeline:
    workflow: str = ""
    workflow_id: str = ""
    run_id: str = ""
    started_at: float = 0.0
    status: str = "running"
    steps: dict[int, Step] = field(default_factory=dict)
    notes: list[tuple[float, str, str]] = field(default_factory=list)  # (at, kind, text)
    ended_at: float | None = None
    outcome: str = ""
    code_versions: list[str] = field(default_factory=list)  # oldest first
    waiting_for: str = ""

    def saw_version(self, version: str) -> None:
        if version and version not in self.code_versions:
            self.code_versions.append(version)


def _error(info: ev.ErrorInfo | None) -> str:
    return f"{info.type}: {info.message}" if info is not None else ""


def _short(value: Any, limit: int = 60) -> str:
    text = dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build(history: list[ev.Event]) -> Timeline:
    t = Timeline()
    for e in history:
        _apply(t, e)
    return t


def _apply(t: Timeline, e: ev.Event) -> None:  # noqa: PLR0915 (one branch per event type)
    note = t.notes.append
    if isinstance(e, ev.WorkflowStarted):
        t.workflow, t.workflow_id, t.run_id, t.started_at = (
            e.workflow_name,
            e.workflow_id,
            e.run_id,
            e.at,
        )
        t.saw_version(e.code_version)
        note((e.at, "start", f"started with {_short(e.input.get('kwargs') or e.input)}"))
    elif isinstance(e, ev.ActivationCompleted):
        t.saw_version(e.code_version)
        if t.status == "blocked":  # a retry replayed: the run goes on
            t.status, t.outcome = "running", ""
            note((e.at, "code", f"replayed by code {e.code_version or '?'}; running again"))
    elif isinstance(e, ev.TaskScheduled):
        t.steps[e.cmd] = Step(e.cmd, e.name, e.at, e.retries)
    elif isinstance(e, ev.TaskAttemptFailed):
        step = t.steps.get(e.cmd) or t.steps.setdefault(e.cmd, Step(e.cmd, e.name, e.at, 0))
        why = describe(e.reason, e.cause, e.actor, e.via) or ""
        if e.reason == NON_RETRYABLE:
            why = retry_policy.describe(e.cause, e.error.type)
        if why and e.reason == "worker_lost" and not counts_as_loss(e.reason, e.cause):
            why += " (not counted against max_worker_losses)"
        elif why and e.reason == "released" and counts_as_loss(e.reason, e.cause):
            why += " (counted against max_worker_losses)"
        step.attempts.append(
            Attempt(e.attempt, e.worker, e.started_at, e.at, e.reason, _error(e.error), why)
        )
        step.status, step.retry_at = "retrying", e.retry_at
    elif isinstance(e, ev.TaskCompleted):
        step = t.steps.setdefault(e.cmd, Step(e.cmd, "?", e.at, 0))
        step.attempts.append(Attempt(e.attempt, e.worker, e.started_at, e.at, "ok"))
        step.status, step.retry_at = "completed", None
    elif isinstance(e, ev.TaskFailed):
        step = t.steps.setdefault(e.cmd, Step(e.cmd, e.name, e.at, 0))
        # An uncertain outcome is not a failure: the step waits for a reviewer's decision.
        status = "uncertain" if e.reason == "uncertain" else "failed"
        step.status, step.error, step.retry_at = status, _error(e.error), None
        if e.reason == NON_RETRYABLE and step.attempts:  # why it ended the step at once
            step.error = f"{step.attempts[-1].why}: {step.error}"
    elif isinstance(e, ev.TaskCancelRequested):
        if e.cmd in t.steps:
            t.steps[e.cmd].status = "cancelled"
    elif isinstance(e, ev.TimerStarted):
        note((e.at, "timer", f"timer {e.cmd} set for +{e.fire_at - t.started_at:.1f}s"))
    elif isinstance(e, ev.TimerFired):
        note((e.at, "timer", f"timer {e.cmd} fired"))
    elif isinstance(e, ev.TimerCancelled):
        note((e.at, "timer", f"timer {e.cmd} cancelled"))
    elif isinstance(e, ev.MessageWaitStarted):
        note((e.at, "message", f"waits for message {e.name!r}"))
    elif isinstance(e, ev.MessageReceived):
        who = f"{e.sender_kind}:{e.sender_id}"
        note((e.at, "message", f"message {e.name!r} from {who}: {_short(e.payload)}"))
    elif isinstance(e, ev.MessageSent):
        note((e.at, "message", f"sent {e.name!r} to {e.workflow_id}"))
    elif isinstance(e, ev.EventWaitStarted):
        note((e.at, "event", f"waits for event {e.event_type} / {e.correlation_id}"))
    elif isinstance(e, ev.EventReceived):
        note((e.at, "event", f"event {e.event_type} / {e.correlation_id}: {_short(e.payload)}"))
    elif isinstance(e, ev.ChildStarted):
        note((e.at, "child", f"starts child {e.workflow_name} ({e.workflow_id})"))
    elif isinstance(e, ev.ChildEnded):
        note((e.at, "child", f"child {e.workflow_id} {e.status}"))
    elif isinstance(e, ev.MemoryCommitted):
        wrote = f"{e.volume} v{e.version} ({e.ref}): {', '.join(e.paths) or 'no change'}"
        note((e.at, "memory", f"step {e.cmd} attempt {e.attempt} committed {wrote}"))
    elif isinstance(e, ev.CancelRequested):
        note((e.at, "cancel", f"cancel requested by {e.actor_kind}:{e.actor_id}: {e.reason}"))
    elif isinstance(e, ev.WorkflowCompleted):
        t.status, t.ended_at, t.outcome = "completed", e.at, f"result {_short(e.result, 200)}"
    elif isinstance(e, ev.WorkflowFailed):
        t.status, t.ended_at, t.outcome = "failed", e.at, _error(e.error)
    elif isinstance(e, ev.WorkflowCancelled):
        t.status, t.ended_at, t.outcome = "cancelled", e.at, e.reason
    elif isinstance(e, ev.WorkflowContinuedAsNew):
        t.status, t.ended_at, t.outcome = "continued", e.at, f"continued as {e.new_run_id}"
    elif isinstance(e, ev.WorkflowBlocked):
        t.saw_version(e.code_version)
        t.status, t.outcome = "blocked", e.reason
        note((e.at, "code", f"blocked: code {e.code_version or '?'} does not replay the history"))


def _offset(t: Timeline, at: float | None) -> str:
    return "" if at is None else f"+{max(0.0, at - t.started_at):.2f}s"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}s"


def steps_table(t: Timeline, *, title: str | None = None) -> Table:
    """One row per step: status, attempts (retries), worker, duration, error."""
    table = Table(title=title, show_lines=False, expand=False)
    for column in ("#", "step", "status", "attempts", "worker", "duration", "at", "error"):
        table.add_column(column, overflow="fold")
    for step in t.steps.values():
        last = step.attempts[-1] if step.attempts else None
        retried = max(0, len(step.attempts) - 1)
        attempts = f"{len(step.attempts)}" + (f" ({retried} retried)" if retried else "")
        error = step.error or next(
            (a.why or a.error for a in reversed(step.attempts) if a.why or a.error), ""
        )
        add_row(
            table,
            str(step.cmd),
            step.name,
            Text(step.status, style=_STYLE.get(step.status, "")),
            attempts,
            last.worker if last else "",
            _seconds(last.duration if last else None),
            _offset(t, step.scheduled_at),
            error,
        )
    return table


def _attempts_table(t: Timeline) -> Table | None:
    rows = [(s, a) for s in t.steps.values() for a in s.attempts if len(s.attempts) > 1]
    if not rows:
        return None
    table = Table(title="Attempts of retried steps")
    for column in ("step", "attempt", "outcome", "worker", "duration", "ended", "why"):
        table.add_column(column, overflow="fold")
    for step, a in rows:
        style = "green" if a.outcome == "ok" else "yellow"
        add_row(
            table,
            f"{step.cmd} {step.name}",
            str(a.number),
            Text(a.outcome, style=style),
            a.worker,
            _seconds(a.duration),
            _offset(t, a.ended_at),
            a.why or a.error,
        )
    return table


def render(t: Timeline) -> RenderableType:
    """The whole timeline: header, steps, attempts of retried steps, other events."""
    header = Text.assemble(
        (f"{t.workflow} ", "bold"),
        f"workflow id {t.workflow_id}  run {t.run_id}  ",
        (t.status, _STYLE.get(t.status, "")),
    )
    parts: list[RenderableType] = [header]
    if t.code_versions:
        parts.append(Text(f"code versions: {', '.join(t.code_versions)}", style="dim"))
    if t.waiting_for:
        parts.append(Text(t.waiting_for, style="yellow"))
    parts.append(steps_table(t, title="Steps"))
    attempts = _attempts_table(t)
    if attempts is not None:
        parts.append(attempts)
    if t.notes:
        notes = Table(title="Timers, messages and events")
        for column in ("at", "kind", "what"):
            notes.add_column(column, overflow="fold")
        for at, kind, text in t.notes:
            add_row(notes, _offset(t, at), kind, text)
        parts.append(notes)
    if t.outcome:
        took = f" after {_seconds(t.ended_at - t.started_at)}" if t.ended_at else ""
        parts.append(Text(f"{t.status}{took}: {t.outcome}", style=_STYLE.get(t.status, "")))
    return Group(*parts)
