"""``python -m bench.limits``: what flow control costs a claim, and how soon a freed slot is reused.

Two figures, each the median of ``--repeat`` runs (5 by default):

* **Claim throughput**, limited against unlimited. A fresh SQLite store (or
  ``--store URL``) holds ``--tasks`` pending attempts (2000 by default) of one
  task, scheduled by runs of 50 steps; a loop claims 16 at a time and
  completes each, as a worker does, until none is left. Once with no limit,
  then with a ``concurrency`` cap, a ``rate_limit``, and both, each set wide
  enough never to hold an attempt back, so what is measured is the admission
  itself (the slot count, the bucket's read and upsert in the claim). Target: limited at most 10%
  slower.
* **Freed-slot reuse**, p50. A workflow runs 40 steps of a ``concurrency=1``
  task in one process (a direct call); each step records when its body
  starts and ends. The reuse latency is the next step's start minus the
  previous one's end: the completion, the wake-up it rings and the claim
  that admits the next attempt. Target: p50 at most 50 ms.

Examples::

    python -m bench.limits
    python -m bench.limits --tasks 300 --repeat 3      # a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import keepgoing
from bench._harness import percentile
from keepgoing._history import events as ev
from keepgoing._open_store import store_from_url
from keepgoing._store.protocol import Store
from keepgoing._store.records import ActivationCommit, StartRequest, TaskOutcome

TARGET_SLOWER = 0.10
TARGET_REUSE_P50_MS = 50.0
PER_RUN = 50
BATCH = 16
CAP = {"limit_name": "bench", "limit_key": "", "concurrency_cap": 1_000_000}
RATE = {
    "rate_name": "bench",
    "rate_key": "",
    "rate_tokens": 1_000_000,
    "rate_period": 1.0,
    "rate_burst": 1_000_000,
}
KINDS: dict[str, dict[str, Any] | None] = {
    "unlimited": None,
    "concurrency": CAP,
    "rate": RATE,
    "both": {**CAP, **RATE},
}


async def _schedule(store: Store, tasks: int, limits: dict[str, Any] | None) -> None:
    now = time.time()
    for r in range(0, tasks, PER_RUN):
        run_id = f"run-{r}"
        await store.start_run(StartRequest(run_id, f"wf-{r}", "wf", {}, "default", "v1", now))
        (claim,) = await store.claim_activations(
            worker_id="w", queues=["default"], workflow_names=["wf"], limit=1,
            lease_ttl=60.0, now=now,
        )  # fmt: skip
        commands: list[ev.Event] = [
            ev.TaskScheduled(cmd=i + 1, name="step", args=[i], limits=limits)
            for i in range(min(PER_RUN, tasks - r))
        ]
        commit = ActivationCommit(
            run_id=run_id, fence=claim.fence, worker_id="w",
            saw_upto=claim.run.last_input_seq, time=now, commands=commands, now=now,
        )  # fmt: skip
        assert (await store.commit_activation(commit)).ok


async def _drain(store: Store) -> int:
    done = 0
    while True:
        now = time.time()
        claims = await store.claim_tasks(
            worker_id="w", queues=["default"], task_names=["step"], limit=BATCH,
            lease_ttl=60.0, now=now,
        )  # fmt: skip
        if not claims:
            return done
        for c in claims:
            outcome = TaskOutcome(
                run_id=c.run_id, cmd=c.cmd, fence=c.fence, worker_id="w",
                attempt=c.attempt, started_at=c.started_at, now=time.time(), ok=True, result=1,
            )  # fmt: skip
            await store.complete_task(outcome)
        done += len(claims)


async def _claims_per_second(url: str | None, tasks: int, limits: dict[str, Any] | None) -> float:
    with tempfile.TemporaryDirectory() as folder:
        store = store_from_url(url or f"sqlite:///{Path(folder) / 'kg.db'}")
        await store.open()
        try:
            await _schedule(store, tasks, limits)
            started = time.perf_counter()
            done = await _drain(store)
            elapsed = time.perf_counter() - started
        finally:
            await store.close()
    assert done == tasks, f"claimed {done} of {tasks}"
    return tasks / elapsed


SPANS: list[tuple[float, float]] = []


@keepgoing.task(name="bench.one_at_a_time", concurrency=1)
async def one_at_a_time(i: int) -> int:
    start = time.perf_counter()
    await asyncio.sleep(0.005)
    SPANS.append((start, time.perf_counter()))
    return i


@keepgoing.workflow(name="bench.reuse")
async def reuse(n: int) -> int:
    return sum(await asyncio.gather(*(one_at_a_time(i) for i in range(n))))


def _reuse_ms(steps: int = 40) -> list[float]:
    SPANS.clear()
    asyncio.run(reuse(steps))
    spans = sorted(SPANS)
    return [(b[0] - a[1]) * 1000 for a, b in itertools.pairwise(spans)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store",
        default="memory://",
        help="store URL (default memory://: SQLite in memory, so the figure is the claim's "
        "own work and not the disk's; 'file' for a fresh SQLite file)",
    )
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.store == "file":
        args.store = None
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    reuse_p50 = []
    kinds = list(KINDS)
    for n in range(args.repeat):
        for kind in kinds[n % 4 :] + kinds[: n % 4]:  # each kind first in turn: no drift bias
            rates[kind].append(asyncio.run(_claims_per_second(args.store, args.tasks, KINDS[kind])))
        reuse_p50.append(percentile(_reuse_ms(), 50))
    median = {kind: statistics.median(values) for kind, values in rates.items()}
    slower = {kind: 1 - median[kind] / median["unlimited"] for kind in KINDS}
    p50 = statistics.median(reuse_p50)
    report = {
        "claims_per_s": {kind: round(v, 1) for kind, v in median.items()},
        "slower_than_unlimited": {kind: round(v, 3) for kind, v in slower.items()},
        "target_slower": TARGET_SLOWER,
        "reuse_p50_ms": round(p50, 2),
        "target_reuse_p50_ms": TARGET_REUSE_P50_MS,
        "repeat": args.repeat,
        "tasks": args.tasks,
    }
    print(json.dumps(report, indent=2))
    for kind in ("concurrency", "rate", "both"):
        print(
            f"claims with {kind}: {median[kind]:.0f}/s vs {median['unlimited']:.0f}/s unlimited "
            f"({slower[kind]:+.1%}; target <= {TARGET_SLOWER:.0%}) "
            f"{'PASS' if slower[kind] <= TARGET_SLOWER else 'MISS'}"
        )
    print(
        f"freed slot reused: p50 {p50:.1f} ms (target <= {TARGET_REUSE_P50_MS:g} ms) "
        f"{'PASS' if p50 <= TARGET_REUSE_P50_MS else 'MISS'}"
    )


if __name__ == "__main__":
    main()
