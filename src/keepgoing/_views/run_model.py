"""A run's history as the web UI draws it: steps with their attempts, waits, worker
losses, messages, children, memory writes, review decisions and the run's problems.

The server folds; the browser only draws (``GET /api/v1/runs/{id}/model`` for a
stored run, ``POST /api/v1/histories/fold`` for a history file opened in the replay
page). Pure: the same events always give the same model, so replay is a prefix.

The steps are the shared fold's (``_views/steps.py``, which ``GET .../steps`` and
``keepgoing show`` serve), put in the browser's terms; the run's header, its waits,
messages, children and memory writes are read here. The words and rules are the
ones the rest of keepgoing uses: why a worker stopped
is ``_store/worker_stops.py``'s :func:`~keepgoing._store.worker_stops.describe`, a rate-limited
attempt is ``_store/trouble.py``'s :func:`~keepgoing._store.trouble.is_rate_limited`,
and a review decision is ``_workflow/review.py``'s
:func:`~keepgoing._workflow.review.parse_decision`, taken in send order as the
workflow takes them. The keys are the browser's (camelCase).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from keepgoing._history import events as ev
from keepgoing._history.codec import encode
from keepgoing._store.trouble import is_rate_limited
from keepgoing._views.steps import StepView, build_steps
from keepgoing._workflow.review import parse_decision

__all__ = ["build_model", "problems", "retry_kind"]

Json = dict[str, Any]

_WAIT_START = {
    "TimerStarted": "timer",
    "MessageWaitStarted": "message",
    "EventWaitStarted": "event",
    "ChildStarted": "child",
}
_DECIDED = {"approve": "approved", "retry": "sent back to run again", "fail": "failed"}
_PROBLEM_TEXT = {
    "worker_lost": "worker lost",
    "rate_limited": "rate-limited (429), retried",
    "error": "error",
    "timeout": "timed out",
    "uncertain": "uncertain outcome",
}


def retry_kind(reason: str, error: Json | None) -> str:
    """What kind of retry an ended attempt is: completed, rate_limited (a 429), error,
    timeout, worker_lost, released or uncertain. Each has its own colour and shape."""
    if reason == "error" and error:
        info = ev.ErrorInfo(
            type=str(error.get("type") or ""), message=str(error.get("message") or "")
        )
        if is_rate_limited(info):
            return "rate_limited"
    return reason


class _Fold:
    """One pass over the events; :meth:`model` is the result."""

    def __init__(self) -> None:
        self.run: Json = {
            "workflowId": "",
            "runId": "",
            "name": "",
            "input": {},
            "queue": "",
            "status": "running",
            "startedAt": None,
            "endedAt": None,
            "result": None,
            "error": None,
            "blockedReason": None,
            "codeVersion": "",
        }
        self.steps: list[Json] = []
        self.waits: list[Json] = []
        self.wait_by_key: dict[str, Json] = {}
        self.open_message_waits: list[Json] = []
        self.losses: list[Json] = []
        self.messages: list[Json] = []
        self.sent: list[Json] = []
        self.children: list[Json] = []
        self.memory: list[Json] = []
        self.activations: list[Json] = []
        self.last: Json | None = None

    def apply(self, e: Json) -> None:
        self.last = e
        handler = getattr(self, f"_on_{e['type']}", None)
        if handler is not None:
            handler(e)
        kind = _WAIT_START.get(e["type"])
        if kind is not None:
            self._wait(kind, e)
        if self.run["status"] == "blocked" and e["type"] == "ActivationCompleted":
            self.run["status"] = "running"

    # -- the run ---------------------------------------------------------------------
    def _on_WorkflowStarted(self, e: Json) -> None:
        self.run.update(
            workflowId=e["workflow_id"],
            runId=e["run_id"],
            name=e["workflow_name"],
            input=e.get("input"),
            queue=e.get("task_queue"),
            startedAt=e["at"],
            codeVersion=e.get("code_version"),
        )

    def _on_ActivationCompleted(self, e: Json) -> None:
        self.activations.append(
            {
                "seq": e["seq"],
                "at": e["at"],
                "worker": e.get("worker"),
                "sawUpto": e.get("saw_upto"),
            }
        )

    def _on_WorkflowCompleted(self, e: Json) -> None:
        self.run.update(status="completed", result=e.get("result"), endedAt=e["at"])

    def _on_WorkflowFailed(self, e: Json) -> None:
        self.run.update(status="failed", error=e.get("error"), endedAt=e["at"])

    def _on_WorkflowCancelled(self, e: Json) -> None:
        self.run.update(status="cancelled", endedAt=e["at"])

    def _on_WorkflowContinuedAsNew(self, e: Json) -> None:
        self.run.update(status="continued", endedAt=e["at"])

    def _on_WorkflowBlocked(self, e: Json) -> None:
        self.run.update(status="blocked", blockedReason=e.get("reason"))

    def _on_MemoryCommitted(self, e: Json) -> None:
        write = {
            "volume": e["volume"],
            "version": e["version"],
            "paths": e.get("paths", []),
            "ref": e.get("ref", "main"),
            "cmd": e.get("cmd", 0),
            "attempt": e.get("attempt", 0),
            "at": e["at"],
            "seq": e["seq"],
        }
        self.memory.append(write)

    # -- messages, children, waits ---------------------------------------------------
    def _on_MessageReceived(self, e: Json) -> None:
        kind, sender = e.get("sender_kind", ""), e.get("sender_id", "")
        message = {
            "name": e["name"],
            "payload": e.get("payload"),
            "sender": f"{kind}:{sender}",
            "senderKind": kind,
            "senderId": sender,
            "at": e["at"],
            "seq": e["seq"],
            "id": e.get("message_id"),
        }
        self.messages.append(message)
        for i, wait in enumerate(self.open_message_waits):
            if wait["name"] == e["name"]:
                del self.open_message_waits[i]
                _end_wait(wait, e["at"], f"received from {kind} {sender}")
                break

    def _on_MessageSent(self, e: Json) -> None:
        self.sent.append(
            {
                "cmd": e["cmd"],
                "to": e["workflow_id"],
                "name": e["name"],
                "payload": e.get("payload"),
                "at": e["at"],
                "seq": e["seq"],
                "delivered": None,
            }
        )

    def _on_MessageDelivered(self, e: Json) -> None:
        found = next((m for m in self.sent if m["cmd"] == e["cmd"]), None)
        if found is not None:
            error = e.get("error")
            found["delivered"] = f"not delivered: {error['message']}" if error else "delivered"

    def _on_ChildRunStarted(self, e: Json) -> None:
        child = next((c for c in self.children if c["cmd"] == e["cmd"]), None)
        if child is not None:
            child.update(runId=e.get("run_id"), error=e.get("error"))

    def _on_ChildEnded(self, e: Json) -> None:
        child = next((c for c in self.children if c["cmd"] == e["cmd"]), None)
        if child is not None:
            child.update(status=e["status"], result=e.get("result"), endedAt=e["at"])
        self._end(f"child:{e['cmd']}", e["at"], f"child {e['status']}")

    def _on_TimerFired(self, e: Json) -> None:
        self._end(f"timer:{e['cmd']}", e["at"], "fired")

    def _on_TimerCancelled(self, e: Json) -> None:
        self._end(f"timer:{e['cmd']}", e["at"], "cancelled")

    def _on_EventReceived(self, e: Json) -> None:
        self._end(f"event:{e['cmd']}", e["at"], f"event {e.get('event_id')}")

    def _on_EventWaitCancelled(self, e: Json) -> None:
        self._end(f"event:{e['cmd']}", e["at"], "cancelled")

    def _end(self, key: str, at: float, outcome: str) -> None:
        wait = self.wait_by_key.get(key)
        if wait is not None:
            _end_wait(wait, at, outcome)

    def _wait(self, kind: str, e: Json) -> None:
        wait = {
            "kind": kind,
            "cmd": e["cmd"],
            "start": e["at"],
            "end": None,
            "seq": e["seq"],
            "label": _wait_label(e),
            "planned": e.get("fire_at") if e["type"] == "TimerStarted" else e.get("deadline"),
            "outcome": None,
            "name": e.get("name"),
        }
        self.waits.append(wait)
        self.wait_by_key[f"{kind}:{e['cmd']}"] = wait
        if kind == "message":
            self.open_message_waits.append(wait)
        if kind == "child":
            self.children.append(
                {
                    "cmd": e["cmd"],
                    "workflowId": e["workflow_id"],
                    "name": e["workflow_name"],
                    "input": e.get("input"),
                    "status": "running",
                    "runId": None,
                }
            )

    # -- the end ---------------------------------------------------------------------
    def take_steps(self, views: list[StepView]) -> None:
        """The steps of the shared fold (``steps.py``), in the browser's terms."""
        for index, view in enumerate(views):
            memory = [w for w in self.memory if w["cmd"] == view.cmd]
            self.steps.append(_step(view, index, memory))
        for step in self.steps:
            for a in step["attempts"]:
                if a["outcome"] == "worker_lost":
                    loss = {"worker": a["worker"], "at": a["end"], "seq": a["seq"]}
                    self.losses.append({**loss, "cmd": step["cmd"], "step": step["name"]})
        self.losses.sort(key=lambda loss: loss["seq"])
        # Decisions are matched in send order, each round taking the first that decides it.
        uncertain = [s for s in self.steps if s["failReason"] == "uncertain"]
        for message in self.messages:
            _settle_review(uncertain, message)

    def model(self, now: float | None, count: int, first: float | None) -> Json:
        # A wait with no outcome yet stays open up to the run's end (or now, while it runs).
        last_at = self.last["at"] if self.last is not None else None
        end = self.run["endedAt"] if self.run["endedAt"] is not None else now
        end = end if end is not None else last_at
        for step in self.steps:
            if step["status"] in ("scheduled", "retrying"):
                prev = step["attempts"][-1] if step["attempts"] else None
                start = step["scheduledAt"]
                if prev is not None:
                    start = prev["retryAt"] if prev.get("retryAt") is not None else prev["end"]
                if self.run["endedAt"] is None:
                    step["current"] = {"start": start, "end": end, "outcome": "running"}
                    if step["status"] == "scheduled" and not step["attempts"]:
                        step["status"] = "running"
            ended = step["endedAt"]
            step["duration"] = ended - step["scheduledAt"] if ended is not None else None
            review = step.get("review")
            if review is not None:
                said = f": {review['reason']}" if review["reason"] else ""
                review["text"] = f"{_DECIDED[review['decision']]} by {review['by']}{said}"
        for wait in self.waits:
            if wait["end"] is None:
                wait["openEnd"] = end
        _mark_reused(self.steps, self.losses, self.activations)
        model: Json = {
            "run": self.run,
            "steps": self.steps,
            "waits": self.waits,
            "losses": self.losses,
            "messages": self.messages,
            "sent": self.sent,
            "children": self.children,
            "memory": self.memory,
            "activations": self.activations,
            "eventCount": count,
            "first": first,
            "last": end,
        }
        model["problems"] = problems(model)
        return model


