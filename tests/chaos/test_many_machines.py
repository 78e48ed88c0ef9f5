"""Many workers on many machines, one PostgreSQL database: kill a worker, restart the database.

Four worker processes, each with its own connection pool and, where the
machine allows it, its own network namespace (see ``_lab``), share one
throwaway PostgreSQL cluster and run 200 workflows of 5 steps each.

Both tests check the same two invariants from every run's history:

1. **Every run completes**: status ``completed``, one ``WorkflowCompleted``,
   the right result.
2. **Every step's completion is recorded exactly once**: each
   ``TaskScheduled`` has exactly one ``TaskCompleted``, none is lost, none is
   duplicated, however many attempts it took.

``test_a_sigkilled_worker`` SIGKILLs one worker while it runs steps.
``test_a_database_restart`` also restarts PostgreSQL in the middle of the
load, and checks that the workers said so in a line, not a stack trace.
"""

from __future__ import annotations

import collections
import os
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

import keepgoing
from integration._support import WorkerProcess, wait_until
from keepgoing._history import events as ev
from keepgoing.errors import StoreError, WorkflowAlreadyRunningError

from ._lab import Lab

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(240)]

RUNS = 200
STEPS = 5
WORKERS = 4
APP = Path(__file__).parent / "apps" / "five_steps.py"


class Fleet:
    """The worker processes of one test, started across the lab's hosts."""

    def __init__(self, lab: Lab, folder: Path) -> None:
        self.lab = lab
        self.folder = folder
        shutil.copy(APP, folder / APP.name)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
        self.env["PYTHONUNBUFFERED"] = "1"
        self.procs: list[WorkerProcess] = []

    def start_all(self, client: keepgoing.Client) -> dict[int, str]:
        """Start a worker on every host; wait until all serve. Returns pid -> worker id."""
        for host in self.lab.hosts:
            argv = self.lab.worker_argv(host, self.folder / APP.name)
            self.procs.append(WorkerProcess(host.name, argv, self.folder, self.env))

        def serving() -> dict[int, str] | None:
            for proc in self.procs:
                if not proc.alive():
                    raise AssertionError(f"{proc.name} exited:\n{proc.stderr()}")
            ids = {
                w.pid: w.worker_id for w in client.list_workers() if w.heartbeat_at > w.started_at
            }
            return ids if len(ids) >= len(self.procs) else None

        return wait_until(serving, 60, "every worker to serve")

    def close(self) -> None:
        for proc in self.procs:
            proc.reap()
        for proc in self.procs:
            print(proc.report()[-3000:])


@pytest.fixture
def fleet(lab: Lab, tmp_path: Path) -> Iterator[Fleet]:
    made = Fleet(lab, tmp_path)
    try:
        yield made
    finally:
        made.close()


def _count(lab: Lab, sql: str, *params: Any) -> int:
    """One number from the database, on a fresh connection (it may have restarted)."""
    try:
        with psycopg.connect(lab.socket_url, connect_timeout=2) as conn:
            row = conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
    except psycopg.OperationalError:
        return -1  # restarting: ask again
    return int(row[0]) if row else 0


def _steps_done(lab: Lab) -> int:
    return _count(lab, "SELECT count(*) FROM history WHERE type = 'TaskCompleted'")


def _runs_done(lab: Lab) -> int:
    return _count(lab, "SELECT count(*) FROM runs WHERE status <> 'running'")


def _wait_for_every_run(lab: Lab, what: str) -> None:
    try:
        wait_until(lambda: _runs_done(lab) == RUNS, 150, what)
    except AssertionError:
        print(_stuck(lab))
        raise


def _stuck(lab: Lab) -> str:
    """The runs still open, their tasks and their last events: why the test timed out."""
    lines = []
    with psycopg.connect(lab.socket_url) as conn:
        runs = conn.execute(
            "SELECT run_id, workflow_id, status, runnable, lease_owner, lease_expires_at, fence "
            "FROM runs WHERE status = 'running' LIMIT 5"
        ).fetchall()
        for run in runs:
            lines.append(f"run {run}")
            for row in conn.execute(
                "SELECT cmd, status, attempt, fence, available_at, lease_owner, lease_expires_at "
                "FROM tasks WHERE run_id = %s ORDER BY cmd",
                (run[0],),
            ):
                lines.append(f"  task {row}")
            for row in conn.execute(
                "SELECT seq, type, body FROM history WHERE run_id = %s ORDER BY seq DESC LIMIT 6",
                (run[0],),
            ):
                lines.append(f"  event {row[0]} {row[1]} {row[2][:200]}")
    return "\n".join(lines)


def _trigger(client: keepgoing.Client) -> Future[None]:
    """Start the RUNS workflows from 8 threads, in the background: the faults below land
    while runs are still being started as well as run."""

    def start(i: int) -> None:
        for _ in range(5):
            try:
                client.trigger_workflow("five_steps", {"run": i}, workflow_id=f"five-{i}")
            except WorkflowAlreadyRunningError:
                return  # an earlier try committed after all
            except StoreError:
                continue  # the database restarted during the commit: try again
            return

    pool = ThreadPoolExecutor(max_workers=8)
    futures = [pool.submit(start, i) for i in range(RUNS)]
    pool.shutdown(wait=False)
    done: Future[None] = Future()

    def settle() -> None:
        for future in futures:
            future.result()
        done.set_result(None)

    threading.Thread(target=settle, daemon=True).start()
    return done


