"""The KEDA objects that scale a group: a ``ScaledObject`` on the ``postgresql`` trigger.

KEDA polls :func:`queue_work_query` against the store, a query over the
``keepgoing_revision_work`` view (migration 0013; per-task groups: the
``keepgoing_queue_work`` view, 0008), and scales the group's Deployment
between 0 and ``max_replicas``: each replica is worth ``concurrency`` units
of queued or running work. A main group's query counts the work of its own
revision's runs only, so an older revision that still has runs has a
Deployment and a ScaledObject of its own (``<group>-r<revision>``, *pinned*)
that scale to zero while its runs wait. Fields follow KEDA 2.15's
ScaledObject specification and its PostgreSQL scaler (see docs/kubernetes.md).
"""

from __future__ import annotations

import math
from typing import Any

from keepgoing._groups.kubernetes.settings import KubernetesSettings
from keepgoing._groups.spec import GroupRevision, group_queue
from keepgoing.errors import GroupError

__all__ = ["object_name", "queue_work_query", "scaled_object", "trigger_authentication"]

#: The key of the group's Secret that holds KEDA's connection string.
KEDA_CONNECTION_KEY = "KEDA_POSTGRESQL_CONNECTION"
KEDA_API = "keda.sh/v1alpha1"


def object_name(revision: GroupRevision, pinned: bool = False) -> str:
    """The name of a group's Deployment and ScaledObject: the group's, or for an older
    revision kept for its runs (``pinned``), ``<group>-r<revision>``."""
    return f"{revision.group}-r{revision.revision}" if pinned else revision.group


def queue_work_query(
    revision: GroupRevision, settings: KubernetesSettings, *, pinned: bool = False
) -> str:
    """The SQL KEDA runs: an integer, the work that needs a replica of this group now.

    Queued and running work on the group's queue (a main group: of its revision's
    runs, and of runs recorded with no revision unless ``pinned``); plus 1 when a
    timer or retry comes due within ``wake_ahead_seconds`` (so a replica is up when
    it fires); with ``keep_warm_while_open``, at least 1 while a run is open.
    """
    queue = _literal(revision.task_queue)
    lead = _number(settings.wake_ahead_seconds)
    view, where = "keepgoing_queue_work", f"queue = {queue}"
    if revision.parent is None and revision.revision >= 1:
        number = int(revision.revision)
        mine = f"revision = {number}"
        view = "keepgoing_revision_work"
        where += f" AND {mine}" if pinned else f" AND (revision IS NULL OR {mine})"
    # One pass over the view's rows for the queue (an aggregate of no rows is one row
    # of NULLs, hence the COALESCE and CASE).
    work = (
        "(SELECT COALESCE(SUM(queued + running), 0) + CASE WHEN MIN(next_due_at) <= "
        f"EXTRACT(EPOCH FROM now()) + {lead} THEN 1 ELSE 0 END "
        f"FROM {view} WHERE {where})"
    )
    if revision.keep_warm_while_open:
        # Open runs live on the main group's queue; a per-task group stays warm for them.
        home = f"queue = {_literal(group_queue(revision.parent))}" if revision.parent else where
        warm = (
            f"(SELECT CASE WHEN COALESCE(SUM(open_runs), 0) > 0 THEN 1 ELSE 0 END "
            f"FROM {view if not revision.parent else 'keepgoing_queue_work'} WHERE {home})"
        )
        return f"SELECT CAST(GREATEST({work}, {warm}) AS BIGINT)"
    return f"SELECT CAST({work} AS BIGINT)"


def trigger_authentication(
    revision: GroupRevision, settings: KubernetesSettings, labels: dict[str, str]
) -> dict[str, Any]:
    """KEDA's credentials for the store: the connection string from the group's Secret."""
    return {
        "apiVersion": KEDA_API,
        "kind": "TriggerAuthentication",
        "metadata": _metadata(f"{revision.group}-store", settings, labels),
        "spec": {
            "secretTargetRef": [
                {
                    "parameter": "connection",
                    "name": secret_name(revision),
                    "key": KEDA_CONNECTION_KEY,
                }
            ]
        },
    }


def scaled_object(
    revision: GroupRevision,
    settings: KubernetesSettings,
    labels: dict[str, str],
    *,
    pinned: bool = False,
) -> dict[str, Any]:
    """The ScaledObject: 0 to ``max_replicas``, idle for ``shutdown_delay_seconds`` before 0."""
    name = object_name(revision, pinned)
    if revision.max_replicas < 1:
        raise GroupError(f"max_replicas must be at least 1, not {revision.max_replicas}")
    cooldown = math.ceil(revision.shutdown_delay_seconds)
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": _metadata(name, settings, labels),
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": name,
            },
            "pollingInterval": settings.polling_interval,
            "cooldownPeriod": cooldown,
            "minReplicaCount": 0,
            "maxReplicaCount": revision.max_replicas,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        # Between 1 and N the HPA scales; it removes one replica at a time,
                        # only after the same idle delay, so a burst's tail keeps its workers.
                        "scaleDown": {
                            "stabilizationWindowSeconds": cooldown,
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 15}],
                        }
                    }
                }
            },
            "triggers": [
                {
                    "type": "postgresql",
                    "name": "queue-work",
                    "metadata": {
                        "query": queue_work_query(revision, settings, pinned=pinned),
                        "targetQueryValue": str(revision.concurrency),
                        "activationTargetQueryValue": "0",
                    },
                    "authenticationRef": {"name": f"{revision.group}-store"},
                }
            ],
        },
    }


def secret_name(revision: GroupRevision) -> str:
    return f"{revision.group}-secrets"


def _metadata(name: str, settings: KubernetesSettings, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": settings.namespace, "labels": dict(labels)}


def _literal(text: str) -> str:
    if "\x00" in text:
        raise GroupError(f"queue name {text!r} holds a NUL byte")
    return "'" + text.replace("'", "''") + "'"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
