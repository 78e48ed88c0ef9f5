"""Copying a run's history prefix into a new run: what resume and fork share.

A new run reuses the recorded prefix of an ended run instead of running it
again: one transaction starts the run (its own ``WorkflowStarted``, with the
new run id and input) and copies every later event before the *cut* with
``INSERT ... SELECT`` — the store's SQL, never a replay through workers. The
steps still open at the cut get their task rows back (pending, but held, see
:data:`HELD`, until the first activation has passed the check of the reused
steps), as do its timers (pending) and the progress it published, so the new
run's first activation replays the prefix and goes on from there, live.

**Where to cut.** Before an ``ActivationCompleted`` marker (its group of
commands goes with it, and every input before it is kept, delivered live to
the new run's first activation: the marker's ``saw_upto`` never reaches past
it), or at an input (every marker before it saw only earlier inputs). So a cut
is clean whatever the workflow does:

* a fork from step ``N`` cuts at the marker of the activation that scheduled
  step ``N``: steps scheduled before it keep their results, step ``N`` and
  everything after run again (with the new input, if one is given);
* a resume of a run failed by a task cuts at the marker that scheduled the
  failed step (it runs again, on the current code); of a run that failed in
  its own code, at the marker of the activation that ended it; of a cancelled
  run, at its ``CancelRequested``, so it goes back into the steps and timers
  it was cancelled in.

The new run's ``WorkflowStarted`` carries ``seed``, its origin's run id, so
``keepgoing.uuid4()`` and ``random()`` replay the prefix with its values, and
``reused_upto`` (the last seq copied) with ``reused_by`` (``resume``, ``fork``,
or ``fork_input`` for a fork given a new input): the worker holds every step of
that prefix, as it replays it at the first activation, to the name and
arguments it recorded (``_runtime/prefix.py``), so a plain worker refuses a
prefix the code or the new input would schedule differently. The new run's
trouble counters start at what the copied prefix holds (its retries, worker
losses and rate limits).

Waits this copy cannot re-create refuse the copy with the reason: an open
external-event wait or a child run started in the prefix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from keepgoing._history import events as ev
from keepgoing._history.codec import encode_at
from keepgoing._store import records as rec
from keepgoing._store.sql import history
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.limits import LIMIT_COLUMNS
from keepgoing._store.sql.rows import value
from keepgoing._store.sql.status import record_status
from keepgoing._store.trouble import count_events
from keepgoing.errors import InvalidRequestError

__all__ = ["HELD", "Copy", "cut_before_step", "cut_for_resume", "copy_prefix", "release_held"]

HELD = 1e15
"""``available_at`` of a step still open in a copied prefix until the run's first
activation has passed the check of its reused steps: no worker claims it before
(a fork refused for a step's new arguments runs none of them); that commit sets
it to its own time (:func:`release_held`), a refusal cancels it with the run."""

_TASK_COLUMNS = (
    "cmd, workflow_id, name, queue, status, args, kwargs, image, retries, retry_delay, "
    "timeout, max_worker_losses, attempt, failures, worker_losses, fence, available_at, "
    "started_at, deadline, lease_owner, lease_expires_at, operation_id, " + ", ".join(LIMIT_COLUMNS)
)


@dataclass(frozen=True)
class Copy:
    """What to start: ``cut`` is the first seq of the source history left out."""

    source: rec.RunRecord
    cut: int
    run_id: str
    workflow_id: str
    input: dict[str, object]
    kind: str  # "resume" or "fork"
    step: int | None
    revision: int | None
    now: float
    #: ``"fork_input"`` for a fork given a new input; else ``kind`` is what reused it.
    reused_by: str = ""


def _marker_before(events: Sequence[ev.Event], seq: int) -> int:
    """The seq of the last ActivationCompleted before ``seq``."""
    found = [e.seq for e in events if isinstance(e, ev.ActivationCompleted) and e.seq < seq]
    if not found:
        raise InvalidRequestError("the run has no activation to start again from")
    return found[-1]


def cut_before_step(events: Sequence[ev.Event], step: int) -> int:
    """Where a fork from step ``step`` (the step's number, as the timeline shows it) cuts."""
    scheduled = [e for e in events if isinstance(e, ev.TaskScheduled) and e.cmd == step]
    if not scheduled:
        steps = ", ".join(str(e.cmd) for e in events if isinstance(e, ev.TaskScheduled))
        raise InvalidRequestError(f"the run has no step {step}; its steps are {steps or 'none'}")
    return _marker_before(events, scheduled[0].seq)


def cut_for_resume(events: Sequence[ev.Event]) -> tuple[int, int | None]:
    """Where a resume of an ended run cuts, and the step it runs again (if a task failed)."""
    end = next(
        (e for e in reversed(events) if isinstance(e, ev.WorkflowFailed | ev.WorkflowCancelled)),
        None,
    )
    if end is None:
        raise InvalidRequestError("only a failed or cancelled run can be resumed")
    if isinstance(end, ev.WorkflowFailed):
        failed = [e for e in events if isinstance(e, ev.TaskFailed) and e.seq < end.seq]
        if failed:
            step = failed[-1].cmd
            return cut_before_step(events, step), step
        return _marker_before(events, end.seq), None
    # Cut at the first CancelRequested, an input: every activation before it stays,
    # so the run goes back into the steps and timers it was cancelled in.
    cancels = [e.seq for e in events if isinstance(e, ev.CancelRequested)]
    return (cancels[0] if cancels else _marker_before(events, end.seq)), None


def _check_copyable(events: Sequence[ev.Event], cut: int) -> tuple[list[int], list[int]]:
    """The open steps and the pending timers at ``cut``; refuses waits it cannot re-create."""
    kept = [e for e in events if e.seq < cut]
    done_tasks = {e.cmd for e in kept if isinstance(e, ev.TaskCompleted | ev.TaskFailed)}
    ended_timers = {e.cmd for e in kept if isinstance(e, ev.TimerFired | ev.TimerCancelled)}
    waits = {e.cmd for e in kept if isinstance(e, ev.EventWaitStarted)}
    if waits - {e.cmd for e in kept if isinstance(e, ev.EventReceived | ev.EventWaitCancelled)}:
        raise InvalidRequestError(
            "the reused prefix holds an open wait for an external event, which a copy "
            "cannot re-create; start from an earlier step"
        )
    if any(isinstance(e, ev.ChildStarted) for e in kept):
        raise InvalidRequestError(
            "the reused prefix starts a child run, which a copy cannot reuse; start from "
            "a step before the child"
        )
    open_tasks = [
        e.cmd for e in kept if isinstance(e, ev.TaskScheduled) and e.cmd not in done_tasks
    ]
    timers = [e.cmd for e in kept if isinstance(e, ev.TimerStarted) and e.cmd not in ended_timers]
    return open_tasks, timers


def _check_revision(conn: Connection, queue: str, revision: int) -> None:
    """Refuse a pin to a revision no group serving ``queue`` has (its run would never run)."""
    found = value(
        conn,
        "SELECT COUNT(*) FROM group_revisions r JOIN worker_groups g ON g.name = r.group_name "
        "WHERE g.task_queue = ? AND r.revision = ?",
        (queue, revision),
    )
    if not found:
        raise InvalidRequestError(
            f"no worker group serving queue {queue!r} has a revision {revision}"
        )


def copy_prefix(conn: Connection, c: Copy, events: Sequence[ev.Event]) -> rec.RunRecord:
    """Start ``c``'s run with the source's history before ``c.cut`` (one transaction)."""
    open_tasks, timers = _check_copyable(events, c.cut)
    if c.revision is not None:
        _check_revision(conn, c.source.task_queue, c.revision)
    src = c.source
    ops.start_run(
        conn,
        rec.StartRequest(
            run_id=c.run_id,
            workflow_id=c.workflow_id,
            workflow_name=src.workflow_name,
            input=c.input,
            task_queue=src.task_queue,
            code_version=src.code_version,
            now=c.now,
            revision_of=src.run_id,
        ),
    )
    started = next(e for e in events if isinstance(e, ev.WorkflowStarted))
    first = history.read_history(conn, c.run_id, 0)[0]
    assert isinstance(first, ev.WorkflowStarted)
    seeded = dataclasses.replace(
        first,
        seed=started.seed or started.run_id,
        reused_upto=c.cut - 1,
        reused_by=c.reused_by or c.kind,
    )
    conn.execute(
        "UPDATE history SET body = ? WHERE run_id = ? AND seq = 1",
        (encode_at(seeded, 1, first.at), c.run_id),
    )
    conn.execute(
        "INSERT INTO history (run_id, seq, type, at, body) "
        "SELECT ?, seq, type, at, body FROM history WHERE run_id = ? AND seq > 1 AND seq < ?",
        (c.run_id, src.run_id, c.cut),
    )
    inputs = [e.seq for e in events if e.seq < c.cut and e.ROLE == "input"]
    trouble = count_events(src.run_id, [e for e in events if 1 < e.seq < c.cut])
    conn.execute(
        "UPDATE runs SET next_seq = ?, last_input_seq = ?, origin_run_id = ?, origin_kind = ?, "
        "origin_step = ?, group_revision = COALESCE(?, group_revision), worker_losses = ?, "
        "retries = ?, rate_limited = ? WHERE run_id = ?",
        (
            c.cut,
            max(inputs, default=1),
            src.run_id,
            c.kind,
            c.step,
            c.revision,
            trouble.worker_losses,
            trouble.retries,
            trouble.rate_limited,
            c.run_id,
        ),
    )
    scheduled = [e.cmd for e in events if e.seq < c.cut and isinstance(e, ev.TaskScheduled)]
    if scheduled:
        marks = ", ".join("?" for _ in scheduled)
        reopen = ", ".join("?" for _ in open_tasks) or "NULL"
        conn.execute(
            f"INSERT INTO tasks (run_id, {_TASK_COLUMNS}) "
            f"SELECT ?, cmd, ?, name, queue, "
            f"CASE WHEN cmd IN ({reopen}) THEN 'pending' ELSE status END, args, kwargs, image, "
            "retries, retry_delay, timeout, max_worker_losses, attempt, "
            f"CASE WHEN cmd IN ({reopen}) THEN 0 ELSE failures END, "
            f"CASE WHEN cmd IN ({reopen}) THEN 0 ELSE worker_losses END, fence, "
            f"CASE WHEN cmd IN ({reopen}) THEN {HELD!r} ELSE available_at END, started_at, "
            "deadline, "
            f"NULL, NULL, operation_id, {', '.join(LIMIT_COLUMNS)} "
            f"FROM tasks WHERE run_id = ? AND cmd IN ({marks})",
            (
                c.run_id,
                c.workflow_id,
                *open_tasks,
                *open_tasks,
                *open_tasks,
                *open_tasks,
                src.run_id,
                *scheduled,
            ),
        )
    published = {e.name: e for e in events if e.seq < c.cut and isinstance(e, ev.StatusSet)}
    for marker in published.values():  # the progress the reused prefix published
        record_status(conn, c.run_id, marker, marker.at)
    for cmd in timers:
        conn.execute(
            "INSERT INTO timers (run_id, cmd, fire_at, status) "
            "SELECT ?, cmd, fire_at, 'pending' FROM timers WHERE run_id = ? AND cmd = ?",
            (c.run_id, src.run_id, cmd),
        )
    found = ops.get_run(conn, c.run_id)
    assert found is not None
    return found


def release_held(conn: Connection, run_id: str, now: float) -> None:
    """Make the steps a copied run held (:data:`HELD`) claimable from ``now``."""
    conn.execute(
        "UPDATE tasks SET available_at = ? WHERE run_id = ? AND status = 'pending' "
        "AND available_at >= ?",
        (now, run_id, HELD),
    )
