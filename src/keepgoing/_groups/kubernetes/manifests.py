"""Render a group revision as Kubernetes objects and write them, with the image's build context.

:func:`render_objects` returns the group's ``Secret``, ``Deployment``,
KEDA ``TriggerAuthentication`` and ``ScaledObject`` as plain dicts, in the
order they must be applied (a Deployment's secret before it, the
ScaledObject after both). Secret values appear base64-encoded in the
``Secret`` and nowhere else: the Deployment refers to them by key.

:func:`render_manifests` writes ``DIR/<group>/``: one JSON file per object
(``kubectl apply -f DIR/<group>/`` reads them; JSON is YAML) and ``image/``,
the Dockerfile with its build context.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keepgoing._groups.kubernetes.dockerfile import image_reference, worker_image, write_context
from keepgoing._groups.kubernetes.keda import (
    KEDA_CONNECTION_KEY,
    object_name,
    scaled_object,
    secret_name,
    trigger_authentication,
)
from keepgoing._groups.kubernetes.settings import KubernetesSettings, keda_connection
from keepgoing._groups.spec import RESERVED_ENV, GroupRevision
from keepgoing._procinfo import NONCE_ENV
from keepgoing.errors import GroupError

__all__ = ["GROUP_LABEL", "RenderedGroup", "render_manifests", "render_objects"]

GROUP_LABEL = "keepgoing.dev/group"
REVISION_LABEL = "keepgoing.dev/revision"
#: On the objects of an older revision kept for its runs: the group they belong to.
PINNED_LABEL = "keepgoing.dev/pinned-of"
IMAGE_ANNOTATION = "keepgoing.dev/image-spec"
_STORE_KEY = "KEEPGOING_STORE"


@dataclass(frozen=True)
class RenderedGroup:
    """What :func:`render_manifests` wrote for one group."""

    group: str
    image: str
    folder: Path
    dockerfile: Path
    files: tuple[Path, ...]
    objects: tuple[dict[str, Any], ...]


def labels(revision: GroupRevision, pinned: bool = False) -> dict[str, str]:
    """A pinned revision's pods carry their own group label (``<group>-r<revision>``),
    so the selectors of the group's Deployments never overlap."""
    tags = {
        "app.kubernetes.io/name": "keepgoing-worker",
        "app.kubernetes.io/instance": revision.group,
        "app.kubernetes.io/managed-by": "keepgoing",
        GROUP_LABEL: object_name(revision, pinned),
        REVISION_LABEL: str(revision.revision),
    }
    if pinned:
        tags[PINNED_LABEL] = revision.group
    return tags


def render_objects(
    revision: GroupRevision,
    settings: KubernetesSettings,
    secrets: Mapping[str, str] | None = None,
    *,
    pinned: bool = False,
) -> list[dict[str, Any]]:
    """The group's objects, in apply order: Secret, Deployment, TriggerAuthentication,
    ScaledObject. ``pinned``: an older revision kept for its runs, whose Deployment and
    ScaledObject are ``<group>-r<revision>`` (it shares the group's Secret and
    TriggerAuthentication, so only those two are rendered).

    Args:
        secrets: the decrypted value of each of the revision's secrets, by the
            environment variable it is injected as.

    Raises:
        GroupError: a secret of the revision has no value, or one is given that the
            revision does not name.
    """
    if pinned:
        tags = labels(revision, pinned=True)
        return [
            deployment(revision, settings, tags, pinned=True),
            scaled_object(revision, settings, tags, pinned=True),
        ]
    values = _check_secrets(revision, secrets or {})
    tags = labels(revision)
    return [
        secret(revision, settings, values, tags),
        deployment(revision, settings, tags),
        trigger_authentication(revision, settings, tags),
        scaled_object(revision, settings, tags),
    ]


