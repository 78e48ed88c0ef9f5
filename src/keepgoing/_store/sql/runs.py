"""Runs, their history and their activations: the SQL both stores run.

Each function takes a connection inside the caller's transaction and does
one store operation; SQLite's thread (``sqlite.thread``) supplies the
transaction (``BEGIN IMMEDIATE`` for writes, so the write lock is held from
the first statement and no row lock order is needed). PostgreSQL runs the
same functions; the ``/*FOR UPDATE*/`` comments are its row locks, and
``dialect`` writes down their order. What commands do and what a run's
ending settles are in ``commands``, above this module and ``messaging``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeVar

from keepgoing._history import events as ev
from keepgoing._history.codec import decode, encode_at
from keepgoing._payload import encode, loads
from keepgoing._store import records as rec
from keepgoing._store.sql.rows import columns, every, one, value
from keepgoing._store.trouble import Trouble, count_events
from keepgoing.errors import InvalidRequestError, WorkflowAlreadyRunningError

R = TypeVar("R", bound=NamedTuple)


class RunRow(NamedTuple):
    """A ``runs`` row as :data:`RUN_COLUMNS` selects it."""

    run_id: str
    workflow_id: str
    workflow_name: str
    status: rec.RunStatus
    input: str
    task_queue: str
    code_version: str
    created_at: float
    updated_at: float
    result: str | None
    error: str | None
    blocked_reason: str | None
    fence: int
    last_input_seq: int
    runnable: int
    ended_at: float | None
    parent_workflow_id: str | None
    parent_run_id: str | None
    continued_from: str | None
    continued_to: str | None
    code_versions: str
    blocked_versions: str
    retry_blocked_at: float | None
    group_revision: int | None
    worker_losses: int
    retries: int
    rate_limited: int
    reviews_waiting: int


class TaskRow(NamedTuple):
    """A ``tasks`` row as :data:`TASK_COLUMNS` selects it: what a claim carries."""

    run_id: str
    workflow_id: str
    cmd: int
    name: str
    args: str
    kwargs: str
    attempt: int
    fence: int
    started_at: float
    deadline: float
    lease_expires_at: float
    timeout: float
    retries: int
    retry_delay: float
    max_worker_losses: int
    image: str | None
    operation_id: str | None


class RunRef(NamedTuple):
    """The run a command belongs to, as the commands' effects need it."""

    run_id: str
    workflow_id: str
    task_queue: str


class _RunId(NamedTuple):
    run_id: str


class _Body(NamedTuple):
    body: str


RUN_COLUMNS = columns(RunRow)
TASK_COLUMNS = columns(TaskRow)


def marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


def run_record(r: RunRow) -> rec.RunRecord:
    error = loads(r.error) if r.error else None
    return rec.RunRecord(
        run_id=r.run_id,
        workflow_id=r.workflow_id,
        workflow_name=r.workflow_name,
        status=r.status,
        input=loads(r.input),
        task_queue=r.task_queue,
        code_version=r.code_version,
        created_at=r.created_at,
        updated_at=r.updated_at,
        result=loads(r.result) if r.result is not None else None,
        error=ev.ErrorInfo(**error) if error else None,
        blocked_reason=r.blocked_reason,
        fence=r.fence,
        last_input_seq=r.last_input_seq,
        runnable=bool(r.runnable),
        ended_at=r.ended_at,
        parent_workflow_id=r.parent_workflow_id,
        parent_run_id=r.parent_run_id,
        continued_from=r.continued_from,
        continued_to=r.continued_to,
        code_versions=tuple(loads(r.code_versions)),
        blocked_versions=tuple(loads(r.blocked_versions)),
        retry_blocked_at=r.retry_blocked_at,
        group_revision=r.group_revision,
        trouble=Trouble(r.worker_losses, r.retries, r.rate_limited, r.reviews_waiting),
    )


def run_records(
    conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()
) -> list[rec.RunRecord]:
    """The runs a statement returns; it selects (or returns) :data:`RUN_COLUMNS`."""
    return [run_record(r) for r in every(conn, RunRow, sql, params)]


