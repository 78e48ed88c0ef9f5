"""The workloads on keepgoing, each on a fresh SQLite store (WAL, synchronous=FULL).

python -m bench.peers.keepgoing_side SHAPE     # prints one JSON figure
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench._harness import Workspace
from bench._workflows import napper, one_step, steps
from bench.peers._shapes import BATCH, STARTS, STEPS


def per_step(per_run: int) -> float:
    with Workspace("peers-per-step") as workspace:
        client = workspace.client
        client.run_workflow(steps, {"n": 1}), client.run_workflow(steps, {"n": STEPS})
        short: list[float] = []
        long: list[float] = []
        for _ in range(per_run):
            for n, into in ((1, short), (STEPS, long)):
                t = time.perf_counter()
                client.run_workflow(steps, {"n": n})
                into.append(time.perf_counter() - t)
        return (statistics.median(long) - statistics.median(short)) / (STEPS - 1) * 1000


def sleep_overhead(per_run: int) -> float:
    with Workspace("peers-sleep") as workspace:
        client = workspace.client
        client.run_workflow(napper, {"nap": 0.0}), client.run_workflow(napper, {"nap": 0.1})
        plain: list[float] = []
        slept: list[float] = []
        for _ in range(per_run):
            for nap, into in ((0.0, plain), (0.1, slept)):
                t = time.perf_counter()
                client.run_workflow(napper, {"nap": nap})
                into.append(time.perf_counter() - t)
        return (statistics.median(slept) - statistics.median(plain) - 0.1) * 1000


def starts() -> float:
    with Workspace("peers-starts") as workspace:
        for _ in range(2):
            workspace.start_worker()
        client = workspace.client
        for handle in [client.trigger_workflow(one_step) for _ in range(20)]:  # warm-up
            client.result(handle, timeout=60)
        t = time.perf_counter()
        handles = [client.trigger_workflow(one_step) for _ in range(STARTS)]
        for handle in handles:
            client.result(handle, timeout=120)
        return STARTS / (time.perf_counter() - t)


def starts_many() -> float:
    """``starts``, with the runs started ``BATCH`` at a time in one commit each."""
    with Workspace("peers-starts-many") as workspace:
        for _ in range(2):
            workspace.start_worker()
        client = workspace.client
        for handle in client.trigger_many(one_step, [None] * 20):  # warm-up
            client.result(handle, timeout=60)
        t = time.perf_counter()
        handles = []
        for _ in range(STARTS // BATCH):
            handles += client.trigger_many(one_step, [None] * BATCH)
        for handle in handles:
            client.result(handle, timeout=120)
        return STARTS / (time.perf_counter() - t)


def wait_p50(per_run: int) -> float:
    with Workspace("peers-wait") as workspace:
        workspace.start_worker()
        client = workspace.client
        for _ in range(5):
            client.trigger_workflow(one_step, wait=True, timeout=60)
        times = []
        for _ in range(per_run * 5):
            t = time.perf_counter()
            client.trigger_workflow(one_step, wait=True, timeout=60)
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shape", choices=["per_step", "starts", "starts_many", "wait_p50", "sleep"])
    parser.add_argument("--per-run", type=int, default=10)
    args = parser.parse_args(argv)
    if args.shape == "per_step":
        value = per_step(args.per_run)
    elif args.shape == "sleep":
        value = sleep_overhead(args.per_run)
    elif args.shape == "starts":
        value = starts()
    elif args.shape == "starts_many":
        value = starts_many()
    else:
        value = wait_p50(args.per_run)
    print(json.dumps({"value": value}))


if __name__ == "__main__":
    main()
