"""``python -m bench.retention``: the store stays the same size under steady load.

One-step runs go through the embedded SQLite store at a steady rate of a fake
clock: each run is started, its activation claimed and its step scheduled, the
step claimed and completed, and the run completed (six store transactions, the
calls a worker makes; ``synchronous=normal``, so the disk's fsync does not drown
what is measured), and the clock moves on by ``1 / RATE`` seconds. The runs'
workflow has ``retention="10m"``; the services' sweep
(:class:`~keepgoing._worker.retention.RetentionSweep`) runs every
``SWEEP_EVERY`` fake seconds, as the server's loop would.

Figures:

1. ``size``: the database file (``page_count * page_size`` after a checkpoint)
   at each sample after the first two retention periods, against its value
   at the end of them: the spread, in per cent. Target: within ±10%.
2. ``per_run``: the median wall time of one run's six transactions over the
   last ``WINDOW`` runs, against the first ``WINDOW`` (a fresh, empty store) and
   against the first ``WINDOW`` after two retention periods (the steady
   state's start), in per cent. Target: within 5%.
3. ``sweep``: rows deleted per second of delete time, and the longest delete
   call (an upper bound on how long a batch holds SQLite's write lock; target
   about 50 ms).

Examples::

    python -m bench.retention                 # 200,000 runs
    python -m bench.retention --quick         # 12,000 runs, a smoke test
    python -m bench.retention --runs 50000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time

from keepgoing._history.events import TaskScheduled, WorkflowCompleted
from keepgoing._store.records import ActivationCommit, StartRequest, TaskOutcome
from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.retention import RetentionPolicy, RetentionSweep
from keepgoing.testing import FakeClock

RETENTION = 600.0  # "10m"
RATE = 5.0  # runs per fake second: 3,000 kept runs at the steady state
SWEEP_EVERY = 5.0  # fake seconds between sweeps
WINDOW = 2000
SAMPLES = 20
WF = "bench.retention"


async def one_run(store: SqliteStore, i: int, now: float) -> None:
    run = await store.start_run(
        StartRequest(
            run_id=f"r{i:07d}",
            workflow_id=f"w{i:07d}",
            workflow_name=WF,
            input={"i": i},
            task_queue="default",
            code_version="v1",
            now=now,
        )
    )
    claim = await _claim(store, now)
    step = TaskScheduled(cmd=1, name="step", args=[i], kwargs={}, retries=0, timeout=60.0)
    await _commit(store, run.run_id, claim, [step], now)
    (task,) = await store.claim_tasks(
        worker_id="w",
        queues=["default"],
        task_names=["step"],
        limit=1,
        lease_ttl=60,
        now=now,
    )
    await store.complete_task(
        TaskOutcome(
            run_id=task.run_id,
            cmd=task.cmd,
            fence=task.fence,
            worker_id="w",
            attempt=task.attempt,
            started_at=task.started_at,
            now=now,
            ok=True,
            result=i * 2,
        )
    )
    claim = await _claim(store, now)
    await _commit(store, run.run_id, claim, [WorkflowCompleted(result=i * 2)], now)


async def _claim(store: SqliteStore, now: float) -> tuple[int, int]:
    (claim,) = await store.claim_activations(
        worker_id="w",
        queues=["default"],
        workflow_names=[WF],
        limit=1,
        lease_ttl=60,
        now=now,
    )
    return claim.fence, claim.run.last_input_seq


async def _commit(
    store: SqliteStore, run_id: str, claim: tuple[int, int], commands: list[object], now: float
) -> None:
    fence, seen = claim
    result = await store.commit_activation(
        ActivationCommit(
            run_id=run_id,
            fence=fence,
            worker_id="w",
            saw_upto=seen,
            time=now,
            commands=commands,  # type: ignore[arg-type]
            now=now,
        )
    )
    assert result.ok, result


class TimedStore:
    """Times each ``delete_runs`` call of the store it wraps."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.deletes: list[float] = []
        self.rows = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    async def delete_runs(self, *args: object, **kwargs: object) -> object:
        began = time.perf_counter()
        swept = await self.store.delete_runs(*args, **kwargs)  # type: ignore[arg-type]
        self.deletes.append(time.perf_counter() - began)
        self.rows += swept.total
        return swept


