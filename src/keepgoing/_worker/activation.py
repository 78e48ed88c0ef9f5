"""Activations: replay or resume a workflow instance and commit its commands.

Also the sequential hot path: when a task finishes on a worker that holds
the run's cached instance, the result is delivered in memory, the next
activation runs at once, and one transaction records the completion, the
activation and the eager claim of the next task (DESIGN section 10).

The activator is handed what it works with (the store, the instance cache,
the clock, the settings, the registry, the statistics) and asks the worker
only how many attempt slots are free. What an activation leaves the worker
to do, it returns as a :class:`FollowUp`: the task attempts the store
claimed for this worker in the same commit, and the timers to fire on time.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from keepgoing import _tracing as tracing
from keepgoing._backoff import backoff
from keepgoing._clock import Clock
from keepgoing._history import events as ev
from keepgoing._payload import safe_text
from keepgoing._runtime.instance import Activation, WorkflowInstance
from keepgoing._runtime.prefix import REFUSED, PrefixMismatch
from keepgoing._store.protocol import Store
from keepgoing._store.records import (
    ActivationClaim,
    ActivationCommit,
    CommitResult,
    FastActivation,
    TaskClaim,
    TaskOutcome,
)
from keepgoing._worker.cache import InstanceCache
from keepgoing._worker.settings import WorkerSettings
from keepgoing.errors import NondeterminismError, StoreError

if TYPE_CHECKING:
    from keepgoing._worker.worker import WorkerStats
    from keepgoing._workflow.registry import Registry

__all__ = ["ACTIVATION_ATTEMPTS", "NOTHING", "Activator", "FollowUp"]

log = logging.getLogger("keepgoing.worker")


ACTIVATION_ATTEMPTS = 5
"""Consecutive failed activations of a run after which it is blocked with the error."""

BACKOFF_FIRST = 0.1  # seconds: the delay after the first failure, before jitter
BACKOFF_CAP = 5.0  # seconds


@dataclass(frozen=True, slots=True)
class FollowUp:
    """What a committed activation leaves to the worker.

    ``claims`` are the task attempts the store leased to this worker in the
    same commit (the eager claims): the worker starts them. ``timers`` are the
    timers the activation started, as ``(fire_at, run_id, cmd)``: the worker
    fires them on time while the run's instance stays cached.
    """

    claims: list[TaskClaim] = field(default_factory=list)
    timers: list[tuple[float, str, int]] = field(default_factory=list)


NOTHING = FollowUp()
"""Nothing to follow up (shared: nobody changes a follow-up)."""

Room = Callable[[], "int | None"]
"""The worker's free attempt slots now, or None once it is stopping (it claims no more)."""


