"""What a worker records about its code when it starts, before it claims anything.

The workflows it serves on its queues (``record_workflows``), the schedules
those workflows declare (kept in step by ``_schedules/declared.py``), each
workflow's retention policy (``record_retention``, which the retention sweep
reads), the flow-control limits of its tasks (``record_limits``, which the
server lists with their use), and each workflow's run-flow spec
(``record_flows``: its concurrency limit or singleton key by argument name,
which the store applies to every start, even one by a process without the
code). :func:`record_startup` is called once by
:meth:`keepgoing._worker.worker.Worker.run`.
"""

from __future__ import annotations

import logging

from keepgoing._clock import Clock
from keepgoing._limits import declared_limits
from keepgoing._schedules.commands import Actor
from keepgoing._schedules.declared import sync_declared
from keepgoing._store.limits_protocol import DeclaredLimit
from keepgoing._store.protocol import Store
from keepgoing._worker.settings import WorkerSettings
from keepgoing._workflow.registry import Registry

__all__ = ["record_startup"]

log = logging.getLogger("keepgoing.worker")


async def record_startup(
    store: Store, registry: Registry, settings: WorkerSettings, worker_id: str, clock: Clock
) -> None:
    """Record the worker's workflows, their declared schedules, retention policies and
    run-flow specs."""
    await store.record_workflows(list(registry.workflows), settings.queues, clock.now())
    await _register_schedules(store, registry, settings, worker_id, clock)
    await store.record_retention(
        {name: d.retention for name, d in registry.workflows.items()}, clock.now()
    )
    await store.record_flows({name: d.flow for name, d in registry.workflows.items()}, clock.now())
    await _record_limits(store, registry, clock)


async def _record_limits(store: Store, registry: Registry, clock: Clock) -> None:
    """Record the limits of the tasks it serves; a role without the table skips it."""
    tasks = [(name, t.concurrency, t.rate_limit) for name, t in registry.tasks.items()]
    limits = [DeclaredLimit(**fields) for fields in declared_limits(tasks)]
    try:
        await store.record_limits(limits, clock.now())
    except Exception as exc:  # never a reason not to serve
        log.info("the limits of this worker's tasks were not recorded: %s", exc)


async def _register_schedules(
    store: Store, registry: Registry, settings: WorkerSettings, worker_id: str, clock: Clock
) -> None:
    """Register the schedules its workflows declare (``_schedules/declared.py``).

    A replica's PostgreSQL role may not write schedules (a deploy registered its
    group's): then this is skipped, with a note in the log."""
    declared = [(d.name, s) for d in registry.workflows.values() for s in d.schedules]
    try:
        changes = await sync_declared(
            store,
            declared,
            workflows=list(registry.workflows),
            queue=settings.queues[0],
            actor=Actor("worker", worker_id),
            now=clock.now(),
        )
    except Exception as exc:  # never a reason not to serve (a role without the table)
        log.info("schedules declared in code were not registered by this worker: %s", exc)
        return
    for change in changes:
        log.info("%s", change)
