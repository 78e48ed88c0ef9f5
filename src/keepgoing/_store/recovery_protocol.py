"""The store's recovery facet: the progress a run publishes, resuming and forking runs.

* :meth:`RecoveryStore.run_status` — the newest value of each name a run
  published with ``keepgoing.set_status`` (table ``run_status``, written in
  the commit that records the ``StatusSet`` event);
* :meth:`RecoveryStore.resume_run` — a failed or cancelled run goes on as a
  new run of the same workflow id that reuses its history up to the step
  that failed (``_store/sql/prefix.py``);
* :meth:`RecoveryStore.fork_run` — a new run (another workflow id) reuses the
  history of any ended run before a step, with the same or a new input;
* :meth:`RecoveryStore.run_origins` — where a run came from and the runs
  resumed or forked from it (lineage both ways).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

from keepgoing._store.records import RunRecord

RecordPair = tuple[RunRecord, RunRecord]

__all__ = ["Origin", "Origins", "RecordPair", "RecoveryStore", "StatusValue"]


@dataclass(frozen=True)
class StatusValue:
    """One published value: its name, the value, and when the run published it."""

    name: str
    value: Any
    at: float


@dataclass(frozen=True)
class Origin:
    """A run resumed or forked from another: ``kind`` is ``"resume"`` or ``"fork"``,
    ``step`` the step it ran again from (None: the run's end)."""

    run_id: str
    workflow_id: str
    kind: str
    step: int | None
    origin_run_id: str
    origin_workflow_id: str


@dataclass(frozen=True)
class Origins:
    """Where a run came from (None: started afresh) and the runs made from it."""

    origin: Origin | None
    derived: list[Origin]


class RecoveryStore(abc.ABC):
    """Published progress, resume and fork (both SQL stores: ``_store/sql/recovery.py``)."""

    @abc.abstractmethod
    async def run_status(self, run_id: str, name: str | None = None) -> list[StatusValue]:
        """The newest value of each name run ``run_id`` published (only ``name``'s, if
        given), oldest first; empty when it published none."""

    @abc.abstractmethod
    async def resume_run(
        self, workflow_id: str, *, run_id: str, revision: int | None, now: float
    ) -> RecordPair:
        """Start run ``run_id`` of ``workflow_id`` from the newest run's history up to
        its failed step (or its end); returns ``(new run, the run resumed)``.

        Raises:
            RunNotFoundError: no run has this workflow id.
            WorkflowAlreadyRunningError: its newest run is still open.
            InvalidRequestError: it completed, or its prefix holds a wait a copy
                cannot re-create.
        """

    @abc.abstractmethod
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
        """Start run ``run_id`` of ``new_workflow_id`` from the history of ``workflow_id``'s
        newest run before step ``from_step``; ``input`` (a stored input document)
        replaces the original's. Returns ``(new run, the run forked)``.

        Raises:
            RunNotFoundError: no run has this workflow id.
            WorkflowAlreadyRunningError: the run is open (only ended runs fork), or
                ``new_workflow_id`` has an open run.
            InvalidRequestError: no such step, or a wait a copy cannot re-create.
        """

    @abc.abstractmethod
    async def run_origins(self, run_id: str) -> Origins:
        """Where run ``run_id`` came from and the runs resumed or forked from it."""
