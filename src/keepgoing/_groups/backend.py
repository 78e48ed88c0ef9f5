"""``GroupBackend``: the one small interface every place that runs workers implements.

A backend turns a group's desired replica count into running ``keepgoing
worker`` processes (the local backend) or into manifests a cluster runs (the
Kubernetes backend). The autoscaler calls it; it never reads the store.

Secrets are handed over by :meth:`GroupBackend.set_secrets`, apart from the
:class:`~keepgoing._groups.spec.GroupRevision`, so a revision object (which is
stored, logged and shown) never carries a plaintext value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from keepgoing._groups.spec import GroupRevision, Instance

__all__ = ["GroupBackend"]


class GroupBackend(Protocol):
    """Where a group's replicas run. Every method may be called from a worker thread."""

    #: ``"local"`` or ``"kubernetes"``: the name ``keepgoing deploy --backend`` takes.
    name: str

    def ensure_group(self, revision: GroupRevision) -> None:
        """Make ``revision`` runnable (build its environment, render its manifests); the
        newest revision ensured is the group's current one. Older revisions stay in
        place, for the runs pinned to them, until :meth:`retire_revision`.
        Idempotent: a revision already in place costs nothing."""

    def set_secrets(
        self, group: str, secrets: Mapping[str, str], revision: int | None = None
    ) -> None:
        """The decrypted secrets of ``group`` (of ``revision``, default the current one), by
        the environment variable they are injected as. Called before :meth:`set_replicas`
        whenever the revision has secrets."""

    def set_replicas(self, group: str, replicas: int, revision: int | None = None) -> None:
        """Run ``replicas`` replicas of ``revision`` of ``group`` (0 stops them all;
        replicas that stop are asked to hand back their work first). Each runs with
        ``KEEPGOING_GROUP_REVISION`` set, so it claims only that revision's runs.
        With no ``revision``: the current one, and older revisions' replicas are
        replaced (stopped)."""

    def retire_revision(self, group: str, revision: int) -> None:
        """``revision`` has no run left: stop its replicas and drop what it kept."""

    def list_instances(self, group: str) -> list[Instance]:
        """The replicas of ``group`` this backend knows of, running or recently ended."""

    def kill_instance(self, group: str, instance_id: str) -> None:
        """SIGKILL one replica of ``group`` (chaos and demos: its step is retried).

        Raises:
            GroupNotFoundError: no such running instance in ``group``.
        """
