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
nobody explains, or one whose cause points at the task (``oom_killed``), or a
stop the task's own process caused (:data:`SIGNALLED_BY_TASK`,
:data:`STOPPED_BY_TASK`), whether the attempt was lost or handed back. The
others are keepgoing's, or its operator's, own doing: the attempt is retried
without limit after ``retry_delay``.

A stop the task caused itself is traced to it so it cannot pass for one
keepgoing decided: a stop recorded from inside an attempt of the worker it
stops, or from that worker's own process or one of its descendants, becomes
``stopped_by_task`` whatever cause it claimed (:func:`traced`); a kill request
whose connection comes from that process tree likewise (the server finds the
requesting process, ``WorkerStop.origin_pid``); the worker records
``signalled_by_task`` for a SIGTERM or SIGINT its own tasks sent it. When the
stop names the attempt it is traced to, only that attempt counts it; the
worker's other attempts are ``stopped_by_other_step``, counted against nothing.
Only the worker's engine records stops for itself without this tracing
(:func:`engine_stop`): its restart for hung threads, and why it shuts down.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "BLAMES_TASK",
    "BY_TASK",
    "CAUSES",
    "DRAIN_TIMEOUT",
    "HUNG_RESTART",
    "KILLED_BY_REQUEST",
    "OOM_KILLED",
    "OTHER_STEP",
    "PENDING_GRACE",
    "REPLACED",
    "SCALED_DOWN",
    "SHUTDOWN",
    "SIGNALLED_BY_TASK",
    "STOPPED_BY_TASK",
    "UNEXPLAINED",
    "Stamp",
    "StopRow",
    "Traced",
    "blames_task",
    "counts_as_loss",
    "describe",
    "engine_stop",
    "loss_stamp",
    "release_stamp",
    "stamp_of",
    "traced",
]

KILLED_BY_REQUEST = "killed_by_request"  # the kill API, the UI's button, `workers kill`
SCALED_DOWN = "scaled_down"  # the autoscaler stopped a replica it no longer needs
DRAIN_TIMEOUT = "drain_timeout"  # SIGTERM, then SIGKILL once the grace period ran out
REPLACED = "replaced"  # a replica of an older revision, stopped for the new one
HUNG_RESTART = "hung_restart"  # the worker restarted itself: too many hung task threads
OOM_KILLED = "oom_killed"  # the cluster reports the container ran out of memory
UNEXPLAINED = "unexplained"  # it died or stopped heartbeating; nobody knows why
SIGNALLED_BY_TASK = "signalled_by_task"  # a task sent its own worker SIGTERM or SIGINT
STOPPED_BY_TASK = "stopped_by_task"  # a kill request or a recorded stop from the worker itself
OTHER_STEP = "stopped_by_other_step"  # handed back because another step stopped the worker
SHUTDOWN = "shutdown"  # told to stop from outside its own code: a terminal, a service manager

CAUSES = (
    KILLED_BY_REQUEST,
    SCALED_DOWN,
    DRAIN_TIMEOUT,
    REPLACED,
    HUNG_RESTART,
    OOM_KILLED,
    UNEXPLAINED,
    SIGNALLED_BY_TASK,
    STOPPED_BY_TASK,
    OTHER_STEP,
    SHUTDOWN,
)
#: Causes a task's own code brought about: they count whether the attempt was lost
#: or handed back.
BY_TASK = frozenset({SIGNALLED_BY_TASK, STOPPED_BY_TASK})
#: Causes that count against ``max_worker_losses``.
BLAMES_TASK = frozenset({UNEXPLAINED, OOM_KILLED, *BY_TASK})
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
    #: The attempt a stop the task caused is traced to (None: not known, or not one).
    blame_run_id: str | None = None
    blame_cmd: int | None = None


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


def counts_as_loss(reason: str, cause: str | None) -> bool:
    """Whether an attempt that ended for ``reason`` with ``cause`` counts against
    ``max_worker_losses``: a loss that blames the task, or a hand-back the task's own
    code caused (a release with no cause, as workers before causes did, never does)."""
    if reason == "worker_lost":
        return blames_task(cause)
    return reason == "released" and cause in BY_TASK


def stamp_of(stop: StopRow, key: tuple[str, int] | None = None) -> Stamp:
    """What attempt ``key`` lost to ``stop`` records: its cause, who asked, from where
    (another attempt of the worker named as the one that stopped it, when the stop
    was traced to it)."""
    actor = None
    if stop.actor_id:
        actor = stop.actor_id if stop.actor_kind == "user" else f"{stop.actor_kind} {stop.actor_id}"
    blamed = stop.blame_run_id is not None and stop.blame_cmd is not None
    if stop.cause in BY_TASK and blamed and key != (stop.blame_run_id, stop.blame_cmd):
        # Another attempt of the worker stopped it: not this attempt's doing.
        return Stamp(OTHER_STEP, f"run {stop.blame_run_id} step {stop.blame_cmd}", stop.via or None)
    return Stamp(stop.cause, actor, stop.via or None)