def render_manifests(
    revision: GroupRevision,
    out_dir: str | Path,
    *,
    settings: KubernetesSettings,
    secrets: Mapping[str, str] | None = None,
    pinned: bool = False,
) -> RenderedGroup:
    """Write the group's manifests and image build context under ``out_dir/<group>/``
    (a pinned older revision: ``out_dir/<group>-r<revision>/``).

    The folder is replaced as a whole, so a file left from an older revision never
    lingers. Build and push the image with
    ``docker build -t <RenderedGroup.image> out_dir/<group>/image`` before applying.
    """
    objects = render_objects(revision, settings, secrets, pinned=pinned)
    folder = Path(out_dir) / object_name(revision, pinned)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json"):
        old.unlink()
    dockerfile = write_context(revision, settings, folder / "image")
    files = []
    for index, obj in enumerate(objects, start=1):
        path = folder / f"{index:02d}-{obj['kind'].lower()}.json"
        text = json.dumps(obj, indent=2, sort_keys=False) + "\n"
        path.write_text(text, "utf-8")
        if obj["kind"] == "Secret":
            path.chmod(0o600)  # it holds the store password and the secrets
        files.append(path)
    return RenderedGroup(
        group=revision.group,
        image=image_reference(revision, settings),
        folder=folder,
        dockerfile=dockerfile,
        files=tuple(files),
        objects=tuple(objects),
    )


def secret(
    revision: GroupRevision,
    settings: KubernetesSettings,
    values: Mapping[str, str],
    tags: dict[str, str],
) -> dict[str, Any]:
    data = {
        _STORE_KEY: settings.store_url,
        KEDA_CONNECTION_KEY: keda_connection(settings.store_url),
        **values,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(revision),
            "namespace": settings.namespace,
            "labels": tags,
        },
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode("ascii") for k, v in data.items()},
    }


def deployment(
    revision: GroupRevision,
    settings: KubernetesSettings,
    tags: dict[str, str],
    *,
    pinned: bool = False,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "worker",
        "image": image_reference(revision, settings),
        "imagePullPolicy": "IfNotPresent",
        "env": _env(revision),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    resources = _resources(revision)
    if resources:
        container["resources"] = resources
    image = worker_image(revision, settings)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": object_name(revision, pinned),
            "namespace": settings.namespace,
            "labels": tags,
            "annotations": {IMAGE_ANNOTATION: image.hash},
        },
        "spec": {
            # Created at zero; KEDA owns the count from then on (apply leaves it alone).
            "replicas": 0,
            "selector": {"matchLabels": {GROUP_LABEL: object_name(revision, pinned)}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": tags},
                "spec": {
                    "terminationGracePeriodSeconds": settings.termination_grace,
                    "containers": [container],
                },
            },
        },
    }


def _env(revision: GroupRevision) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "KEEPGOING_GROUP", "value": revision.group},
        *(
            [{"name": "KEEPGOING_GROUP_REVISION", "value": str(revision.revision)}]
            if revision.revision >= 1
            else []
        ),
        {"name": "KEEPGOING_INSTANCE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        # A nonce per pod, so the worker need not start itself again to get one.
        {"name": NONCE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        _from_secret(_STORE_KEY, revision),
    ]
    if revision.task_queues:
        env.append(
            {
                "name": "KEEPGOING_TASK_QUEUES",
                "value": ",".join(f"{t}={q}" for t, q in sorted(revision.task_queues.items())),
            }
        )
    for name, value in sorted(revision.env.items()):
        if name in RESERVED_ENV:
            raise GroupError(f"env may not set {name}: keepgoing sets it for its workers")
        env.append({"name": name, "value": value})
    names = revision.secret_names
    for name in names:
        env.append(_from_secret(name, revision))
    if names:
        env.append({"name": "KEEPGOING_SECRET_ENV", "value": ",".join(names)})
    return env


def _from_secret(key: str, revision: GroupRevision) -> dict[str, Any]:
    ref = {"name": secret_name(revision), "key": key}
    return {"name": key, "valueFrom": {"secretKeyRef": ref}}


def _resources(revision: GroupRevision) -> dict[str, Any]:
    amounts = {k: v for k, v in (("cpu", revision.cpu), ("memory", revision.memory)) if v}
    # Requests are what the scheduler reserves, limits what the kernel enforces: the
    # same, so a worker gets the size it was deployed with and no more.
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def _check_secrets(revision: GroupRevision, values: Mapping[str, str]) -> dict[str, str]:
    names = revision.secret_names
    missing = [n for n in names if n not in values]
    if missing:
        raise GroupError(
            f"group {revision.group} needs the value of secret(s) {', '.join(missing)} "
            "to render its Secret"
        )
    extra = sorted(set(values) - set(names))
    if extra:
        raise GroupError(f"group {revision.group} does not use secret(s) {', '.join(extra)}")
    for name in names:
        if not isinstance(values[name], str):
            raise GroupError(f"the value of secret {name} must be a string")
    return {n: values[n] for n in names}
