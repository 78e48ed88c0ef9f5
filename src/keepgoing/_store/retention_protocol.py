"""What a store does for retention: which ended runs may go, and deleting them.

The rule of what may be deleted is one SQL predicate (``_store/sql/retention.py``)
that every call below uses; the sweep that archives and deletes in batches sits
above the store (``_worker/retention.py``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from keepgoing._store.records import RunRecord

__all__ = ["RetentionStore", "RetentionWindow", "SweptRows"]


@dataclass(frozen=True)
class RetentionWindow:
    """Which ended runs are past retention at ``now``.

    ``default`` is the store's policy in seconds (None: keep runs forever), used
    for a workflow without a policy of its own. ``older_than``, when given,
    replaces every policy (``keepgoing runs prune --older-than``); ``workflow``
    keeps the sweep to one workflow name.
    """

    now: float
    default: float | None = None
    older_than: float | None = None
    workflow: str | None = None


@dataclass
class SweptRows:
    """Rows one deletion removed, by table (counts, never ids), and the audit
    entry that holds their counts (``audit_id``, for the next batch of a pass)."""

    runs: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    audit_id: int | None = None

    def add(self, other: SweptRows) -> None:
        self.runs += other.runs
        for table, n in other.rows.items():
            self.rows[table] = self.rows.get(table, 0) + n

    @property
    def total(self) -> int:
        return sum(self.rows.values())


class RetentionStore(abc.ABC):
    @abc.abstractmethod
    async def record_retention(self, policies: Mapping[str, float | None], now: float) -> None:
        """Remember each workflow's own policy in seconds (None: the store's default)."""

    @abc.abstractmethod
    async def workflow_retention(self) -> dict[str, float | None]:
        """The policies :meth:`record_retention` recorded, by workflow name."""

    @abc.abstractmethod
    async def expired_runs(self, window: RetentionWindow, limit: int) -> list[RunRecord]:
        """Up to ``limit`` ended runs that may be deleted now, the longest ended first.

        Never an open run, a child whose parent is open, a run whose open child or
        continue-as-new successor keeps its revision, a run with an operation
        waiting for review, or a run younger than its policy.
        """

    @abc.abstractmethod
    async def delete_runs(
        self,
        run_ids: Sequence[str],
        window: RetentionWindow,
        *,
        actor: str,
        audit_id: int | None = None,
    ) -> SweptRows:
        """Delete those of ``run_ids`` that may still be deleted, with every row
        that hangs off them, in one transaction that also writes an audit entry
        with the counts; then give back a few free pages (SQLite).

        With ``audit_id`` (a ``retention.sweep`` entry an earlier batch of the
        same pass wrote, from its :attr:`SweptRows.audit_id`) the counts are
        added to that entry instead, so a sweep pass writes one entry."""

    @abc.abstractmethod
    async def prune_schedule_actions(
        self, window: RetentionWindow, limit: int, *, actor: str, audit_id: int | None = None
    ) -> int:
        """Delete up to ``limit`` schedule actions older than ``window.default``
        (nothing when it is None), always keeping each schedule's newest ten, its
        buffered ones and those whose run is open; writes an audit entry with the
        count (or adds it to the pass's entry ``audit_id``). How many went."""

    @abc.abstractmethod
    async def trim_audit(self, before: float, limit: int) -> int:
        """Delete up to ``limit`` audit entries older than ``before``; how many went."""
