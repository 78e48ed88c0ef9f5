"""Count what one run costs a real worker: SQL statements, commits, keepgoing calls.

A :class:`Bench` runs a real :class:`~keepgoing._worker.worker.Worker` in this
process, on its own thread and event loop, against a SQLite file or a
PostgreSQL database. Its heartbeat, poll and background services are an hour
apart, so between a run's start and the worker's next idle wait the only work
done is the run's own. :meth:`Bench.measure` starts one run and counts, from
its start (on the worker's loop) until the worker waits idle again after the
run ended:

- ``work``: statements that read or write rows (``SELECT``, ``INSERT``,
  ``UPDATE``, ``DELETE``, ``WITH``);
- ``control``: everything else the store sends (``BEGIN``, ``COMMIT``,
  ``SAVEPOINT``, ``RELEASE``, ``PRAGMA``...);
- ``commits``: SQLite ``COMMIT`` statements (each is an fsync under
  ``synchronous=FULL`` unless it is lease-only), PostgreSQL
  ``psycopg.Connection.commit`` calls and ``COMMIT`` statements;
- ``calls``: Python function calls whose code lives under ``src/keepgoing``
  (``sys.setprofile`` on every thread the worker starts), deterministic on one
  interpreter up to the store's choice of running a call on its own thread or
  the caller's;
- ``waits``: on PostgreSQL, the answers the store waited for, each a round
  trip to the server: a statement sent outside a pipeline, a pipeline's fetch
  of results it has sent for (a read, or its closing sync with the
  ``COMMIT``). Statements queued in a pipeline and never read wait for
  nothing until the sync. 0 on SQLite, which has no server.

On SQLite the statements come from ``set_trace_callback`` on the store's
connection, which reports a statement again for each trigger program it runs
(with the same expanded text): consecutive identical texts are counted once.
On PostgreSQL they are the calls of the store's connection wrapper
(``PgConnection.execute`` / ``executemany``), each one statement sent.

The run's end is read on a separate connection that nothing counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import keepgoing
from keepgoing import task, workflow
from keepgoing._store.protocol import Store
from keepgoing._store.records import StartRequest
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker

HOUR = 3600.0
QUEUE = "budgets"
PACKAGE = str(Path(keepgoing.__file__).resolve().parent)
WORK = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE")
METRICS = ("work", "control", "commits", "calls", "waits")
DONE = ("completed", "failed", "cancelled", "continued")


@task(name="budgets.add_one")
def add_one(x: int) -> int:
    """The cheapest step: a sync body that adds one."""
    return x + 1


@workflow(name="budgets.steps")
async def steps(n: int) -> int:
    """``n`` sequential trivial steps."""
    total = 0
    for _ in range(n):
        total = await add_one(total)
    return total


@dataclass
class Tally:
    """What one measured run cost."""

    work: int = 0
    control: int = 0
    commits: int = 0
    calls: int = 0
    waits: int = 0
    last_sql: str | None = None
    statements: list[str] = field(default_factory=list)

    def statement(self, sql: str, *, collapse: bool) -> None:
        if collapse and sql == self.last_sql:
            return  # a trigger program of the statement just counted
        self.last_sql = sql
        self.statements.append(sql)
        head = sql.lstrip(" (\n\t").split(None, 1)[0].upper() if sql.strip() else ""
        if head in WORK:
            self.work += 1
        else:
            self.control += 1
        if head == "COMMIT":
            self.commits += 1


@dataclass
class Counter:
    """The switch every hook looks at: counts only while a tally is set."""

    tally: Tally | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        tally = self.tally
        if tally is not None and event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            tally.calls += 1

    def sql(self, text: str, *, collapse: bool = True) -> None:
        tally = self.tally
        if tally is not None:
            with self.lock:
                tally.statement(text, collapse=collapse)

    def commit(self) -> None:
        tally = self.tally
        if tally is not None:
            tally.commits += 1

    def wait(self) -> None:
        tally = self.tally
        if tally is not None:
            with self.lock:
                tally.waits += 1


def settings() -> WorkerSettings:
    """Nothing but the run's own work: heartbeats, polls and services an hour apart."""
    return WorkerSettings(
        queues=(QUEUE,),
        concurrency=4,
        lease_ttl=2 * HOUR,
        heartbeat_interval=HOUR,
        poll_interval=HOUR,
        services_interval=HOUR,
        blocked_interval=HOUR,
    )