def build_model(
    events: Sequence[ev.Event],
    *,
    now: float | None = None,
    encoded: Sequence[Json] | None = None,
) -> Json:
    """The UI's model of the run whose history is ``events``; ``now``: the time an open
    run's running step and open waits are drawn up to (None: its last event's);
    ``encoded``: the events as :func:`~keepgoing._history.codec.encode` gives them,
    when the caller has them already."""
    fold = _Fold()
    for body in encoded if encoded is not None else [encode(e) for e in events]:
        fold.apply(body)
    fold.take_steps(build_steps(fold.run["runId"], events))
    return fold.model(now, len(events), events[0].at if events else None)


def _step(view: StepView, index: int, memory: list[Json]) -> Json:
    attempts: list[Json] = []
    for a in view.attempts:
        start = a.started_at
        if start is None:
            start = attempts[-1]["end"] if attempts else view.scheduled_at
        drawn: Json = {"n": a.attempt, "worker": a.worker, "start": start, "end": a.ended_at}
        if a.outcome == "completed":
            drawn.update(outcome="completed", error=None, seq=a.seq, kind="completed")
        else:
            drawn.update(outcome=a.outcome, error=a.error, retryAt=a.retry_at, seq=a.seq)
            # ``cause`` as recorded: None where the attempt's event named none.
            drawn["cause"] = None if a.cause == a.outcome else a.cause
            drawn.update(why=a.cause_text, kind=retry_kind(a.outcome, a.error))
        attempts.append(drawn)
    status = view.status
    last = view.attempts[-1] if view.attempts else None
    if status in ("scheduled", "retrying") and last is not None and last.retry_at is None:
        status = "failing"  # its last attempt failed and no retry is due: TaskFailed follows
    return {
        "cmd": view.cmd,
        "name": view.name,
        "args": view.args,
        "kwargs": view.kwargs,
        "retries": view.retries,
        "timeout": view.timeout,
        "scheduledAt": view.scheduled_at,
        "scheduledSeq": view.scheduled_seq,
        "attempts": attempts,
        "status": status,
        "output": view.output,
        "error": view.error,
        "memory": memory,
        "reused": None,
        "endedAt": view.ended_at,
        "completedSeq": view.completed_seq,
        "failReason": view.fail_reason,
        "failedSeq": view.failed_seq,
        "operationId": view.operation_id,
        "index": index,
    }