def one_run(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> rec.RunRecord | None:
    """The first run a statement returns, or None; it selects :data:`RUN_COLUMNS`."""
    row = one(conn, RunRow, sql, params)
    return run_record(row) if row is not None else None


def task_claim(t: TaskRow) -> rec.TaskClaim:
    return rec.TaskClaim(
        run_id=t.run_id,
        workflow_id=t.workflow_id,
        cmd=t.cmd,
        name=t.name,
        args=loads(t.args),
        kwargs=loads(t.kwargs),
        attempt=t.attempt,
        fence=t.fence,
        started_at=t.started_at,
        deadline=t.deadline,
        lease_expires_at=t.lease_expires_at,
        timeout=t.timeout,
        retries=t.retries,
        retry_delay=t.retry_delay,
        max_worker_losses=t.max_worker_losses,
        image=t.image,
        operation_id=t.operation_id,
    )


# -- runs ----------------------------------------------------------------------
def start_run(conn: sqlite3.Connection, req: rec.StartRequest) -> rec.RunRecord:
    open_run = one(
        conn,
        _RunId,
        "SELECT run_id FROM runs WHERE workflow_id = ? AND status IN ('running', 'blocked')",
        (req.workflow_id,),
    )
    if open_run is not None:
        raise WorkflowAlreadyRunningError(req.workflow_id, open_run.run_id)
    # A child or a successor keeps its parent's revision (where the parent is now,
    # after a move too), so a run and the runs it starts finish on one code.
    if req.revision_of is not None:
        revision, of = "(SELECT group_revision FROM runs WHERE run_id = ?)", req.revision_of
    else:
        revision, of = "(SELECT revision FROM worker_groups WHERE task_queue = ?)", req.task_queue
    # The run's row as appending WorkflowStarted (seq 1, an input) leaves it,
    # written at once: one statement instead of an insert, a read and an update.
    row = one(
        conn,
        RunRow,
        "INSERT INTO runs (run_id, workflow_id, workflow_name, status, input, task_queue, "
        "code_version, created_at, updated_at, next_seq, last_input_seq, runnable, "
        "runnable_since, parent_workflow_id, parent_run_id, parent_cmd, continued_from, "
        "group_revision) "
        f"VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, 2, 1, 1, ?, ?, ?, ?, ?, {revision}) "
        f"RETURNING {RUN_COLUMNS}",
        (
            req.run_id,
            req.workflow_id,
            req.workflow_name,
            encode(req.input, f"the input of workflow {req.workflow_name!r}"),
            req.task_queue,
            req.code_version,
            req.now,
            req.now,
            req.now,
            req.parent_workflow_id,
            req.parent_run_id,
            req.parent_cmd,
            req.continued_from,
            of,
        ),
    )
    assert row is not None
    started = ev.WorkflowStarted(
        workflow_name=req.workflow_name,
        workflow_id=req.workflow_id,
        run_id=req.run_id,
        input=req.input,
        code_version=req.code_version,
        task_queue=req.task_queue,
        parent_workflow_id=req.parent_workflow_id,
        parent_run_id=req.parent_run_id,
        continued_from=req.continued_from,
    )
    conn.execute(
        "INSERT INTO history (run_id, seq, type, at, body) VALUES (?, 1, ?, ?, ?)",
        (req.run_id, "WorkflowStarted", req.now, encode_at(started, 1, req.now)),
    )
    return run_record(row)


def start_runs(
    conn: sqlite3.Connection, requests: Sequence[rec.StartRequest]
) -> list[tuple[rec.RunRecord, bool]]:
    """Every run started in the caller's one transaction, or an error that undoes them all.

    A request whose ``run_id`` already names a run of the same workflow name and
    id is a repeat: that run, with False. Errors name the request (``start #i``).
    """
    started: list[tuple[rec.RunRecord, bool]] = []
    for i, req in enumerate(requests):
        earlier = get_run(conn, req.run_id)
        if earlier is not None:
            if (earlier.workflow_name, earlier.workflow_id) != (req.workflow_name, req.workflow_id):
                raise InvalidRequestError(
                    f"start #{i}: request_id {req.run_id} already started run {earlier.run_id} "
                    f"of {earlier.workflow_name!r} (workflow id {earlier.workflow_id!r}); "
                    "use a new request_id for a different start"
                )
            started.append((earlier, False))
            continue
        try:
            started.append((start_run(conn, req), True))
        except WorkflowAlreadyRunningError as exc:
            exc.add_note(f"start #{i} of the batch; none of the batch was started")
            raise
    return started


def get_run(conn: sqlite3.Connection, run_id: str) -> rec.RunRecord | None:
    return one_run(conn, f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,))


def find_run(conn: sqlite3.Connection, workflow_id: str) -> rec.RunRecord | None:
    return one_run(
        conn,
        f"SELECT {RUN_COLUMNS} FROM runs WHERE workflow_id = ? "
        "ORDER BY created_at DESC, rowid DESC LIMIT 1",
        (workflow_id,),
    )


