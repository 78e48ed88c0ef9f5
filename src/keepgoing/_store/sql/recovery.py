"""The recovery facet's SQL (mixed into ``SqlStore``): published progress, resume,
fork and their lineage. Resume and fork copy a history prefix (``prefix.py``);
the ``run_status`` rows are written by ``status.py``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from keepgoing._store import records as rec
from keepgoing._store.recovery_protocol import (
    Origin,
    Origins,
    RecordPair,
    RecoveryStore,
    StatusValue,
)
from keepgoing._store.sql import history, prefix
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import every, one
from keepgoing._store.sql.status import run_status
from keepgoing.errors import InvalidRequestError, RunNotFoundError, WorkflowAlreadyRunningError

__all__ = ["SqlRecoveryMixin"]


def _ended(conn: Connection, workflow_id: str) -> rec.RunRecord:
    run = ops.find_run(conn, workflow_id)
    if run is None:
        raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
    if run.status in ("running", "blocked"):
        raise WorkflowAlreadyRunningError(workflow_id, run.run_id)
    return run


def resume_run(
    conn: Connection, workflow_id: str, run_id: str, revision: int | None, now: float
) -> RecordPair:
    source = _ended(conn, workflow_id)
    if source.status not in ("failed", "cancelled"):
        raise InvalidRequestError(
            f"only a failed or cancelled run can be resumed; run {source.run_id} of "
            f"{workflow_id!r} is {source.status}"
        )
    events = history.read_history(conn, source.run_id, 0)
    cut, step = prefix.cut_for_resume(events)
    copy = prefix.Copy(
        source, cut, run_id, workflow_id, source.input, "resume", step, revision, now
    )
    return prefix.copy_prefix(conn, copy, events), source


def fork_run(
    conn: Connection,
    workflow_id: str,
    from_step: int,
    input: dict[str, Any] | None,
    new_workflow_id: str,
    run_id: str,
    revision: int | None,
    now: float,
) -> RecordPair:
    source = _ended(conn, workflow_id)
    if source.status == "continued":
        raise InvalidRequestError(
            f"run {source.run_id} of {workflow_id!r} continued as a new run; fork that one"
        )
    events = history.read_history(conn, source.run_id, 0)
    cut = prefix.cut_before_step(events, from_step)
    stored = source.input if input is None else input
    by = "fork" if stored == source.input else "fork_input"
    copy = prefix.Copy(
        source, cut, run_id, new_workflow_id, stored, "fork", from_step, revision, now, by
    )
    return prefix.copy_prefix(conn, copy, events), source


class _OriginRow(NamedTuple):
    run_id: str
    workflow_id: str
    origin_kind: str
    origin_step: int | None
    origin_run_id: str
    origin_workflow_id: str


_ORIGINS = (
    "SELECT r.run_id, r.workflow_id, r.origin_kind, r.origin_step, r.origin_run_id, "
    "o.workflow_id AS origin_workflow_id FROM runs r JOIN runs o ON o.run_id = r.origin_run_id "
)


def run_origins(conn: Connection, run_id: str) -> Origins:
    mine = one(conn, _OriginRow, _ORIGINS + "WHERE r.run_id = ?", (run_id,))
    derived = every(
        conn, _OriginRow, _ORIGINS + "WHERE r.origin_run_id = ? ORDER BY r.created_at", (run_id,)
    )
    return Origins(
        origin=Origin(*mine) if mine is not None else None,
        derived=[Origin(*d) for d in derived],
    )


class SqlRecoveryMixin(RecoveryStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...  # provided by SqlStore

    async def resume_run(
        self, workflow_id: str, *, run_id: str, revision: int | None, now: float
    ) -> RecordPair:
        found: RecordPair = await self._write(
            lambda c: resume_run(c, workflow_id, run_id, revision, now), True
        )
        return found

    async def fork_run(
        self,
        workflow_id: str,
        *,
        from_step: int,
        input: dict[str, Any] | None,
        new_workflow_id: str,
        run_id: str,
        revision: int | None,
        now: float,
    ) -> RecordPair:
        found: RecordPair = await self._write(
            lambda c: fork_run(
                c, workflow_id, from_step, input, new_workflow_id, run_id, revision, now
            ),
            True,
        )
        return found

    async def run_origins(self, run_id: str) -> Origins:
        found: Origins = await self._read(lambda c: run_origins(c, run_id))
        return found

    async def run_status(self, run_id: str, name: str | None = None) -> list[StatusValue]:
        found: list[StatusValue] = await self._read(lambda c: run_status(c, run_id, name))
        return found
