"""Worker settings, with the defaults that give recovery in about a second and a half."""

from __future__ import annotations

import os
from dataclasses import dataclass

from keepgoing._durations import parse_duration
from keepgoing.errors import ConfigurationError

__all__ = ["WorkerSettings"]


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker claims, leases and waits.

    Attributes:
        queues: task queues served.
        concurrency: task attempts run at once.
        lease_ttl: seconds a lease lasts without a heartbeat; a killed worker's
            attempts are retried about this long after it dies.
        heartbeat_interval: seconds between heartbeats (all leases in one write).
        poll_interval: longest idle wait; wake-ups usually come sooner.
        services_interval: how often timers and expired leases are checked.
        activation_batch: runs activated per claim.
        cache_size: workflow instances kept in memory (least recently used evicted).
        shutdown_grace: seconds running attempts get to finish on SIGTERM.
        reap_batch: expired leases or due timers handled per pass.
        blocked_interval: how often blocked runs are looked at for a retry (at
            start, and then this often; each run's own backoff decides).
        max_hung_threads: threads left running sync bodies that timed out, past
            which a worker started by ``keepgoing worker`` hands back its leases and
            restarts in a fresh process (the only way to end such threads).
        revision: the worker group revision this worker runs (``KEEPGOING_GROUP_REVISION``,
            set by the group's backend): it claims only the runs pinned to it. None
            (a worker started by hand) claims any run on its queues.
    """

    queues: tuple[str, ...] = ("default",)
    concurrency: int = 16
    lease_ttl: float = 1.5
    heartbeat_interval: float = 0.25
    poll_interval: float = 1.0
    services_interval: float = 0.25
    activation_batch: int = 64
    cache_size: int = 1000
    shutdown_grace: float = 10.0
    reap_batch: int = 100
    blocked_interval: float = 30.0
    max_hung_threads: int = 8
    revision: int | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.max_hung_threads < 1:
            raise ConfigurationError(
                f"max_hung_threads must be at least 1, not {self.max_hung_threads}"
            )
        if not self.queues or any(not q or not isinstance(q, str) for q in self.queues):
            raise ConfigurationError(f"queues must be non-empty names, not {self.queues!r}")
        if self.heartbeat_interval * 2 > self.lease_ttl:
            raise ConfigurationError(
                f"heartbeat_interval ({self.heartbeat_interval}s) must be at most half of "
                f"lease_ttl ({self.lease_ttl}s), or live workers would lose their leases"
            )

    @classmethod
    def from_env(cls, **overrides: object) -> WorkerSettings:
        """Defaults, then ``KEEPGOING_LEASE_TTL`` / ``KEEPGOING_HEARTBEAT``, then overrides."""
        values: dict[str, object] = {}
        if "KEEPGOING_LEASE_TTL" in os.environ:
            values["lease_ttl"] = parse_duration(
                os.environ["KEEPGOING_LEASE_TTL"], what="KEEPGOING_LEASE_TTL"
            )
        if "KEEPGOING_HEARTBEAT" in os.environ:
            values["heartbeat_interval"] = parse_duration(
                os.environ["KEEPGOING_HEARTBEAT"], what="KEEPGOING_HEARTBEAT"
            )
        pinned = os.environ.get("KEEPGOING_GROUP_REVISION", "").strip()
        if pinned:
            if not pinned.isdigit() or int(pinned) < 1:
                raise ConfigurationError(
                    f"KEEPGOING_GROUP_REVISION must be a revision number, not {pinned!r}"
                )
            values["revision"] = int(pinned)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
