"""Pure rules shared by every store: what happens to a task after an attempt fails.

Errors the task raises and timeouts count against ``retries``; attempts lost
with their worker count against ``max_worker_losses``, apart from ``retries``,
when the loss blames the task (``worker_stops.blames_task``: no known cause, or one
that points at the task); a loss keepgoing or its operator caused counts
against neither, and neither does an attempt a stopping worker handed back,
unless the task's own code stopped that worker (``worker_stops.BY_TASK``).
An attempt that raised ``UncertainOutcome`` (reason ``"uncertain"``) is never
retried: its write may have happened, so the step waits for a review instead.
Nor is one the task's rules say cannot succeed again (reason
``"non_retryable"``: ``NonRetryableError``, ``give_up_on``, ``retry_on``;
``_workflow/retry_policy.py``): the step fails at once.
Backoff starts at ``retry_delay``, doubles per failure, is capped, and has
+/-20% jitter. Without ``retry_delay`` a retry is due at once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from keepgoing._history.events import ErrorInfo
from keepgoing._store.worker_stops import counts_as_loss

__all__ = [
    "BACKOFF_CAP",
    "NON_RETRYABLE",
    "PARENT_ENDED",
    "OVER_BUDGET",
    "UNCERTAIN",
    "FailureDecision",
    "backoff",
    "decide_failure",
    "error_of",
    "lost_error",
    "reap_reason",
]

BACKOFF_CAP = 900.0  # 15 minutes, unless retry_delay itself is longer
PARENT_ENDED = "the parent workflow ended"  # why a child is cancelled with its parent
#: The reason of an attempt that raised ``UncertainOutcome``.
UNCERTAIN = "uncertain"
#: The reason of an attempt that raised ``BudgetExceededError``: a gateway key is over
#: one of its limits, so another attempt now would be refused the same way.
OVER_BUDGET = "budget_exceeded"

#: The reason of an attempt whose error the task's rules say is not retried.
NON_RETRYABLE = "non_retryable"
_jitter = random.Random()


@dataclass(frozen=True)
class FailureDecision:
    """``retry_at`` is None when the task has failed for good."""

    failures: int
    worker_losses: int
    retry_at: float | None
    final_message: str | None = None


def backoff(failures: int, retry_delay: float | None, *, jitter: bool = True) -> float:
    """Seconds to wait before the retry that follows the ``failures``-th failure."""
    if not retry_delay:
        return 0.0
    delay = min(retry_delay * (2 ** max(0, failures - 1)), max(BACKOFF_CAP, retry_delay))
    return float(delay * _jitter.uniform(0.8, 1.2)) if jitter else float(delay)


def decide_failure(
    *,
    reason: str,
    failures: int,
    worker_losses: int,
    retries: int,
    max_worker_losses: int,
    retry_delay: float | None,
    now: float,
    cause: str | None = None,
) -> FailureDecision:
    """Decide the fate of a task whose attempt just failed for ``reason``.

    ``failures`` and ``worker_losses`` are the counts *before* this attempt;
    ``cause`` is why the worker stopped, for a loss (``_store/worker_stops.py``).
    """
    if reason in (UNCERTAIN, NON_RETRYABLE):
        # Uncertain: the write may have happened, another attempt could apply it twice.
        # Non-retryable: the task said another attempt cannot succeed.
        return FailureDecision(failures + 1, worker_losses, None)
    if reason == OVER_BUDGET:
        # Over a key's limit: fails the step at once (never retried blindly).
        return FailureDecision(failures + 1, worker_losses, None)
    if reason in ("worker_lost", "released"):
        # A hand-back counts only when the task's own code stopped its worker.
        counted = counts_as_loss(reason, cause)
        losses = worker_losses + (1 if counted else 0)
        if counted and losses > max_worker_losses:
            return FailureDecision(
                failures,
                losses,
                None,
                f"the task's worker was lost {losses} times (max_worker_losses="
                f"{max_worker_losses}); it may be killing or stopping its own worker, "
                "for example by running out of memory or signalling its process",
            )
        # A released attempt (graceful shutdown) is due again at once; a loss, or a
        # hand-back the task caused, after retry_delay.
        delay = 0.0 if reason == "released" and not counted else backoff(1, retry_delay)
        return FailureDecision(failures, losses, now + delay)
    failed = failures + 1
    if failed > retries:
        return FailureDecision(failed, worker_losses, None)
    return FailureDecision(failed, worker_losses, now + backoff(failed, retry_delay))


def reap_reason(*, expired: bool, past_deadline: bool, owner_alive: bool | None) -> str | None:
    """Why a running attempt is taken from its worker now, or None to leave it.

    ``owner_alive`` is the lease owner's liveness token: True while its
    process lives (however long its heartbeats stall, say behind a C call that
    holds the GIL), False once the process is gone, None when it has none.
    A gone owner loses its attempts at once, expired or not; a living one
    keeps an expired lease until the attempt's deadline (a lease it does not
    know it holds, it hands back itself: ``Store.heartbeat``); without a token
    the lease's expiry decides. ``"timeout"`` past the deadline, else
    ``"worker_lost"``.
    """
    if owner_alive is False or (expired and (owner_alive is None or past_deadline)):
        return "timeout" if past_deadline else "worker_lost"
    return None


def lost_error(
    reason: str, owner: str | None, attempt: int, timeout: float, owner_alive: bool | None
) -> ErrorInfo:
    """What a reaped attempt records (both stores)."""
    if reason == "timeout":
        return ErrorInfo(
            type="TimeoutError", message=f"attempt {attempt} exceeded its timeout of {timeout:g}s"
        )
    if owner_alive is False:
        return ErrorInfo(type="keepgoing.WorkerLost", message=f"worker {owner} is gone")
    return ErrorInfo(
        type="keepgoing.WorkerLost", message=f"worker {owner} stopped renewing its lease"
    )


def error_of(exc: Exception) -> ErrorInfo:
    """A refusal the store records in history (a send or a child start that failed)."""
    kind = type(exc)
    return ErrorInfo(type=f"{kind.__module__}.{kind.__qualname__}", message=str(exc))
