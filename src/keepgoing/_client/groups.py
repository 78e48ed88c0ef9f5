"""Worker groups from a client: the same operations on a store or over HTTP.

:class:`GroupClient` is what :attr:`keepgoing.Client.groups` returns. In store
mode it runs :mod:`keepgoing._groups.commands` on the store; with a server it
calls ``/api/v1/groups`` (permissions ``groups.read``, ``groups.write``,
``groups.kill``).
"""

from __future__ import annotations

import getpass
import json
import urllib.parse
from typing import TYPE_CHECKING

from keepgoing._clock import system_clock
from keepgoing._groups import commands as ops
from keepgoing._groups.registration import DeployPlan
from keepgoing._groups.spec import GroupRevision
from keepgoing._groups.upgrade import (
    DeployOptions,
    DeployOutcome,
    RunMove,
    deploy_plan,
    migrate_run,
)
from keepgoing._store.records import AuditEntry

if TYPE_CHECKING:
    from keepgoing._client.http_backend import HttpBackend
    from keepgoing._client.store_backend import StoreBackend

__all__ = ["GroupClient"]

API = "/api/v1"


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


class GroupClient:
    """Deploy, inspect, scale, kill and remove worker groups; keep secrets."""

    def __init__(self, backend: StoreBackend | HttpBackend) -> None:
        self._backend = backend
        self._http = not hasattr(backend, "run")

    def deploy(self, plan: DeployPlan, options: DeployOptions | None = None) -> DeployOutcome:
        """Check the runs it would move, register ``plan``, move them (see
        :func:`keepgoing._groups.upgrade.deploy_plan`).

        Raises:
            DeployRefusedError: a run to move would block on the new code.
        """
        options = options or DeployOptions()
        if self._http:
            body = {**plan.to_body(), **options.to_body()}
            found = self._h.call("POST", f"{API}/groups", idempotent=False, json=body)
            return DeployOutcome.from_body(found)
        outcome: DeployOutcome = self._s.run(
            deploy_plan(self._s.store, plan, now=system_clock.now(), options=options)
        )
        return outcome

    def migrate(
        self,
        workflow_id: str,
        to_revision: int,
        *,
        run_id: str | None = None,
        force: bool = False,
        check_time_limit: float = 60.0,
    ) -> RunMove:
        """Move an open run to ``to_revision`` of its group, once its history replays on
        that revision's source (``force``: without the check). Written to the audit log.

        Raises:
            DeployRefusedError: its history does not replay there; nothing moves.
            GroupError: no such revision, or it is retired.
        """
        if self._http:
            found = self._h.call(
                "POST",
                f"{API}/runs/{_quote(workflow_id)}/migrate",
                idempotent=True,
                json={
                    "to_revision": to_revision,
                    "run_id": run_id,
                    "force": force,
                    "check_time_limit": check_time_limit,
                },
            )
            return RunMove.from_body(found)

        async def move() -> RunMove:
            now = system_clock.now()
            moved = await migrate_run(
                self._s.store,
                workflow_id,
                to_revision=to_revision,
                now=now,
                run_id=run_id,
                force=force,
                time_limit=check_time_limit,
            )
            await self._s.store.append_audit(
                AuditEntry(
                    at=now,
                    actor_kind="user",
                    actor_id=_actor().removeprefix("user "),
                    action="workflow.migrate",
                    workflow_id=moved.workflow_id,
                    run_id=moved.run_id,
                    detail={"from": moved.from_revision, "to": moved.to_revision},
                )
            )
            return moved

        moved: RunMove = self._s.run(move())
        return moved

    def statuses(self) -> list[ops.GroupStatus]:
        """Every group with its settings, instances and newest decision."""
        if self._http:
            found = self._h.call("GET", f"{API}/groups", idempotent=True)
            return [ops.GroupStatus.from_body(g) for g in found["groups"]]
        groups: list[ops.GroupStatus] = self._s.run(ops.list_group_status(self._s.store))
        return groups

    def show(self, name: str, *, decisions: int = 20) -> ops.GroupStatus:
        if self._http:
            found = self._h.call(
                "GET",
                f"{API}/groups/{_quote(name)}",
                idempotent=True,
                params={"decisions": decisions},
            )
            return ops.GroupStatus.from_body(found)
        status: ops.GroupStatus = self._s.run(
            ops.group_status(self._s.store, name, decisions=decisions)
        )
        return status

    def revision(self, name: str, revision: int) -> GroupRevision:
        """The stored revision ``revision`` of group ``name`` (its source; no secret values)."""
        if self._http:
            found = self._h.call(
                "GET", f"{API}/groups/{_quote(name)}/revisions/{int(revision)}", idempotent=True
            )
            return GroupRevision.from_json(json.dumps(found["spec"]))
        spec: str = self._s.run(ops.revision_spec(self._s.store, name, revision))
        return GroupRevision.from_json(spec)

    def scale(self, name: str, replicas: int) -> None:
        if self._http:
            self._h.call(
                "POST",
                f"{API}/groups/{_quote(name)}/scale",
                idempotent=True,
                json={"replicas": replicas},
            )
            return
        self._s.run(
            ops.scale_group(self._s.store, name, replicas, now=system_clock.now(), actor=_actor())
        )

    def kill(self, name: str, instance_id: str | None = None, *, via: str = "api") -> str:
        """SIGKILL one running instance (default: the newest); returns its id. Its
        worker's losses are recorded as ``killed_by_request`` (``via``: ``"api"``,
        ``"ui"`` or ``"cli"``) and count against no limit."""
        if self._http:
            found = self._h.call(
                "POST",
                f"{API}/groups/{_quote(name)}/kill",
                idempotent=False,
                json={"instance_id": instance_id, "via": via},
            )
            return str(found["instance_id"])
        user = _actor().removeprefix("user ")
        killed: str = self._s.run(
            ops.kill_instance(self._s.store, name, instance_id, actor=("user", user), via=via)
        )
        return killed

    def remove(self, name: str) -> None:
        if self._http:
            self._h.call("DELETE", f"{API}/groups/{_quote(name)}", idempotent=True)
            return
        self._s.run(ops.delete_group(self._s.store, name))

    def set_secret(self, name: str, value: str) -> None:
        """Keep ``value`` encrypted as secret ``name`` (for ``Secret.from_env(name)``)."""
        if self._http:
            self._h.call(
                "PUT", f"{API}/secrets/{_quote(name)}", idempotent=True, json={"value": value}
            )
            return
        self._s.run(ops.set_secret(self._s.store, name, value, now=system_clock.now()))

    def list_secrets(self) -> list[str]:
        """The names of the kept secrets (never their values)."""
        if self._http:
            found = self._h.call("GET", f"{API}/secrets", idempotent=True)
            return [str(n) for n in found["secrets"]]
        names: list[str] = self._s.run(self._s.store.list_secrets(""))
        return names

    def remove_secret(self, name: str) -> bool:
        if self._http:
            found = self._h.call("DELETE", f"{API}/secrets/{_quote(name)}", idempotent=True)
            return bool(found["deleted"])
        deleted: bool = self._s.run(self._s.store.delete_secret("", name))
        return deleted

    def autoscaler_running(self) -> bool | None:
        """Whether an autoscaler holds this store's lease (None over HTTP: the server runs one)."""
        if self._http:
            return None
        holder = self._s.run(self._s.store.service_holder("autoscaler", system_clock.now()))
        return holder is not None

    @property
    def _h(self) -> HttpBackend:
        return self._backend  # type: ignore[return-value]

    @property
    def _s(self) -> StoreBackend:
        return self._backend  # type: ignore[return-value]


def _actor() -> str:
    try:
        return f"user {getpass.getuser()}"
    except (KeyError, OSError):
        return "a local user"
