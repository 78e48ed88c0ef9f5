"""Worker groups and the secrets they use: deploy, show, scale, kill, remove.

Permissions: ``groups.read`` to list and show, ``groups.write`` to deploy,
scale, remove and keep secrets, ``groups.kill`` to SIGKILL an instance
(``admin`` implies them all). Deploys, scales, kills, removals and secret
changes are audited; secret values never appear in an answer or the audit log.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import Field

from keepgoing._groups import commands as ops
from keepgoing._groups.envs import check_local_image
from keepgoing._groups.registration import DeployPlan
from keepgoing._groups.upgrade import DeployOptions, deploy_plan
from keepgoing._server.auth import KillsInstances, Principal, ReadsGroups, WritesGroups
from keepgoing._server.context import context
from keepgoing._server.routes._common import PREFIX, STRICT, documented
from keepgoing._server.schemas import _Request
from keepgoing._store.records import AuditEntry

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["groups"], dependencies=STRICT)

GroupName = Annotated[
    str, Path(min_length=1, max_length=63, pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
]
SecretName = Annotated[
    str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
]


class DeployBody(_Request):
    backend: str = Field("local", max_length=20)
    groups: list[dict[str, Any]] = Field(min_length=1, max_length=50)
    uploads: dict[str, str] = Field(default_factory=dict)
    force: bool = False
    migrate: list[str] = Field(default_factory=list, max_length=1000)
    check_per_name: int = Field(20, ge=1, le=10000)
    check_time_limit: float = Field(60.0, gt=0, le=3600)


class ScaleBody(_Request):
    replicas: int = Field(ge=0, le=1000)


class InstanceKillBody(_Request):
    instance_id: str | None = Field(None, min_length=1, max_length=120)
    via: Literal["api", "ui", "cli"] = Field("api", description="Where the kill was asked from.")


class SecretBody(_Request):
    value: str = Field(min_length=1, max_length=32 * 1024)


async def _audit(
    request: Request, principal: Principal, action: str, detail: dict[str, Any]
) -> None:
    ctx = context(request)
    await ctx.store.append_audit(
        AuditEntry(
            at=ctx.clock.now(),
            actor_kind=principal.kind,
            actor_id=principal.id,
            action=action,
            detail=detail,
        )
    )


@router.post("/groups", responses=documented(reads=False), summary="Deploy worker groups")
async def deploy_groups(
    request: Request, body: DeployBody, principal: WritesGroups
) -> dict[str, Any]:
    """Register a deploy (the main group, per-task groups, uploaded secrets); starts no run.

    With ``upgrade: "auto"`` on the main group (or runs named in ``migrate``) the
    runs that would move are replayed on the new code first: a run that would
    block refuses the deploy (409 ``deploy_refused``, the report in ``details``)
    unless ``force``."""
    raw = body.model_dump()
    plan = DeployPlan.from_body(raw)
    options = DeployOptions.from_body(raw)
    if plan.backend == "local":  # its replicas run on this machine: is its Python here?
        for revision in plan.groups:
            if revision.image is not None:
                await asyncio.to_thread(check_local_image, revision.image)
    ctx = context(request)
    outcome = await deploy_plan(ctx.store, plan, now=ctx.clock.now(), options=options)
    await _audit(
        request,
        principal,
        "groups.deploy",
        {
            "groups": outcome.revisions,
            "secrets": sorted(plan.uploads),
            "moved": list(outcome.moved),
            "pinned": sorted(outcome.pinned),
        },
    )
    return outcome.to_body()


@router.get("/groups", responses=documented(), summary="List worker groups")
async def list_groups(request: Request, _: ReadsGroups) -> dict[str, Any]:
    statuses = await ops.list_group_status(context(request).store)
    return {"groups": [s.to_body() for s in statuses]}


@router.get("/groups/{name}", responses=documented(404), summary="Show a worker group")
async def show_group(
    request: Request,
    name: GroupName,
    _: ReadsGroups,
    decisions: Annotated[int, Query(ge=0, le=1000)] = 20,
) -> dict[str, Any]:
    """A group's settings (secret names only), instances and newest decisions."""
    status = await ops.group_status(context(request).store, name, decisions=decisions)
    return status.to_body()


@router.get(
    "/groups/{name}/revisions/{revision}",
    responses=documented(404),
    summary="Get a revision of a group",
)
async def get_revision(
    request: Request,
    name: GroupName,
    revision: Annotated[int, Path(ge=1, le=2**31)],
    _: ReadsGroups,
) -> dict[str, Any]:
    """The stored spec of the revision (its source and settings; never secret values)."""
    spec = await ops.revision_spec(context(request).store, name, revision)
    return {"group": name, "revision": revision, "spec": json.loads(spec)}


@router.post(
    "/groups/{name}/scale", responses=documented(404, reads=False), summary="Scale a group"
)
async def scale_group(
    request: Request, name: GroupName, body: ScaleBody, principal: WritesGroups
) -> dict[str, Any]:
    ctx = context(request)
    actor = f"{principal.kind} {principal.id}"
    await ops.scale_group(ctx.store, name, body.replicas, now=ctx.clock.now(), actor=actor)
    await _audit(request, principal, "groups.scale", {"group": name, "replicas": body.replicas})
    return {"group": name, "replicas": body.replicas}


@router.post(
    "/groups/{name}/kill", responses=documented(404, reads=False), summary="Kill an instance"
)
async def kill_instance(
    request: Request, name: GroupName, body: InstanceKillBody, principal: KillsInstances
) -> dict[str, Any]:
    """SIGKILL one running instance (default: the newest). Its step is retried."""
    killed = await ops.kill_instance(
        context(request).store,
        name,
        body.instance_id,
        actor=(principal.kind, principal.id),
        via=body.via,
    )
    await _audit(request, principal, "groups.kill", {"group": name, "instance_id": killed})
    return {"group": name, "instance_id": killed}


@router.delete("/groups/{name}", responses=documented(404), summary="Remove a group")
async def remove_group(
    request: Request, name: GroupName, principal: WritesGroups
) -> dict[str, Any]:
    await ops.delete_group(context(request).store, name)
    await _audit(request, principal, "groups.remove", {"group": name})
    return {"group": name, "removed": True}


@router.get("/secrets", responses=documented(), summary="List kept secrets")
async def list_secrets(request: Request, _: ReadsGroups) -> dict[str, Any]:
    """The names of the kept secrets; never their values."""
    return {"secrets": await context(request).store.list_secrets("")}


@router.put("/secrets/{name}", responses=documented(reads=False), summary="Keep a secret")
async def put_secret(
    request: Request, name: SecretName, body: SecretBody, principal: WritesGroups
) -> dict[str, Any]:
    ctx = context(request)
    await ops.set_secret(ctx.store, name, body.value, now=ctx.clock.now())
    await _audit(request, principal, "secrets.set", {"name": name})
    return {"name": name}


@router.delete("/secrets/{name}", responses=documented(), summary="Forget a secret")
async def delete_secret(
    request: Request, name: SecretName, principal: WritesGroups
) -> dict[str, Any]:
    deleted = await context(request).store.delete_secret("", name)
    if deleted:
        await _audit(request, principal, "secrets.remove", {"name": name})
    return {"name": name, "deleted": deleted}