def _end_wait(wait: Json, at: float, outcome: str) -> None:
    wait["end"], wait["outcome"] = at, outcome


def _clock(at: Any) -> str:
    try:
        return datetime.datetime.fromtimestamp(float(at), datetime.UTC).strftime("%H:%M:%S")
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _wait_label(e: Json) -> str:
    kind = e["type"]
    if kind == "TimerStarted":
        return f"timer until {_clock(e.get('fire_at'))}Z"
    if kind == "MessageWaitStarted":
        return f'waiting for message "{e["name"]}"'
    if kind == "EventWaitStarted":
        return f"waiting for event {e['event_type']}/{e['correlation_id']}"
    if kind == "ChildStarted":
        return f"child {e['workflow_name']} ({e['workflow_id']})"
    return str(kind)


def _mark_reused(steps: list[Json], losses: list[Json], activations: list[Json]) -> None:
    """A step finished before a worker was lost, and the worker that took over replayed
    the history: it reused the saved output instead of running the step again."""
    for loss in losses:
        replacement = next(
            (
                a
                for a in activations
                if a["seq"] > loss["seq"] and a["worker"] and a["worker"] != loss["worker"]
            ),
            None,
        )
        if replacement is None:
            continue
        for step in steps:
            done = step["completedSeq"]
            if done is not None and done < loss["seq"] and not step["reused"]:
                step["reused"] = {
                    "by": replacement["worker"],
                    "lost": loss["worker"],
                    "at": replacement["at"],
                }