def _kill_while_it_works(lab: Lab, fleet: Fleet, ids: dict[int, str], at_steps: int) -> str:
    """Once ``at_steps`` steps are done, SIGKILL the worker running the most attempts."""
    wait_until(lambda: _steps_done(lab) >= at_steps, 90, f"{at_steps} step completions")
    by_id = {worker_id: pid for pid, worker_id in ids.items()}
    busiest = _busiest(lab)
    victim = next(p for p in fleet.procs if p.pid == by_id[busiest])
    victim.kill()
    print(f"SIGKILLed {victim.name} ({busiest}) after {_steps_done(lab)} step completions")
    fleet.procs.remove(victim)
    fleet.procs.append(victim)  # the survivors come first
    return busiest


def _busiest(lab: Lab) -> str:
    """The worker holding the most running attempts."""
    with psycopg.connect(lab.socket_url) as conn:
        row = conn.execute(
            "SELECT lease_owner FROM tasks WHERE status = 'running' "
            "GROUP BY lease_owner ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()
    assert row is not None, "no worker is running a step"
    return str(row[0])


def _check_invariants(client: keepgoing.Client) -> collections.Counter[str]:
    """Both invariants, over every run; returns how the attempts that failed failed."""
    failures: collections.Counter[str] = collections.Counter()
    completions = 0
    for i in range(RUNS):
        run = client.get_run(f"five-{i}")
        history = client.history(f"five-{i}")
        # Invariant 1: the run completed, once, with the right result.
        assert run.status == "completed", (run, history)
        (ended,) = [e for e in history if isinstance(e, ev.WorkflowCompleted)]
        assert ended.result == [i * 10 + n for n in range(STEPS)]
        # Invariant 2: each step's completion is recorded exactly once.
        scheduled = [e for e in history if isinstance(e, ev.TaskScheduled)]
        assert len(scheduled) == STEPS
        for step in scheduled:
            done = [e for e in history if isinstance(e, ev.TaskCompleted) and e.cmd == step.cmd]
            assert len(done) == 1, (f"five-{i}", step.cmd, done)
        completions += sum(isinstance(e, ev.TaskCompleted) for e in history)
        failures.update(e.reason for e in history if isinstance(e, ev.TaskAttemptFailed))
    assert completions == RUNS * STEPS
    return failures


def test_a_sigkilled_worker(lab: Lab, fleet: Fleet) -> None:
    with keepgoing.Client(store=lab.socket_url) as client:
        ids = fleet.start_all(client)
        began = time.monotonic()
        triggered = _trigger(client)

        victim = _kill_while_it_works(lab, fleet, ids, at_steps=RUNS * STEPS // 5)
        triggered.result(timeout=120)
        _wait_for_every_run(lab, "every run to end")
        took = time.monotonic() - began

        failures = _check_invariants(client)
        lost = _count(
            lab,
            "SELECT count(*) FROM history WHERE type = 'TaskAttemptFailed' "
            "AND body::json ->> 'worker' = %s AND body::json ->> 'reason' = 'worker_lost'",
            victim,
        )
    print(f"{RUNS} runs x {STEPS} steps on {WORKERS} workers in {took:.1f}s; attempts failed: "
          f"{dict(failures)}; the killed worker's attempts retried elsewhere: {lost}")  # fmt: skip
    assert lost >= 1, "the killed worker's running attempts were not recovered"
    assert all(p.alive() for p in fleet.procs[:-1])


def test_a_database_restart(lab: Lab, fleet: Fleet) -> None:
    with keepgoing.Client(store=lab.socket_url) as client:
        ids = fleet.start_all(client)
        triggered = _trigger(client)
        _kill_while_it_works(lab, fleet, ids, at_steps=RUNS * STEPS // 10)

        wait_until(lambda: _steps_done(lab) >= RUNS * STEPS * 2 // 5, 90, "40% of the steps")
        before = _steps_done(lab)
        down_for = lab.restart_database()
        print(f"restarted PostgreSQL after {before} step completions; it took {down_for:.1f}s")

        triggered.result(timeout=120)
        _wait_for_every_run(lab, "every run to end after the restart")
        failures = _check_invariants(client)
    print(f"attempts failed: {dict(failures)}")
    survivors = fleet.procs[:-1]
    assert all(p.alive() for p in survivors), "a worker died with the database"
    for proc in survivors:
        log = proc.stderr()
        # One clear line when the database went away (and one when it came back), not a
        # stack trace per failed call.
        assert "Traceback" not in log, log
        assert 1 <= log.count("reconnecting with backoff") <= 2, log
        assert "reconnected to PostgreSQL" in log, log
