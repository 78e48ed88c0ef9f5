"""The state behind :class:`~keepgoing._store.memory.MemoryStore`: rows and their rules.

Everything here is synchronous and unlocked; ``MemoryStore`` holds its lock
around each call, so each method below is one atomic "transaction". Methods
that can refuse (a stale fence, an invalid command) check before they mutate,
so a refusal writes nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any

from keepgoing._history.events import (
    ActivationCompleted,
    ErrorInfo,
    Event,
    TaskAttemptFailed,
    TaskFailed,
    TaskScheduled,
    TimerCancelled,
    TimerStarted,
    WorkflowBlocked,
    WorkflowCancelled,
    WorkflowCompleted,
    WorkflowFailed,
    WorkflowStarted,
)
from keepgoing._store import _memory_messaging as messaging
from keepgoing._store.records import (
    OPEN,
    TERMINAL,
    CommitResult,
    RunRecord,
    RunStatus,
    StartRequest,
    TaskClaim,
    WorkerRecord,
)
from keepgoing._store.transitions import FailureDecision, decide_failure
from keepgoing.errors import StoreError, WorkflowAlreadyRunningError

__all__ = ["MemoryState", "RunRow", "TaskRow", "TimerRow"]

TaskKey = tuple[str, int]


@dataclass
class RunRow:
    """A run and its history. ``runnable_since`` orders activation claims."""

    run_id: str
    workflow_id: str
    workflow_name: str
    status: RunStatus
    input: dict[str, Any]
    task_queue: str
    code_version: str
    created_at: float
    updated_at: float
    order: int
    result: Any = None
    error: ErrorInfo | None = None
    blocked_reason: str | None = None
    fence: int = 0
    last_input_seq: int = 0
    runnable: bool = False
    runnable_since: int = 0
    ended_at: float | None = None
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    history: list[Event] = field(default_factory=list)
    task_cmds: list[int] = field(default_factory=list)
    timer_cmds: list[int] = field(default_factory=list)
    parent_workflow_id: str | None = None
    parent_run_id: str | None = None
    parent_cmd: int | None = None
    continued_from: str | None = None
    continued_to: str | None = None

    def record(self) -> RunRecord:
        """A detached, frozen copy of the run."""
        return RunRecord(
            run_id=self.run_id,
            workflow_id=self.workflow_id,
            workflow_name=self.workflow_name,
            status=self.status,
            input=copy.deepcopy(self.input),
            task_queue=self.task_queue,
            code_version=self.code_version,
            created_at=self.created_at,
            updated_at=self.updated_at,
            result=copy.deepcopy(self.result),
            error=self.error,
            blocked_reason=self.blocked_reason,
            fence=self.fence,
            last_input_seq=self.last_input_seq,
            runnable=self.runnable,
            ended_at=self.ended_at,
            parent_workflow_id=self.parent_workflow_id,
            parent_run_id=self.parent_run_id,
            continued_from=self.continued_from,
            continued_to=self.continued_to,
        )

    def lease_held(self, now: float) -> bool:
        """Whether someone holds an activation lease that has not expired at ``now``."""
        return self.lease_owner is not None and (self.lease_expires_at or 0.0) > now


@dataclass
class TaskRow:
    """One task (``TaskScheduled``) and the state of its current attempt."""

    run_id: str
    cmd: int
    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    retries: int
    retry_delay: float | None
    timeout: float
    max_worker_losses: int
    image: str | None
    order: int
    status: str = "pending"  # pending | running | completed | failed | cancelled
    available_at: float = 0.0
    attempt: int = 0
    failures: int = 0
    worker_losses: int = 0
    fence: int = 0
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    started_at: float | None = None
    deadline: float | None = None

    @property
    def key(self) -> TaskKey:
        return (self.run_id, self.cmd)

    def lease_cap(self, now: float, lease_ttl: float) -> float:
        # The lease never outlives the deadline by more than one TTL: this is how
        # the orchestrator enforces the attempt timeout on a live but stuck worker.
        return min(now + lease_ttl, (self.deadline or now) + lease_ttl)


@dataclass
class TimerRow:
    """One timer (``TimerStarted``)."""

    run_id: str
    cmd: int
    fire_at: float
    order: int
    status: str = "pending"  # pending | fired | cancelled


def _unknown_error() -> ErrorInfo:
    return ErrorInfo(type="keepgoing.UnknownError", message="the attempt failed without an error")


class MemoryState:
    """All rows of a memory store, with the mutations the protocol defines."""

    def __init__(self) -> None:
        self.runs: dict[str, RunRow] = {}
        self.tasks: dict[TaskKey, TaskRow] = {}
        self.timers: dict[TaskKey, TimerRow] = {}
        # Indexes of the rows that can still change, so scans stay proportional
        # to live work rather than to everything ever stored.
        self.active_tasks: dict[TaskKey, TaskRow] = {}
        self.pending_timers: dict[TaskKey, TimerRow] = {}
        self.leased_runs: dict[str, RunRow] = {}
        self.runnable_runs: dict[str, RunRow] = {}
        self.runs_by_workflow: dict[str, list[RunRow]] = {}
        self.workers: dict[str, tuple[int, WorkerRecord]] = {}
        self.messaging = messaging.MessagingState()
        self._counter = itertools.count(1)

    def tick(self) -> int:
        """The next value of a store-wide counter, used for stable ordering."""
        return next(self._counter)

    def create_run(self, request: StartRequest) -> RunRow:
        """A running, runnable run with ``WorkflowStarted`` at seq 1.

        Raises:
            WorkflowAlreadyRunningError: ``workflow_id`` has a run that has not ended.
            StoreError: ``run_id`` is already taken.
        """
        if request.run_id in self.runs:
            raise StoreError(f"a run with id {request.run_id!r} already exists")
        for other in self.runs_by_workflow.get(request.workflow_id, []):
            if other.status in OPEN:
                raise WorkflowAlreadyRunningError(request.workflow_id, other.run_id)
        run = RunRow(
            run_id=request.run_id,
            workflow_id=request.workflow_id,
            workflow_name=request.workflow_name,
            status="running",
            input=copy.deepcopy(request.input),
            task_queue=request.task_queue,
            code_version=request.code_version,
            created_at=request.now,
            updated_at=request.now,
            order=self.tick(),
            parent_workflow_id=request.parent_workflow_id,
            parent_run_id=request.parent_run_id,
            parent_cmd=request.parent_cmd,
            continued_from=request.continued_from,
        )
        self.runs[run.run_id] = run
        self.runs_by_workflow.setdefault(run.workflow_id, []).append(run)
        started = WorkflowStarted(
            workflow_name=run.workflow_name,
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            input=request.input,
            code_version=run.code_version,
            task_queue=run.task_queue,
            parent_workflow_id=run.parent_workflow_id,
            parent_run_id=run.parent_run_id,
            continued_from=run.continued_from,
        )
        self.append(run, started, request.now)
        return run

    def newest_run(self, workflow_id: str) -> RunRow | None:
        runs = self.runs_by_workflow.get(workflow_id, [])
        return max(runs, key=lambda r: (r.created_at, r.order), default=None)

    # -- history ---------------------------------------------------------------
    def append(self, run: RunRow, event: Event, at: float) -> Event:
        """Append ``event`` with the next seq; an input makes the run runnable."""
        stored = dataclasses.replace(copy.deepcopy(event), seq=len(run.history) + 1, at=at)
        run.history.append(stored)
        run.updated_at = at
        if stored.ROLE == "input":
            run.last_input_seq = stored.seq
            self.set_runnable(run, True)
        return stored

    def set_runnable(self, run: RunRow, runnable: bool) -> None:
        if runnable and not run.runnable:
            run.runnable_since = self.tick()
        run.runnable = runnable
        if runnable:
            self.runnable_runs[run.run_id] = run
        else:
            self.runnable_runs.pop(run.run_id, None)

    def set_run_lease(self, run: RunRow, owner: str | None, expires_at: float | None) -> None:
        run.lease_owner = owner
        run.lease_expires_at = expires_at if owner is not None else None
        if owner is None:
            self.leased_runs.pop(run.run_id, None)
        else:
            self.leased_runs[run.run_id] = run

    # -- tasks -------------------------------------------------------------------
    def set_task_status(self, task: TaskRow, status: str) -> None:
        task.status = status
        if status in ("pending", "running"):
            self.active_tasks[task.key] = task
        else:
            self.active_tasks.pop(task.key, None)
        if status != "running":
            task.lease_owner = None
            task.lease_expires_at = None

    def claim_task(self, task: TaskRow, worker_id: str, lease_ttl: float, now: float) -> TaskClaim:
        """Start the next attempt of ``task`` for ``worker_id``."""
        task.attempt += 1
        task.fence += 1
        task.started_at = now
        task.deadline = now + task.timeout
        self.set_task_status(task, "running")
        task.lease_owner = worker_id
        task.lease_expires_at = task.lease_cap(now, lease_ttl)
        return self.task_claim(task)

    def task_claim(self, task: TaskRow) -> TaskClaim:
        assert task.started_at is not None and task.deadline is not None
        assert task.lease_expires_at is not None
        return TaskClaim(
            run_id=task.run_id,
            workflow_id=self.runs[task.run_id].workflow_id,
            cmd=task.cmd,
            name=task.name,
            args=copy.deepcopy(task.args),
            kwargs=copy.deepcopy(task.kwargs),
            attempt=task.attempt,
            fence=task.fence,
            started_at=task.started_at,
            deadline=task.deadline,
            lease_expires_at=task.lease_expires_at,
            timeout=task.timeout,
            retries=task.retries,
            retry_delay=task.retry_delay,
            max_worker_losses=task.max_worker_losses,
            image=task.image,
        )

    def fail_attempt(
        self,
        task: TaskRow,
        *,
        reason: str,
        error: ErrorInfo | None,
        worker: str,
        started_at: float | None,
        now: float,
    ) -> FailureDecision:
        """Record a failed attempt of a running task, then retry it or fail it for good."""
        run = self.runs[task.run_id]
        error = error or _unknown_error()
        decision = decide_failure(
            reason=reason,
            failures=task.failures,
            worker_losses=task.worker_losses,
            retries=task.retries,
            max_worker_losses=task.max_worker_losses,
            retry_delay=task.retry_delay,
            now=now,
        )
        if reason == "released":
            # A graceful hand-back is due again at once (protocol: "pending again at once").
            decision = dataclasses.replace(decision, retry_at=now, final_message=None)
        attempt_failed = TaskAttemptFailed(
            cmd=task.cmd,
            name=task.name,
            attempt=task.attempt,
            error=error,
            reason=reason,
            worker=worker,
            started_at=started_at,
            retry_at=decision.retry_at,
        )
        self.append(run, attempt_failed, now)
        task.failures = decision.failures
        task.worker_losses = decision.worker_losses
        if decision.retry_at is not None:
            self.set_task_status(task, "pending")
            task.available_at = decision.retry_at
            return decision
        self.set_task_status(task, "failed")
        if decision.final_message is not None:
            error = ErrorInfo(type="keepgoing.WorkerLost", message=decision.final_message)
        final = TaskFailed(
            cmd=task.cmd, name=task.name, error=error, attempts=task.attempt, reason=reason
        )
        self.append(run, final, now)
        return decision

    # -- activations ---------------------------------------------------------------
    def check_commands(self, run: RunRow, commands: list[Event]) -> None:
        """Refuse, before anything is written, commands that would corrupt the run."""
        new_tasks: set[int] = set()
        new_timers: set[int] = set()
        for command in commands:
            if command.ROLE != "command":
                raise StoreError(
                    f"{type(command).__name__} is not a command and cannot be committed"
                )
            if isinstance(command, TaskScheduled):
                if (run.run_id, command.cmd) in self.tasks or command.cmd in new_tasks:
                    raise StoreError(f"run {run.run_id} already has a task with cmd {command.cmd}")
                new_tasks.add(command.cmd)
            elif isinstance(command, TimerStarted):
                if (run.run_id, command.cmd) in self.timers or command.cmd in new_timers:
                    raise StoreError(f"run {run.run_id} already has a timer with cmd {command.cmd}")
                new_timers.add(command.cmd)

    def apply_activation(
        self,
        run: RunRow,
        *,
        saw_upto: int,
        time: float,
        worker_id: str,
        commands: list[Event],
        now: float,
        eager_claim: bool,
        eager_limit: int,
        lease_ttl: float,
        blocked_reason: str | None = None,
    ) -> CommitResult:
        """Append a marker and ``commands`` and apply their effects (checks done by caller)."""
        last_seq = len(run.history)
        if commands or blocked_reason is None:
            marker = ActivationCompleted(saw_upto=saw_upto, time=time, worker=worker_id)
            last_seq = self.append(run, marker, now).seq
        scheduled: list[TaskRow] = []
        for command in commands:
            last_seq = self.append(run, command, now).seq
            task = self._apply_command(run, command, now)
            if task is not None:
                scheduled.append(task)
        if run.status in TERMINAL:
            self.close_run(run, now)
        elif blocked_reason is not None:
            last_seq = self.append(run, WorkflowBlocked(reason=blocked_reason), now).seq
            run.status = "blocked"
            run.blocked_reason = blocked_reason
        self.set_run_lease(run, None, None)
        if run.last_input_seq <= saw_upto:
            self.set_runnable(run, False)
        eager: list[TaskClaim] = []
        if eager_claim and run.status == "running":
            for task in scheduled[: max(0, eager_limit)]:
                eager.append(self.claim_task(task, worker_id, lease_ttl, now))
        return CommitResult(
            ok=True, last_seq=last_seq, fence=run.fence, eager=eager, saw_upto=saw_upto
        )

    def _apply_command(self, run: RunRow, command: Event, now: float) -> TaskRow | None:
        if isinstance(command, TaskScheduled):
            return self._create_task(run, command, now)
        if isinstance(command, TimerStarted):
            timer = TimerRow(run.run_id, command.cmd, command.fire_at, self.tick())
            self.timers[(run.run_id, command.cmd)] = timer
            self.pending_timers[(run.run_id, command.cmd)] = timer
            run.timer_cmds.append(command.cmd)
        elif isinstance(command, TimerCancelled):
            # Cancelling a timer that already fired is a no-op (DESIGN section 9).
            pending = self.pending_timers.pop((run.run_id, command.cmd), None)
            if pending is not None:
                pending.status = "cancelled"
        elif isinstance(command, WorkflowCompleted | WorkflowFailed | WorkflowCancelled):
            self.end_run(run, command, now)
        else:
            messaging.apply_command(self, run, command, now)
        return None

    def end_run(self, run: RunRow, command: Event, now: float) -> None:
        """Set the run's final status from ``command``; :meth:`close_run` settles the rest."""
        if run.status in TERMINAL:
            return
        if isinstance(command, WorkflowCompleted):
            run.status, run.result = "completed", copy.deepcopy(command.result)
        elif isinstance(command, WorkflowFailed):
            run.status, run.error = "failed", command.error
        else:
            assert isinstance(command, WorkflowCancelled)
            message = command.reason or "cancelled"
            run.status = "cancelled"
            run.error = ErrorInfo(type="asyncio.CancelledError", message=message)
        run.ended_at = now
        self.set_runnable(run, False)
        self.set_run_lease(run, None, None)

    def _create_task(self, run: RunRow, command: TaskScheduled, now: float) -> TaskRow:
        task = TaskRow(
            run_id=run.run_id,
            cmd=command.cmd,
            name=command.name,
            args=copy.deepcopy(command.args),
            kwargs=copy.deepcopy(command.kwargs),
            retries=command.retries,
            retry_delay=command.retry_delay,
            timeout=command.timeout,
            max_worker_losses=command.max_worker_losses,
            image=command.image,
            order=self.tick(),
            available_at=now,
        )
        self.tasks[task.key] = task
        self.set_task_status(task, "pending")
        run.task_cmds.append(command.cmd)
        return task

    def close_run(self, run: RunRow, now: float) -> None:
        """Cancel an ended run's open work and waits; tell its children and parent."""
        self._cancel_open_work(run)
        messaging.after_run_ended(self, run, now, notify_parent=run.status != "continued")

    def _cancel_open_work(self, run: RunRow) -> None:
        # An ended run accepts no further completions: its open tasks are cancelled,
        # which makes any in-flight attempt's fenced completion fail.
        for cmd in run.timer_cmds:
            timer = self.pending_timers.pop((run.run_id, cmd), None)
            if timer is not None:
                timer.status = "cancelled"
        for cmd in run.task_cmds:
            task = self.active_tasks.get((run.run_id, cmd))
            if task is not None:
                self.set_task_status(task, "cancelled")