def _settle_review(uncertain: list[Json], message: Json) -> None:
    """A review decision for an uncertain step: the first ``review:<operation id>``
    message whose payload decides this round, in send order."""
    if not message["name"].startswith("review:") or message.get("decided"):
        return
    for step in uncertain:
        if step.get("review") or message["name"] != f"review:{step['operationId']}":
            continue
        decision = parse_decision(message["payload"], step["cmd"])
        if decision is None:
            continue
        message["decided"] = True
        step["review"] = {
            "decision": decision.decision,
            "by": f"{message['senderKind']} {message['senderId']}",
            "reason": decision.reason,
            "result": decision.result,
            "at": message["at"],
            "seq": message["seq"],
        }
        if decision.decision == "approve":
            step.update(status="approved", output=decision.result)
        elif decision.decision == "fail":
            step["status"] = "failed"
        else:
            step["status"] = "sent_back"
        return


def problems(model: Json) -> list[Json]:
    """The run's problems, in the order a person should see them: each worker loss first
    (one stop per lost worker, with every step it took down), then the steps waiting
    for a review, then every other failed attempt in order (one stop per step and kind).
    Each stop names the step to open (``cmd``), the steps it covers, and ``seq``: the
    event after which replay shows it resolved (the retry that completed, or the
    failure)."""
    found: list[Json] = []
    by_worker: dict[str, Json] = {}

    def done(step: Json) -> Any:
        return step["completedSeq"] if step["completedSeq"] is not None else step.get("failedSeq")

    for loss in model["losses"]:
        step = next((s for s in model["steps"] if s["cmd"] == loss["cmd"]), None)
        attempt = (
            next((a for a in step["attempts"] if a["seq"] == loss["seq"]), None) if step else None
        )
        stop = by_worker.get(loss["worker"])
        if stop is None:
            why = attempt["why"] if attempt is not None else "worker lost"
            stop = {
                "kind": "worker_lost",
                "worker": loss["worker"],
                "cmd": loss["cmd"],
                "cmds": [],
                "names": [],
                "seq": loss["seq"],
                "at": loss["at"],
                "why": why,
            }
            by_worker[loss["worker"]] = stop
            found.append(stop)
        stop["cmds"].append(loss["cmd"])
        stop["names"].append(loss["step"])
        resolved = done(step) if step is not None else None
        stop["seq"] = max(stop["seq"], resolved if resolved is not None else loss["seq"])
    for stop in found:
        where = f" ({stop['worker']})" if stop["worker"] else ""
        stop["label"] = f"{stop['why']}: {', '.join(stop['names'])}{where}"
    review: list[Json] = []
    others: list[Json] = []
    for step in model["steps"]:
        if step.get("failReason") == "uncertain":
            said = step["review"]["text"] if step.get("review") else None
            review.append(
                {
                    "kind": "uncertain",
                    "cmd": step["cmd"],
                    "cmds": [step["cmd"]],
                    "seq": step.get("failedSeq"),
                    "at": step["endedAt"],
                    "label": f"{step['name']} #{step['cmd']}: "
                    + (said or "uncertain outcome, waiting for review"),
                }
            )
        kinds: dict[str, list[Any]] = {}
        for a in step["attempts"]:
            if a["kind"] in ("rate_limited", "error", "timeout"):
                kinds.setdefault(a["kind"], [a, 0])[1] += 1
        for kind, (first, n) in kinds.items():
            resolved = done(step)
            times = f" \u00d7{n}" if n > 1 else ""  # a multiplication sign
            error = f" ({first['error']['type']})" if first.get("error") else ""
            others.append(
                {
                    "kind": kind,
                    "cmd": step["cmd"],
                    "cmds": [step["cmd"]],
                    "seq": resolved if resolved is not None else first["seq"],
                    "at": first["end"],
                    "label": f"{step['name']} #{step['cmd']}: {_PROBLEM_TEXT[kind]}{times}{error}",
                }
            )
    others.sort(key=lambda p: (p["at"], p["cmd"]))
    return [*found, *review, *others]
