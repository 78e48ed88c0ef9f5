"""Activations: replay or resume a workflow instance and commit its commands.

Also the sequential hot path: when a task finishes on a worker that holds
the run's cached instance, the result is delivered in memory, the next
activation runs at once, and one transaction records the completion, the
activation and the eager claim of the next task (DESIGN section 10).
"""

from __future__ import annotations

import logging
import traceback
from typing import TYPE_CHECKING

from keepgoing._history import events as ev
from keepgoing._runtime.instance import Activation, WorkflowInstance
from keepgoing._store.records import (
    ActivationClaim,
    ActivationCommit,
    CommitResult,
    FastActivation,
    TaskOutcome,
)
from keepgoing.errors import NondeterminismError

if TYPE_CHECKING:
    from keepgoing._worker.worker import Worker

__all__ = ["Activator"]

log = logging.getLogger("keepgoing.worker")


class Activator:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    async def activate(self, claim: ActivationClaim) -> None:
        w, run = self.worker, claim.run
        try:
            instance = w.cache.take(run.run_id)
        except KeyError:  # this worker is completing one of its tasks right now
            await w.store.release_activation(run.run_id, claim.fence)
            return
        try:
            instance = await self._activate(claim, instance)
        finally:
            w.cache.give_back(run.run_id, instance)

    async def _activate(
        self, claim: ActivationClaim, instance: WorkflowInstance | None
    ) -> WorkflowInstance | None:
        w, run = self.worker, claim.run
        events = await w.store.read_history(run.run_id, instance.last_input_seq if instance else 0)
        if instance is not None and _stale(instance, events):
            instance.close()
            instance = None
            events = await w.store.read_history(run.run_id, 0)
        if instance is None:
            definition = w.registry.workflow(run.workflow_name)
            instance = WorkflowInstance(
                definition.fn,
                run_id=run.run_id,
                workflow_id=run.workflow_id,
                workflow_name=run.workflow_name,
            )
            instance.local = w.keep_failures
            w.stats.replays += 1
        try:
            activation = instance.activate(events)
        except NondeterminismError as exc:
            await self._block(claim, str(exc))
            instance.close()
            return None
        except Exception as exc:
            # Replaying the same history would fail the same way (a workflow that
            # busy-loops, say): block the run instead of retrying it forever.
            detail = "".join(traceback.format_exception(exc)).rstrip()
            await self._block(claim, f"the workflow's code failed while replaying:\n{detail}")
            instance.close()
            return None
        w.stats.activations += 1
        if not activation.commands and not activation.delivered:
            await w.store.release_activation(run.run_id, claim.fence)
            instance.fence = claim.fence
            return instance
        result = await w.store.commit_activation(
            ActivationCommit(
                run_id=run.run_id,
                fence=claim.fence,
                worker_id=w.worker_id,
                saw_upto=activation.saw_upto,
                time=activation.time,
                commands=activation.commands,
                now=w.clock.now(),
                eager_claim=not w.stopping,  # a stopping worker takes no new step
                eager_limit=max(0, w.free_slots()),
                lease_ttl=w.settings.lease_ttl,
            )
        )
        return self._after_commit(instance, result, activation.saw_upto, activation.commands)

    async def _block(self, claim: ActivationClaim, reason: str) -> None:
        w = self.worker
        w.stats.blocked += 1
        log.error("run %s is blocked:\n%s", claim.run.run_id, reason)
        await w.store.commit_activation(
            ActivationCommit(
                run_id=claim.run.run_id,
                fence=claim.fence,
                worker_id=w.worker_id,
                saw_upto=0,
                time=w.clock.now(),
                commands=[],
                now=w.clock.now(),
                blocked_reason=reason,
            )
        )

    def _after_commit(
        self,
        instance: WorkflowInstance,
        result: CommitResult,
        saw_upto: int,
        commands: list[ev.Event],
    ) -> WorkflowInstance | None:
        if not result.ok:
            instance.close()
            return None
        instance.position = result.last_seq
        instance.last_input_seq = saw_upto
        instance.fence = result.fence
        if instance.failure is not None and self.worker.keep_failures:
            self.worker.failures[instance.run_id] = instance.failure
        for claim in result.eager:
            self.worker.spawn(claim)
        self.worker.note_timers(instance.run_id, commands)
        return instance

    # -- task completion, with the fast path -------------------------------------
    async def complete(self, outcome: TaskOutcome) -> None:
        w = self.worker
        if not outcome.ok or w.cache.is_busy(outcome.run_id):
            await w.store.complete_task(outcome)
            return
        instance = w.cache.take(outcome.run_id)
        kept = None  # an error drops the instance: its state ran ahead of the store's
        try:
            kept = await self._complete_fast(outcome, instance)
        finally:
            w.cache.give_back(outcome.run_id, kept)

    async def _complete_fast(
        self, outcome: TaskOutcome, instance: WorkflowInstance | None
    ) -> WorkflowInstance | None:
        w = self.worker
        if instance is None:
            await w.store.complete_task(outcome)
            return None
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
            await w.store.complete_task(outcome)
            return None
        fast = FastActivation(
            run_fence=fence,
            last_input_seq=last_input,
            commands=activation.commands,
            time=activation.time,
            eager_claim=not w.stopping,
            eager_limit=max(1, w.free_slots() + 1),
            lease_ttl=w.settings.lease_ttl,
        )
        try:
            result = await w.store.complete_task(outcome, fast)
        except BaseException:
            instance.close()
            raise
        if result.activation is None or not result.activation.ok:
            instance.close()
            return None
        w.stats.fast_path += 1
        w.stats.activations += 1
        return self._after_commit(
            instance, result.activation, result.activation.saw_upto, activation.commands
        )

    # -- timers, with the same fast path -------------------------------------------
    async def fire_timer(self, run_id: str, cmd: int) -> bool:
        """Fire a due timer of a cached instance and commit the activation it causes.

        Returns False when the fast path does not apply (the run is busy, not
        cached, or the timer is gone); the orchestrator's sweep fires it then.
        """
        w = self.worker
        if w.cache.is_busy(run_id):
            return False
        instance = w.cache.take(run_id)
        fired = False
        try:
            if instance is not None and cmd in instance.loop.pending_timers():
                instance, fired = await self._fire_fast(instance, cmd)
        finally:
            w.cache.give_back(run_id, instance)
        return fired

    async def _fire_fast(
        self, instance: WorkflowInstance, cmd: int
    ) -> tuple[WorkflowInstance | None, bool]:
        w = self.worker
        now = w.clock.now()
        fence, last_input = instance.fence, instance.last_input_seq
        fired = ev.TimerFired(seq=instance.position + 1, at=now, cmd=cmd)
        try:
            activation = instance.activate([fired])
        except Exception:
            log.exception("in-memory activation of run %s failed", instance.run_id)
            instance.close()
            return None, False
        fast = FastActivation(
            run_fence=fence,
            last_input_seq=last_input,
            commands=activation.commands,
            time=activation.time,
            eager_claim=not w.stopping,
            eager_limit=max(0, w.free_slots()),
            lease_ttl=w.settings.lease_ttl,
        )
        result = await w.store.fire_timer(
            instance.run_id, cmd, worker_id=w.worker_id, now=now, fast=fast
        )
        if result is None or not result.ok:
            instance.close()  # it ran ahead in memory; the run is replayed when claimed
            return None, False
        w.stats.activations += 1
        kept = self._after_commit(instance, result, result.saw_upto, activation.commands)
        return kept, True


def _stale(instance: WorkflowInstance, events: list[ev.Event]) -> bool:
    """Another worker activated the run since this instance last did."""
    return any(e.ROLE == "marker" and e.seq > instance.position for e in events)
