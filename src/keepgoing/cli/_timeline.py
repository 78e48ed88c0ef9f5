"""A run's history as a timeline: steps with their attempts, timers, messages.

:func:`build` folds the events into :class:`Timeline`: its steps are the shared
steps view (:func:`keepgoing._views.steps.build_steps`, the fold the HTTP API and the
web UI show), and the run's header and its timers, messages and events are read
here. :func:`steps_table` and :func:`render` draw it with rich (``keepgoing show``,
``keepgoing run --wait``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from keepgoing._history import events as ev
from keepgoing._payload import dumps
from keepgoing._store.transitions import NON_RETRYABLE
from keepgoing._views.steps import AttemptView, StepView, build_steps
from keepgoing.cli._common import add_row

__all__ = ["Timeline", "as_json", "build", "render", "steps_table"]

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
class Timeline:
    workflow: str = ""
    workflow_id: str = ""
    run_id: str = ""
    started_at: float = 0.0
    status: str = "running"
    steps: dict[int, StepView] = field(default_factory=dict)
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
    t.steps = {step.cmd: step for step in build_steps(t.run_id, history)}
    return t


def _error_text(error: dict[str, Any] | None) -> str:
    return f"{error.get('type')}: {error.get('message')}" if error else ""


def _why(a: AttemptView) -> str:
    """Why a lost or released attempt's worker stopped, in words, and whether the loss
    counted against ``max_worker_losses`` where that is not what its reason says."""
    why = a.cause_text or ""
    if why and a.outcome == "worker_lost" and a.counted is False:
        why += " (not counted against max_worker_losses)"
    elif why and a.outcome == "released" and a.counted:
        why += " (counted against max_worker_losses)"
    return why


def _said(a: AttemptView) -> str:
    return _why(a) or _error_text(a.error)


def _outcome(a: AttemptView) -> str:
    return "ok" if a.outcome == "completed" else a.outcome


def _apply(t: Timeline, e: ev.Event) -> None:
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


def as_json(t: Timeline) -> dict[str, Any]:
    """The timeline as ``keepgoing show --json`` prints it: each step with its
    attempts (``outcome`` ``ok`` for the one that completed, ``error`` and ``why`` in
    words)."""
    body = dataclasses.asdict(t)
    body["steps"] = {cmd: _step_json(step) for cmd, step in t.steps.items()}
    return body


def _step_json(step: StepView) -> dict[str, Any]:
    last = step.attempts[-1] if step.attempts else None
    ended = step.status in ("completed", "failed", "uncertain")
    return {
        "cmd": step.cmd,
        "name": step.name,
        "scheduled_at": step.scheduled_at,
        "retries": step.retries,
        "status": step.status,
        "attempts": [
            {
                "number": a.attempt,
                "worker": a.worker,
                "started_at": a.started_at,
                "ended_at": a.ended_at,
                "outcome": _outcome(a),
                "error": _error_text(a.error),
                "why": _why(a),
            }
            for a in step.attempts
        ],
        "error": _step_error(step),
        "retry_at": None if ended or last is None else last.retry_at,
    }


def _step_error(step: StepView) -> str:
    """A failed step's error, led by why its last attempt was not retried, if it says."""
    error = _error_text(step.error)
    last = step.attempts[-1] if step.attempts else None
    if error and last is not None and last.outcome == NON_RETRYABLE and (why := _why(last)):
        return f"{why}: {error}"
    return error


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
        error = _step_error(step) or next(
            (said for a in reversed(step.attempts) if (said := _said(a))), ""
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
        style = "green" if a.outcome == "completed" else "yellow"
        add_row(
            table,
            f"{step.cmd} {step.name}",
            str(a.attempt),
            Text(_outcome(a), style=style),
            a.worker,
            _seconds(a.duration),
            _offset(t, a.ended_at),
            _said(a),
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
