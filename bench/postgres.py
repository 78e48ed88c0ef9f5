"""``python -m bench.postgres``: the engine benchmarks on PostgreSQL, beside SQLite.

Every figure is measured on both stores in the same run, on this machine, so
the ratio is fair: real ``keepgoing worker`` processes with default settings,
a fresh database (or SQLite file) per workspace, medians over repetitions.

* **per_step** -- the cost of each added sequential step: ``steps(n=1)`` and
  ``steps(n=20)`` alternate on one worker; ``(median(d20) - median(d1)) / 19``
  from the store's own timestamps (as ``bench/per_step.py``).
* **throughput** -- 500 one-step workflows with 2 workers, started from 32
  threads; ``500 / (last end - first start)`` (as ``bench/throughput.py``).
  Target on PostgreSQL: within 2x of SQLite.
* **wakeup** -- from work becoming runnable to a worker claiming it. A probe
  process waits on ``store.wait_for_change`` (LISTEN/NOTIFY on PostgreSQL,
  the doorbell on SQLite) and claims as soon as it wakes, stamping each
  claim; the client starts one run at a time, idle gaps between, and
  measures from the moment ``start_run``'s commit returned to the claim.
  Target on PostgreSQL: p50 <= 5 ms.

The PostgreSQL server is ``KEEPGOING_BENCH_POSTGRES_DSN`` (else
``KEEPGOING_TEST_POSTGRES_DSN``, else ``postgresql://postgres@127.0.0.1:5432/postgres``);
each workspace creates a database there and drops it afterwards.

Examples::

    python -m bench.postgres                   # all three, 3 repetitions
    python -m bench.postgres --only wakeup --repeat 5 --json pg.json
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench._harness import (
    BenchError,
    Config,
    Measurement,
    Workspace,
    machine_facts,
    median,
    percentile,
    run_duration,
    wait_until,
)
from bench._report import console_table, write_json
from bench._workflows import one_step, steps
from keepgoing import Client

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
STORES = ("sqlite", "postgresql")
THROUGHPUT_RUNS = 500
TRIGGER_THREADS = 32


def admin_dsn() -> str:
    env = os.environ
    return (
        env.get("KEEPGOING_BENCH_POSTGRES_DSN")
        or env.get("KEEPGOING_TEST_POSTGRES_DSN")
        or DEFAULT_DSN
    )


class PgWorkspace(Workspace):
    """A :class:`~bench._harness.Workspace` whose store is a fresh PostgreSQL database."""

    def __init__(self, label: str) -> None:  # the SQLite file is replaced, not made
        self._tmp = tempfile.TemporaryDirectory(prefix=f"keepgoing-bench-pg-{label}-")
        self.folder = self._tmp.name
        self.database = f"keepgoing_bench_{label}_{secrets.token_hex(4)}"
        with psycopg.connect(admin_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')  # type: ignore[arg-type]
        parts = urlsplit(admin_dsn())
        self.store_url = urlunsplit(parts._replace(path=f"/{self.database}"))
        self.client = Client(store=self.store_url)
        self.workers = []

    def close(self) -> None:
        super().close()
        with psycopg.connect(admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')  # type: ignore[arg-type]


def workspace(store: str, label: str) -> Workspace:
    return PgWorkspace(label) if store == "postgresql" else Workspace(label)


# -- per step ------------------------------------------------------------------------
def per_step(store: str, config: Config) -> Measurement:
    per_run = 4 if config.quick else 10
    figures: list[float] = []
    with workspace(store, "per_step") as space:
        space.start_worker()
        client = space.client
        for n in (1, 20):
            client.trigger_workflow(steps, {"n": n}, wait=True, timeout=60)
        for rep in range(config.repeat):
            d1, d20 = [], []
            for _ in range(per_run):
                for n, into in ((1, d1), (20, d20)):
                    handle = client.trigger_workflow(steps, {"n": n})
                    client.result(handle, timeout=60)
                    into.append(run_duration(client, handle))
            figures.append((median(d20) - median(d1)) / 19 * 1000)
            config.log(f"  per_step {store} rep {rep + 1}: {figures[-1]:.3f} ms/step")
    return Measurement(f"per_step.{store}", "per added sequential step", "ms", figures)


# -- throughput -----------------------------------------------------------------------
def throughput(store: str, config: Config) -> Measurement:
    figures: list[float] = []
    for rep in range(config.repeat):
        with workspace(store, "throughput") as space:
            space.start_worker()
            space.start_worker()
            figures.append(_throughput_once(space.client))
        config.log(f"  throughput {store} rep {rep + 1}: {figures[-1]:.0f} workflows/s")
    label = f"{THROUGHPUT_RUNS} one-step workflows, 2 workers"
    return Measurement(f"throughput.{store}", label, "workflows/s", figures)


def _throughput_once(client: Client) -> float:
    with ThreadPoolExecutor(TRIGGER_THREADS) as pool:
        list(pool.map(lambda _: client.trigger_workflow(one_step), range(THROUGHPUT_RUNS)))
    wait_until(
        lambda: not client.list_runs(workflow=one_step, status="running", limit=1),
        timeout=180,
        interval=0.05,
        what="every run to end",
    )
    runs = client.list_runs(workflow=one_step, limit=THROUGHPUT_RUNS * 2)
    if len(runs) != THROUGHPUT_RUNS or any(r.status != "completed" for r in runs):
        raise BenchError(f"expected {THROUGHPUT_RUNS} completed runs, found {len(runs)}")
    first = min(r.created_at for r in runs)
    last = max(r.ended_at for r in runs if r.ended_at is not None)
    return THROUGHPUT_RUNS / (last - first)


# -- wake-up latency ---------------------------------------------------------------------
def wakeup(store: str, config: Config) -> list[Measurement]:
    samples = 40 if config.quick else 100
    p50s: list[float] = []
    p95s: list[float] = []
    with workspace(store, "wakeup") as space:
        client = space.client
        probe = subprocess.Popen(
            [sys.executable, "-m", "bench.postgres", "--probe", space.store_url],
            stdout=subprocess.PIPE,
            text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        try:
            assert probe.stdout is not None
            if probe.stdout.readline().strip() != "ready":
                raise BenchError("the wake-up probe did not start")
            for rep in range(config.repeat):
                times = [_one_wakeup(client, probe.stdout) for _ in range(samples)]
                p50s.append(percentile(times, 50))
                p95s.append(percentile(times, 95))
                config.log(
                    f"  wakeup {store} rep {rep + 1}: p50={p50s[-1]:.2f} ms p95={p95s[-1]:.2f} ms"
                )
        finally:
            probe.kill()
            probe.wait(timeout=10)
    what = "runnable -> claimed by a waiting worker"
    return [
        Measurement(f"wakeup_p50.{store}", what, "ms", p50s),
        Measurement(f"wakeup_p95.{store}", what, "ms", p95s),
    ]


def _one_wakeup(client: Client, claims: IO[str]) -> float:
    time.sleep(0.02)  # the probe is idle, waiting, when the work arrives
    handle = client.trigger_workflow(one_step)
    runnable = time.time()  # start_run's commit (and its NOTIFY) has returned
    line = claims.readline().split()
    if len(line) != 2:
        raise BenchError("the wake-up probe stopped (see its stderr above)")
    run_id, claimed = line
    if run_id != handle.run_id:
        raise BenchError(f"the probe claimed {run_id}, expected {handle.run_id}")
    return max(0.0, float(claimed) - runnable) * 1000


def probe(url: str) -> None:
    """A stripped worker: wait for a change, claim, print ``run_id time`` per claim."""
    from keepgoing._open_store import store_from_url  # noqa: PLC0415
    from keepgoing._store.doorbell import WaitKey  # noqa: PLC0415

    async def main() -> None:
        store = store_from_url(url)
        await store.open()
        await store.record_workflows(["one_step"], ["default"], time.time())
        print("ready", flush=True)
        me = WaitKey()
        while True:
            await store.wait_for_change(1.0, key=me)
            claims = await store.claim_activations(
                worker_id="probe",
                queues=["default"],
                workflow_names=["one_step"],
                limit=64,
                lease_ttl=3600,
                now=time.time(),
            )
            stamp = time.time()
            for claim in claims:
                print(claim.run.run_id, repr(stamp), flush=True)

    asyncio.run(main())


# -- the command -------------------------------------------------------------------------
BENCHMARKS: dict[str, Callable[[str, Config], Measurement | list[Measurement]]] = {
    "per_step": per_step,
    "throughput": throughput,
    "wakeup": wakeup,
}


def ratios(results: list[Measurement]) -> list[Measurement]:
    """PostgreSQL against the targets: throughput within 2x of SQLite, wake-up p50 <= 5 ms."""
    by_name = {m.name: m for m in results}
    derived = []
    sqlite, pg = by_name.get("throughput.sqlite"), by_name.get("throughput.postgresql")
    if sqlite and pg:
        runs = [p / s for p, s in zip(pg.runs, sqlite.runs, strict=False)]
        derived.append(
            Measurement("throughput_ratio", "PostgreSQL / SQLite throughput", "x", runs, 0.5, ">=")
        )
    wake = by_name.get("wakeup_p50.postgresql")
    if wake:
        derived.append(
            Measurement("wakeup_target", "PostgreSQL wake-up p50", "ms", wake.runs, 5.0, "<=")
        )
    return derived


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.postgres", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        probe(args.probe)
        return 0
    if args.repeat < 3:
        parser.error("--repeat must be at least 3: each figure is a median of repetitions")
    config = Config(repeat=args.repeat, quick=args.quick, log=lambda line: print(line, flush=True))
    results: list[Measurement] = []
    for name in args.only or list(BENCHMARKS):
        for store in STORES:
            got = BENCHMARKS[name](store, config)
            results.extend(got if isinstance(got, list) else [got])
    results.extend(ratios(results))
    facts = machine_facts()
    with psycopg.connect(admin_dsn()) as conn:
        facts["postgresql"] = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        facts["postgresql_synchronous_commit"] = str(
            conn.execute("SHOW synchronous_commit").fetchone()[0]
        )  # type: ignore[index]
    console_table(results, facts)
    if args.json:
        write_json(args.json, results, facts, repeat=args.repeat, quick=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
