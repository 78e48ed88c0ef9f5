"""The store protocol: the one boundary between the engine and its storage.

Both stores (``sqlite``, which also serves ``memory://`` in memory, and
``postgres``) implement :class:`Store` over one SQL body (``sql/``) and pass the
same contract suite (``tests/contract``).

Model
-----
* A **run** has an append-only history (see ``keepgoing._history.events``),
  a ``status`` (running, blocked, completed, failed, cancelled), a
  ``runnable`` flag, an activation lease (owner, expiry) and a ``fence``.
  Appending an *input* event sets ``runnable`` and ``last_input_seq``.
  ``seq`` is allocated inside the writing transaction, 1, 2, 3, ... per run.
* A **task** row exists for every ``TaskScheduled``; it is identified by
  ``(run_id, cmd)``, is pending / running / completed / failed, and carries
  its own lease, ``fence``, attempt counter, failure and worker-loss counters.
* A **timer** row exists for every ``TimerStarted``: pending, fired or cancelled.
* Every claim increments the claimed row's ``fence``. A write that presents a
  fence must find the row still at that fence, or it writes nothing (the rule
  is one SQL fragment, ``FENCED`` in ``sql/leases.py``).

Time is always passed in (``now``) so tests can use a fake clock. Methods are
coroutines; they never block the event loop for long.

Errors: every method may raise :class:`keepgoing.errors.StoreError` when
storage fails. Other errors are listed per method.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Mapping, Sequence

from keepgoing._history.events import Event
from keepgoing._run_flow import RunFlow
from keepgoing._store.auth_protocol import AuthStore
from keepgoing._store.gateway_protocol import GatewayStore
from keepgoing._store.groups_protocol import GroupStore, RevisionStore
from keepgoing._store.inspect_protocol import InspectStore
from keepgoing._store.limits_protocol import LimitStore
from keepgoing._store.observe_protocol import ObserveStore
from keepgoing._store.records import (
    ActivationClaim,
    ActivationCommit,
    AuditEntry,
    CancelRequest,
    CommitResult,
    EventPublished,
    EventRequest,
    FastActivation,
    Lineage,
    MessageRequest,
    ReviewRequest,
    RunRecord,
    StartRequest,
    TaskClaim,
    TaskOutcome,
    TaskOutcomeResult,
    WorkerRecord,
    WorkerStop,
)
from keepgoing._store.recovery_protocol import RecoveryStore
from keepgoing._store.retention_protocol import RetentionStore
from keepgoing._store.schedules_protocol import ScheduleStore
from keepgoing._store.volumes_protocol import VolumeStore

__all__ = ["Store"]


class Store(
    AuthStore,
    ObserveStore,
    InspectStore,
    VolumeStore,
    GatewayStore,
    GroupStore,
    RevisionStore,
    ScheduleStore,
    RecoveryStore,
    RetentionStore,
    LimitStore,
    abc.ABC,
):
    """Durable state of every run. One instance per process is enough; it is task-safe."""

    url: str = ""

    # -- lifecycle -------------------------------------------------------------
    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations. Idempotent.

        Raises:
            SchemaVersionError: the stored schema is newer than this code knows.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections. Idempotent."""

    # -- runs ------------------------------------------------------------------
    @abc.abstractmethod
    async def start_run(self, request: StartRequest) -> RunRecord:
        """Create a run and append ``WorkflowStarted`` (seq 1) in one transaction.

        The run is ``running`` and runnable. A workflow id may have at most one
        run that has not ended (running or blocked); an ended id may start again.

        Raises:
            WorkflowAlreadyRunningError: ``workflow_id`` has a run that has not ended.
        """

    @abc.abstractmethod
    async def start_runs(self, requests: Sequence[StartRequest]) -> list[tuple[RunRecord, bool]]:
        """Start every run as :meth:`start_run` does, all in one transaction: every
        one of them is started (and durable) when this returns, or none is.

        A request whose ``run_id`` already names a run of the same workflow name
        and workflow id is an idempotent repeat: that run, with False (True for a
        run this call started), in the order of ``requests``.

        Raises:
            WorkflowAlreadyRunningError: a request's ``workflow_id`` has a run that
                has not ended (its note names the request); nothing was started.
            InvalidRequestError: a ``run_id`` already names a run of another
                workflow name or id; nothing was started.
        """

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run with ``run_id``, or None."""

    @abc.abstractmethod
    async def find_run(self, workflow_id: str) -> RunRecord | None:
        """The newest run (by ``created_at``, then insertion) of ``workflow_id``, or None."""

    @abc.abstractmethod
    async def list_runs(
        self,
        *,
        workflow_name: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRecord]:
        """Runs, newest first, filtered by workflow name and status."""

    @abc.abstractmethod
    async def read_history(self, run_id: str, after_seq: int = 0) -> list[Event]:
        """Events of ``run_id`` with ``seq > after_seq``, in seq order ([] if none)."""

    # -- activations -------------------------------------------------------------
    @abc.abstractmethod
    async def claim_activations(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        workflow_names: Sequence[str],
        limit: int,
        lease_ttl: float,
        now: float,
        revision: int | None = None,
    ) -> list[ActivationClaim]:
        """Lease up to ``limit`` runnable runs, oldest runnable first.

        Eligible: status ``running``, ``runnable``, ``task_queue`` in ``queues``,
        ``workflow_name`` in ``workflow_names``, and no unexpired activation lease.
        With ``revision`` (a worker of that group revision) only runs whose
        ``group_revision`` is that revision or NULL are eligible: a run stays on
        the revision it started on until it is migrated.
        Each claim sets the lease (owner, ``now + lease_ttl``) and increments the fence.
        """

    @abc.abstractmethod
    async def commit_activation(self, commit: ActivationCommit) -> CommitResult:
        """Apply an activation atomically (see :class:`ActivationCommit`).

        Fails (``ok=False``, nothing written) if the run's fence differs from
        ``commit.fence`` or the run is no longer running. On success the
        activation lease is released, and ``runnable`` is cleared unless an
        input arrived after ``saw_upto``.
        """

    @abc.abstractmethod
    async def claim_blocked(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        versions: Mapping[str, str],
        limit: int,
        lease_ttl: float,
        now: float,
        revision: int | None = None,
    ) -> list[ActivationClaim]:
        """Lease up to ``limit`` blocked runs that code ``versions`` should retry.

        ``revision`` pins as in :meth:`claim_activations`.

        ``versions`` maps each workflow name the worker serves to its code
        version. Eligible: status ``blocked``, ``task_queue`` in ``queues``,
        and either the worker's version is not among the run's
        ``blocked_versions`` or ``retry_blocked_at`` has passed. Each claimed
        run becomes ``running`` and runnable (``blocked_reason`` cleared) with
        the activation lease held by ``worker_id`` and its fence incremented;
        activating it either continues the run or blocks it again.
        """

    @abc.abstractmethod
    async def unblock_run(self, workflow_id: str, run_id: str | None, now: float) -> RunRecord:
        """Make the blocked run of ``workflow_id`` (or exactly ``run_id``) runnable now.

        It becomes ``running``; the next worker that serves it replays it, and
        blocks it again with the new diff if its code still does not replay.

        Raises:
            RunNotFoundError: no such run.
            WorkflowNotRunningError: the run is not blocked (nothing changes).
        """

    @abc.abstractmethod
    async def release_activation(self, run_id: str, fence: int) -> None:
        """Drop an activation lease without committing (the run stays runnable)."""

    # -- tasks ---------------------------------------------------------------------
    @abc.abstractmethod
    async def claim_tasks(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        task_names: Sequence[str],
        limit: int,
        lease_ttl: float,
        now: float,
        revision: int | None = None,
    ) -> list[TaskClaim]:
        """Lease up to ``limit`` pending tasks whose ``available_at <= now``.

        Eligible: the run's ``task_queue`` is in ``queues`` and the task's name
        is in ``task_names``. With ``revision``, a task on its run's own queue is
        eligible only if the run's ``group_revision`` is that revision or NULL (a
        task routed to a per-task group's queue is eligible for any revision).
        Each claim increments ``attempt`` and the fence, sets ``started_at=now``,
        ``deadline=now+timeout`` and the lease (``min(now+lease_ttl, deadline+lease_ttl)``).
        """

    @abc.abstractmethod
    async def complete_task(
        self, outcome: TaskOutcome, fast: FastActivation | None = None
    ) -> TaskOutcomeResult:
        """Record how an attempt ended, fenced by ``outcome.fence``.

        Success appends ``TaskCompleted``. A failure appends ``TaskAttemptFailed``
        and, per :func:`keepgoing._store.transitions.decide_failure`, either
        makes the task pending again at ``retry_at`` or fails it for good and
        appends ``TaskFailed``. ``TaskCompleted``/``TaskFailed`` make the run
        runnable, unless ``fast`` is given, its preconditions hold, and the
        outcome is a success: then the fast activation is applied in the same
        transaction (see :class:`FastActivation`).

        A stale fence, or a task that is no longer running, writes nothing and
        returns ``accepted=False``.
        """

    @abc.abstractmethod
    async def fire_timer(
        self, run_id: str, cmd: int, *, worker_id: str, now: float, fast: FastActivation
    ) -> CommitResult | None:
        """Fire one pending timer of a running run, with the next activation if possible.

        The timer's hot path, like :meth:`complete_task`'s: appends
        ``TimerFired(cmd)`` and, when ``fast``'s preconditions hold (the run's
        fence and ``last_input_seq`` unchanged, no activation lease), the
        marker (``saw_upto`` = the ``TimerFired`` seq) and ``fast.commands`` in
        the same transaction, returning that commit's result. When they do not
        hold, the timer still fires (the run becomes runnable) and None is
        returned. A timer that is not pending, or a run that is not running,
        writes nothing and returns None.
        """

    @abc.abstractmethod
    async def release_tasks(self, worker_id: str, now: float) -> int:
        """Give back every task attempt leased by ``worker_id`` (graceful shutdown).

        Each becomes pending again at once with ``TaskAttemptFailed(reason=
        "released")``, not counted against retries or worker losses. Returns
        how many were released. Activation leases of ``worker_id`` are dropped too.
        """

    # -- leases and services -----------------------------------------------------------
    @abc.abstractmethod
    async def heartbeat(
        self,
        worker_id: str,
        *,
        lease_ttl: float,
        now: float,
        attempts: Collection[tuple[str, int]] | None = None,
        runs: Collection[str] | None = None,
        known_through: float | None = None,
    ) -> set[tuple[str, int]]:
        """Extend every lease ``worker_id`` holds, in one go.

        Task leases run ``lease_ttl`` from now but never more than ``lease_ttl``
        past the attempt's deadline (the attempt-lease cap, ``sql/leases.py``); the
        orchestrator thereby enforces the attempt timeout. Also refreshes the
        worker's registry row. Returns the ``(run_id, cmd)`` of the task
        attempts the worker still holds; an attempt missing from it was lost.

        ``attempts`` (task keys) and ``runs`` (activations), when given, are
        what the worker knows it holds, and only those leases are extended.
        With ``known_through``, the worker vouches that every task lease granted
        to it before that instant is in ``attempts`` or was never heard of (a
        claim whose commit answer was lost when its connection dropped during
        ``COMMIT``): each running attempt it holds that was claimed before then
        and is not in ``attempts`` is handed back at once, recorded as
        ``TaskAttemptFailed`` with reason ``"released"`` (the worker never ran
        it), in the same transaction. A lease granted later is left alone: its
        answer may still be on its way to the worker.
        """

    @abc.abstractmethod
    async def fire_due_timers(self, *, now: float, limit: int) -> int:
        """Fire up to ``limit`` pending timers with ``fire_at <= now``.

        Each appends ``TimerFired(cmd)`` to its run and makes it runnable;
        each timer fires exactly once, however many callers race.
        Returns how many fired.
        """

    @abc.abstractmethod
    async def reap_expired_leases(self, *, now: float, limit: int) -> int:
        """Recover up to ``limit`` task attempts whose lease expired before ``now``.

        Each attempt is recorded as ``TaskAttemptFailed`` with reason
        ``"timeout"`` if ``now`` is past its deadline, else ``"worker_lost"``,
        and retried or failed per ``decide_failure``. Expired activation
        leases are cleared too. Each expired lease is reaped exactly once.
        Owners with a liveness token (:meth:`hold_liveness`) are judged by it
        as ``transitions.reap_reason`` says: a living owner keeps an expired
        attempt lease until the deadline; a gone owner loses every lease now.
        Returns how many task attempts were reaped.
        """

    @abc.abstractmethod
    async def next_wakeup(self) -> float | None:
        """The earliest future instant at which work may become due: a pending
        timer's ``fire_at``, a pending task's ``available_at``, or a lease's
        expiry. None when nothing is scheduled."""

    # -- messages, events, cancellation, lineage, audit -------------------------------
    @abc.abstractmethod
    async def send_message(self, request: MessageRequest) -> str:
        """Append ``MessageReceived`` to the open run of ``request.workflow_id``.

        Returns the new message id. Messages to one run keep their send order.

        Raises:
            RunNotFoundError: no run has that workflow id (or ``run_id``).
            WorkflowNotRunningError: the run has ended.
            InvalidRequestError: the name starts with ``review:``, kept for review
                decisions (:meth:`decide_review` sends those).
        """

    @abc.abstractmethod
    async def decide_review(self, request: ReviewRequest) -> str:
        """Accept a reviewer's decision on uncertain round ``request.cmd``, in one
        transaction: only while the round is uncertain, its run open, and neither
        decided nor given up by the workflow (``ReviewAbandoned``); at most once.
        Sends the decision as the message ``review:<operation id>`` from the
        reviewer, records the round as decided, and appends an
        ``operation.review`` audit entry. Returns the message id.

        Raises:
            OperationNotUncertainError: any of those does not hold (the message says
                which); nothing is written.
            RunNotFoundError: no such run.
        """

    @abc.abstractmethod
    async def publish_event(self, request: EventRequest) -> EventPublished:
        """Store an external event and deliver it to the runs waiting for it.

        An ``event_id`` seen before changes nothing (``duplicate=True``). Each
        open wait on (``event_type``, ``correlation_id``) gets ``EventReceived``;
        an event with no waiter yet is kept, and matched when a wait starts.
        Each run receives each event at most once.
        """

    @abc.abstractmethod
    async def cancel_run(self, request: CancelRequest) -> RunRecord:
        """Ask the open run of ``workflow_id`` to stop.

        A running run gets ``CancelRequested`` (its workflow sees
        ``CancelledError``); a blocked run, which cannot run code, ends as
        cancelled at once, and so do its open children.

        Raises:
            RunNotFoundError: no such run.
            WorkflowNotRunningError: the run has already ended (nothing changes).
        """

    @abc.abstractmethod
    async def lineage(self, workflow_id: str) -> Lineage:
        """The newest run of ``workflow_id`` with its parent and its children.

        Raises:
            RunNotFoundError: no run has that workflow id.
        """

    @abc.abstractmethod
    async def append_audit(self, entry: AuditEntry) -> int:
        """Record ``entry``; returns its id."""

    @abc.abstractmethod
    async def list_audit(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        action: str | None = None,
        workflow_id: str | None = None,
    ) -> list[AuditEntry]:
        """Audit entries, newest first, optionally of one action or workflow."""

    # -- notification ------------------------------------------------------------------
    @abc.abstractmethod
    async def wait_for_change(self, timeout: float, key: object | None = None) -> None:
        """Return when the store may have new work or a run may have ended, or
        after ``timeout`` seconds. Spurious wake-ups are allowed.

        Waits with the same ``key`` (default: the calling asyncio task) never
        miss a change made between them: such a change ends the next wait at once.
        """

    # -- workers -------------------------------------------------------------------------
    @abc.abstractmethod
    async def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or replace the worker's registry row."""

    @abc.abstractmethod
    async def deregister_worker(self, worker_id: str) -> None:
        """Remove the worker's registry row."""

    async def hold_liveness(self, worker_id: str) -> str | None:
        """Take a liveness token for ``worker_id`` that this process holds until
        :meth:`release_liveness` or its death, and return it, to record as
        ``WorkerRecord.liveness``; None if this store has no such tokens.

        The lease reaper reads the token of each lease owner that recorded one:
        held, the owner lives, and an expired lease of its task attempt is kept
        until the attempt's deadline (its heartbeats may be stalled by a call
        that holds the GIL); free, the owner's process is gone, and all its
        leases are taken back at once, expired or not.
        """
        return None

    async def release_liveness(self, worker_id: str) -> None:
        """Give up the token :meth:`hold_liveness` took (after the worker's leases)."""
        return None

    @abc.abstractmethod
    async def record_worker_stop(self, stop: WorkerStop, *, now: float) -> int:
        """Record, before its signal is sent, that ``stop.worker_id`` is being stopped
        on purpose and why; returns the stop's id for :meth:`settle_worker_stop`.

        Until it is settled the stop is pending: the reaper leaves that worker's
        attempts alone (for at most ``worker_stops.PENDING_GRACE`` seconds). Each attempt
        later taken from the worker, by the reaper (``worker_lost``) or by
        :meth:`release_tasks`, records the newest stop's cause, actor and ``via``
        in its ``TaskAttemptFailed``; the rules are in ``_store/worker_stops.py`` (a
        :class:`WorkerStop` with a cause not in ``worker_stops.CAUSES`` cannot be made).
        """

    @abc.abstractmethod
    async def settle_worker_stop(self, stop_id: int, *, signalled: bool) -> None:
        """The signal of stop ``stop_id`` was sent (it explains the worker's losses
        from now on), or could not be (the process was gone: the stop is removed, so
        an earlier death keeps no cause). An unknown id changes nothing."""

    @abc.abstractmethod
    async def list_workers(self) -> list[WorkerRecord]:
        """Every registered worker, oldest first: the live ones and those marked lost
        (``lost_at`` set) in the last ``lost_workers.KEEP_LOST`` seconds."""

    @abc.abstractmethod
    async def mark_lost_workers(self, *, now: float) -> int:
        """Mark lost every registered worker the rule of ``_store/lost_workers.py``
        says is (its liveness token free, or no heartbeat past its deadline), with
        ``now`` and the reason in words; forget those lost long ago. Returns how many
        it marked. Safe for any number of concurrent callers: a worker that
        heartbeats meanwhile is not marked, and none is marked twice."""

    @abc.abstractmethod
    async def record_workflows(
        self, names: Sequence[str], queues: Sequence[str], now: float
    ) -> None:
        """Remember that ``names`` are served on ``queues`` (kept after workers stop)."""

    @abc.abstractmethod
    async def record_flows(self, flows: Mapping[str, RunFlow | None], now: float) -> None:
        """Remember each workflow's run-flow spec (its concurrency limit or singleton
        key; None: none), which every later start of it obeys, by code or by name."""

    @abc.abstractmethod
    async def run_flows(self) -> dict[str, RunFlow]:
        """The specs :meth:`record_flows` recorded, by workflow name."""

    @abc.abstractmethod
    async def known_workflows(self) -> dict[str, list[str]]:
        """Every workflow name any worker has served, with its queues (sorted)."""
