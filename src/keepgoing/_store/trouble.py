"""Trouble markers: what went wrong in a run, counted by the commits that record it.

A run's row keeps four counters (migration 0018), updated by the same
statement that appends the events they count (``sql/history.py``'s append), so
the runs list, its filters and its counts never read a history:

* ``worker_losses`` — attempts lost with their worker (``TaskAttemptFailed``,
  reason ``worker_lost``);
* ``retries`` — attempts that raised or timed out and were retried (reason
  ``error`` or ``timeout`` with a ``retry_at``);
* ``rate_limited`` — attempts whose error says the other side refused for a
  rate limit (:func:`is_rate_limited`: an HTTP 429, a ``RateLimit…`` error
  type, "too many requests");
* ``reviews_waiting`` — steps whose workflow waits for a review decision now:
  a ``MessageWaitStarted`` for ``review:op-<run>-<cmd>`` opens a wait, each
  ``MessageReceived`` of that name answers one (the task row keeps the
  balance per operation, ``tasks.review_waits``); zero once the run ends.

``blocked`` is the run's status. The words every surface (API, CLI, UI) shows
for a run come from :func:`markers`, and its *state* (``waiting_for_review``
for a running run that waits for a reviewer, else its status) from
:func:`run_state`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from keepgoing._history import events as ev

__all__ = [
    "MARKERS",
    "Marker",
    "REVIEW_PREFIX",
    "TROUBLE_CONDITIONS",
    "Trouble",
    "TroubleDelta",
    "count_events",
    "is_rate_limited",
    "markers",
    "review_cmd",
    "run_state",
]

#: Every marker a run can carry, in the order they are shown.
MARKERS = ("worker_lost", "retried", "rate_limited", "waiting_for_review", "blocked")
#: The name of a review decision's message, before the operation id (``_workflow/review.py``).
REVIEW_PREFIX = "review:"
#: Each marker's condition on the ``runs`` row, literal so the partial indexes of
#: migration 0018 serve it.
TROUBLE_CONDITIONS = {
    "worker_lost": "worker_losses > 0",
    "retried": "retries > 0",
    "rate_limited": "rate_limited > 0",
    "waiting_for_review": "(reviews_waiting > 0 AND status = 'running')",
    "blocked": "status = 'blocked'",
}
_X = "\N{MULTIPLICATION SIGN}"  # as in "worker lost x2"
_RATE_LIMIT = re.compile(r"\b429\b|rate[ _-]?limit|too many requests", re.IGNORECASE)


@dataclass(frozen=True)
class Trouble:
    """A run's trouble counters, as its row keeps them."""

    worker_losses: int = 0
    retries: int = 0
    rate_limited: int = 0
    reviews_waiting: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "worker_losses": self.worker_losses,
            "retries": self.retries,
            "rate_limited": self.rate_limited,
            "reviews_waiting": self.reviews_waiting,
        }


@dataclass(frozen=True)
class Marker:
    """One marker of a run: its kind (one of :data:`MARKERS`), how many, in words."""

    kind: str
    count: int
    text: str


@dataclass(frozen=True)
class TroubleDelta:
    """What a batch of appended events adds to the run's counters; ``reviews`` maps
    each operation's first step to the change in its open review waits."""

    worker_losses: int = 0
    retries: int = 0
    rate_limited: int = 0
    reviews: tuple[tuple[int, int], ...] = ()
    ends: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.worker_losses or self.retries or self.rate_limited or self.reviews or self.ends
        )


def is_rate_limited(error: ev.ErrorInfo | None) -> bool:
    """Whether a failed attempt's error says it was refused for a rate limit: its type
    or message names a 429, a rate limit or "too many requests".

    The timeline's attempt kinds (``_views/run_model.py``, ``retry_kind``, which the
    server folds for the UI) use it; ``tests/ui`` checks that the page draws it so.
    """
    if error is None:
        return False
    return bool(_RATE_LIMIT.search(error.type) or _RATE_LIMIT.search(error.message))


def review_cmd(name: str, run_id: str) -> int | None:
    """The step of the run's own operation a review message ``name`` is about
    (``review:op-<run_id>-<cmd>``), or None for any other name."""
    head = f"{REVIEW_PREFIX}op-{run_id}-"
    if not name.startswith(head):
        return None
    tail = name[len(head) :]
    if not tail.isascii() or not tail.isdigit() or len(tail) > 10 or tail.startswith("0"):
        return None
    return int(tail)


_ENDS = (ev.WorkflowCompleted, ev.WorkflowFailed, ev.WorkflowCancelled, ev.WorkflowContinuedAsNew)


def count_events(run_id: str, events: Iterable[ev.Event]) -> TroubleDelta:
    """What ``events``, appended to run ``run_id``, add to its trouble counters."""
    losses = retries = limited = 0
    reviews: dict[int, int] = {}
    ends = False
    for event in events:
        if isinstance(event, ev.TaskAttemptFailed):
            if event.reason == "worker_lost":
                losses += 1
            elif event.reason in ("error", "timeout"):
                retries += event.retry_at is not None
                limited += is_rate_limited(event.error)
        elif isinstance(event, ev.MessageWaitStarted | ev.MessageReceived):
            cmd = review_cmd(event.name, run_id)
            if cmd is not None:
                step = 1 if isinstance(event, ev.MessageWaitStarted) else -1
                reviews[cmd] = reviews.get(cmd, 0) + step
        elif isinstance(event, _ENDS):
            ends = True
    changed = tuple(sorted((cmd, n) for cmd, n in reviews.items() if n))
    return TroubleDelta(losses, retries, limited, changed, ends)


def run_state(status: str, trouble: Trouble) -> str:
    """What a run is doing, in one word: ``waiting_for_review`` for a running run that
    waits for a reviewer's decision, else its status."""
    if status == "running" and trouble.reviews_waiting > 0:
        return "waiting_for_review"
    return status


def markers(status: str, trouble: Trouble) -> list[Marker]:
    """A run's markers, in the order of :data:`MARKERS`, each with its count and words."""
    found: list[Marker] = []
    if trouble.worker_losses:
        n = trouble.worker_losses
        found.append(Marker("worker_lost", n, f"worker lost {_X}{n}"))
    if trouble.retries:
        n = trouble.retries
        found.append(Marker("retried", n, f"retried {_X}{n}"))
    if trouble.rate_limited:
        n = trouble.rate_limited
        found.append(Marker("rate_limited", n, f"rate-limited {_X}{n}"))
    if run_state(status, trouble) == "waiting_for_review":
        n = trouble.reviews_waiting
        found.append(
            Marker("waiting_for_review", n, "waiting for review" + (f" {_X}{n}" if n > 1 else ""))
        )
    if status == "blocked":
        found.append(Marker("blocked", 1, "blocked"))
    return found
