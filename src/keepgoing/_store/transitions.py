"""Pure rules shared by every store: what happens to a task after an attempt fails.

Errors the task raises and timeouts count against ``retries``; attempts lost
with their worker count against ``max_worker_losses``, apart from ``retries``.
Backoff starts at ``retry_delay``, doubles per failure, is capped, and has
+/-20% jitter. Without ``retry_delay`` a retry is due at once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from keepgoing._history.events import ErrorInfo

__all__ = [
    "BACKOFF_CAP",
    "PARENT_ENDED",
    "FailureDecision",
    "backoff",
    "decide_failure",
    "error_of",
]

BACKOFF_CAP = 900.0  # 15 minutes, unless retry_delay itself is longer
PARENT_ENDED = "the parent workflow ended"  # why a child is cancelled with its parent
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
) -> FailureDecision:
    """Decide the fate of a task whose attempt just failed for ``reason``.

    ``failures`` and ``worker_losses`` are the counts *before* this attempt.
    """
    if reason in ("worker_lost", "released"):
        losses = worker_losses + (1 if reason == "worker_lost" else 0)
        if losses > max_worker_losses:
            return FailureDecision(
                failures,
                losses,
                None,
                f"the task's worker was lost {losses} times (max_worker_losses="
                f"{max_worker_losses}); it may be killing its worker, for example by "
                "running out of memory",
            )
        # A released attempt (graceful shutdown) is due again at once.
        delay = 0.0 if reason == "released" else backoff(1, retry_delay)
        return FailureDecision(failures, losses, now + delay)
    failed = failures + 1
    if failed > retries:
        return FailureDecision(failed, worker_losses, None)
    return FailureDecision(failed, worker_losses, now + backoff(failed, retry_delay))


def error_of(exc: Exception) -> ErrorInfo:
    """A refusal the store records in history (a send or a child start that failed)."""
    kind = type(exc)
    return ErrorInfo(type=f"{kind.__module__}.{kind.__qualname__}", message=str(exc))