class Bench:
    """A worker on its own thread and loop, whose runs can be measured one at a time.

    Args:
        store: the worker's store (not yet opened).
        status: reads a run's status on a connection nothing counts.
        trace: called with the store once it is open, to hook its statements.
    """

    def __init__(
        self,
        store: Store,
        status: StatusReader,
        trace: Callable[[Store, Counter], None] | None = None,
    ) -> None:
        self.store = store
        self.status = status
        self.counter = Counter()
        self._trace = trace
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="budget-worker", daemon=True)
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._watching: str | None = None
        self._failure: BaseException | None = None
        self.worker: Worker | None = None

    # -- lifecycle -------------------------------------------------------------
    def __enter__(self) -> Bench:
        threading.setprofile(self.counter.profile)  # the store's and the tasks' threads
        self._thread.start()
        if not self._ready.wait(30) or self.worker is None:
            self.__exit__()
            raise RuntimeError(f"the worker did not start: {self._failure!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.worker is not None:
                self._loop.call_soon_threadsafe(self.worker.request_stop)
            self._thread.join(30)
        finally:
            threading.setprofile(None)  # type: ignore[arg-type]
            self.status.close()

    def _main(self) -> None:
        sys.setprofile(self.counter.profile)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported by __enter__ or measure
            self._failure = exc
            self._ready.set()
        finally:
            sys.setprofile(None)
            self._loop.close()

    async def _serve(self) -> None:
        await self.store.open()
        if self._trace is not None:
            self._trace(self.store, self.counter)
        worker = Worker(self.store, settings=settings(), worker_id=f"budget-{uuid.uuid4().hex[:6]}")
        waits = worker._wait

        async def wait(timeout: float) -> None:
            self._idle()
            await waits(timeout)

        worker._wait = wait  # type: ignore[method-assign]
        self.worker = worker
        self._loop.call_soon(self._ready.set)
        try:
            await worker.run()
        finally:
            await self.store.close()

    def _idle(self) -> None:
        """The worker is about to wait: the measured run is over once it has ended."""
        run_id = self._watching
        if run_id is not None and self.status(run_id) in DONE:
            self.counter.tally = None
            self._watching = None
            self._ended.set()

    # -- measuring -------------------------------------------------------------
    def measure(self, n: int, timeout: float = 30.0) -> Tally:
        """Start ``steps(n)`` and count what it costs until the worker is idle again."""
        tally = Tally()
        run_id = uuid.uuid4().hex
        self._ended.clear()
        started = asyncio.run_coroutine_threadsafe(self._start(run_id, n, tally), self._loop)
        started.result(timeout)
        if not self._ended.wait(timeout):
            self.counter.tally = None
            raise TimeoutError(f"steps(n={n}) did not end in {timeout} s: {self.status(run_id)}")
        if self.status(run_id) != "completed":
            raise AssertionError(f"steps(n={n}) ended {self.status(run_id)}")
        return tally

    async def _start(self, run_id: str, n: int, tally: Tally) -> None:
        # The start is counted too: once it commits, the worker may claim the run
        # before this coroutine resumes.
        self._watching = run_id
        self.counter.tally = tally
        await self.store.start_run(
            StartRequest(
                run_id=run_id,
                workflow_id=f"budgets-{run_id}",
                workflow_name=steps.name,
                input={"args": [], "kwargs": {"n": n}},
                task_queue=QUEUE,
                code_version=steps.code_version,
                now=self.worker.clock.now() if self.worker else 0.0,
            )
        )


@dataclass(frozen=True)
class Costs:
    """The least of repeated runs: a one-step run, a long run, and per added step."""

    one: dict[str, float]
    long: dict[str, float]
    steps: int
    #: The statements of the one-step run that sent the fewest: what a failure shows.
    sample: tuple[str, ...] = ()

    @property
    def per_step(self) -> dict[str, float]:
        return {m: (self.long[m] - self.one[m]) / (self.steps - 1) for m in METRICS}

    def figures(self) -> dict[str, float]:
        """Every figure by ``<one|per_step>.<metric>``, the names budgets use."""
        found = {f"one.{m}": v for m, v in self.one.items()}
        found.update({f"per_step.{m}": v for m, v in self.per_step.items()})
        return found


def costs(bench: Bench, *, steps: int = 20, repeat: int = 9) -> Costs:
    """The least of ``repeat`` alternating runs of one step and of ``steps`` steps.

    The least, not the median: when the worker's loop runs a pass that finds
    nothing (claims of activations and attempts, about three statements and two
    transactions) depends on when a task's thread hands its result back, which
    moves with the machine's load; such passes only ever add. The least is the
    run's own work, and it is what repeats from run to run.
    """
    for n in (1, steps):  # warm-up: imports, caches, statement texts checked once
        bench.measure(n)
    ones: list[Tally] = []
    longs: list[Tally] = []
    for _ in range(repeat):
        ones.append(bench.measure(1))
        longs.append(bench.measure(steps))
    fewest = min(ones, key=lambda t: t.work + t.control)
    return Costs(_least(ones), _least(longs), steps, tuple(fewest.statements))


def _least(tallies: list[Tally]) -> dict[str, float]:
    return {m: float(min(getattr(t, m) for t in tallies)) for m in METRICS}


def over_budget(figures: dict[str, float], budget: dict[str, float]) -> list[str]:
    """Every figure above its budget, said in a line each (empty when all fit)."""
    return [
        f"{name}: {figures[name]:g} > budget {limit:g}"
        for name, limit in budget.items()
        if figures[name] > limit
    ]


# -- the stores' hooks -----------------------------------------------------------
def trace_sqlite(store: Store, counter: Counter) -> None:
    """Hook the SQLite store's one connection (its thread's)."""
    conn = store._thread._conn  # type: ignore[attr-defined]
    if not isinstance(conn, sqlite3.Connection):
        raise RuntimeError("the SQLite store has no open connection to trace")
    conn.set_trace_callback(counter.sql)


class StatusReader:
    """Reads a run's status on its own connection, which nothing counts."""

    def __init__(self, conn: Any, sql: str) -> None:
        self.conn = conn
        self._sql = sql
        self._lock = threading.Lock()

    def __call__(self, run_id: str) -> str | None:
        with self._lock:
            row = self.conn.execute(self._sql, (run_id,)).fetchone()
        return None if row is None else str(row[0])

    def close(self) -> None:
        with self._lock:
            self.conn.close()


def sqlite_status(path: str) -> StatusReader:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    return StatusReader(conn, "SELECT status FROM runs WHERE run_id = ?")


@contextlib.contextmanager
def traced_postgres(counter: Counter, status: StatusReader) -> Iterator[None]:
    """Count the PostgreSQL store's statements, commits and waits (this process's only;
    not those of ``status``, which reads the measured run's end)."""
    import psycopg  # noqa: PLC0415
    from psycopg._pipeline_base import BasePipeline  # noqa: PLC0415

    from keepgoing._store.postgres.sql import PgConnection  # noqa: PLC0415

    execute, executemany = PgConnection.execute, PgConnection.executemany
    commit, raw_execute = psycopg.Connection.commit, psycopg.Connection.execute
    cursor_execute, fetch = psycopg.Cursor.execute, BasePipeline._fetch_gen

    def counted_execute(self: Any, sql: str, params: Any = ()) -> Any:
        counter.sql(sql, collapse=False)
        return execute(self, sql, params)

    def counted_executemany(self: Any, sql: str, rows: Any) -> Any:
        counter.sql(sql, collapse=False)
        return executemany(self, sql, rows)

    def counted_commit(self: Any) -> None:
        counter.commit()
        if self._pipeline is None:
            counter.wait()
        commit(self)

    def counted_raw(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if query == "COMMIT":  # the store's write transactions end with this statement
            counter.commit()
        return raw_execute(self, query, *args, **kwargs)

    def counted_cursor(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if self.connection._pipeline is None and self.connection is not status.conn:
            # Sent alone: its answer is waited for.
            counter.wait()
        return cursor_execute(self, query, *args, **kwargs)

    def counted_fetch(self: Any, *, flush: bool) -> Any:
        if self.result_queue:  # results sent for and not yet read: wait for them
            counter.wait()
        return fetch(self, flush=flush)

    PgConnection.execute = counted_execute  # type: ignore[method-assign]
    PgConnection.executemany = counted_executemany  # type: ignore[method-assign]
    psycopg.Connection.commit = counted_commit  # type: ignore[method-assign]
    psycopg.Connection.execute = counted_raw  # type: ignore[method-assign]
    psycopg.Cursor.execute = counted_cursor  # type: ignore[method-assign]
    BasePipeline._fetch_gen = counted_fetch  # type: ignore[method-assign]
    try:
        yield
    finally:
        PgConnection.execute = execute  # type: ignore[method-assign]
        PgConnection.executemany = executemany  # type: ignore[method-assign]
        psycopg.Connection.commit = commit  # type: ignore[method-assign]
        psycopg.Connection.execute = raw_execute  # type: ignore[method-assign]
        psycopg.Cursor.execute = cursor_execute  # type: ignore[method-assign]
        BasePipeline._fetch_gen = fetch  # type: ignore[method-assign]


def postgres_status(url: str) -> StatusReader:
    import psycopg  # noqa: PLC0415

    conn = psycopg.connect(url, autocommit=True)
    return StatusReader(conn, "SELECT status FROM runs WHERE run_id = %s")
