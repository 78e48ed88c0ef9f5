"""The workloads on DBOS Transact, with its SQLite system database.

Run by ``python -m bench.peers`` in ``.venv-peers``; never imported by keepgoing.

    python -m bench.peers.dbos_side SHAPE --db PATH     # prints one JSON figure
    python -m bench.peers.dbos_side worker --db PATH    # a queue worker, until SIGTERM
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from dbos import DBOS, DBOSClient

from bench.peers._shapes import STARTS, STEPS

QUEUE = "bench"
#: DBOS's queue workers poll (default every 1 s); a short interval is kinder to DBOS here.
POLL = 0.01


@DBOS.step()
def trivial(i: int) -> int:
    return i


@DBOS.workflow()
def steps(n: int) -> int:
    total = 0
    for i in range(n):
        total += trivial(i)
    return total


@DBOS.workflow()
def one_step() -> int:
    return trivial(1)


@DBOS.workflow()
def napper(nap: float) -> int:
    first = trivial(1)
    if nap > 0:
        DBOS.sleep(nap)
    return first + trivial(2)


def wal(path: str) -> None:
    """WAL mode is a property of the file; ``synchronous`` stays SQLite's default, FULL."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")


def configure(path: str) -> None:
    DBOS(
        config={
            "name": "bench",
            "system_database_url": f"sqlite:///{path}",
            "run_admin_server": False,
            "log_level": "WARNING",
        }
    )


def launch(path: str) -> None:
    wal(path)
    configure(path)
    DBOS.launch()


def per_step(path: str, per_run: int) -> float:
    launch(path)
    steps(1), steps(STEPS)  # warm-up
    short: list[float] = []
    long: list[float] = []
    for _ in range(per_run):
        for n, into in ((1, short), (STEPS, long)):
            t = time.perf_counter()
            steps(n)
            into.append(time.perf_counter() - t)
    return (statistics.median(long) - statistics.median(short)) / (STEPS - 1) * 1000


def sleep_overhead(path: str, per_run: int) -> float:
    launch(path)
    napper(0.0), napper(0.1)
    plain: list[float] = []
    slept: list[float] = []
    for _ in range(per_run):
        for nap, into in ((0.0, plain), (0.1, slept)):
            t = time.perf_counter()
            napper(nap)
            into.append(time.perf_counter() - t)
    return (statistics.median(slept) - statistics.median(plain) - 0.1) * 1000


class Workers:
    """Queue workers in their own processes (DBOS runs queued workflows where it is launched)."""

    def __init__(self, path: str, count: int) -> None:
        wal(path)
        self.procs = []
        for i in range(count):  # one at a time: the first one creates the schema
            ready = f"{path}.ready-{i}"
            self.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.peers.dbos_side",
                        "worker",
                        "--db",
                        path,
                        "--ready",
                        ready,
                    ]
                )
            )
            deadline = time.monotonic() + 60
            while not os.path.exists(ready):
                if self.procs[-1].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("a DBOS worker did not start")
                time.sleep(0.01)
        self.client = DBOSClient(system_database_url=f"sqlite:///{path}")

    def enqueue(self, name: str) -> Any:
        return self.client.enqueue({"queue_name": QUEUE, "workflow_name": name})

    def warm(self) -> None:
        handles = [self.enqueue("one_step") for _ in range(20)]
        for h in handles:
            h.get_result()

    def close(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.client.destroy()


def starts(path: str) -> float:
    workers = Workers(path, 2)
    try:
        workers.warm()
        t = time.perf_counter()
        handles = [workers.enqueue("one_step") for _ in range(STARTS)]
        for h in handles:
            h.get_result()
        return STARTS / (time.perf_counter() - t)
    finally:
        workers.close()


def wait_p50(path: str, per_run: int) -> float:
    workers = Workers(path, 1)
    try:
        workers.warm()
        times = []
        for _ in range(per_run * 5):
            t = time.perf_counter()
            workers.enqueue("one_step").get_result()
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1000
    finally:
        workers.close()


def worker(path: str, ready: str) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    configure(path)
    DBOS.launch()
    DBOS.register_queue(QUEUE, polling_interval_sec=POLL)
    with open(ready, "w"):
        pass
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "shape", choices=["per_step", "starts", "starts_many", "wait_p50", "sleep", "worker"]
    )
    parser.add_argument("--db", required=True)
    parser.add_argument("--per-run", type=int, default=10)
    parser.add_argument("--ready", help="(worker) a file to create once it listens")
    args = parser.parse_args(argv)
    if args.shape == "worker":
        worker(args.db, args.ready)
        return
    if args.shape == "per_step":
        value = per_step(args.db, args.per_run)
    elif args.shape == "sleep":
        value = sleep_overhead(args.db, args.per_run)
    elif args.shape in ("starts", "starts_many"):  # DBOS has no batch start
        value = starts(args.db)
    else:
        value = wait_p50(args.db, args.per_run)
    print(json.dumps({"value": value}))
    DBOS.destroy(workflow_completion_timeout_sec=0)


if __name__ == "__main__":
    main()
