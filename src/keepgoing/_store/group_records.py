"""The rows of the worker-group facet (migration 0009), as small named types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "DecisionRecord",
    "GroupLoad",
    "GroupRecord",
    "InstanceRecord",
    "OpenRun",
    "RevisionLoad",
    "RevisionRecord",
    "RevisionStatus",
]


@dataclass(frozen=True)
class GroupRecord:
    """A deployed group: its queue, backend, current revision and desired replicas.

    ``cold_start`` is the measured seconds from a 0 -> 1 decision to the first
    worker serving the queue (None until measured).
    """

    name: str
    task_queue: str
    backend: str
    parent: str | None
    revision: int
    replicas: int
    cold_start: float | None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class RevisionRecord:
    group_name: str
    revision: int
    spec: str  # GroupRevision.to_json(): no plaintext secrets
    created_at: float
    retired_at: float | None = None


@dataclass(frozen=True)
class DecisionRecord:
    """One autoscaler decision: replicas from -> to, why, and the load it saw."""

    id: int
    group_name: str
    at: float
    from_replicas: int
    to_replicas: int
    reason: str
    queued: int
    running: int
    revision: int | None = None  # an older revision's replicas (None: the current one's)


@dataclass(frozen=True)
class InstanceRecord:
    instance_id: str
    group_name: str
    revision: int
    state: str
    pid: int | None
    host: str
    started_at: float
    ended_at: float | None
    exit_status: int | None


@dataclass(frozen=True)
class GroupLoad:
    """The work on one queue that needs a replica, and what waits without one.

    ``queued``: task attempts due and runs runnable, not yet claimed;
    ``running``: task attempts and activations leased by a worker;
    ``open_runs``: runs not ended (waiting ones included: ``keep_warm_while_open``);
    ``next_timer``: the earliest pending timer of a run on the queue;
    ``next_task``: the earliest pending task attempt due later (a retry's backoff).
    """

    task_queue: str
    queued: int = 0
    running: int = 0
    open_runs: int = 0
    next_timer: float | None = None
    next_task: float | None = None


@dataclass(frozen=True)
class RevisionStatus:
    """One revision of a group with the runs still on it (pinning).

    ``open_runs`` are runs not ended whose ``group_revision`` is this one
    (``blocked_runs`` of them blocked); ``retired_at`` is when the revision was
    retired: it had no open run left and was not the current one.
    """

    group_name: str
    revision: int
    created_at: float
    retired_at: float | None
    open_runs: int
    blocked_runs: int
    current: bool
    upgrade: str = "pinned"


@dataclass(frozen=True)
class RevisionLoad:
    """The work of one revision of a queue (``keepgoing_revision_work``): what its
    replicas would claim now (``queued``), hold (``running``), and the runs on it."""

    task_queue: str
    revision: int | None
    queued: int = 0
    running: int = 0
    open_runs: int = 0
    next_timer: float | None = None
    next_task: float | None = None


class OpenRun(NamedTuple):
    """A run not ended on a group's queue, as a deploy's replay check picks it
    (``next_seq`` is where its history ends, to move it only if it is unchanged)."""

    run_id: str
    workflow_id: str
    workflow_name: str
    group_revision: int | None
    status: str
    next_seq: int
    created_at: float
