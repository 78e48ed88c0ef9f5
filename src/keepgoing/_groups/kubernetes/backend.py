"""``KubernetesBackend``: a :class:`~keepgoing._groups.backend.GroupBackend` on a cluster.

``ensure_group`` applies the group's Deployment and KEDA objects (and its
Secret once the secret values are known); from then on KEDA scales the
Deployment from the ``keepgoing_queue_work`` view, so keepgoing's own
autoscaler need not run. ``set_replicas`` patches the Deployment's scale
(KEDA may change it again at its next poll), ``list_instances`` lists the
group's pods by label, and ``kill_instance`` deletes one pod with no grace:
the kubelet SIGKILLs it and its step is retried elsewhere.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from keepgoing._groups.kubernetes.client import Cluster
from keepgoing._groups.kubernetes.keda import scaled_object, trigger_authentication
from keepgoing._groups.kubernetes.manifests import (
    GROUP_LABEL,
    PINNED_LABEL,
    REVISION_LABEL,
    deployment,
    labels,
    secret,
)
from keepgoing._groups.kubernetes.settings import KubernetesSettings
from keepgoing._groups.spec import GroupRevision, Instance
from keepgoing._groups.worker_stops import Termination
from keepgoing._store.worker_stops import OOM_KILLED
from keepgoing.errors import GroupError, GroupNotFoundError

__all__ = ["KubernetesBackend", "apply_manifests"]


class KubernetesBackend:
    """Run groups as Deployments scaled by KEDA. ``api_client``: a configured
    ``kubernetes.client.ApiClient`` (default: from the kubeconfig or the pod)."""

    name = "kubernetes"

    def __init__(self, settings: KubernetesSettings, *, api_client: Any | None = None) -> None:
        self.settings = settings
        self._api_client = api_client
        self._cluster: Cluster | None = None
        self._lock = threading.Lock()
        self._revisions: dict[str, GroupRevision] = {}
        self._secrets: dict[str, dict[str, str]] = {}

    @property
    def cluster(self) -> Cluster:
        with self._lock:
            if self._cluster is None:
                self._cluster = Cluster(self._api_client)
            return self._cluster

    def ensure_group(self, revision: GroupRevision) -> None:
        tags = labels(revision)
        with self._lock:
            self._revisions[revision.group] = revision
            known = self._secrets.get(revision.group)
        objects = [deployment(revision, self.settings, tags)]
        if not revision.secrets or known is not None:
            values = {k: v for k, v in (known or {}).items() if k in revision.secret_names}
            if set(values) == set(revision.secret_names):
                objects.insert(0, secret(revision, self.settings, values, tags))
        objects += [
            trigger_authentication(revision, self.settings, tags),
            scaled_object(revision, self.settings, tags),
        ]
        for obj in objects:
            self.cluster.apply(obj)

    def set_secrets(
        self, group: str, secrets: Mapping[str, str], number: int | None = None
    ) -> None:
        revision = self._revision(group)
        values = {str(k): str(v) for k, v in secrets.items()}
        missing = [n for n in revision.secret_names if n not in values]
        if missing:
            raise GroupError(f"group {group} needs the value of secret(s) {', '.join(missing)}")
        with self._lock:
            self._secrets[group] = values
        picked = {n: values[n] for n in revision.secret_names}
        self.cluster.apply(secret(revision, self.settings, picked, labels(revision)))

    def set_replicas(self, group: str, replicas: int, revision: int | None = None) -> None:
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise GroupError(f"replicas must be a whole number >= 0, not {replicas!r}")
        self.cluster.scale(group, self.settings.namespace, replicas)

    def retire_revision(self, group: str, revision: int) -> None:
        """Nothing to drop here yet: a revision's Deployment is replaced by the next."""

    def list_instances(self, group: str) -> list[Instance]:
        """The group's pods: its current Deployment's, and those of the older revisions
        kept for their runs (labelled ``pinned-of`` the group)."""
        namespace = self.settings.namespace
        pods = [
            *self.cluster.pods(namespace, f"{GROUP_LABEL}={group}"),
            *self.cluster.pods(namespace, f"{PINNED_LABEL}={group}"),
        ]
        instances = [_instance(group, pod) for pod in pods]
        return sorted(instances, key=lambda i: (i.started_at, i.instance_id))

    def terminations(self, group: str) -> list[Termination]:
        """The group's containers that ended for a reason the cluster points at the
        task with (``OOMKilled``), from each pod's container statuses: the current
        state of an ended container, and the last state of a restarted one."""
        pods = self.cluster.pods(self.settings.namespace, f"{GROUP_LABEL}={group}")
        return [t for pod in pods for t in _terminations(pod)]

    def kill_instance(self, group: str, instance_id: str) -> None:
        namespace = self.settings.namespace
        pod = self.cluster.read_pod(instance_id, namespace)
        tags = pod.metadata.labels or {}
        if group not in (tags.get(GROUP_LABEL), tags.get(PINNED_LABEL)):
            raise GroupNotFoundError(f"pod {instance_id} is not an instance of group {group}")
        self.cluster.delete_pod(instance_id, namespace)

    def _revision(self, group: str) -> GroupRevision:
        with self._lock:
            revision = self._revisions.get(group)
        if revision is None:
            raise GroupNotFoundError(f"group {group} was not ensured on this backend")
        return revision