def list_runs(
    conn: sqlite3.Connection,
    workflow_name: str | None,
    status: str | None,
    limit: int,
    offset: int,
) -> list[rec.RunRecord]:
    where, params = [], []
    if workflow_name is not None:
        where.append("workflow_name = ?")
        params.append(workflow_name)
    if status is not None:
        where.append("status = ?")
        params.append(status)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    return run_records(
        conn,
        f"SELECT {RUN_COLUMNS} FROM runs {clause} "
        "ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
        (*params, limit, offset),
    )


def read_history(conn: sqlite3.Connection, run_id: str, after_seq: int) -> list[ev.Event]:
    rows = every(
        conn,
        _Body,
        "SELECT body FROM history WHERE run_id = ? AND seq > ? ORDER BY seq",
        (run_id, after_seq),
    )
    return [decode(loads(r.body)) for r in rows]


# -- appending -------------------------------------------------------------------
def append(
    conn: sqlite3.Connection,
    run_id: str,
    events: Sequence[ev.Event],
    now: float,
    *,
    next_seq: int | None = None,
    then: str = "",
    then_params: Sequence[Any] = (),
) -> int:
    """Append ``events`` with the next seqs and ``at=now``; update the run row once.

    Returns the seq of the last event. ``next_seq`` saves a read when the caller
    has it; ``then`` adds SET clauses to the run's update (the rightmost
    assignment of a column wins; only a column assigned without parameters may
    be assigned twice), with ``then_params`` for its placeholders.
    """
    last, sql, params = _append(conn, run_id, events, now, next_seq, then, then_params, "", ())
    conn.execute(sql, params)
    return last


def append_returning(
    conn: sqlite3.Connection,
    run_id: str,
    events: Sequence[ev.Event],
    now: float,
    returning: tuple[type[R], str, Sequence[Any]],
    *,
    next_seq: int,
    then: str = "",
    then_params: Sequence[Any] = (),
) -> tuple[int, R]:
    """:func:`append`, whose update of the run also returns a row: ``returning`` is
    its type, the ``RETURNING`` expressions and their parameters."""
    row_type, sql, params = returning
    last, update, values = _append(
        conn, run_id, events, now, next_seq, then, then_params, sql, params
    )
    row = one(conn, row_type, update, values)
    assert row is not None  # the caller holds the run
    return last, row


def _append(
    conn: sqlite3.Connection,
    run_id: str,
    events: Sequence[ev.Event],
    now: float,
    next_seq: int | None,
    then: str,
    then_params: Sequence[Any],
    returning: str,
    returning_params: Sequence[Any],
) -> tuple[int, str, tuple[Any, ...]]:
    """Insert the events; return the last seq and the run's update (to run) with its
    parameters."""
    seq = next_seq
    if seq is None:
        seq = value(conn, "SELECT next_seq FROM runs WHERE run_id = ? /*FOR UPDATE*/", (run_id,))
    rows = []
    last_input = 0
    for event in events:
        if event.ROLE == "input":
            last_input = seq
        rows.append((run_id, seq, type(event).__name__, now, encode_at(event, seq, now)))
        seq += 1
    conn.executemany(
        "INSERT INTO history (run_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)", rows
    )
    then = _trouble(conn, run_id, events) + then
    tail = f" WHERE run_id = ?{' RETURNING ' + returning if returning else ''}"
    if last_input:
        return (
            seq - 1,
            "UPDATE runs SET next_seq = ?, last_input_seq = ?, updated_at = ?, "
            "runnable_since = CASE WHEN runnable = 1 THEN runnable_since ELSE ? END, "
            f"runnable = 1{then}{tail}",
            (seq, last_input, now, now, *then_params, run_id, *returning_params),
        )
    return (
        seq - 1,
        f"UPDATE runs SET next_seq = ?, updated_at = ?{then}{tail}",
        (seq, now, *then_params, run_id, *returning_params),
    )


def _trouble(conn: sqlite3.Connection, run_id: str, events: Sequence[ev.Event]) -> str:
    """The SET clauses that keep the run's trouble counters (``_store/trouble.py``) for
    ``events``: literal numbers, in the append's own update of the run. Only a review
    wait or answer adds a statement (the operation's balance on its task row)."""
    delta = count_events(run_id, events)
    if not delta:
        return ""
    sets = [
        f", {column} = {column} + {n}"
        for column, n in (
            ("worker_losses", delta.worker_losses),
            ("retries", delta.retries),
            ("rate_limited", delta.rate_limited),
        )
        if n
    ]
    for cmd, change in delta.reviews:
        conn.execute(
            "UPDATE tasks SET review_waits = review_waits + ? WHERE run_id = ? AND cmd = ?",
            (change, run_id, cmd),
        )
    if delta.ends:
        sets.append(", reviews_waiting = 0")
    elif delta.reviews:
        sets.append(
            ", reviews_waiting = (SELECT COUNT(*) FROM tasks t "
            "WHERE t.run_id = runs.run_id AND t.review_waits > 0)"
        )
    return "".join(sets)