def file_size(path: str) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    return int(pages * size)


async def measure(runs: int, log: object = print) -> dict[str, float]:
    folder = tempfile.mkdtemp(prefix="kg-bench-retention-")
    path = os.path.join(folder, "kg.db")
    # synchronous=normal: the figures are about growth, not about the disk's fsync.
    store = SqliteStore(path, synchronous="normal")
    await store.open()
    clock = FakeClock()
    await store.record_retention({WF: RETENTION}, clock.now())
    timed = TimedStore(store)
    sweep = RetentionSweep(
        timed,  # type: ignore[arg-type]
        RetentionPolicy(interval=SWEEP_EVERY),
        clock=clock,
        owner="bench",
        batches=1,
    )
    per_run: list[float] = []
    sizes: list[tuple[int, int]] = []
    steady = int(2 * RETENTION * RATE)  # two periods: the first runs are gone by then
    every = max(1, (runs - steady) // SAMPLES)
    try:
        for i in range(runs):
            began = time.perf_counter()
            await one_run(store, i, clock.now())
            per_run.append(time.perf_counter() - began)
            clock.advance(1.0 / RATE)
            while await sweep.tick():
                pass
            if i + 1 >= steady and (i + 1 - steady) % every == 0:
                sizes.append((i + 1, file_size(path)))
                log(f"  {i + 1} runs: {sizes[-1][1] / 1e6:.2f} MB, {per_run[-1] * 1e3:.2f} ms")  # type: ignore[operator]
    finally:
        await store.close()
    base = sizes[0][1]
    spread = [100.0 * (s - base) / base for _, s in sizes]
    first = statistics.median(per_run[:WINDOW])
    last = statistics.median(per_run[-WINDOW:])
    settled = statistics.median(per_run[steady : steady + WINDOW])
    delete_time = sum(timed.deletes) or 1e-9
    return {
        "runs": runs,
        "size_mb": base / 1e6,
        "size_spread_min_pct": min(spread),
        "size_spread_max_pct": max(spread),
        "per_run_fresh_ms": first * 1000,
        "per_run_end_ms": last * 1000,
        "per_run_change_pct": 100.0 * (last - first) / first,
        "per_run_steady_ms": settled * 1000,
        "per_run_change_from_steady_pct": 100.0 * (last - settled) / settled,
        "sweep_rows_per_s": timed.rows / delete_time,
        "longest_delete_ms": max(timed.deletes) * 1000 if timed.deletes else 0.0,
        "median_delete_ms": statistics.median(timed.deletes) * 1000 if timed.deletes else 0.0,
        "rows_deleted": timed.rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retention")
    parser.add_argument("--quick", action="store_true", help="12,000 runs, a smoke test")
    parser.add_argument("--runs", type=int, default=None, help="runs to push (default 200,000)")
    args = parser.parse_args(argv)
    runs = args.runs or (12_000 if args.quick else 200_000)
    if runs < 2 * RETENTION * RATE + SAMPLES:
        parser.error(f"--runs must be at least {int(2 * RETENTION * RATE) + SAMPLES}")
    print(f"retention: {runs} one-step runs, retention 10m, {RATE:g} runs per fake second")
    figures = asyncio.run(measure(runs))
    for key, value in figures.items():
        print(f"  {key}: {value:.2f}" if isinstance(value, float) else f"  {key}: {value}")
    ok = (
        figures["size_spread_min_pct"] >= -10
        and figures["size_spread_max_pct"] <= 10
        and abs(figures["per_run_change_pct"]) <= 5
    )
    print("retention: " + ("within targets" if ok else "OUTSIDE a target"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
