"""What ``keepgoing groups`` and the ``/api/v1/groups`` routes do, once, over a store."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from keepgoing._clock import system_clock
from keepgoing._groups.local import kill_local_instance
from keepgoing._groups.secrets import SecretBox, check_secret_name
from keepgoing._groups.spec import check_group_name
from keepgoing._groups.worker_stops import matching_workers
from keepgoing._store.group_records import (
    DecisionRecord,
    GroupRecord,
    InstanceRecord,
    RevisionStatus,
)
from keepgoing._store.protocol import Store
from keepgoing._store.records import WorkerStop
from keepgoing._store.worker_stops import KILLED_BY_REQUEST
from keepgoing.errors import GroupConflictError, GroupError, GroupNotFoundError

__all__ = [
    "GroupStatus",
    "delete_group",
    "group_status",
    "kill_instance",
    "list_group_status",
    "revision_spec",
    "scale_group",
    "set_secret",
]


@dataclass(frozen=True)
class GroupStatus:
    """A group as ``keepgoing groups show`` prints it: its row, the settings of its
    current revision (never secret values), its instances and newest decisions, and
    its revisions with the runs pinned to each (newest first)."""

    group: GroupRecord
    settings: dict[str, Any]
    instances: tuple[InstanceRecord, ...] = ()
    decisions: tuple[DecisionRecord, ...] = ()
    revisions: tuple[RevisionStatus, ...] = ()

    def to_body(self) -> dict[str, Any]:
        return {
            "group": asdict(self.group),
            "settings": self.settings,
            "instances": [asdict(i) for i in self.instances],
            "decisions": [asdict(d) for d in self.decisions],
            "revisions": [asdict(r) for r in self.revisions],
        }

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> GroupStatus:
        return cls(
            group=GroupRecord(**body["group"]),
            settings=dict(body["settings"]),
            instances=tuple(InstanceRecord(**i) for i in body["instances"]),
            decisions=tuple(DecisionRecord(**d) for d in body["decisions"]),
            revisions=tuple(RevisionStatus(**r) for r in body.get("revisions", [])),
        )


_SHOWN = (
    "filename",
    "dependencies",
    "cpu",
    "memory",
    "max_replicas",
    "shutdown_delay_seconds",
    "keep_warm_while_open",
    "concurrency",
    "tasks",
    "task_queues",
)


async def group_status(store: Store, name: str, *, decisions: int = 20) -> GroupStatus:
    check_group_name(name) if len(name) <= 40 else None
    group = await store.get_group(name)
    if group is None:
        raise GroupNotFoundError(f"no worker group named {name!r}")
    revision = await store.get_revision(name)
    spec = json.loads(revision.spec) if revision is not None else {}
    settings = {key: spec.get(key) for key in _SHOWN}
    settings["env"] = sorted(spec.get("env", {}))  # names only
    settings["secrets"] = sorted(ref[0] for ref in spec.get("secrets", []))
    settings["image"] = None if spec.get("image") is None else spec["image"]
    settings["upgrade"] = spec.get("upgrade", "pinned")
    return GroupStatus(
        group=group,
        settings=settings,
        instances=tuple(await store.list_instances(name)),
        decisions=tuple(await store.list_decisions(name, limit=decisions)),
        revisions=tuple(await store.list_revisions(name)),
    )


async def revision_spec(store: Store, name: str, revision: int) -> str:
    """The stored spec (JSON, no secret values) of ``revision`` of group ``name``.

    Raises:
        GroupNotFoundError: no such group or revision.
    """
    found = await store.get_revision(name, revision)
    if found is None:
        raise GroupNotFoundError(f"group {name!r} has no revision {revision}")
    return found.spec


async def list_group_status(store: Store) -> list[GroupStatus]:
    return [await group_status(store, g.name, decisions=1) for g in await store.list_groups()]


async def scale_group(store: Store, name: str, replicas: int, *, now: float, actor: str) -> None:
    """Set the desired replicas now; the autoscaler carries on from there (an idle group
    goes back to 0 after its shutdown delay)."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= 1000:
        raise GroupError(f"replicas must be an int from 0 to 1000, not {replicas!r}")
    status = await group_status(store, name, decisions=0)
    limit = status.settings.get("max_replicas") or 1
    if replicas > limit:
        raise GroupConflictError(f"group {name!r} has max_replicas {limit}; {replicas} is more")
    await store.record_decision(
        name, to_replicas=replicas, reason=f"set by {actor}", queued=0, running=0, now=now
    )


async def kill_instance(
    store: Store,
    name: str,
    instance_id: str | None,
    *,
    actor: tuple[str, str] = ("", ""),
    via: str = "api",
) -> str:
    """SIGKILL one running instance of ``name`` (the newest when ``instance_id`` is None);
    returns its id. The stop is recorded first for the worker it runs, with cause
    ``killed_by_request`` and ``actor`` (kind, id): its losses count against nothing."""
    group = await store.get_group(name)
    if group is None:
        raise GroupNotFoundError(f"no worker group named {name!r}")
    if group.backend != "local":
        raise GroupConflictError(f"group {name!r} runs on {group.backend}; kill its pods there")
    running = [i for i in await store.list_instances(name) if i.state == "running"]
    if instance_id is None:
        if not running:
            raise GroupNotFoundError(f"group {name!r} has no running instance")
        instance_id = max(running, key=lambda i: i.started_at).instance_id
    elif instance_id not in {i.instance_id for i in running}:
        raise GroupNotFoundError(f"group {name!r} has no running instance {instance_id!r}")
    (instance,) = [i for i in running if i.instance_id == instance_id]
    stops = []
    if instance.pid is not None:
        for worker in matching_workers(await store.list_workers(), instance.pid, instance.host):
            stop = WorkerStop(worker.worker_id, KILLED_BY_REQUEST, *actor, via, f"group {name}")
            stops.append(await store.record_worker_stop(stop, now=system_clock.now()))
    try:
        kill_local_instance(name, instance_id)
    except BaseException:
        for stop_id in stops:
            await store.settle_worker_stop(stop_id, signalled=False)
        raise
    for stop_id in stops:
        await store.settle_worker_stop(stop_id, signalled=True)
    return instance_id


async def delete_group(store: Store, name: str) -> None:
    group = await store.get_group(name)
    if group is None:
        raise GroupNotFoundError(f"no worker group named {name!r}")
    if group.parent is not None:
        raise GroupConflictError(
            f"{name!r} is a per-task group of {group.parent!r}; remove that one"
        )
    await store.delete_group(name)


async def set_secret(
    store: Store, name: str, value: str, *, now: float, box: SecretBox | None = None
) -> None:
    check_secret_name(name)
    if not isinstance(value, str) or not value or len(value) > 32 * 1024:
        raise GroupError("a secret value must be a non-empty string of at most 32 KiB")
    await store.put_secret("", name, (box or SecretBox()).seal(value), now)
