"""A deploy as data (:class:`DeployPlan`) and its registration in a store.

The client builds a plan from the source file (``deploy_workflow_worker``); in
store mode it registers it here itself, and over HTTP the server does, after
:meth:`DeployPlan.from_body` has checked every field of the request as hostile
input. Uploaded secret values travel in the plan only on the way in: they are
encrypted before they are stored, and no revision holds them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from keepgoing._groups.secrets import SecretBox, check_secret_name
from keepgoing._groups.spec import (
    MAX_NAME,
    GroupRevision,
    SecretRef,
    check_env_name,
    check_group_name,
    group_queue,
    parse_cpu,
    parse_memory,
    script_dependencies,
)
from keepgoing._store.protocol import Store
from keepgoing.errors import GroupError

__all__ = ["MAX_SOURCE", "UPGRADES", "DeployPlan", "check_revision", "register"]

MAX_SOURCE = 1024 * 1024
MAX_REPLICAS = 1000
_MAX_ENV = 200
_MAX_VALUE = 32 * 1024
DEFAULT_SHUTDOWN_DELAY = 60.0
_BACKENDS = ("local", "kubernetes")
#: What a deploy does with the open runs of a revision: leave them on it, or move them.
UPGRADES = ("pinned", "auto")


def check_settings(
    *,
    max_replicas: object,
    shutdown_delay_seconds: object,
    concurrency: object,
) -> tuple[int, float, int]:
    if isinstance(max_replicas, bool) or not isinstance(max_replicas, int):
        raise GroupError(f"max_replicas must be an int, not {max_replicas!r}")
    if not 1 <= max_replicas <= MAX_REPLICAS:
        raise GroupError(f"max_replicas must be between 1 and {MAX_REPLICAS}, not {max_replicas}")
    delay = DEFAULT_SHUTDOWN_DELAY if shutdown_delay_seconds is None else shutdown_delay_seconds
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay):
        raise GroupError(f"shutdown_delay_seconds must be a number, not {delay!r}")
    if not 0 <= delay <= 86400:
        raise GroupError(f"shutdown_delay_seconds must be between 0 and 86400, not {delay}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise GroupError(f"concurrency must be a positive int, not {concurrency!r}")
    return max_replicas, float(delay), concurrency


def check_revision(rev: GroupRevision, *, main: str) -> GroupRevision:
    """``rev`` if every field is well formed for a group of the deploy of ``main``.

    Raises:
        GroupError: naming the field.
    """
    check_group_name(rev.group)
    if rev.task_queue != group_queue(rev.group):
        raise GroupError(f"group {rev.group!r} must serve queue {group_queue(rev.group)!r}")
    if rev.group != main and (rev.parent != main or not rev.group.startswith(f"{main}-")):
        raise GroupError(
            f"per-task group {rev.group!r} must be named {main}-<hash> with parent {main}"
        )
    if rev.group == main and (rev.parent is not None or rev.tasks):
        raise GroupError(f"the main group {main!r} has no parent and serves every task")
    if not isinstance(rev.source, str) or not rev.source.strip():
        raise GroupError("the source file is empty")
    if len(rev.source.encode()) > MAX_SOURCE:
        raise GroupError(f"the source file is larger than {MAX_SOURCE} bytes")
    if not isinstance(rev.filename, str) or not rev.filename.endswith(".py") or "/" in rev.filename:
        raise GroupError(
            f"the source file name must be a file name ending in .py, not {rev.filename!r}"
        )
    if tuple(rev.dependencies) != script_dependencies(rev.source, rev.filename):
        raise GroupError("dependencies must be the source file's '# /// script' dependencies")
    parse_cpu(rev.cpu)
    parse_memory(rev.memory)
    check_settings(
        max_replicas=rev.max_replicas,
        shutdown_delay_seconds=rev.shutdown_delay_seconds,
        concurrency=rev.concurrency,
    )
    if len(rev.env) + len(rev.secrets) > _MAX_ENV:
        raise GroupError(f"at most {_MAX_ENV} env variables and secrets")
    for key, value in rev.env.items():
        check_env_name(key)
        if not isinstance(value, str) or len(value) > _MAX_VALUE or "\0" in value:
            raise GroupError(f"env {key} must be a string of at most {_MAX_VALUE} characters")
    seen = set(rev.env)
    for ref in rev.secrets:
        check_env_name(ref.env_var, "secrets")
        check_secret_name(ref.name)
        if ref.scope not in ("", main):
            raise GroupError(f"secret {ref.name!r} has scope {ref.scope!r}, not '' or {main!r}")
        if ref.env_var in seen:
            raise GroupError(f"{ref.env_var} is set twice (env and secrets)")
        seen.add(ref.env_var)
    if rev.upgrade not in UPGRADES:
        raise GroupError(f"upgrade must be one of {', '.join(UPGRADES)}, not {rev.upgrade!r}")
    if not isinstance(rev.keep_warm_while_open, bool):
        raise GroupError("keep_warm_while_open must be true or false")
    for task, queue in rev.task_queues.items():
        if (
            not isinstance(task, str)
            or not isinstance(queue, str)
            or not queue.startswith(f"workflows.{main}-")
        ):
            raise GroupError(f"task {task!r} is routed to {queue!r}, not a group of {main!r}")
    return rev


@dataclass(frozen=True)
class DeployPlan:
    """The groups of one deploy: the main group, one per distinct task image, and the
    secret values uploaded with it (by name, kept in the main group's scope)."""

    main: GroupRevision
    task_groups: tuple[GroupRevision, ...] = ()
    uploads: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    backend: str = "local"

    @property
    def groups(self) -> tuple[GroupRevision, ...]:
        return (self.main, *self.task_groups)

    @property
    def task_workers(self) -> dict[str, str]:
        return {task: g.group for g in self.task_groups for task in g.tasks}

    def check(self) -> DeployPlan:
        if self.backend not in _BACKENDS:
            raise GroupError(f"backend must be one of {', '.join(_BACKENDS)}, not {self.backend!r}")
        main = self.main.group
        check_revision(self.main, main=main)
        names = [g.group for g in self.task_groups]
        if len(set(names)) != len(names):
            raise GroupError("two per-task groups have one name")
        for group in self.task_groups:
            check_revision(group, main=main)
            if len(group.group) > MAX_NAME + 9:
                raise GroupError(f"per-task group name {group.group!r} is too long")
        for name, value in self.uploads.items():
            check_secret_name(name)
            if not isinstance(value, str) or not value or len(value) > _MAX_VALUE:
                raise GroupError(f"uploaded secret {name!r} must be a non-empty string")
        wanted = {r.name for g in self.groups for r in g.secrets if r.scope == main}
        if wanted != set(self.uploads):
            raise GroupError("the uploaded secrets do not match the secrets the groups use")
        return self

    def to_body(self) -> dict[str, Any]:
        """The JSON of the HTTP request (uploads included: send it only to the server)."""
        import json  # noqa: PLC0415

        return {
            "backend": self.backend,
            "groups": [json.loads(g.to_json()) for g in self.groups],
            "uploads": dict(self.uploads),
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> DeployPlan:
        """Parse and check a request body; every malformed field is a ``GroupError``."""
        import json  # noqa: PLC0415

        groups = body.get("groups")
        if not isinstance(groups, list) or not groups or len(groups) > 50:
            raise GroupError("groups must be a list of 1 to 50 group revisions")
        revisions = []
        for raw in groups:
            if not isinstance(raw, dict):
                raise GroupError("each group revision must be an object")
            try:
                revisions.append(GroupRevision.from_json(json.dumps({**raw, "revision": 0})))
            except GroupError:
                raise
            except KeyError as exc:
                raise GroupError(f"a group revision lacks the field {exc}") from None
            except Exception as exc:
                raise GroupError(
                    f"a group revision is malformed: {type(exc).__name__}: {exc}"
                ) from None
        uploads = body.get("uploads", {})
        if not isinstance(uploads, dict):
            raise GroupError("uploads must be an object of secret name to value")
        backend = body.get("backend", "local")
        return cls(
            main=revisions[0],
            task_groups=tuple(revisions[1:]),
            uploads=MappingProxyType(dict(uploads)),
            backend=str(backend),
        ).check()


def secret_refs(main: str, entries: Mapping[str, tuple[str, bool]]) -> tuple[SecretRef, ...]:
    """env var -> (secret name, uploaded) as the refs a revision keeps."""
    return tuple(
        SecretRef(env_var=var, scope=main if uploaded else "", name=name)
        for var, (name, uploaded) in sorted(entries.items())
    )


async def register(
    store: Store, plan: DeployPlan, *, now: float, box: SecretBox | None = None
) -> dict[str, int]:
    """Store ``plan``'s secrets (encrypted) and a new revision of each of its groups;
    forget the main group's per-task groups this deploy no longer has.

    Returns: group name -> its new revision.

    Raises:
        GroupError: a kept secret is missing, or a queue is served by another group.
    """
    plan.check()
    main = plan.main.group
    kept = sorted({r.name for g in plan.groups for r in g.secrets if r.scope == ""})
    found = await store.get_secrets([("", name) for name in kept])
    missing = [name for name in kept if ("", name) not in found]
    if missing:
        raise GroupError(
            f"no secret named {', '.join(missing)} is kept; set it with "
            f"`keepgoing secrets set {missing[0]}` or use Secret.from_local_env(...)"
        )
    if plan.uploads:
        box = box or SecretBox()
        for name, value in sorted(plan.uploads.items()):
            await store.put_secret(main, name, box.seal(value), now)
    revisions = {}
    for group in (*plan.task_groups, plan.main):
        revisions[group.group] = await store.deploy_group(
            name=group.group,
            task_queue=group.task_queue,
            backend=plan.backend,
            parent=group.parent,
            spec=replace(group, revision=0).to_json(),
            now=now,
        )
    current = {g.group for g in plan.task_groups}
    for old in await store.list_groups():
        if old.parent == main and old.name not in current:
            await store.delete_group(old.name)
    return revisions