# -- activations -------------------------------------------------------------------
def revision_rule(revision: int | None, column: str = "group_revision") -> tuple[str, list[int]]:
    """The claim rule of pinning: a worker of group revision ``revision`` takes only the
    runs of that revision (and runs from before their queue had a group); a worker of
    no revision takes any. Returns the SQL to AND in, and its parameters."""
    if revision is None:
        return "", []
    return f" AND ({column} IS NULL OR {column} = ?)", [revision]


def claim_activations(
    conn: sqlite3.Connection,
    worker_id: str,
    queues: Sequence[str],
    names: Sequence[str],
    limit: int,
    lease_ttl: float,
    now: float,
    revision: int | None = None,
) -> list[rec.ActivationClaim]:
    if not queues or not names or limit <= 0:
        return []
    pinned, pin = revision_rule(revision)
    ids = [
        r.run_id
        for r in every(
            conn,
            _RunId,
            "SELECT run_id FROM runs WHERE runnable = 1 AND status = 'running' "
            f"AND task_queue IN ({marks(queues)}) AND workflow_name IN ({marks(names)}) "
            f"AND (lease_owner IS NULL OR lease_expires_at < ?){pinned} "
            "ORDER BY runnable_since LIMIT ? /*FOR UPDATE SKIP LOCKED*/",
            (*queues, *names, now, *pin, limit),
        )
    ]
    if not ids:
        return []
    expires = now + lease_ttl
    claimed = run_records(
        conn,
        "UPDATE runs SET fence = fence + 1, lease_owner = ?, lease_expires_at = ? "
        f"WHERE run_id IN ({marks(ids)}) RETURNING {RUN_COLUMNS}",
        (worker_id, expires, *ids),
    )
    order = {run_id: i for i, run_id in enumerate(ids)}  # oldest runnable first
    runs = sorted(claimed, key=lambda run: order[run.run_id])
    return [rec.ActivationClaim(run=run, fence=run.fence, lease_expires_at=expires) for run in runs]


def insert_task(
    conn: sqlite3.Connection,
    run: RunRef,
    t: ev.TaskScheduled,
    now: float,
    owner: str | None,
    lease_ttl: float,
) -> rec.TaskClaim | None:
    """Insert a scheduled task; claimed at once by ``owner`` when given (eager dispatch)."""
    run_id, workflow_id, queue = run.run_id, run.workflow_id, run.task_queue
    queue = t.task_queue or queue
    what = f"the arguments of task {t.name!r}"
    args, kwargs = encode(t.args, what), encode(t.kwargs, what)
    deadline = now + t.timeout
    lease = min(now + lease_ttl, deadline + lease_ttl)
    conn.execute(
        "INSERT INTO tasks (run_id, cmd, workflow_id, name, queue, status, args, kwargs, image, "
        "retries, retry_delay, timeout, max_worker_losses, attempt, fence, available_at, "
        "started_at, deadline, lease_owner, lease_expires_at, operation_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            t.cmd,
            workflow_id,
            t.name,
            queue,
            "running" if owner else "pending",
            args,
            kwargs,
            t.image,
            t.retries,
            t.retry_delay,
            t.timeout,
            t.max_worker_losses,
            1 if owner else 0,
            1 if owner else 0,
            now,
            now if owner else None,
            deadline if owner else None,
            owner,
            lease if owner else None,
            t.operation_id,
        ),
    )
    if owner is None:
        return None
    return rec.TaskClaim(
        run_id=run_id,
        workflow_id=workflow_id,
        cmd=t.cmd,
        name=t.name,
        args=loads(args),  # decoded from what is stored: never the workflow's own objects
        kwargs=loads(kwargs),
        attempt=1,
        fence=1,
        started_at=now,
        deadline=deadline,
        lease_expires_at=lease,
        timeout=t.timeout,
        retries=t.retries,
        retry_delay=t.retry_delay,
        max_worker_losses=t.max_worker_losses,
        image=t.image,
        operation_id=t.operation_id,
    )


def release_activation(conn: sqlite3.Connection, run_id: str, fence: int) -> None:
    conn.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
        "WHERE run_id = ? AND fence = ?",
        (run_id, fence),
    )