class Activator:
    """Activates runs and completes task attempts for one worker.

    Args:
        store: the worker's store.
        cache: the worker's cached instances.
        clock: injected time.
        settings: the lease length.
        stats: counters the activator adds to.
        registry: the workflows it replays.
        worker_id: who holds the leases it commits.
        room: how many more attempts the worker can take now (None: it is
            stopping); read whenever a commit may claim the next tasks.
    """

    def __init__(
        self,
        store: Store,
        cache: InstanceCache,
        clock: Clock,
        settings: WorkerSettings,
        stats: WorkerStats,
        *,
        registry: Registry,
        worker_id: str,
        room: Room,
    ) -> None:
        self.store = store
        self.cache = cache
        self.clock = clock
        self.settings = settings
        self.stats = stats
        self.registry = registry
        self.worker_id = worker_id
        self.room = room
        self.keep_failures = False  # in-process runs re-raise the workflow's own exception
        self.failures: dict[str, BaseException] = {}  # run id -> its exception, if kept
        self._failures: dict[str, int] = {}  # run id -> consecutive failed activations

    def code_version(self, workflow_name: str) -> str:
        """The code version of one workflow served here ('' if none such is)."""
        definition = self.registry.workflows.get(workflow_name)
        return definition.code_version if definition is not None else ""

    async def activate(self, claim: ActivationClaim) -> FollowUp:
        run = claim.run
        try:
            instance = self.cache.take(run.run_id)
        except KeyError:  # this worker is completing one of its tasks right now
            await self.store.release_activation(run.run_id, claim.fence)
            return NOTHING
        kept = None  # an error drops the instance: it may have run ahead of the store
        try:
            kept, follow = await self._activate(claim, instance)
        finally:
            self.cache.give_back(run.run_id, kept)
        self._failures.pop(run.run_id, None)
        return follow

    # -- activations that fail ------------------------------------------------------
    async def failed(self, claim: ActivationClaim, exc: Exception) -> float | None:
        """Deal with an activation that raised (not a lost lease: that commits nothing).

        Returns the seconds to hold the run's lease before releasing it (a capped,
        jittered backoff), or None when the run is released or blocked now. The
        :data:`ACTIVATION_ATTEMPTS`-th consecutive failure blocks the run with the
        error as its reason; the database being unreachable counts against nothing.
        """
        run_id = claim.run.run_id
        count = self._failures.get(run_id, 0) + 1
        self._failures[run_id] = count
        if isinstance(exc, StoreError):  # the database, not the code: no traceback
            log.warning("activation of run %s not committed: %s", run_id, exc)
            return _backoff(count)
        if count < ACTIVATION_ATTEMPTS:
            log.warning(
                "activation of run %s failed (%d of %d): %s: %s; retrying with backoff",
                run_id,
                count,
                ACTIVATION_ATTEMPTS,
                type(exc).__name__,
                exc,
                exc_info=count == 1,
            )
            return _backoff(count)
        self._failures.pop(run_id, None)
        detail = "".join(traceback.format_exception(exc)).rstrip()
        reason = f"activating the run failed {count} times in a row; the last error:\n{detail}"
        try:
            await self._block(claim, reason)
        except Exception:
            log.exception("could not block run %s; it will be retried", run_id)
            return _backoff(count)
        return None

    async def _activate(
        self, claim: ActivationClaim, instance: WorkflowInstance | None
    ) -> tuple[WorkflowInstance | None, FollowUp]:
        run = claim.run
        after = instance.last_input_seq if instance else 0
        events = await self.store.read_history(run.run_id, after)
        if instance is not None and _stale(instance, events):
            instance.close()
            instance = None
            events = await self.store.read_history(run.run_id, 0)
        if instance is None:
            definition = self.registry.workflow(run.workflow_name)
            instance = WorkflowInstance(
                definition.fn,
                run_id=run.run_id,
                workflow_id=run.workflow_id,
                workflow_name=run.workflow_name,
            )
            instance.local = self.keep_failures
            self.stats.replays += 1
        try:
            activation = instance.activate(events)
        except PrefixMismatch as exc:  # a copied run's reused steps: it fails, no retry
            await self._refuse(claim, exc, events)
            instance.close()
            return None, NOTHING
        except NondeterminismError as exc:
            await self._block(claim, str(exc))
            instance.close()
            return None, NOTHING
        except Exception as exc:
            # Replaying the same history would fail the same way (a workflow that
            # busy-loops, say): block the run instead of retrying it forever.
            detail = "".join(traceback.format_exception(exc)).rstrip()
            await self._block(claim, f"the workflow's code failed while replaying:\n{detail}")
            instance.close()
            return None, NOTHING
        self.stats.activations += 1
        # A copied run past its reused steps: the steps its prefix left open may run now.
        checked = instance.reused is not None
        if not activation.commands and not activation.delivered and not checked:
            await self.store.release_activation(run.run_id, claim.fence)
            instance.fence = claim.fence
            return instance, NOTHING
        room = self.room()
        commit = ActivationCommit(
            run_id=run.run_id,
            fence=claim.fence,
            worker_id=self.worker_id,
            saw_upto=activation.saw_upto,
            time=activation.time,
            commands=activation.commands,
            now=self.clock.now(),
            eager_claim=room is not None,  # a stopping worker takes no new step
            eager_limit=max(0, room or 0),
            lease_ttl=self.settings.lease_ttl,
            code_version=self.code_version(run.workflow_name),
            release_held=checked,
        )
        try:
            result = await self.store.commit_activation(commit)
        except BaseException:
            instance.close()  # it ran ahead of the store
            raise
        if result.ok:
            instance.reused = None  # checked: live activations never replay the prefix
        return self._after_commit(instance, result, activation.saw_upto, activation.commands)

    async def _block(self, claim: ActivationClaim, reason: str) -> None:
        self.stats.blocked += 1
        reason = safe_text(reason)
        log.error("run %s is blocked:\n%s", claim.run.run_id, reason)
        await self.store.commit_activation(
            ActivationCommit(
                run_id=claim.run.run_id,
                fence=claim.fence,
                worker_id=self.worker_id,
                saw_upto=0,
                time=self.clock.now(),
                commands=[],
                now=self.clock.now(),
                blocked_reason=reason,
                code_version=self.code_version(claim.run.workflow_name),
            )
        )

    async def _refuse(
        self, claim: ActivationClaim, exc: PrefixMismatch, events: list[ev.Event]
    ) -> None:
        """Fail a resumed or forked run whose reused prefix the code schedules otherwise:
        its first activation ends it, so no step past the prefix is scheduled."""
        message = safe_text(str(exc))
        log.error("run %s is refused:\n%s", claim.run.run_id, message)
        now = self.clock.now()
        failed = ev.WorkflowFailed(error=ev.ErrorInfo(type=REFUSED, message=message))
        await self.store.commit_activation(
            ActivationCommit(
                run_id=claim.run.run_id,
                fence=claim.fence,
                worker_id=self.worker_id,
                saw_upto=max((e.seq for e in events if e.ROLE == "input"), default=0),
                time=now,
                commands=[failed],
                now=now,
                lease_ttl=self.settings.lease_ttl,
                code_version=self.code_version(claim.run.workflow_name),
            )
        )

    def _after_commit(
        self,
        instance: WorkflowInstance,
        result: CommitResult,
        saw_upto: int,
        commands: list[ev.Event],
    ) -> tuple[WorkflowInstance | None, FollowUp]:
        if not result.ok:
            instance.close()
            return None, NOTHING
        instance.position = result.last_seq
        instance.last_input_seq = saw_upto
        instance.fence = result.fence
        if tracing.enabled():
            _trace_run_end(instance, commands)
        if instance.failure is not None and self.keep_failures:
            self.failures[instance.run_id] = instance.failure
        run_id = instance.run_id
        timers = [(c.fire_at, run_id, c.cmd) for c in commands if isinstance(c, ev.TimerStarted)]
        if not timers and not result.eager:
            return instance, NOTHING
        return instance, FollowUp(result.eager, timers)

    # -- task completion, with the fast path -------------------------------------
    async def complete(self, outcome: TaskOutcome) -> FollowUp:
        if not outcome.ok or self.cache.is_busy(outcome.run_id):
            await self.store.complete_task(outcome)
            return NOTHING
        instance = self.cache.take(outcome.run_id)
        kept = None  # an error drops the instance: its state ran ahead of the store's
        try:
            kept, follow = await self._complete_fast(outcome, instance)
        finally:
            self.cache.give_back(outcome.run_id, kept)
        return follow

    async def _complete_fast(
        self, outcome: TaskOutcome, instance: WorkflowInstance | None
    ) -> tuple[WorkflowInstance | None, FollowUp]:
        if instance is None:
            await self.store.complete_task(outcome)
            return None, NOTHING
        fence, last_input = instance.fence, instance.last_input_seq
        done = ev.TaskCompleted(
            seq=instance.position + 1,
            at=outcome.now,
            cmd=outcome.cmd,
            result=outcome.result,
            attempt=outcome.attempt,
            worker=outcome.worker_id,
            started_at=outcome.started_at,
        )
        try:
            activation: Activation = instance.activate([done])
        except Exception:
            log.exception("in-memory activation of run %s failed", outcome.run_id)
            instance.close()
            await self.store.complete_task(outcome)
            return None, NOTHING
        room = self.room()
        fast = FastActivation(
            run_fence=fence,
            last_input_seq=last_input,
            commands=activation.commands,
            time=activation.time,
            eager_claim=room is not None,
            eager_limit=max(1, (room or 0) + 1),  # the completing attempt's slot is free
            lease_ttl=self.settings.lease_ttl,
            code_version=self.code_version(instance.workflow_name),
        )
        try:
            result = await self.store.complete_task(outcome, fast)
        except BaseException:
            instance.close()
            raise
        if result.activation is None or not result.activation.ok:
            instance.close()
            return None, NOTHING
        self.stats.fast_path += 1
        self.stats.activations += 1
        return self._after_commit(
            instance, result.activation, result.activation.saw_upto, activation.commands
        )

    # -- timers, with the same fast path -------------------------------------------
    async def fire_timer(self, run_id: str, cmd: int) -> FollowUp | None:
        """Fire a due timer of a cached instance and commit the activation it causes.

        Returns None when the fast path does not apply (the run is busy, not
        cached, or the timer is gone); the orchestrator's sweep fires it then.
        """
        if self.cache.is_busy(run_id):
            return None
        instance = self.cache.take(run_id)
        follow = None
        try:
            if instance is not None and cmd in instance.loop.pending_timers():
                instance, follow = await self._fire_fast(instance, cmd)
        finally:
            self.cache.give_back(run_id, instance)
        return follow

    async def _fire_fast(
        self, instance: WorkflowInstance, cmd: int
    ) -> tuple[WorkflowInstance | None, FollowUp | None]:
        now = self.clock.now()
        fence, last_input = instance.fence, instance.last_input_seq
        fired = ev.TimerFired(seq=instance.position + 1, at=now, cmd=cmd)
        try:
            activation = instance.activate([fired])
        except Exception:
            log.exception("in-memory activation of run %s failed", instance.run_id)
            instance.close()
            return None, None
        room = self.room()
        fast = FastActivation(
            run_fence=fence,
            last_input_seq=last_input,
            commands=activation.commands,
            time=activation.time,
            eager_claim=room is not None,
            eager_limit=max(0, room or 0),
            lease_ttl=self.settings.lease_ttl,
            code_version=self.code_version(instance.workflow_name),
        )
        result = await self.store.fire_timer(
            instance.run_id, cmd, worker_id=self.worker_id, now=now, fast=fast
        )
        if result is None or not result.ok:
            instance.close()  # it ran ahead in memory; the run is replayed when claimed
            return None, None
        self.stats.activations += 1
        return self._after_commit(instance, result, result.saw_upto, activation.commands)


