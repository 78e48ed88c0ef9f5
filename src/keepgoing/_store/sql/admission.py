"""Admission of runs: priorities, and the slots of a workflow's concurrency limit.

A limited run (``flow_limit`` set on its row) takes one of ``flow_limit`` slots
of its workflow's key (``flow_key``, "" when the limit has no key). It holds
the slot from its **admission** until it **ends**: while it is leased, while
it sleeps on a timer or a message, while it is blocked on code it cannot
replay, and while its lease is lost with a killed worker (the run resumes
elsewhere still holding it). "Open runs" are the runs that have not ended; a
limit counts the admitted ones. A run the limit does not admit waits
``queued`` (``admitted = 0``, its status ``running`` underneath, so every
rule about open runs still holds for it); it holds no worker, and a claim
admits it when a slot is free, highest priority first.

There is one implementation of the rule, used by the start path
(:func:`admit`, from ``runs.start_run``) and the run claim
(:data:`SLOT_FREE` and :func:`admit_claimed`, from ``leases.claim_activations``):
a run is admitted when the admitted open runs of its key number fewer than
its limit. On PostgreSQL both take the key's advisory lock before counting, so two
admissions of one key take turns: a start waits for it (``dialect.lock_key``; it
holds no other run's row), a claim only tries (``dialect.try_lock_key``) and
leaves a key being admitted elsewhere to its next claim, so claims holding
row locks never wait on each other. SQLite has one writer.
A start is admitted at once only if no run of its key is already queued, so
queued runs go first.

The order of every claim: :data:`RUN_ORDER` for runs, :data:`TASK_ORDER` for
tasks (a task has its run's priority): the time it became runnable less
``priority * AGING`` seconds. One point of priority is worth a minute of
waiting, so a higher priority goes first but an old run is never starved.

The spec a start obeys is the one the workers serving the workflow recorded
(:func:`record_flows`, ``workflow_flow``), so a start by name, by schedule or
by raw HTTP cannot bypass a limit; a client's spec stands only for a
workflow no worker has recorded yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from keepgoing._run_flow import AGING, RunFlow, UncomputableKeyError
from keepgoing._store import records as rec
from keepgoing._store.limits_protocol import DeclaredLimit, LimitUse
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.dialect import lock_key, try_lock_key
from keepgoing._store.sql.rows import every, one, value
from keepgoing.errors import InvalidRequestError

__all__ = [
    "RUN_ORDER",
    "SLOT_FREE",
    "STATUS_SHOWN",
    "TASK_ORDER",
    "Candidate",
    "admit",
    "admit_claimed",
    "flow_use",
    "queue_reason",
    "record_flows",
    "recorded_flows",
    "start_flow",
    "status_is",
]

#: The order of a run claim (the ``runs_runnable`` index is on this expression).
RUN_ORDER = f"runnable_since - priority * {AGING}"
#: The order of a task claim (the ``tasks_pending`` index is on this expression).
TASK_ORDER = f"available_at - priority * {AGING}"


def status_is(status: str) -> tuple[str, list[str]]:
    """The rows whose record says ``status`` (SQL, parameters): a ``queued`` run is a
    ``running`` row not admitted, and ``running`` means admitted."""
    if status == "queued":
        return "(status = 'running' AND admitted = 0)", []
    if status == "running":
        return "(status = 'running' AND admitted = 1)", []
    return "status = ?", [status]


#: The status a run's record says, as SQL (for counts by status).
STATUS_SHOWN = "CASE WHEN status = 'running' AND admitted = 0 THEN 'queued' ELSE status END"


def holds_slot(alias: str = "") -> str:
    """A row that holds a slot: a limited run, admitted, not ended."""
    return (
        f"{alias}flow_limit IS NOT NULL AND {alias}admitted = 1 "
        f"AND {alias}status IN ('running', 'blocked')"
    )


_HELD = (
    "SELECT COUNT(*) FROM runs h WHERE h.workflow_name = runs.workflow_name "
    f"AND h.flow_key = runs.flow_key AND {holds_slot('h.')}"
)

#: What a run claim ANDs in: an admitted run, or a queued one whose key has a
#: free slot (the claim admits it with :func:`admit_claimed`).
SLOT_FREE = f"(admitted = 1 OR ({_HELD}) < flow_limit)"


class Candidate(NamedTuple):
    """A run a claim selected, with what its admission needs."""

    run_id: str
    workflow_name: str
    admitted: int
    flow_key: str | None
    flow_limit: int | None


class _Spec(NamedTuple):
    name: str
    spec: str


class _FlowUse(NamedTuple):
    name: str
    spec: str
    held: int
    waiting: int


# -- the spec ----------------------------------------------------------------------
def record_flows(conn: Connection, flows: Mapping[str, RunFlow | None], now: float) -> None:
    """Record each workflow's spec as its workers say; a workflow now without one
    loses its row (its later starts are unlimited)."""
    gone = [name for name, flow in flows.items() if flow is None]
    if gone:
        conn.execute(f"DELETE FROM workflow_flow WHERE name IN ({','.join('?' * len(gone))})", gone)
    conn.executemany(
        "INSERT INTO workflow_flow (name, spec, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at",
        [(name, flow.to_json(), now) for name, flow in flows.items() if flow is not None],
    )


def recorded_flows(conn: Connection) -> dict[str, RunFlow]:
    rows = every(conn, _Spec, "SELECT name, spec FROM workflow_flow")
    return {r.name: RunFlow.from_json(r.spec) for r in rows}


def start_flow(conn: Connection, req: rec.StartRequest) -> tuple[RunFlow | None, str | None]:
    """The spec a start obeys and its key: the recorded one over the client's.

    Raises:
        InvalidRequestError: the key needs the workflow's code, and the start
            does not carry the key its client computed.
    """
    row = one(
        conn, _Spec, "SELECT name, spec FROM workflow_flow WHERE name = ?", (req.workflow_name,)
    )
    flow = RunFlow.from_json(row.spec) if row is not None else req.flow
    if flow is None:
        return None, None
    given = req.flow_key
    if given is None and flow.callable_key and req.continued_from is not None:
        # A continue_as_new successor keeps the key its predecessor was given.
        given = value(conn, "SELECT flow_key FROM runs WHERE run_id = ?", (req.continued_from,))
    try:
        return flow, flow.key_of(req.input, given)
    except UncomputableKeyError as exc:
        raise InvalidRequestError(
            f"workflow {req.workflow_name!r} cannot be started here: {exc}"
        ) from None


def flow_use(conn: Connection) -> list[LimitUse]:
    """Each recorded workflow limit with its use now, named ``workflow:NAME``: the
    slots held over every key and the runs queued for one."""
    rows = every(
        conn,
        _FlowUse,
        "SELECT f.name, f.spec, "
        f"(SELECT COUNT(*) FROM runs h WHERE h.workflow_name = f.name AND {holds_slot('h.')}) "
        "AS held, (SELECT COUNT(*) FROM runs q WHERE q.workflow_name = f.name AND "
        "q.flow_limit IS NOT NULL AND q.admitted = 0 AND q.status = 'running') AS waiting "
        "FROM workflow_flow f ORDER BY f.name",
    )
    uses = []
    for r in rows:
        flow = RunFlow.from_json(r.spec)
        keyed = flow.key is not None or flow.callable_key
        limit = DeclaredLimit(f"workflow:{r.name}", concurrency_cap=flow.limit, keyed=keyed)
        uses.append(LimitUse(limit, held=int(r.held), waiting=int(r.waiting)))
    return uses


# -- admission ---------------------------------------------------------------------
def _held(conn: Connection, name: str, key: str) -> int:
    return int(
        value(
            conn,
            "SELECT COUNT(*) FROM runs WHERE workflow_name = ? AND flow_key = ? "
            f"AND {holds_slot()}",
            (name, key),
        )
    )


def _queued(conn: Connection, name: str, key: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM runs WHERE workflow_name = ? AND flow_key = ? AND flow_limit IS NOT NULL "
        "AND admitted = 0 AND status = 'running' LIMIT 1",
        (name, key),
    ).fetchone()
    return row is not None


def admit(conn: Connection, name: str, flow: RunFlow, key: str) -> bool:
    """Whether a start of ``name`` with ``key`` is admitted now (else it is queued):
    a free slot, and no run of its key queued before it."""
    lock_key(conn, "admission", name, key)
    return _held(conn, name, key) < flow.limit and not _queued(conn, name, key)


def admit_claimed(conn: Connection, runs: Sequence[Candidate]) -> list[str]:
    """The ids of ``runs`` (in claim order) that may be activated: the admitted
    ones, and the queued ones a free slot admits now (their rows are updated)."""
    taken = []
    for run in runs:
        if run.admitted or run.flow_limit is None or run.flow_key is None:
            taken.append(run.run_id)
            continue
        # Never waited for: the claim holds row locks, and a key another transaction
        # is admitting is left to the next claim (no lock cycle between claims).
        if not try_lock_key(conn, "admission", run.workflow_name, run.flow_key):
            continue
        if _held(conn, run.workflow_name, run.flow_key) >= run.flow_limit:
            continue  # an earlier run of this claim took the last slot
        conn.execute("UPDATE runs SET admitted = 1 WHERE run_id = ?", (run.run_id,))
        taken.append(run.run_id)
    return taken


def queue_reason(conn: Connection, name: str, key: str | None, limit: int | None) -> str:
    """What a queued run waits for, in words: "waiting for a concurrency slot of
    digest (2/2 held)", with the key's value when the limit has one."""
    held = _held(conn, name, key or "")
    of = name if not key else f"{name} for {key}"
    return f"waiting for a concurrency slot of {of} ({held}/{limit} held)"
