"""``python -m bench.retention``: the store stays the same size under steady load.

One-step runs go through the embedded SQLite store at a steady rate of a fake
clock: each run is started, its activation claimed and its step scheduled, the
step claimed and completed, and the run completed (six store transactions, the
calls a worker makes; ``synchronous=normal`` by default, so the disk's fsync
does not drown what is measured), and the clock moves on by ``1 / RATE``
seconds. The runs' workflow has ``retention="10m"``; the services' sweep
(:class:`~keepgoing._worker.retention.RetentionSweep`) runs every
``SWEEP_EVERY`` fake seconds (the server's default interval), as the server's
loop would.

Figures:

1. ``size``: the database file (``page_count * page_size`` after a checkpoint)
   at each sample after the first two retention periods, against its value
   at the end of them: the spread, in per cent. Target: within ±10%.
2. ``per_run``: like with like. After the long pass, a fresh store is filled
   to the same kept-run count (one retention period of runs, ``RETENTION *
   RATE``, the count the long pass keeps at its steady state), and then
   windows of ``WINDOW`` runs alternate between the long-run store and the
   fresh one (``WINDOWS`` each), so both see the same load on the machine.
   Each window's median wall time of one run's six transactions; the figure
   is the median of those window medians, the long-run store against the
   fresh one, in per cent. Target: within 5%. (The first runs into an empty
   file are reported too, ``per_run_empty_ms``: not the target's comparison.)
3. ``sweep``: rows deleted per second of delete time, and the longest and the
   p99 delete call (``delete``: the store call, with its hop to the store's
   thread and the free-page step after it, an upper bound) and delete body
   inside its write transaction (``held``: the write lock is held from it to
   the commit; the long pass's deletes only). Target about 50 ms; batches are
   sized by their delete call's time.

Examples::

    python -m bench.retention                 # 200,000 runs
    python -m bench.retention --quick         # 12,000 runs, a smoke test
    python -m bench.retention --runs 50000 --synchronous full
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
from typing import Any

from keepgoing._history.events import TaskScheduled, WorkflowCompleted
from keepgoing._store.records import ActivationCommit, StartRequest, TaskOutcome
from keepgoing._store.sql import retention as sql_retention
from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.retention import RetentionPolicy, RetentionSweep
from keepgoing.testing import FakeClock

RETENTION = 600.0  # "10m"
RATE = 5.0  # runs per fake second: 3,000 kept runs at the steady state
SWEEP_EVERY = 60.0  # fake seconds between sweeps (the server's default interval)
WINDOW = 500
WINDOWS = 16
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


class HeldTimer:
    """Times the body of each retention delete inside its write transaction (the
    write lock is held from it to the commit): ``delete_runs`` in
    ``_store/sql/retention.py``, wrapped while the benchmark runs."""

    def __init__(self) -> None:
        self.held: list[float] = []
        self._original = sql_retention.delete_runs

    def __enter__(self) -> HeldTimer:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return self._original(*args, **kwargs)
            finally:
                self.held.append(time.perf_counter() - began)

        sql_retention.delete_runs = timed
        return self

    def __exit__(self, *exc: object) -> None:
        sql_retention.delete_runs = self._original


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


class Lane:
    """One store with its fake clock and its sweep, pushing runs one at a time."""

    def __init__(self, path: str, synchronous: str) -> None:
        self.path = path
        self.store = SqliteStore(path, synchronous=synchronous)
        self.clock = FakeClock()
        self.timed = TimedStore(self.store)
        self.sweep = RetentionSweep(
            self.timed,  # type: ignore[arg-type]
            RetentionPolicy(interval=SWEEP_EVERY),
            clock=self.clock,
            owner="bench",
        )
        self.pushed = 0

    async def open(self) -> None:
        await self.store.open()
        await self.store.record_retention({WF: RETENTION}, self.clock.now())

    async def push(self) -> float:
        """One run (and the sweep when due); the run's wall time."""
        began = time.perf_counter()
        await one_run(self.store, self.pushed, self.clock.now())
        took = time.perf_counter() - began
        self.pushed += 1
        self.clock.advance(1.0 / RATE)
        while await self.sweep.tick():
            pass
        return took


