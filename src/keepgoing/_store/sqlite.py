"""The embedded default store: one SQLite file in WAL mode.

Durability: ``synchronous=FULL`` by default (a committed step survives a power
loss); ``?synchronous=normal`` in the URL trades that for speed while staying
durable against a process crash. All access goes through one thread with
group commit (``_sqlite_thread``); other processes are woken through a
:class:`~keepgoing._store.doorbell.Doorbell`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection, Sequence
from typing import Any

from keepgoing._clock import system_clock
from keepgoing._history.events import Event, TaskScheduled, WorkflowCompleted, WorkflowFailed
from keepgoing._store import _sqlite_leases as leases
from keepgoing._store import _sqlite_messaging as messaging
from keepgoing._store import _sqlite_ops as ops
from keepgoing._store import _sqlite_tasks as tasks
from keepgoing._store import records as rec
from keepgoing._store._sqlite_auth import SqliteAuthMixin
from keepgoing._store._sqlite_observe import SqliteObserveMixin
from keepgoing._store._sqlite_thread import SqliteThread
from keepgoing._store._sqlite_volumes import SqliteVolumesMixin
from keepgoing._store.doorbell import Doorbell
from keepgoing._store.migrate import check_version, load_migrations
from keepgoing._store.protocol import Store

__all__ = ["SqliteStore"]

BUSY_TIMEOUT_MS = 30_000


class SqliteStore(SqliteAuthMixin, SqliteObserveMixin, SqliteVolumesMixin, Store):
    """A :class:`Store` on one SQLite file (``path``), or in memory with ``":memory:"``."""

    def __init__(self, path: str, *, synchronous: str = "full", url: str | None = None) -> None:
        if synchronous.lower() not in ("full", "normal"):
            raise ValueError(f"synchronous must be 'full' or 'normal', not {synchronous!r}")
        self.path = path
        self.synchronous = synchronous.upper()
        self.url = url or f"sqlite:///{path}"
        key = path if path == ":memory:" else os.path.abspath(path)
        self._bell = Doorbell(f"{key}:{id(self) if path == ':memory:' else ''}")
        self._thread = SqliteThread(self._connect, self._bell.ring)
        self._opened = False

    # -- lifecycle -------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            folder = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(folder, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, self.url)
        return conn

    async def open(self) -> None:
        if not self._opened:
            self._thread.start()
            self._opened = True

    def open_sync(self) -> None:
        if not self._opened:
            self._thread.start()
            self._opened = True

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        if self._opened:
            self._thread.stop()
            self._bell.close()
            self._opened = False

    async def _read(self, op: Any) -> Any:
        return await self._thread.call(op, write=False)

    async def _write(self, op: Any, notify: Any = False) -> Any:
        return await self._thread.call(op, write=True, notify=notify)

    # -- runs --------------------------------------------------------------------
    async def start_run(self, request: rec.StartRequest) -> rec.RunRecord:
        run: rec.RunRecord = await self._write(lambda c: ops.start_run(c, request), True)
        return run

    async def get_run(self, run_id: str) -> rec.RunRecord | None:
        run: rec.RunRecord | None = await self._read(lambda c: ops.get_run(c, run_id))
        return run

    async def find_run(self, workflow_id: str) -> rec.RunRecord | None:
        run: rec.RunRecord | None = await self._read(lambda c: ops.find_run(c, workflow_id))
        return run

    async def list_runs(
        self,
        *,
        workflow_name: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[rec.RunRecord]:
        runs: list[rec.RunRecord] = await self._read(
            lambda c: ops.list_runs(c, workflow_name, status, limit, offset)
        )
        return runs

    async def read_history(self, run_id: str, after_seq: int = 0) -> list[Event]:
        events: list[Event] = await self._read(lambda c: ops.read_history(c, run_id, after_seq))
        return events

    # -- activations -----------------------------------------------------------------
    async def claim_activations(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        workflow_names: Sequence[str],
        limit: int,
        lease_ttl: float,
        now: float,
    ) -> list[rec.ActivationClaim]:
        claims: list[rec.ActivationClaim] = await self._write(
            lambda c: ops.claim_activations(
                c, worker_id, list(queues), list(workflow_names), limit, lease_ttl, now
            )
        )
        return claims

    async def commit_activation(self, commit: rec.ActivationCommit) -> rec.CommitResult:
        result: rec.CommitResult = await self._write(
            lambda c: ops.commit_activation(c, commit),
            lambda r: r.ok and (commit.blocked_reason is not None or _wakes(commit.commands, r)),
        )
        return result

    async def release_activation(self, run_id: str, fence: int) -> None:
        await self._write(lambda c: ops.release_activation(c, run_id, fence), True)

    # -- tasks ---------------------------------------------------------------------
    async def claim_tasks(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        task_names: Sequence[str],
        limit: int,
        lease_ttl: float,
        now: float,
    ) -> list[rec.TaskClaim]:
        claims: list[rec.TaskClaim] = await self._write(
            lambda c: tasks.claim_tasks(
                c, worker_id, list(queues), list(task_names), limit, lease_ttl, now
            )
        )
        return claims

    async def complete_task(
        self, outcome: rec.TaskOutcome, fast: rec.FastActivation | None = None
    ) -> rec.TaskOutcomeResult:
        result: rec.TaskOutcomeResult = await self._write(
            lambda c: tasks.complete_task(c, outcome, fast),
            lambda r: (
                r.accepted
                and (r.activation is None or fast is None or _wakes(fast.commands, r.activation))
            ),
        )
        return result

    async def fire_timer(
        self, run_id: str, cmd: int, *, worker_id: str, now: float, fast: rec.FastActivation
    ) -> rec.CommitResult | None:
        result: rec.CommitResult | None = await self._write(
            lambda c: tasks.fire_timer(c, run_id, cmd, worker_id, now, fast),
            lambda r: r is None or _wakes(fast.commands, r),
        )
        return result

    async def release_tasks(self, worker_id: str, now: float) -> int:
        count: int = await self._write(lambda c: leases.release_tasks(c, worker_id, now), True)
        return count

    # -- leases and services ----------------------------------------------------------
    async def heartbeat(
        self,
        worker_id: str,
        *,
        lease_ttl: float,
        now: float,
        attempts: Collection[tuple[str, int]] | None = None,
        runs: Collection[str] | None = None,
    ) -> set[tuple[str, int]]:
        held: set[tuple[str, int]] = await self._write(
            lambda c: leases.heartbeat(c, worker_id, lease_ttl, now, attempts, runs)
        )
        return held

    async def fire_due_timers(self, *, now: float, limit: int) -> int:
        count: int = await self._write(
            lambda c: leases.fire_due_timers(c, now, limit), lambda n: n > 0
        )
        return count

    async def reap_expired_leases(self, *, now: float, limit: int) -> int:
        count: int = await self._write(
            lambda c: leases.reap_expired_leases(c, now, limit), lambda n: n > 0
        )
        return count

    async def next_wakeup(self) -> float | None:
        when: float | None = await self._read(leases.next_wakeup)
        return when

    # -- messages, events, cancellation, lineage, audit -----------------------------
    async def send_message(self, request: rec.MessageRequest) -> str:
        message_id: str = await self._write(lambda c: messaging.send_message(c, request), True)
        return message_id

    async def publish_event(self, request: rec.EventRequest) -> rec.EventPublished:
        published: rec.EventPublished = await self._write(
            lambda c: messaging.publish_event(c, request), lambda p: bool(p.matched_runs)
        )
        return published

    async def cancel_run(self, request: rec.CancelRequest) -> rec.RunRecord:
        run: rec.RunRecord = await self._write(lambda c: messaging.cancel_run(c, request), True)
        return run

    async def lineage(self, workflow_id: str) -> rec.Lineage:
        found: rec.Lineage = await self._read(lambda c: messaging.lineage(c, workflow_id))
        return found

    async def append_audit(self, entry: rec.AuditEntry) -> int:
        entry_id: int = await self._write(lambda c: messaging.append_audit(c, entry))
        return entry_id

    async def list_audit(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        action: str | None = None,
        workflow_id: str | None = None,
    ) -> list[rec.AuditEntry]:
        entries: list[rec.AuditEntry] = await self._read(
            lambda c: messaging.list_audit(c, limit, offset, action, workflow_id)
        )
        return entries

    async def wait_for_change(self, timeout: float, key: object | None = None) -> None:
        await self._bell.wait(timeout, key)

    # -- workers ---------------------------------------------------------------------
    async def register_worker(self, worker: rec.WorkerRecord) -> None:
        await self._write(lambda c: leases.register_worker(c, worker))

    async def deregister_worker(self, worker_id: str) -> None:
        await self._write(lambda c: leases.deregister_worker(c, worker_id))

    async def list_workers(self) -> list[rec.WorkerRecord]:
        workers: list[rec.WorkerRecord] = await self._read(leases.list_workers)
        return workers

    async def record_workflows(
        self, names: Sequence[str], queues: Sequence[str], now: float
    ) -> None:
        await self._write(lambda c: leases.record_workflows(c, list(names), list(queues), now))

    async def known_workflows(self) -> dict[str, list[str]]:
        known: dict[str, list[str]] = await self._read(leases.known_workflows)
        return known


def _wakes(commands: Sequence[Event], result: rec.CommitResult) -> bool:
    """Whether a commit leaves work for other processes or ends the run."""
    scheduled = sum(isinstance(c, TaskScheduled) for c in commands)
    ends = any(isinstance(c, WorkflowCompleted | WorkflowFailed) for c in commands)
    return ends or scheduled > len(result.eager)


def _migrate(conn: sqlite3.Connection, where: str) -> None:
    known = load_migrations("sqlite")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS keepgoing_schema ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = conn.execute("SELECT COALESCE(MAX(version), 0) FROM keepgoing_schema").fetchone()
        check_version(applied[0], known, where)
        for migration in known:
            if migration.version > applied[0]:
                for statement in _statements(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO keepgoing_schema (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, system_clock.now()),
                )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(sql: str) -> list[str]:
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    statements, pending = [], ""
    for piece in "\n".join(lines).split(";"):
        pending += piece + ";"
        # A trigger's BEGIN ... END holds semicolons: keep going until it is whole.
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                statements.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        statements.append(pending.strip().rstrip(";"))
    return statements