_ENDINGS = {
    ev.WorkflowCompleted: "completed",
    ev.WorkflowFailed: "failed",
    ev.WorkflowCancelled: "cancelled",
    ev.WorkflowContinuedAsNew: "continued",
}


def _trace_run_end(instance: WorkflowInstance, commands: list[ev.Event]) -> None:
    """A run's span, made by the worker that commits its end (a run outlives any one
    process, so its span is recorded when it ends, from its start time)."""
    ending = next((_ENDINGS[type(c)] for c in commands if type(c) in _ENDINGS), None)
    if ending is None:
        return
    start = instance.started_at
    current = tracing.start(
        f"run {instance.workflow_name}",
        {
            "keepgoing.run_id": instance.run_id,
            "keepgoing.workflow_id": instance.workflow_id,
            "keepgoing.workflow_name": instance.workflow_name,
            "keepgoing.run_status": ending,
        },
        kind="internal",
        start_time=int(start * 1e9) if start is not None else None,
    )
    tracing.finish(current, {}, None if ending in ("completed", "continued") else ending)


def _backoff(failures: int) -> float:
    """From half the delay to all of it: a failed activation always waits a little."""
    return backoff(failures - 1, base=BACKOFF_FIRST, cap=BACKOFF_CAP, jitter=0.5)


def _stale(instance: WorkflowInstance, events: list[ev.Event]) -> bool:
    """Another worker activated the run since this instance last did."""
    return any(e.ROLE == "marker" and e.seq > instance.position for e in events)
