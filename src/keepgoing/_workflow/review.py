"""Review of uncertain outcomes: what a workflow does when a step's write may have happened.

A task raises :class:`~keepgoing.UncertainOutcome` when it sent a write and
cannot tell whether it was applied. The store records the step as failed for
reason ``"uncertain"`` without retrying it. At the step's ``await`` the
workflow then waits, durably and without holding a worker, for the message
``review:<operation id>`` whose payload is a decision:

* ``{"decision": "approve", "cmd": N, "result": ...}``: the step returns
  ``result`` (what the reviewer found the write did);
* ``{"decision": "retry", "cmd": N}``: the step runs again as a new step that
  keeps the operation id (``operation_id()`` and ``reconcile=`` see the same id);
* ``{"decision": "fail", "cmd": N, "reason": "..."}``: ``TaskFailedError``
  (``reason="reviewed"``) at the await.

``cmd`` names the round the decision is for (the step that was uncertain), so
a decision sent twice cannot settle a later round. A message that is not a
decision for the current round is passed over and the wait goes on. The rules
here are shared with the operation status (``keepgoing._views.operations``).

Decisions reach the run only through the review path (``review_operation``:
one conditional store write that accepts a decision once, while the round is
uncertain and waited for); the store refuses any other message whose name
starts with ``review:``. When the wait ends without a decision (a timeout
around the await, a cancellation), the workflow records ``ReviewAbandoned``
for the round, and the store refuses decisions on it from then on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from keepgoing._history import events as ev
from keepgoing._runtime.instance import TaskSpec, WorkflowInstance
from keepgoing._workflow.messages import WorkflowMessage, wait_for_message
from keepgoing.errors import TaskFailedError

__all__ = [
    "DECISIONS",
    "Decision",
    "UNCERTAIN",
    "parse_decision",
    "review_message",
    "settle_uncertain",
]

#: The reason of a ``TaskFailed`` whose attempt raised ``UncertainOutcome`` (store-written).
UNCERTAIN = "uncertain"
DECISIONS = ("approve", "retry", "fail")
_PREFIX = ev.REVIEW_PREFIX


@dataclass(frozen=True)
class Decision:
    """A reviewer's decision on one uncertain round of an operation."""

    decision: str
    cmd: int
    result: Any = None
    reason: str = ""
    sender_kind: str = ""
    sender_id: str = ""


def review_message(operation_id: str) -> str:
    """The name of the message that carries decisions on ``operation_id``."""
    return _PREFIX + operation_id


def parse_decision(
    payload: Any, cmd: int, sender_kind: str = "", sender_id: str = ""
) -> Decision | None:
    """The decision ``payload`` holds for round ``cmd``, or None if it holds none."""
    if not isinstance(payload, dict) or payload.get("decision") not in DECISIONS:
        return None
    round_ = payload.get("cmd")
    if isinstance(round_, bool) or round_ != cmd:
        return None
    reason = payload.get("reason")
    return Decision(
        decision=payload["decision"],
        cmd=cmd,
        result=payload.get("result"),
        reason=reason if isinstance(reason, str) else "",
        sender_kind=sender_kind,
        sender_id=sender_id,
    )


async def _decision(operation_id: str, cmd: int) -> Decision:
    while True:
        message: WorkflowMessage = await wait_for_message(review_message(operation_id))
        found = parse_decision(message.payload, cmd, message.sender_kind, message.sender_id)
        if found is not None:
            return found


async def settle_uncertain(
    instance: WorkflowInstance, spec: TaskSpec, cmd: int, failed: TaskFailedError
) -> Any:
    """Wait for reviews of step ``cmd`` (scheduled from ``spec``) until one settles it.

    A direct in-process call has no address a review could be sent to: there the
    uncertain failure is raised at the await as it is.
    """
    if instance.local:
        raise failed
    operation_id = spec.operation_id or f"op-{instance.run_id}-{cmd}"
    again = dataclasses.replace(spec, operation_id=operation_id)
    while True:
        try:
            found = await _decision(operation_id, cmd)
        except BaseException:
            # A timeout around the await, a cancelled branch or run: the workflow no
            # longer waits, and the store refuses decisions on this round from now on.
            instance.mark(ev.ReviewAbandoned(cmd=cmd, operation_id=operation_id))
            raise
        if found.decision == "approve":
            return found.result
        if found.decision == "fail":
            why = f": {found.reason}" if found.reason else ""
            raise TaskFailedError(
                spec.name,
                failed.error_type,
                f"failed by reviewer {found.sender_kind}:{found.sender_id} after an "
                f"uncertain outcome ({failed.message}){why}",
                failed.attempts,
                reason="reviewed",
            )
        cmd, future = instance.schedule_task(again)
        try:
            return await future
        except TaskFailedError as exc:
            if exc.reason != UNCERTAIN:
                raise
            failed = exc
