"""The autoscaler's half of pinning: older revisions that still have runs, and retirement.

A group's current revision is scaled by the autoscaler's rule on the work of
its own runs (and of runs recorded with no revision). Every older revision
that still has open runs keeps its environment in the backend and is scaled
by the same rule on the work of *its* runs only: to zero while they wait on a
message or a timer, back up when the message arrives (the store's doorbell
wakes the autoscaler). Once no run is left on an older revision, the store
retires it (:meth:`Store.retire_revisions`, a decision row), the retirement is
audited, and the backend drops its environment and source.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from keepgoing._groups.backend import GroupBackend
from keepgoing._groups.spec import GroupRevision
from keepgoing._store.group_records import GroupLoad, GroupRecord, RevisionLoad
from keepgoing._store.protocol import Store
from keepgoing._store.records import AuditEntry
from keepgoing.errors import KeepgoingError

__all__ = ["OldRevision", "PinnedRevisions", "ensure_old", "retire", "split_loads"]

log = logging.getLogger("keepgoing.groups")


@dataclass
class OldRevision:
    spec: GroupRevision | None = None
    failed: str | None = None
    replicas: int = 0
    low_since: float | None = None
    granted: bool = False  # its replicas have a gateway key (when the autoscaler gives them)


@dataclass
class PinnedRevisions:
    """The older revisions of one group that this autoscaler serves."""

    old: dict[int, OldRevision] = field(default_factory=dict)
    # (current revision, older revisions with runs) at the last retire pass
    live: tuple[int, frozenset[int]] | None = None


def split_loads(
    group: GroupRecord, loads: list[RevisionLoad]
) -> tuple[GroupLoad, dict[int, GroupLoad]]:
    """The current revision's load (runs recorded with no revision included) and each
    older revision's."""
    current = GroupLoad(task_queue=group.task_queue)
    old: dict[int, GroupLoad] = {}
    for x in loads:
        as_group = GroupLoad(
            task_queue=x.task_queue,
            queued=x.queued,
            running=x.running,
            open_runs=x.open_runs,
            next_timer=x.next_timer,
            next_task=x.next_task,
        )
        if x.revision is None or x.revision >= group.revision:
            current = _merge(current, as_group)
        else:
            old[x.revision] = as_group
    return current, old


def _merge(a: GroupLoad, b: GroupLoad) -> GroupLoad:
    def first(x: float | None, y: float | None) -> float | None:
        return y if x is None else x if y is None else min(x, y)

    return GroupLoad(
        task_queue=a.task_queue,
        queued=a.queued + b.queued,
        running=a.running + b.running,
        open_runs=a.open_runs + b.open_runs,
        next_timer=first(a.next_timer, b.next_timer),
        next_task=first(a.next_task, b.next_task),
    )


async def ensure_old(
    store: Store,
    backend: GroupBackend,
    group: GroupRecord,
    number: int,
    state: OldRevision,
    decrypt: Callable[[GroupRevision], Awaitable[dict[str, str]]],
) -> bool:
    """Make revision ``number`` runnable in ``backend``; False if it cannot run."""
    if state.spec is not None:
        return state.failed is None
    found = await store.get_revision(group.name, number)
    if found is None:
        state.failed = "no such revision"
        return False
    spec = GroupRevision.from_json(found.spec)
    state.spec = spec
    try:
        if spec.secrets:
            values = await decrypt(spec)
            await asyncio.to_thread(backend.set_secrets, group.name, values, number)
        await asyncio.to_thread(backend.ensure_group, spec)
    except KeepgoingError as exc:
        state.failed = str(exc)
        log.error("group %s revision %d cannot run: %s", group.name, number, exc)
        return False
    log.info("group %s: revision %d kept for its pinned runs", group.name, number)
    return True


async def retire(
    store: Store,
    backend: GroupBackend | None,
    group: GroupRecord,
    pinned: PinnedRevisions,
    live: tuple[int, frozenset[int]],
    now: float,
) -> list[int]:
    """Retire the older revisions of ``group`` with no run left, when ``live`` (the
    current revision and the older ones with runs) changed since the last pass."""
    if pinned.live == live:
        return []
    pinned.live = live
    retired = await store.retire_revisions(group.name, now)
    for number in retired:
        log.info("group %s: revision %d retired (no run is left on it)", group.name, number)
        await store.append_audit(
            AuditEntry(
                at=now,
                actor_kind="system",
                actor_id="autoscaler",
                action="groups.retire_revision",
                detail={"group": group.name, "revision": number},
            )
        )
        pinned.old.pop(number, None)
        if backend is not None:  # None: a group scaled elsewhere (KEDA)
            await asyncio.to_thread(backend.retire_revision, group.name, number)
    return retired
