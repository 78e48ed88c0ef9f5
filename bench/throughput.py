"""``throughput``: one-step workflows completed per second with two workers.

Two worker subprocesses wait, idle, on a fresh store. The client starts 500
``one_step`` runs as fast as it can (``wait=False``, from a pool of threads
so the starts share group commits), then waits for all to end.
Throughput is ``500 / (max(ended_at) - min(created_at))`` over the run
records, so it counts from the first start to the last completion.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from bench._harness import BenchError, Config, Measurement, Workspace, median, wait_until
from bench._workflows import one_step
from keepgoing import Client

NAME = "throughput"
TARGET = 2500.0  # from 32 client threads, issue 31's target
RUNS = 500
WORKERS = 2
TRIGGER_THREADS = 32


def run(config: Config) -> list[Measurement]:
    figures: list[float] = []
    trigger_rates: list[float] = []
    for rep in range(config.repeat):
        with Workspace(NAME) as workspace:
            for _ in range(WORKERS):
                workspace.start_worker()
            rate, trigger_rate = _once(workspace.client)
        figures.append(rate)
        trigger_rates.append(trigger_rate)
        config.log(
            f"  {NAME} rep {rep + 1}: {rate:.0f} workflows/s (starts alone: {trigger_rate:.0f}/s)"
        )
    return [
        Measurement(
            name=NAME,
            label=f"{RUNS} one-step workflows, {WORKERS} workers",
            unit="workflows/s",
            runs=figures,
            target=TARGET,
            op=">=",
            detail={"runs": RUNS, "workers": WORKERS, "start_rate_median": median(trigger_rates)},
        )
    ]


def _once(client: Client) -> tuple[float, float]:
    began = time.perf_counter()
    with ThreadPoolExecutor(TRIGGER_THREADS) as pool:
        handles = list(pool.map(lambda _: client.trigger_workflow(one_step), range(RUNS)))
    trigger_rate = RUNS / (time.perf_counter() - began)
    if len({h.run_id for h in handles}) != RUNS:
        raise BenchError("the client did not start every run")

    # Cheap polling (one row at most) so the wait takes little CPU from the workers.
    wait_until(
        lambda: not client.list_runs(workflow=one_step, status="running", limit=1),
        timeout=120,
        interval=0.05,
        what="every run to end",
    )
    runs = client.list_runs(workflow=one_step, limit=1000)
    if len(runs) != RUNS:
        raise BenchError(f"expected {RUNS} runs in the store, found {len(runs)}")
    failed = [r for r in runs if r.status != "completed"]
    if failed:
        raise BenchError(f"{len(failed)} run(s) did not complete, e.g. {failed[0]}")
    first = min(r.created_at for r in runs)
    last = max(r.ended_at for r in runs if r.ended_at is not None)
    return RUNS / (last - first), trigger_rate