def apply_manifests(
    source: str | Path | Iterable[dict[str, Any]], *, api_client: Any | None = None
) -> list[str]:
    """Apply rendered manifests: a folder from ``render_manifests`` (or its parent, with
    a folder per group), one JSON file, or the objects themselves. Returns what was
    applied, as ``Kind namespace/name``, in order.

    Raises:
        GroupError: the client is not installed, a file is not a manifest, or the API
            server refused an object (its answer is in the message).
    """
    objects = _load(source) if isinstance(source, str | Path) else list(source)
    cluster = Cluster(api_client)
    applied = []
    for obj in objects:
        cluster.apply(obj)
        meta = obj["metadata"]
        applied.append(f"{obj['kind']} {meta.get('namespace', 'default')}/{meta['name']}")
    return applied


def _load(source: str | Path) -> list[dict[str, Any]]:
    import json  # noqa: PLC0415

    path = Path(source)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(path.glob("*.json")) or sorted(path.glob("*/*.json"))
    else:
        raise GroupError(f"{path} is neither a manifest file nor a folder of them")
    if not files:
        raise GroupError(f"{path} holds no manifests (*.json); render them with --out first")
    objects = []
    for file in files:
        try:
            obj = json.loads(file.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise GroupError(f"{file} is not a JSON manifest: {exc}") from None
        if not isinstance(obj, dict) or not {"apiVersion", "kind", "metadata"} <= set(obj):
            raise GroupError(f"{file} is not a Kubernetes object (apiVersion, kind, metadata)")
        objects.append(obj)
    return objects


def _instance(group: str, pod: Any) -> Instance:
    meta, status = pod.metadata, pod.status
    phase = (status.phase if status else None) or "Pending"
    started = (status.start_time if status else None) or meta.creation_timestamp
    terminated = None
    for cs in (status.container_statuses if status else None) or []:
        if cs.state is not None and cs.state.terminated is not None:
            terminated = cs.state.terminated
    ended = phase in ("Succeeded", "Failed")
    return Instance(
        instance_id=meta.name,
        group=group,
        revision=int((meta.labels or {}).get(REVISION_LABEL, "0") or 0),
        state="exited" if ended else "running",
        started_at=started.timestamp() if started is not None else 0.0,
        pid=None,
        host=(pod.spec.node_name if pod.spec else None) or "",
        ended_at=(
            terminated.finished_at.timestamp()
            if ended and terminated is not None and terminated.finished_at is not None
            else None
        ),
        exit_status=terminated.exit_code if ended and terminated is not None else None,
    )


#: Container termination reasons (as the kubelet reports them) that name a cause.
_REASONS = {"OOMKilled": OOM_KILLED}


def _terminations(pod: Any) -> list[Termination]:
    meta, status = pod.metadata, pod.status
    found = []
    for cs in (status.container_statuses if status else None) or []:
        for state in (cs.state, cs.last_state):
            ended = state.terminated if state is not None else None
            cause = _REASONS.get(ended.reason or "") if ended is not None else None
            if ended is None or cause is None or ended.finished_at is None:
                continue
            finished = ended.finished_at.timestamp()
            found.append(Termination(meta.name, meta.name, finished, cause, ended.reason))
    return found
