"""Runs: their rows as the store reads them, starting them, finding and listing them.

Each function takes a connection inside the caller's transaction and does
one store operation; SQLite's thread (``sqlite.thread``) supplies the
transaction (``BEGIN IMMEDIATE`` for writes, so the write lock is held from
the first statement and no row lock order is needed). PostgreSQL runs the
same functions; the ``/*FOR UPDATE*/`` comments are its row locks, and
``dialect`` writes down their order. A run's history is in ``history``, its
leases (activation and task claims) in ``leases``; what commands do and what
a run's ending settles are in ``commands``, above this module and ``messaging``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from keepgoing._history import events as ev
from keepgoing._history.codec import encode_at
from keepgoing._payload import encode, loads
from keepgoing._run_flow import RunFlow
from keepgoing._store import records as rec
from keepgoing._store.sql import admission
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import columns, every, one, value
from keepgoing._store.trouble import Trouble
from keepgoing.errors import InvalidRequestError, WorkflowAlreadyRunningError


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
    priority: int
    admitted: int
    flow_key: str | None
    flow_limit: int | None


class ClaimRow(NamedTuple):
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


class CommandRun(NamedTuple):
    """The run a command belongs to, as the commands' effects need it."""

    run_id: str
    workflow_id: str
    task_queue: str


class _RunId(NamedTuple):
    run_id: str


RUN_COLUMNS = columns(RunRow)
TASK_COLUMNS = columns(ClaimRow)


def marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


def run_record(r: RunRow, queued_for: str | None = None) -> rec.RunRecord:
    error = loads(r.error) if r.error else None
    queued = r.status == "running" and not r.admitted
    return rec.RunRecord(
        run_id=r.run_id,
        workflow_id=r.workflow_id,
        workflow_name=r.workflow_name,
        status="queued" if queued else r.status,
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
        priority=r.priority,
        queued_for=queued_for if queued else None,
    )


def run_records(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[rec.RunRecord]:
    """The runs a statement returns; it selects (or returns) :data:`RUN_COLUMNS`."""
    return [run_record(r) for r in every(conn, RunRow, sql, params)]


def one_run(conn: Connection, sql: str, params: Sequence[Any] = ()) -> rec.RunRecord | None:
    """The first run a statement returns, or None; it selects :data:`RUN_COLUMNS`."""
    row = one(conn, RunRow, sql, params)
    return _with_reason(conn, row) if row is not None else None


def task_claim(t: ClaimRow) -> rec.TaskClaim:
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
def start_run(
    conn: Connection,
    req: rec.StartRequest,
    flow: tuple[RunFlow | None, str | None] | None = None,
) -> rec.RunRecord:
    """Start ``req``'s run, admitted or queued by its workflow's limit (``flow``: the
    spec and key :func:`admission.start_flow` gave, when the caller has read them)."""
    open_run = one(
        conn,
        _RunId,
        "SELECT run_id FROM runs WHERE workflow_id = ? AND status IN ('running', 'blocked')",
        (req.workflow_id,),
    )
    if open_run is not None:
        raise WorkflowAlreadyRunningError(req.workflow_id, open_run.run_id)
    spec, key = admission.start_flow(conn, req) if flow is None else flow
    admitted = spec is None or key is None or admission.admit(conn, req.workflow_name, spec, key)
    # A child or a successor keeps the priority of the run that started it.
    inherit = req.parent_run_id or req.continued_from
    priority = req.priority or (_priority_of(conn, inherit) if inherit is not None else 0)
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
        "group_revision, priority, flow_key, flow_limit, admitted) "
        f"VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, 2, 1, 1, ?, ?, ?, ?, ?, {revision}, "
        "?, ?, ?, ?) "
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
            priority,
            key,
            None if spec is None else spec.limit,
            1 if admitted else 0,
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
    return _with_reason(conn, row)


def _priority_of(conn: Connection, run_id: str) -> int:
    found = value(conn, "SELECT priority FROM runs WHERE run_id = ?", (run_id,))
    return int(found) if found is not None else 0


def _with_reason(conn: Connection, row: RunRow) -> rec.RunRecord:
    """The run, saying what it waits for when it is queued."""
    if row.status != "running" or row.admitted:
        return run_record(row)
    reason = admission.queue_reason(conn, row.workflow_name, row.flow_key, row.flow_limit)
    return run_record(row, reason)


def start_runs(
    conn: Connection,
    requests: Sequence[rec.StartRequest],
    start: Callable[[Connection, rec.StartRequest], rec.RunRecord] = start_run,
) -> list[tuple[rec.RunRecord, bool]]:
    """Every run started in the caller's one transaction, or an error that undoes them all.

    A request whose ``run_id`` already names a run of the same workflow name and
    id is a repeat: that run, with False; so is a start ``start`` answers with
    another run (a singleton's ``skip``). Errors name the request (``start #i``).
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
            run = start(conn, req)
            started.append((run, run.run_id == req.run_id))
        except WorkflowAlreadyRunningError as exc:
            exc.add_note(f"start #{i} of the batch; none of the batch was started")
            raise
    return started


def get_run(conn: Connection, run_id: str) -> rec.RunRecord | None:
    return one_run(conn, f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,))


def find_run(conn: Connection, workflow_id: str) -> rec.RunRecord | None:
    return one_run(
        conn,
        f"SELECT {RUN_COLUMNS} FROM runs WHERE workflow_id = ? "
        "ORDER BY created_at DESC, rowid DESC LIMIT 1",
        (workflow_id,),
    )


def list_runs(
    conn: Connection,
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
        clause, values = admission.status_is(status)
        where.append(clause)
        params.extend(values)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    return run_records(
        conn,
        f"SELECT {RUN_COLUMNS} FROM runs {clause} "
        "ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
        (*params, limit, offset),
    )
