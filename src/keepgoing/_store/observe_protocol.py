"""The store's operator facet: read-only views for the API, the CLI and metrics.

These are the questions an operator asks of a running system: how many runs
are in each state, how deep each queue is, how long steps take, how many
leases expired, and which runs started in a time window.

Step latency and lease expiries are cumulative since the store was created
(Prometheus counters): the SQL stores keep them up to date with triggers
on their history table.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from keepgoing._store.records import RunRecord

__all__ = ["STEP_BUCKETS", "ObserveStore", "QueueDepth", "StepMetrics"]

#: Upper bounds (seconds) of the step-latency histogram buckets; ``+Inf`` is implied.
STEP_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)


@dataclass(frozen=True)
class QueueDepth:
    """Work waiting on one task queue.

    ``runnable_runs``: runs waiting for an activation. ``ready_tasks``: task
    attempts due now and not yet claimed. ``delayed_tasks``: pending attempts
    due later (retry backoff). ``running_tasks``: attempts leased by a worker.
    """

    queue: str
    runnable_runs: int = 0
    ready_tasks: int = 0
    delayed_tasks: int = 0
    running_tasks: int = 0

    @property
    def depth(self) -> int:
        """What a worker could pick up now: runnable runs plus ready tasks."""
        return self.runnable_runs + self.ready_tasks


@dataclass(frozen=True)
class StepMetrics:
    """Cumulative step latency (``TaskCompleted.at - started_at``) and lease expiries.

    ``buckets[i]`` counts completed steps that took at most ``STEP_BUCKETS[i]``
    seconds (cumulative, as Prometheus expects); ``count`` is the ``+Inf`` bucket.
    ``lease_expiries`` counts attempts recorded as ``worker_lost``.
    """

    buckets: tuple[int, ...]
    count: int
    total_seconds: float
    lease_expiries: int


class ObserveStore(abc.ABC):
    """Operator views. Methods may raise :class:`~keepgoing.errors.StoreError`."""

    @abc.abstractmethod
    async def run_counts(self) -> dict[str, int]:
        """How many runs are in each status (statuses with no run are left out)."""

    @abc.abstractmethod
    async def queue_depths(self, now: float) -> list[QueueDepth]:
        """One :class:`QueueDepth` per queue that has any waiting or running work,
        sorted by queue name. A task is ready when its ``available_at <= now``."""

    @abc.abstractmethod
    async def step_metrics(self) -> StepMetrics:
        """The step-latency histogram and the lease-expiry counter."""

    @abc.abstractmethod
    async def search_runs(
        self,
        *,
        workflow_name: str | None = None,
        status: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRecord]:
        """Runs, newest first, like ``list_runs``, also filtered by creation time:
        ``created_after <= created_at < created_before`` (either bound optional)."""