def loss_stamp(
    stops: Sequence[StopRow],
    *,
    lease_expires_at: float,
    owner_alive: bool | None,
    now: float,
    key: tuple[str, int] | None = None,
) -> Stamp | None:
    """The cause of attempt ``key`` the reaper takes from a worker with ``stops``.

    None: the newest stop is still being signalled; leave the attempt for the
    next sweep. A worker told to shut down (:data:`SHUTDOWN`) that dies before it
    hands an attempt back died for a reason nobody gave: such a stop explains no loss.
    """
    if stops:
        newest = stops[-1]
        if newest.state == "pending" and now - newest.recorded_at < PENDING_GRACE:
            return None
    for stop in reversed(stops):
        if stop.state != "sent" or stop.cause == SHUTDOWN:
            continue
        if owner_alive is None and lease_expires_at < stop.recorded_at:
            break  # the lease had already lapsed: lost before anyone stopped the worker
        return stamp_of(stop, key)
    return Stamp(UNEXPLAINED)


def release_stamp(stops: Sequence[StopRow], key: tuple[str, int] | None = None) -> Stamp | None:
    """Why a worker hands attempt ``key`` back: its newest stop, a drain timeout (the
    SIGKILL that ends a drain, which an attempt handed back beat) left out, and the
    worker's own :data:`SHUTDOWN` only when nobody else recorded why (None: it
    recorded nothing, as workers before causes did)."""
    asked = [stop for stop in stops if stop.cause not in (DRAIN_TIMEOUT, SHUTDOWN)]
    if asked:
        return stamp_of(asked[-1], key)
    own = [stop for stop in stops if stop.cause == SHUTDOWN]
    return stamp_of(own[-1], key) if own else None


_engine: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "keepgoing_engine_stop", default=False
)


@contextlib.contextmanager
def engine_stop() -> Iterator[None]:
    """Around a worker engine's record of its own stop: not traced to a task."""
    token = _engine.set(True)
    try:
        yield
    finally:
        _engine.reset(token)


@dataclass(frozen=True)
class Traced:
    """What a stop the stopped worker's own code asked for is recorded as."""

    cause: str
    detail: str
    blame_run_id: str | None
    blame_cmd: int | None


def traced(
    worker_id: str,
    cause: str,
    detail: str,
    *,
    attempt: tuple[str, str, int] | None,
    from_worker: bool,
) -> Traced | None:
    """How a stop of ``worker_id`` for ``cause`` is recorded when the stopped worker's
    own code asked for it (``stopped_by_task``, traced to the attempt that did when
    that is known), or None: record it as it is.

    ``attempt`` is the ``(worker id, run id, step)`` of the attempt whose code makes
    this call, if any; ``from_worker`` whether the process that asked for the stop is
    the stopped worker's or one of its descendants.
    """
    if cause in BY_TASK or _engine.get():
        return None
    mine = attempt is not None and attempt[0] == worker_id
    if not mine and not from_worker:
        return None
    why = f"asked for as {cause} from the worker's own process"
    blame_run: str | None = None
    blame_cmd: int | None = None
    if mine and attempt is not None:
        blame_run, blame_cmd = attempt[1], attempt[2]
        why = f"asked for as {cause} by run {blame_run} step {blame_cmd}"
    return Traced(STOPPED_BY_TASK, f"{why}; {detail}" if detail else why, blame_run, blame_cmd)


_TEXT = {
    SCALED_DOWN: "worker scaled down",
    DRAIN_TIMEOUT: "worker stopped: its drain timed out",
    REPLACED: "worker replaced by a newer revision",
    HUNG_RESTART: "worker restarted itself (too many hung task threads)",
    OOM_KILLED: "worker ran out of memory (OOMKilled)",
    UNEXPLAINED: "worker lost (no known cause)",
    SIGNALLED_BY_TASK: "worker stopped by a signal the task itself sent",
    STOPPED_BY_TASK: "worker stopped at the request of its own process",
    OTHER_STEP: "worker stopped by another step's code",
    SHUTDOWN: "worker shut down",
}
#: Whose doing a cause is, for the text: these name a step, not a person.
_STEP_ACTORS = frozenset({SIGNALLED_BY_TASK, STOPPED_BY_TASK, OTHER_STEP})
_VIA = {"ui": "from the UI", "cli": "from the CLI", "api": "through the API"}


def describe(reason: str, cause: str | None, actor: str | None, via: str | None) -> str | None:
    """How ``keepgoing show`` and the UI name the cause of a lost or released attempt;
    None for an attempt that ended otherwise."""
    if reason not in ("worker_lost", "released"):
        return None
    if cause == KILLED_BY_REQUEST:
        where = _VIA.get(via or "", f"({via})" if via else "on request")
        return f"worker killed {where}" + (f" by {actor}" if actor else "")
    if cause in _STEP_ACTORS:
        text = _TEXT[cause]
        return f"{text} ({actor})" if actor else text
    if cause in _TEXT:
        text = _TEXT[cause]
        return f"{text} by {actor}" if actor and cause != UNEXPLAINED else text
    if reason == "released":
        return "worker shut down and handed the attempt back"
    return "worker lost" if cause is None else f"worker lost ({cause})"
