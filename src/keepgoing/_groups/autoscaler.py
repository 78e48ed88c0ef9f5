"""The autoscaler: each group's replicas follow its queued and running work, down to zero.

It runs beside the orchestrator services (timers, lease reaping) in every
``keepgoing server``, ``keepgoing dev`` and ``keepgoing groups serve``, and
acts only while it holds the store's ``autoscaler`` lease row, so one process
scales a store's groups at a time. It scales the groups of the backends it was
given (the local one); Kubernetes groups are scaled by KEDA from the
``keepgoing_queue_work`` view instead.

The rule, per group, from :meth:`Store.group_loads`:

* **work** is queued task attempts and runnable runs plus running attempts and
  leased activations: never the backlog alone, so a group is not scaled down
  while an attempt runs on it. A run that waits on a timer, a message, an
  event or a child is none of these, so it holds no replica; with
  ``keep_warm_while_open`` every open run counts as work.
* with work: ``min(max_replicas, ceil(work / concurrency))``, at least 1.
  Going up is at once: a commit that creates work rings the store's doorbell
  (``NOTIFY`` on PostgreSQL), which wakes this loop.
* a pending timer (or retry) of a run on the queue wakes its group early, by
  the group's measured cold start, so the worker is up when it is due.
* going down (and to zero) waits until the lower count has held for
  ``shutdown_delay_seconds``.

Every change is kept with its reason (:meth:`Store.record_decision`) and logged.

Pinning (:mod:`keepgoing._groups.pinned`): the rule runs per revision. The
current revision counts the work of its own runs; each older revision that
still has runs keeps its environment and is scaled on its runs' work alone,
and is retired once no run is left on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from keepgoing._clock import Clock, system_clock
from keepgoing._groups.backend import GroupBackend
from keepgoing._groups.pinned import OldRevision, PinnedRevisions, ensure_old, retire, split_loads
from keepgoing._groups.secrets import SecretBox
from keepgoing._groups.spec import GroupRevision, Instance
from keepgoing._groups.worker_stops import record_terminations, store_hook
from keepgoing._store.group_records import GroupLoad, GroupRecord, InstanceRecord
from keepgoing._store.protocol import Store
from keepgoing._store.records import WorkerRecord
from keepgoing.errors import KeepgoingError, StoreError

__all__ = ["SERVICE", "Autoscaler", "AutoscalerStats", "ReplicaKeys"]

log = logging.getLogger("keepgoing.groups")

#: The lease row that makes one autoscaler act at a time.
SERVICE = "autoscaler"
_LIVE = 5.0  # seconds: a registered worker heartbeating within this is up


class ReplicaKeys(Protocol):
    """What gives each group revision's replicas their way to the server's gateway
    (``keepgoing._server.group_keys.GroupKeys``): a key of their own, and its revocation."""

    async def grant(
        self, group: str, revision: int, keep: Collection[int] | None = None
    ) -> dict[str, str]: ...

    async def revoke(self, group: str, which: Callable[[int], bool] = ...) -> int: ...


@dataclass
class AutoscalerStats:
    passes: int = 0
    decisions: int = 0
    errors: int = 0
    holding: bool = False


@dataclass
class _State:
    revision: GroupRevision | None = None
    failed: str | None = None  # why this revision cannot run
    low_since: float | None = None
    waking_since: float | None = None
    instances: tuple[Instance, ...] = ()
    applied: int | None = None
    pinned: PinnedRevisions = field(default_factory=PinnedRevisions)
    terminated: set[tuple[str, float]] = field(default_factory=set)  # recorded as stops


@dataclass
class _Plan:
    replicas: int
    reason: str | None  # None: no change
    next_check: float | None = None
    queued: int = 0
    running: int = 0
    extra: dict[str, float] = field(default_factory=dict)


class Autoscaler:
    """Scales the groups of ``backends`` (by backend name) while it holds the lease.

    Args:
        store: an opened store.
        backends: e.g. ``{"local": LocalBackend(...)}``.
        lease_ttl: seconds the lease lasts without renewal.
        secrets: decrypts the groups' secrets (default: the key of ``load_key``).
        keys: gives each revision's replicas the server's URL and a gateway key of their
            own (a server's autoscaler; None: replicas call models in-process).
    """

    def __init__(
        self,
        store: Store,
        backends: Mapping[str, GroupBackend],
        *,
        clock: Clock = system_clock,
        lease_ttl: float = 10.0,
        secrets: SecretBox | None = None,
        owner: str | None = None,
        keys: ReplicaKeys | None = None,
    ) -> None:
        self.store = store
        self.backends = dict(backends)
        self.clock = clock
        self.lease_ttl = lease_ttl
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stats = AutoscalerStats()
        self._secrets = secrets
        self.keys = keys
        self._state: dict[str, _State] = {}
        self._elsewhere: dict[str, PinnedRevisions] = {}
        self._stopping = asyncio.Event()

    def request_stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Serve until :meth:`request_stop`; then stop this process's replicas and let go."""
        hook = store_hook(self.store, asyncio.get_running_loop(), self.clock)
        for backend in self.backends.values():
            if getattr(backend, "on_stop", False) is None:  # it signals replicas itself
                backend.on_stop = hook  # type: ignore[attr-defined]
        try:
            while not self._stopping.is_set():
                try:
                    timeout = await self.tick()
                except Exception as exc:
                    self.stats.errors += 1
                    if isinstance(exc, StoreError):
                        log.warning("autoscaler pass failed (%s); retrying", exc)
                    else:
                        log.exception("autoscaler pass failed; retrying")
                    timeout = 1.0
                await self._wait(timeout)
        finally:
            await self._let_go()

    async def tick(self) -> float:
        """One pass; the seconds until the next one is needed (a change wakes it sooner)."""
        now = self.clock.now()
        self.stats.passes += 1
        held = await self.store.claim_service(SERVICE, self.owner, ttl=self.lease_ttl, now=now)
        if not held:
            if self.stats.holding:
                log.warning("autoscaler %s lost its lease; stopping its replicas", self.owner)
                await self._stop_all()
            self.stats.holding = False
            return self.lease_ttl / 2
        if not self.stats.holding:
            log.info("autoscaler %s is scaling this store's groups", self.owner)
        self.stats.holding = True
        every_group = await self.store.list_groups()
        groups = [g for g in every_group if g.backend in self.backends]
        for other in every_group:
            if other.backend not in self.backends and other.parent is None:
                await self._retire_elsewhere(other, now)
        for gone in set(self._state) - {g.name for g in groups}:
            await self._forget(gone)
        loads = {
            x.task_queue: x
            for x in await self.store.group_loads([g.task_queue for g in groups], now)
        }
        wait = self.lease_ttl / 2
        for group in groups:
            state = self._state.setdefault(group.name, _State())
            backend = self.backends[group.backend]
            ready = await self._ensure(group, state, backend)
            load = loads[group.task_queue]
            if group.parent is None:  # a per-task group's tasks run on any of its revisions
                load, old = split_loads(
                    group, await self.store.revision_loads(group.task_queue, now)
                )
                # Older revisions serve their runs even while the current one cannot run.
                wait = min(wait, await self._serve_old(group, state, backend, old, now))
            if ready:
                wait = min(wait, await self._serve_current(group, state, backend, load, now))
        return wait

    async def _serve_current(
        self, group: GroupRecord, state: _State, backend: GroupBackend, load: GroupLoad, now: float
    ) -> float:
        """Scale the current revision by the rule; the seconds until it needs a look."""
        assert state.revision is not None
        wait = self.lease_ttl / 2
        plan = self._plan(group, state.revision, state, load, now)
        if plan.reason is not None:
            await self._decide(group, plan, now)
            if group.replicas == 0 and plan.replicas > 0:
                state.waking_since = now
        if state.applied != plan.replicas or plan.replicas > 0:
            await asyncio.to_thread(
                backend.set_replicas, group.name, plan.replicas, state.revision.revision
            )
            state.applied = plan.replicas
        if state.waking_since is not None:
            await self._measure_cold_start(group, state, await self.store.list_workers(), now)
        await self._sync_instances(group, state, backend)
        terminations = getattr(backend, "terminations", None)
        if callable(terminations):  # the cluster says why some replicas ended
            ended = await asyncio.to_thread(terminations, group.name)
            await record_terminations(self.store, ended, state.terminated, now)
        if plan.next_check is not None:
            wait = min(wait, max(0.0, plan.next_check - now))
        stopping = any(i.state == "running" for i in state.instances)
        if plan.replicas > 0 or state.waking_since is not None or stopping:
            wait = min(wait, 1.0)  # watch replicas come and go
        return wait

    async def _retire_elsewhere(self, group: GroupRecord, now: float) -> None:
        """A group another system scales (KEDA): retiring its revisions is still ours."""
        state = self._elsewhere.setdefault(group.name, PinnedRevisions())
        loads = await self.store.revision_loads(group.task_queue, now)
        live = frozenset(
            x.revision
            for x in loads
            if x.revision is not None and x.revision < group.revision and x.open_runs > 0
        )
        await retire(self.store, None, group, state, (group.revision, live), now)

    async def _serve_old(
        self,
        group: GroupRecord,
        state: _State,
        backend: GroupBackend,
        loads: dict[int, GroupLoad],
        now: float,
    ) -> float:
        """Scale each older revision with runs on its own runs' work; retire the rest."""
        pinned, wait = state.pinned, self.lease_ttl / 2
        live = frozenset(n for n, x in loads.items() if x.open_runs > 0)
        for number in sorted(live):
            old = pinned.old.setdefault(number, OldRevision())
            if not await ensure_old(self.store, backend, group, number, old, self._decrypt):
                continue
            if not old.granted:
                await self._grant(backend, group.name, number, None)
                old.granted = True
            assert old.spec is not None
            sized = replace(group, replicas=old.replicas)
            plan = self._plan(sized, old.spec, old, loads[number], now)
            if plan.reason is not None:
                log.info(
                    "group %s revision %d: %d -> %d replicas (%s)",
                    group.name,
                    number,
                    old.replicas,
                    plan.replicas,
                    plan.reason,
                )
                await self.store.record_decision(
                    group.name,
                    to_replicas=plan.replicas,
                    reason=f"revision {number}: {plan.reason}",
                    queued=plan.queued,
                    running=plan.running,
                    now=now,
                    revision=number,
                    from_replicas=old.replicas,
                )
            if plan.replicas > 0 or plan.replicas != old.replicas:
                await asyncio.to_thread(backend.set_replicas, group.name, plan.replicas, number)
            old.replicas = plan.replicas
            if plan.next_check is not None:
                wait = min(wait, max(0.0, plan.next_check - now))
            if plan.replicas > 0:
                wait = min(wait, 1.0)
        retired = await retire(self.store, backend, group, pinned, (group.revision, live), now)
        if retired and self.keys is not None:  # their replicas are gone: so are their keys
            gone = set(retired)
            await self.keys.revoke(group.name, lambda n: n in gone)
        return wait

    # -- the rule ---------------------------------------------------------------------
    def _plan(
        self,
        group: GroupRecord,
        spec: GroupRevision,
        state: _State | OldRevision,
        load: GroupLoad,
        now: float,
    ) -> _Plan:
        current = group.replicas
        work = load.queued + load.running
        why = f"{load.queued} queued, {load.running} running"
        if spec.keep_warm_while_open and load.open_runs > work:
            work = load.open_runs
            why = f"{load.open_runs} open run(s), kept warm"
        cold = group.cold_start or 0.0
        next_check = None
        if work == 0:
            for due, what in ((load.next_timer, "a timer"), (load.next_task, "a retry")):
                if due is None:
                    continue
                if due - cold <= now:
                    work = 1
                    why = f"{what} is due in {max(0.0, due - now):.1f}s (cold start {cold:.1f}s)"
                    break
                next_check = due - cold if next_check is None else min(next_check, due - cold)
        target = (
            0 if work == 0 else min(spec.max_replicas, max(1, math.ceil(work / spec.concurrency)))
        )
        plan = _Plan(current, None, next_check, load.queued, load.running)
        if target >= current:
            state.low_since = None
            if target > current:
                plan.replicas, plan.reason = target, f"scale up: {why}"
            return plan
        state.low_since = state.low_since if state.low_since is not None else now
        quiet = now - state.low_since
        if quiet >= spec.shutdown_delay_seconds:
            state.low_since = None
            plan.replicas = target
            plan.reason = (
                f"scale down: nothing queued or running for {quiet:.1f}s"
                if target == 0
                else f"scale down: {why} for {quiet:.1f}s"
            )
            return plan
        due = state.low_since + spec.shutdown_delay_seconds
        plan.next_check = due if next_check is None else min(next_check, due)
        return plan

    # -- effects ------------------------------------------------------------------------
    async def _ensure(self, group: GroupRecord, state: _State, backend: GroupBackend) -> bool:
        if state.revision is not None and state.revision.revision == group.revision:
            return state.failed is None
        if state.revision is not None and state.failed is None:
            # The revision that was current keeps its replicas for its pinned runs.
            state.pinned.old[state.revision.revision] = OldRevision(
                spec=state.revision, replicas=state.applied or 0, granted=True
            )
        state.revision, state.failed = None, None
        found = await self.store.get_revision(group.name, group.revision)
        if found is None:
            return False
        try:
            spec = GroupRevision.from_json(found.spec)
            if spec.secrets:
                values = await self._decrypt(spec)
                await asyncio.to_thread(backend.set_secrets, group.name, values, spec.revision)
            await asyncio.to_thread(backend.ensure_group, spec)
        except KeepgoingError as exc:
            state.failed = str(exc)
            state.revision = GroupRevision.from_json(found.spec)
            if self.keys is not None:  # nothing of it runs: no key of it is left
                await self.keys.revoke(group.name, lambda n: n == group.revision)
            log.error("group %s revision %d cannot run: %s", group.name, group.revision, exc)
            await self.store.record_decision(
                group.name,
                to_replicas=0,
                reason=f"revision {group.revision} cannot run: {exc}",
                queued=0,
                running=0,
                now=self.clock.now(),
            )
            await asyncio.to_thread(backend.set_replicas, group.name, 0, group.revision)
            return False
        # A new key for the new revision; the keys of revisions no longer kept are revoked.
        await self._grant(backend, group.name, spec.revision, {spec.revision, *state.pinned.old})
        state.revision = spec
        state.applied = None  # replicas of an older revision are replaced
        log.info("group %s: revision %d ready", group.name, group.revision)
        return True

    async def _grant(
        self, backend: GroupBackend, group: str, revision: int, keep: Collection[int] | None
    ) -> None:
        """Give ``revision``'s replicas (started from now on) a gateway key of their own."""
        give = getattr(backend, "set_gateway_access", None)
        if self.keys is None or not callable(give):
            return
        pairs = await self.keys.grant(group, revision, keep)
        await asyncio.to_thread(give, group, revision, pairs)

    async def _decrypt(self, spec: GroupRevision) -> dict[str, str]:
        box = self._secrets = self._secrets or SecretBox()
        keys = [(ref.scope, ref.name) for ref in spec.secrets]
        found = await self.store.get_secrets(keys)
        values = {}
        for ref in spec.secrets:
            cipher = found.get((ref.scope, ref.name))
            if cipher is None:
                where = f"kept secret {ref.name!r}" if not ref.scope else f"secret {ref.name!r}"
                raise KeepgoingError(f"{where} for {ref.env_var} is not in the store")
            values[ref.env_var] = box.open(cipher, repr(ref.name))
        return values

    async def _decide(self, group: GroupRecord, plan: _Plan, now: float) -> None:
        assert plan.reason is not None
        self.stats.decisions += 1
        log.info(
            "group %s: %d -> %d replicas (%s)",
            group.name,
            group.replicas,
            plan.replicas,
            plan.reason,
        )
        await self.store.record_decision(
            group.name,
            to_replicas=plan.replicas,
            reason=plan.reason,
            queued=plan.queued,
            running=plan.running,
            now=now,
        )

    async def _measure_cold_start(
        self, group: GroupRecord, state: _State, workers: list[WorkerRecord], now: float
    ) -> None:
        assert state.waking_since is not None
        for worker in workers:
            fresh = worker.started_at >= state.waking_since - 0.5
            live = worker.heartbeat_at >= now - _LIVE
            if group.task_queue in worker.queues and fresh and live:
                seconds = max(0.0, worker.started_at - state.waking_since)
                old = group.cold_start
                measured = seconds if old is None else 0.5 * old + 0.5 * seconds
                await self.store.set_cold_start(group.name, measured)
                log.info("group %s: cold start %.2fs", group.name, seconds)
                state.waking_since = None
                return
        if now - state.waking_since > 600:
            state.waking_since = None  # it never came up; the instances say why

    async def _sync_instances(
        self, group: GroupRecord, state: _State, backend: GroupBackend
    ) -> None:
        instances = tuple(await asyncio.to_thread(backend.list_instances, group.name))
        if instances == state.instances:
            return
        state.instances = instances
        await self.store.record_instances(
            group.name,
            [
                InstanceRecord(
                    instance_id=i.instance_id,
                    group_name=group.name,
                    revision=i.revision,
                    state=i.state,
                    pid=i.pid,
                    host=i.host,
                    started_at=i.started_at,
                    ended_at=i.ended_at,
                    exit_status=i.exit_status,
                )
                for i in instances
            ],
        )

    async def _forget(self, name: str) -> None:
        state = self._state.pop(name, None)
        if self.keys is not None:
            await self.keys.revoke(name)
        for backend in self.backends.values():
            await asyncio.to_thread(backend.set_replicas, name, 0)
            for number in state.pinned.old if state is not None else ():
                await asyncio.to_thread(backend.retire_revision, name, number)

    async def _stop_all(self) -> None:
        for name, state in list(self._state.items()):
            for backend in self.backends.values():
                with contextlib.suppress(KeepgoingError):
                    await asyncio.to_thread(backend.set_replicas, name, 0)
                for number in state.pinned.old:
                    with contextlib.suppress(KeepgoingError):
                        await asyncio.to_thread(backend.set_replicas, name, 0, number)
        self._state.clear()

    async def _let_go(self) -> None:
        await self._stop_all()
        for backend in self.backends.values():
            close = getattr(backend, "close", None)
            if callable(close):
                await asyncio.to_thread(close)
        try:
            await self.store.release_service(SERVICE, self.owner)
        except StoreError as exc:
            log.warning("could not release the autoscaler lease: %s", exc)

    async def _wait(self, timeout: float) -> None:
        stop = asyncio.ensure_future(self._stopping.wait())
        change = asyncio.ensure_future(self.store.wait_for_change(timeout, key=self))
        try:
            await asyncio.wait({stop, change}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (stop, change):
                fut.cancel()
            await asyncio.gather(stop, change, return_exceptions=True)
