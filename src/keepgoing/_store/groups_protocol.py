"""The store's worker-group facet: groups, revisions, decisions, instances, secrets.

A deploy adds a revision (1, 2, ... per group) and points the group at it; runs
started on the group's queue record the revision current at their start
(``RunRecord.group_revision``). Secret values are stored as ciphertext only; the
store never sees a key. Methods are coroutines and may raise
:class:`~keepgoing.errors.StoreError` when storage fails.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from keepgoing._store.group_records import (
    DecisionRecord,
    GroupLoad,
    GroupRecord,
    InstanceRecord,
    OpenRun,
    RevisionLoad,
    RevisionRecord,
    RevisionStatus,
)
from keepgoing._store.records import RunRecord

__all__ = ["GroupStore", "RevisionStore"]


class GroupStore(abc.ABC):
    """Worker groups, stored with the runs they serve."""

    @abc.abstractmethod
    async def deploy_group(
        self,
        *,
        name: str,
        task_queue: str,
        backend: str,
        parent: str | None,
        spec: str,
        now: float,
    ) -> int:
        """Create group ``name`` or add a revision to it; return the new revision number.

        ``spec`` is the revision's JSON with ``"revision"`` unset; the stored spec has
        it set. Raises ``GroupError`` when another group already serves ``task_queue``.
        """

    @abc.abstractmethod
    async def get_group(self, name: str) -> GroupRecord | None: ...

    @abc.abstractmethod
    async def list_groups(self) -> list[GroupRecord]:
        """Every group, by name."""

    @abc.abstractmethod
    async def get_revision(self, name: str, revision: int | None = None) -> RevisionRecord | None:
        """A revision of ``name`` (default: its current one)."""

    @abc.abstractmethod
    async def delete_group(self, name: str) -> bool:
        """Forget ``name``, its revisions, decisions, instances and uploaded secrets.
        True if it existed. Its per-task groups (``parent = name``) go too."""

    @abc.abstractmethod
    async def record_decision(
        self,
        name: str,
        *,
        to_replicas: int,
        reason: str,
        queued: int,
        running: int,
        now: float,
        revision: int | None = None,
        from_replicas: int | None = None,
    ) -> DecisionRecord | None:
        """Set the group's desired replicas and keep the decision (None: no such group).

        With ``revision`` (an older revision still serving pinned runs) the decision is
        kept with it and ``from_replicas``, and the group's desired count is unchanged."""

    @abc.abstractmethod
    async def list_decisions(self, name: str, *, limit: int = 50) -> list[DecisionRecord]:
        """The newest decisions of ``name``, newest first."""

    @abc.abstractmethod
    async def set_cold_start(self, name: str, seconds: float) -> None: ...

    @abc.abstractmethod
    async def group_loads(self, queues: Sequence[str], now: float) -> list[GroupLoad]:
        """The load of each queue in ``queues`` (a queue with no work has zeros)."""

    @abc.abstractmethod
    async def record_instances(self, name: str, instances: Sequence[InstanceRecord]) -> None:
        """Upsert what the backend reports of ``name``'s instances; keep the newest 50."""

    @abc.abstractmethod
    async def list_instances(self, name: str) -> list[InstanceRecord]:
        """Instances of ``name``: running first, then the newest ended."""

    @abc.abstractmethod
    async def put_secret(self, scope: str, name: str, ciphertext: str, now: float) -> None: ...

    @abc.abstractmethod
    async def get_secrets(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The ciphertext of each (scope, name) that is kept."""

    @abc.abstractmethod
    async def list_secrets(self, scope: str = "") -> list[str]:
        """Names of the secrets kept in ``scope``, sorted (never values)."""

    @abc.abstractmethod
    async def delete_secret(self, scope: str, name: str) -> bool: ...

    @abc.abstractmethod
    async def claim_service(self, name: str, owner: str, *, ttl: float, now: float) -> bool:
        """Take or renew the lease row ``name`` for ``owner``; True if ``owner`` holds it.

        Only one owner holds a lease until it expires, so one autoscaler acts at a time.
        """

    @abc.abstractmethod
    async def release_service(self, name: str, owner: str) -> None: ...

    @abc.abstractmethod
    async def service_holder(self, name: str, now: float) -> str | None:
        """The owner of lease ``name`` if it has not expired."""


class RevisionStore(abc.ABC):
    """Pinning: the runs on each revision of a group, moving them, retiring revisions.

    A run on a group's queue records the revision current at its start; only
    that revision's workers claim it (``Store.claim_activations(revision=...)``).
    """

    @abc.abstractmethod
    async def list_revisions(self, name: str) -> list[RevisionStatus]:
        """Every revision of group ``name``, newest first, with its open runs ([]: no group).

        A run recorded with no revision (started before its queue had a group)
        counts on the current revision, which serves it."""

    @abc.abstractmethod
    async def revision_loads(self, task_queue: str, now: float) -> list[RevisionLoad]:
        """The load of each revision with work or runs on ``task_queue``: tasks on the
        queue by their run's revision, runnable and leased runs, open runs, the next
        timer and retry. Revision None: runs recorded with no revision."""

    @abc.abstractmethod
    async def open_runs_on(self, task_queue: str) -> list[OpenRun]:
        """The runs not ended (running or blocked) on ``task_queue``, newest first."""

    @abc.abstractmethod
    async def migrate_run(
        self,
        workflow_id: str,
        run_id: str | None,
        *,
        to_revision: int,
        now: float,
        expect_seq: int | None = None,
    ) -> RunRecord:
        """Move the open run of ``workflow_id`` (or exactly ``run_id``) to ``to_revision``
        of the group serving its queue; a blocked run becomes runnable there. The run's
        fence is incremented and its activation lease dropped, so a commit of an
        activation the old revision's worker holds is refused.

        ``expect_seq`` (the run's ``next_seq`` when its history was checked) makes
        the move conditional on the history being unchanged since.

        Raises:
            RunNotFoundError: no such run.
            WorkflowNotRunningError: the run has ended.
            GroupNotFoundError: no group serves its queue, or it has no such revision.
            GroupError: the revision is retired.
            GroupConflictError: the history grew past ``expect_seq`` (nothing moves).
        """

    @abc.abstractmethod
    async def retire_revisions(self, name: str, now: float) -> list[int]:
        """Retire each revision of ``name`` older than its current one with no open run
        left (``retired_at`` set, a decision row saying so); the revisions retired now."""
