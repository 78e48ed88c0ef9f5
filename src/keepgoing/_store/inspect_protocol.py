"""The store's inspection facet: the runs list at scale, what changed, tasks and logs.

What a UI or an operator reads about many runs and about one run's steps:

* :meth:`InspectStore.page_runs` — one page of runs, newest first, under a
  :class:`RunFilter`, with a keyset cursor (no ``OFFSET``: page 2,000 costs
  what page 1 does);
* :meth:`InspectStore.count_runs_by_status` — how many runs in each status
  match a filter; :meth:`InspectStore.count_trouble` — how many carry each
  trouble marker;
* :meth:`InspectStore.runs_changed` — runs updated since an instant (the live
  stream of runs);
* :meth:`InspectStore.run_tasks` — the task rows of a run (who runs a step now);
* :meth:`InspectStore.attempt_logs` — what attempts printed, as the worker
  stored it with each outcome.
"""

from __future__ import annotations

import abc
import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from keepgoing._store.records import AttemptLog, RunRecord
from keepgoing._store.trouble import MARKERS
from keepgoing.errors import InvalidRequestError

__all__ = [
    "RUN_STATUSES",
    "AttemptLog",
    "InspectStore",
    "InvalidCursorError",
    "RunCursor",
    "RunFilter",
    "RunPage",
    "TaskState",
]

#: Every status a run can have.
RUN_STATUSES = (
    "queued",
    "running",
    "blocked",
    "completed",
    "failed",
    "cancelled",
    "continued",
)


class InvalidCursorError(InvalidRequestError):
    """A page cursor that this store did not hand out (or that was altered)."""


@dataclass(frozen=True)
class RunFilter:
    """Which runs to list or count. Every field is optional; given ones all apply.

    * ``statuses`` — any of these statuses;
    * ``workflow_name`` — exactly this workflow name;
    * ``since`` / ``until`` — ``since <= created_at < until`` (UNIX seconds);
    * ``id`` — a workflow id or run id equal to it or starting with it;
    * ``text`` — a case-insensitive substring of the workflow id, the run id, the
      workflow name, the blocked reason or the error (type, message, traceback);
    * ``needs_patch`` — runs not ended (running or blocked) that have not passed
      ``keepgoing.patched(needs_patch)`` on code with the change: they may still
      take its old branch, so the old branch cannot be removed yet;
    * ``revision`` — runs pinned to this group revision;
    * ``trouble`` — runs carrying every one of these markers
      (``_store/trouble.py``: ``worker_lost``, ``retried``, ``rate_limited``,
      ``waiting_for_review``, ``blocked``), each served by a partial index.
    """

    statuses: tuple[str, ...] = ()
    workflow_name: str | None = None
    since: float | None = None
    until: float | None = None
    id: str | None = None
    text: str | None = None
    needs_patch: str | None = None
    revision: int | None = None
    trouble: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunCursor:
    """Where a page ended: the last run's ``created_at`` and its insertion order."""

    created_at: float
    row: int

    def encode(self) -> str:
        raw = json.dumps([self.created_at, self.row], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> RunCursor:
        """The cursor ``text`` names.

        Raises:
            InvalidCursorError: ``text`` is not a cursor :meth:`encode` made.
        """
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            created_at, row = json.loads(raw)
        except (ValueError, TypeError, binascii.Error):
            raise InvalidCursorError(
                f"cursor {text[:40]!r} is not one this server handed out; "
                "pass the next_cursor of a previous page"
            ) from None
        if (
            not isinstance(created_at, int | float)
            or isinstance(created_at, bool)
            or not isinstance(row, int)
            or isinstance(row, bool)
            or not -1e12 < created_at < 1e12
            or not 0 <= row < 2**63
        ):
            raise InvalidCursorError(f"cursor {text[:40]!r} holds values out of range")
        return cls(float(created_at), row)


@dataclass(frozen=True)
class RunPage:
    """One page of runs, newest first; ``next_cursor`` is None on the last page."""

    runs: list[RunRecord]
    next_cursor: RunCursor | None = None


@dataclass(frozen=True)
class TaskState:
    """A step's task row as it stands: its current (or last) attempt and lease."""

    run_id: str
    cmd: int
    name: str
    status: str  # pending | running | completed | failed | uncertain | cancelled
    attempt: int
    failures: int
    worker_losses: int
    started_at: float | None
    deadline: float | None
    lease_owner: str | None
    available_at: float
    #: Set when the step carries an earlier step's operation (a reviewed retry).
    operation_id: str | None = None


class InspectStore(abc.ABC):
    """Inspection views. Methods may raise :class:`~keepgoing.errors.StoreError`."""

    @abc.abstractmethod
    async def page_runs(
        self,
        filter: RunFilter,
        *,
        limit: int = 50,
        after: RunCursor | None = None,
        offset: int = 0,
    ) -> RunPage:
        """Up to ``limit`` runs matching ``filter``, newest first (by ``created_at``,
        then by insertion), strictly after ``after`` (then skipping ``offset``, which
        only old clients paging by offset use: it costs what it skips). Indexed for
        the status, workflow and ``id`` filters. With ``text``, a page reads at most
        10,000 runs newest first: it may hold fewer than ``limit`` (even none) and
        still have a ``next_cursor``, which goes on from the last run read."""

    @abc.abstractmethod
    async def count_runs_by_status(self, filter: RunFilter) -> dict[str, int]:
        """How many runs matching ``filter`` are in each status (statuses with none left out)."""

    @abc.abstractmethod
    async def count_trouble(self, filter: RunFilter) -> dict[str, int]:
        """How many runs matching ``filter`` carry each trouble marker (every marker of
        ``trouble.MARKERS``, zero included). Each count reads the marker's partial
        index, never a history."""

    @abc.abstractmethod
    async def runs_changed(self, since: float, *, limit: int = 200) -> list[RunRecord]:
        """Runs whose ``updated_at >= since``, least recently updated first, at most ``limit``."""

    @abc.abstractmethod
    async def run_tasks(self, run_id: str) -> list[TaskState]:
        """Every task row of ``run_id``, by ``cmd``."""

    @abc.abstractmethod
    async def uncertain_steps(self, *, limit: int = 200) -> list[TaskState]:
        """Task rows whose attempt raised ``UncertainOutcome`` (status ``uncertain``)
        in runs that are still open (running or blocked), oldest run first, at most
        ``limit``: the review queue's candidates. A step a reviewer has decided on
        keeps its row; the run's history says what was decided."""

    @abc.abstractmethod
    async def attempt_logs(
        self, run_id: str, *, cmd: int | None = None, attempt: int | None = None
    ) -> list[AttemptLog]:
        """The stored logs of ``run_id``'s attempts (of one step, of one attempt),
        by ``cmd`` then ``attempt``."""

    @staticmethod
    def check_trouble(markers: Sequence[str]) -> tuple[str, ...]:
        """``markers`` if each is a trouble marker.

        Raises:
            ValueError: one is not (the message names it and the valid ones).
        """
        return _known(markers, MARKERS, "a trouble marker")

    @staticmethod
    def check_statuses(statuses: Sequence[str]) -> tuple[str, ...]:
        """``statuses`` if each is a run status.

        Raises:
            ValueError: one is not (the message names it and the valid ones).
        """
        return _known(statuses, RUN_STATUSES, "a run status")


def _known(values: Sequence[str], known: tuple[str, ...], what: str) -> tuple[str, ...]:
    for value in values:
        if value not in known:
            raise ValueError(f"{value!r} is not {what}; use one of {', '.join(known)}")
    return tuple(dict.fromkeys(values))