async def _windows(old: Lane, fresh: Lane) -> tuple[list[float], list[float]]:
    """``WINDOWS`` windows on each store, alternating; each window's median."""
    out: tuple[list[float], list[float]] = ([], [])
    for _ in range(WINDOWS):
        for lane, medians in ((old, out[0]), (fresh, out[1])):
            medians.append(statistics.median([await lane.push() for _ in range(WINDOW)]))
    return out


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0


async def measure(runs: int, log: object = print, synchronous: str = "normal") -> dict[str, float]:
    folder = tempfile.mkdtemp(prefix="kg-bench-retention-")
    old = Lane(os.path.join(folder, "kg.db"), synchronous)
    fresh = Lane(os.path.join(folder, "fresh.db"), synchronous)
    await old.open()
    early: list[float] = []
    sizes: list[tuple[int, int]] = []
    steady = int(2 * RETENTION * RATE)  # two periods: the first runs are gone by then
    every = max(1, (runs - steady) // SAMPLES)
    held = HeldTimer()
    try:
        with held:
            for i in range(runs):
                took = await old.push()
                if i < WINDOW:
                    early.append(took)
                if i + 1 >= steady and (i + 1 - steady) % every == 0:
                    sizes.append((i + 1, file_size(old.path)))
                    log(f"  {i + 1} runs: {sizes[-1][1] / 1e6:.2f} MB, {took * 1e3:.2f} ms")  # type: ignore[operator]
        await fresh.open()
        for _ in range(int(RETENTION * RATE)):  # the kept-run count of the steady state
            await fresh.push()
        medians_old, medians_fresh = await _windows(old, fresh)
        kept = await _kept(old), await _kept(fresh)
    finally:
        await old.store.close()
        await fresh.store.close()
    base = sizes[0][1]
    spread = [100.0 * (s - base) / base for _, s in sizes]
    end, new = statistics.median(medians_old), statistics.median(medians_fresh)
    deletes = old.timed.deletes
    delete_time = sum(deletes) or 1e-9
    return {
        "runs": runs,
        "size_mb": base / 1e6,
        "size_end_mb": sizes[-1][1] / 1e6,
        "size_spread_min_pct": min(spread),
        "size_spread_max_pct": max(spread),
        "kept_runs_end": kept[0],
        "kept_runs_fresh": kept[1],
        "per_run_empty_ms": statistics.median(early) * 1000,
        "per_run_fresh_ms": new * 1000,
        "per_run_end_ms": end * 1000,
        "per_run_change_pct": 100.0 * (end - new) / new,
        "sweep_rows_per_s": old.timed.rows / delete_time,
        "longest_delete_ms": max(deletes) * 1000 if deletes else 0.0,
        "p99_delete_ms": _p99(deletes) * 1000,
        "median_delete_ms": statistics.median(deletes) * 1000 if deletes else 0.0,
        "longest_held_ms": max(held.held) * 1000 if held.held else 0.0,
        "p99_held_ms": _p99(held.held) * 1000,
        "deletes": len(deletes),
        "rows_deleted": old.timed.rows,
    }


async def _kept(lane: Lane) -> int:
    with sqlite3.connect(lane.path) as conn:
        count = int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    conn.close()
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retention")
    parser.add_argument("--quick", action="store_true", help="12,000 runs, a smoke test")
    parser.add_argument("--runs", type=int, default=None, help="runs to push (default 200,000)")
    parser.add_argument(
        "--synchronous", choices=("normal", "full"), default="normal", help="SQLite's fsync mode"
    )
    args = parser.parse_args(argv)
    runs = args.runs or (12_000 if args.quick else 200_000)
    if runs < 2 * RETENTION * RATE + SAMPLES:
        parser.error(f"--runs must be at least {int(2 * RETENTION * RATE) + SAMPLES}")
    print(
        f"retention: {runs} one-step runs, retention 10m, {RATE:g} runs per fake second, "
        f"synchronous={args.synchronous}"
    )
    figures = asyncio.run(measure(runs, synchronous=args.synchronous))
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
