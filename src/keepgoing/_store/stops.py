"""Why a worker stopped: the causes of worker losses, and which of them blame the task.

Whoever stops a worker on purpose records the stop in the store *before* it
sends the signal (:meth:`Store.record_worker_stop`: worker id, cause, actor),
and settles it once the signal went out (:meth:`Store.settle_worker_stop`: the
row becomes ``sent``, or is removed when nothing could be signalled). When the
reaper takes an attempt from a dead worker, or a stopping worker hands its
attempts back, the attempt's ``TaskAttemptFailed`` is stamped with the cause of
the newest stop recorded for that worker (:func:`loss_stamp`,
:func:`release_stamp`); a loss with none is ``unexplained``.

Why this is race-free:

* worker ids are unique per process (a restarted or re-executed worker
  registers a new one), so a stop names exactly one life of one process;
* a stop is read only in the transaction that records the loss, never after:
  a stop recorded once a loss is recorded relabels nothing;
* a stop whose signal could not be sent (the process had already exited) is
  removed, and while one is still ``pending`` the reaper leaves that worker's
  attempts for its next sweep rather than guess (after :data:`PENDING_GRACE`
  a stop left pending by a crashed stopper is ignored);
* a worker without a liveness token whose attempt lease had already expired
  when the stop was recorded had lost that attempt before anyone stopped it:
  that loss stays ``unexplained``. (With a token, a successful signal proves
  the process was alive, and its attempts were its own until then.)

Only :data:`BLAMES_TASK` causes count against ``max_worker_losses``: a loss
nobody explains, or one whose cause points at the task (``oom_killed``). The
others are keepgoing's, or its operator's, own doing: the attempt is retried
without limit after ``retry_delay``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BLAMES_TASK",
    "CAUSES",
    "DRAIN_TIMEOUT",
    "HUNG_RESTART",
    "KILLED_BY_REQUEST",
    "OOM_KILLED",
    "PENDING_GRACE",
    "REPLACED",
    "SCALED_DOWN",
    "UNEXPLAINED",
    "Stamp",
    "StopRow",
    "blames_task",
    "describe",
    "loss_stamp",
    "release_stamp",
    "stamp_of",
]

KILLED_BY_REQUEST = "killed_by_request"  # the kill API, the UI's button, `workers kill`
SCALED_DOWN = "scaled_down"  # the autoscaler stopped a replica it no longer needs
DRAIN_TIMEOUT = "drain_timeout"  # SIGTERM, then SIGKILL once the grace period ran out
REPLACED = "replaced"  # a replica of an older revision, stopped for the new one
HUNG_RESTART = "hung_restart"  # the worker restarted itself: too many hung task threads
OOM_KILLED = "oom_killed"  # the cluster reports the container ran out of memory
UNEXPLAINED = "unexplained"  # it died or stopped heartbeating; nobody knows why

CAUSES = (
    KILLED_BY_REQUEST,
    SCALED_DOWN,
    DRAIN_TIMEOUT,
    REPLACED,
    HUNG_RESTART,
    OOM_KILLED,
    UNEXPLAINED,
)
#: Causes that count against ``max_worker_losses``.
BLAMES_TASK = frozenset({UNEXPLAINED, OOM_KILLED})
#: Seconds a stop may stay ``pending`` (recorded, signal not yet settled) before it
#: is taken for one whose stopper died half way, and ignored.
PENDING_GRACE = 30.0
#: Seconds a stop is kept; older ones are removed as new ones are recorded.
KEEP = 7 * 86400.0


@dataclass(frozen=True)
class StopRow:
    """A recorded stop, as the store reads it back (oldest first)."""

    stop_id: int
    cause: str
    actor_kind: str
    actor_id: str
    via: str
    state: str  # "pending" | "sent"
    recorded_at: float


@dataclass(frozen=True)
class Stamp:
    """What a lost or released attempt records about why its worker stopped."""

    cause: str
    actor: str | None = None
    via: str | None = None


def blames_task(cause: str | None) -> bool:
    """Whether a worker loss with ``cause`` counts against ``max_worker_losses``.

    A loss recorded without a cause (before causes were kept), or with one this
    code does not know, counts: the safe side is the old rule.
    """
    return cause is None or cause not in CAUSES or cause in BLAMES_TASK


def stamp_of(stop: StopRow) -> Stamp:
    """What an attempt lost to ``stop`` records: its cause, who asked, from where."""
    actor = None
    if stop.actor_id:
        actor = stop.actor_id if stop.actor_kind == "user" else f"{stop.actor_kind} {stop.actor_id}"
    return Stamp(stop.cause, actor, stop.via or None)


def loss_stamp(
    stops: Sequence[StopRow], *, lease_expires_at: float, owner_alive: bool | None, now: float
) -> Stamp | None:
    """The cause of an attempt the reaper takes from a worker with ``stops``.

    None: the newest stop is still being signalled; leave the attempt for the
    next sweep.
    """
    if stops:
        newest = stops[-1]
        if newest.state == "pending" and now - newest.recorded_at < PENDING_GRACE:
            return None
    for stop in reversed(stops):
        if stop.state != "sent":
            continue
        if owner_alive is None and lease_expires_at < stop.recorded_at:
            break  # the lease had already lapsed: lost before anyone stopped the worker
        return stamp_of(stop)
    return Stamp(UNEXPLAINED)


def release_stamp(stops: Sequence[StopRow]) -> Stamp | None:
    """Why a worker hands its attempts back: its newest stop (None: it stopped on
    its own, say on Ctrl-C or a SIGTERM from outside keepgoing). A drain timeout
    is the SIGKILL that ends a drain; an attempt handed back beat it."""
    asked = [stop for stop in stops if stop.cause != DRAIN_TIMEOUT]
    return stamp_of(asked[-1]) if asked else None


_TEXT = {
    SCALED_DOWN: "worker scaled down",
    DRAIN_TIMEOUT: "worker stopped: its drain timed out",
    REPLACED: "worker replaced by a newer revision",
    HUNG_RESTART: "worker restarted itself (too many hung task threads)",
    OOM_KILLED: "worker ran out of memory (OOMKilled)",
    UNEXPLAINED: "worker lost (no known cause)",
}
_VIA = {"ui": "from the UI", "cli": "from the CLI", "api": "through the API"}


def describe(reason: str, cause: str | None, actor: str | None, via: str | None) -> str | None:
    """How ``keepgoing show`` and the UI name the cause of a lost or released attempt;
    None for an attempt that ended otherwise."""
    if reason not in ("worker_lost", "released"):
        return None
    if cause == KILLED_BY_REQUEST:
        where = _VIA.get(via or "", f"({via})" if via else "on request")
        return f"worker killed {where}" + (f" by {actor}" if actor else "")
    if cause in _TEXT:
        text = _TEXT[cause]
        return f"{text} by {actor}" if actor and cause != UNEXPLAINED else text
    if reason == "released":
        return "worker shut down and handed the attempt back"
    return "worker lost" if cause is None else f"worker lost ({cause})"
