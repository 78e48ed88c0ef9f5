"""Singletons: one open run of a workflow per value of an argument, and what a start
that finds one does.

``@workflow(singleton="account_id", on_conflict=...)`` is a concurrency limit
of one per key (``admission.py`` holds the slot rule); this module is the
conflict rule of a top-level start (the store's ``start_run``/``start_runs``, a
schedule's fire), decided in the start's transaction:

* ``queue``: the start is queued behind the open run (admission does it);
* ``skip``: nothing starts, the start gets the open run (the oldest open one);
* ``cancel_running``: the open runs are cancelled (a queued one ends at once,
  a running one is asked to cancel) and the start queues behind them, so it
  runs once they have ended: two runs of one key never overlap.

A child or a ``continue_as_new`` successor of a singleton is held by the slot
rule alone (it queues).
"""

from __future__ import annotations

from typing import NamedTuple

from keepgoing._store import records as rec
from keepgoing._store.sql import admission, commands
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.dialect import lock_key
from keepgoing._store.sql.rows import every

__all__ = ["start_run"]

#: Who cancels a run ``cancel_running`` replaces, as its audit entry says.
_ACTOR = "singleton"


class _Open(NamedTuple):
    run_id: str
    workflow_id: str


def start_run(conn: Connection, req: rec.StartRequest) -> rec.RunRecord:
    """Start ``req`` under its workflow's singleton rule, if it has one; the run
    started, or under ``skip`` the open run it found (another ``run_id``)."""
    flow, key = admission.start_flow(conn, req)
    if flow is None or key is None or not flow.singleton or flow.on_conflict == "queue":
        return ops.start_run(conn, req, (flow, key))
    # The key's admission lock first: two starts of one key decide in turn.
    lock_key(conn, "admission", req.workflow_name, key)
    open_runs = _open(conn, req.workflow_name, key)
    if open_runs and flow.on_conflict == "skip":
        found = ops.get_run(conn, open_runs[0].run_id)
        assert found is not None
        return found
    for run in open_runs:
        commands.cancel_run(
            conn,
            rec.CancelRequest(
                workflow_id=run.workflow_id,
                run_id=run.run_id,
                reason=f"replaced by run {req.run_id} (singleton, on_conflict=cancel_running)",
                actor_kind=_ACTOR,
                actor_id=req.workflow_id,
                now=req.now,
            ),
        )
    return ops.start_run(conn, req, (flow, key))


def _open(conn: Connection, name: str, key: str) -> list[_Open]:
    """The open runs of ``name`` holding or waiting for ``key``'s slot, oldest first."""
    return every(
        conn,
        _Open,
        "SELECT run_id, workflow_id FROM runs WHERE workflow_name = ? AND flow_key = ? "
        "AND flow_limit IS NOT NULL AND status IN ('running', 'blocked') "
        "ORDER BY created_at, rowid /*FOR UPDATE*/",
        (name, key),
    )
