"""The store's flow-control facet: the limits workers declare, and their use now.

The rules themselves (who holds a slot, the token bucket, admission at claim
time) are in ``_store/sql/limits.py``; this facet is what the worker records
at its start and what the server, the client and the metrics read.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DeclaredLimit", "LimitStore", "LimitUse", "LimitWait"]


@dataclass(frozen=True)
class DeclaredLimit:
    """A limit as a worker declares it at its start: a named one, or a task's own
    (named for the task). ``keyed``: its slots or tokens are per value of a key."""

    name: str
    concurrency_cap: int | None = None
    keyed: bool = False
    rate_tokens: int | None = None
    rate_period: float | None = None
    rate_burst: int | None = None


@dataclass(frozen=True)
class LimitUse:
    """A declared limit and its use now: slots held (over every key), attempts
    waiting for it, and the bucket's tokens (a limit without a key; else None)."""

    limit: DeclaredLimit
    held: int = 0
    waiting: int = 0
    tokens: float | None = None


@dataclass(frozen=True)
class LimitWait:
    """A pending task of a run held back by a limit.

    ``kind`` is ``"concurrency"`` (``held`` of ``cap`` slots of its key taken) or
    ``"rate"`` (no token until ``until``).
    """

    run_id: str
    task: str
    kind: str
    limit: str
    held: int = 0
    cap: int = 0
    until: float | None = None


class LimitStore(abc.ABC):
    """Flow control. Methods may raise :class:`~keepgoing.errors.StoreError`."""

    @abc.abstractmethod
    async def record_limits(self, limits: Sequence[DeclaredLimit], now: float) -> None:
        """Record (or update) the limits a starting worker declares."""

    @abc.abstractmethod
    async def limit_use(self, now: float) -> list[LimitUse]:
        """Every declared limit with its use now, by name; then each workflow's
        concurrency limit or singleton as ``workflow:NAME`` (its runs' slots held
        and the runs queued)."""

    @abc.abstractmethod
    async def limit_waits(self, run_ids: Sequence[str], now: float) -> list[LimitWait]:
        """The pending tasks of ``run_ids`` that a limit holds back now."""
