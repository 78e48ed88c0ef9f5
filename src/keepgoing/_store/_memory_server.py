"""The memory store's token and operator facets (mixed into ``MemoryStore``).

Like the rest of ``MemoryStore``, each method does its work under the store's
lock without awaiting, so each call is atomic.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading

from keepgoing._history.events import TaskAttemptFailed, TaskCompleted
from keepgoing._store._memory_state import MemoryState, RunRow
from keepgoing._store.auth_protocol import AuthStore, TokenRecord
from keepgoing._store.observe_protocol import STEP_BUCKETS, ObserveStore, QueueDepth, StepMetrics
from keepgoing._store.records import RunRecord
from keepgoing.errors import StoreError

__all__ = ["MemoryAuthMixin", "MemoryObserveMixin"]


class MemoryAuthMixin(AuthStore):
    """Tokens in a dict, in creation order."""

    _lock: threading.Lock

    @property
    def _tokens(self) -> dict[str, TokenRecord]:
        # Created on first use: MemoryStore.__init__ belongs to the engine.
        tokens: dict[str, TokenRecord] | None = self.__dict__.get("_kg_tokens")
        if tokens is None:
            tokens = self.__dict__["_kg_tokens"] = {}
        return tokens

    async def create_token(self, token: TokenRecord) -> None:
        with self._lock:
            if token.token_id in self._tokens:
                raise StoreError(f"a token with id {token.token_id!r} already exists")
            self._tokens[token.token_id] = token

    async def get_token(self, token_id: str) -> TokenRecord | None:
        with self._lock:
            return self._tokens.get(token_id)

    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenRecord]:
        with self._lock:
            return [t for t in self._tokens.values() if include_revoked or t.active]

    async def revoke_token(self, token_id: str, now: float) -> TokenRecord | None:
        with self._lock:
            token = self._tokens.get(token_id)
            if token is None or not token.active:
                return token
            revoked = dataclasses.replace(token, revoked_at=now)
            self._tokens[token_id] = revoked
            return revoked


class MemoryObserveMixin(ObserveStore):
    """Operator views computed from the rows on demand."""

    _lock: threading.Lock
    _state: MemoryState

    async def run_counts(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for run in self._state.runs.values():
                counts[run.status] = counts.get(run.status, 0) + 1
            return dict(sorted(counts.items()))

    async def queue_depths(self, now: float) -> list[QueueDepth]:
        with self._lock:
            s = self._state
            rows: dict[str, dict[str, int]] = {}

            def bump(queue: str, what: str) -> None:
                row = rows.setdefault(queue, {})
                row[what] = row.get(what, 0) + 1

            for run in s.runnable_runs.values():
                if run.status == "running":
                    bump(run.task_queue, "runnable_runs")
            for task in s.active_tasks.values():
                queue = s.runs[task.run_id].task_queue
                if task.status == "running":
                    bump(queue, "running_tasks")
                elif task.status == "pending":
                    bump(queue, "ready_tasks" if task.available_at <= now else "delayed_tasks")
            return [QueueDepth(queue, **counts) for queue, counts in sorted(rows.items())]

    async def step_metrics(self) -> StepMetrics:
        with self._lock:
            buckets = [0] * len(STEP_BUCKETS)
            count, total, expiries = 0, 0.0, 0
            for run in self._state.runs.values():
                for event in run.history:
                    if isinstance(event, TaskCompleted) and event.started_at is not None:
                        seconds = max(0.0, event.at - event.started_at)
                        count += 1
                        total += seconds
                        for i in range(bisect.bisect_left(STEP_BUCKETS, seconds), len(buckets)):
                            buckets[i] += 1
                    elif isinstance(event, TaskAttemptFailed) and event.reason == "worker_lost":
                        expiries += 1
            return StepMetrics(tuple(buckets), count, total, expiries)

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
        def wanted(run: RunRow) -> bool:
            return (
                (workflow_name is None or run.workflow_name == workflow_name)
                and (status is None or run.status == status)
                and (created_after is None or run.created_at >= created_after)
                and (created_before is None or run.created_at < created_before)
            )

        with self._lock:
            runs = [run for run in self._state.runs.values() if wanted(run)]
            runs.sort(key=lambda run: (run.created_at, run.order), reverse=True)
            start = max(0, offset)
            return [run.record() for run in runs[start : start + max(0, limit)]]
