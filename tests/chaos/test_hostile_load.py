"""Hostile tasks under kills and freezes: four workers, one throwaway PostgreSQL.

The load (``apps/hostile_mix.py``) mixes plain steps with sync tasks that call
``sys.exit``, hang past their timeout (so workers pile up hung threads and
restart themselves), and hold the GIL for longer than a lease. Meanwhile one
worker is frozen (SIGSTOP) for a few seconds and another is SIGKILLed.

Invariants, from every run's history and the effects log:

1. **Every run ends**, completed, with the result its steps' kinds dictate.
2. **No step is recorded completed twice.**
3. **No side effect outside a recorded attempt**: every body that started is
   an attempt the history records (completed or failed), and a GIL-holding
   step started exactly as many times as it has recorded attempts.
"""

from __future__ import annotations

import collections
import os
import shutil
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import keepgoing
from integration._support import WorkerProcess, pid_of, wait_until
from keepgoing._history import events as ev

from ._lab import Lab

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

RUNS = 48
STEPS = 5
APP = Path(__file__).parent / "apps" / "hostile_mix.py"


def _kind(run: int, n: int) -> str:
    return {3: "exit", 6: "hang", 9: "gil"}.get((run + n) % 12, "plain")


def _expected(run: int) -> list[int]:
    return [-1 if _kind(run, n) in ("exit", "hang") else run * 10 + n for n in range(STEPS)]


def _scalar(lab: Lab, sql: str) -> Any:
    try:
        with psycopg.connect(lab.socket_url, connect_timeout=2) as conn:
            row = conn.execute(sql).fetchone()
    except psycopg.OperationalError:
        return None
    return row[0] if row else None


def test_hostile_tasks_under_kills_and_freezes(lab: Lab, tmp_path: Path) -> None:
    shutil.copy(APP, tmp_path / APP.name)
    effects = tmp_path / "effects"
    effects.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
    env.update(PYTHONUNBUFFERED="1", KG_CHAOS_DIR=str(effects))
    procs = [
        WorkerProcess(
            host.name,
            lab.worker_argv(host, tmp_path / APP.name, "--max-hung-threads", "6"),
            tmp_path,
            env,
        )
        for host in lab.hosts
    ]
    try:
        with keepgoing.Client(store=lab.socket_url) as client:
            wait_until(lambda: len(client.list_workers()) >= len(procs), 60, "every worker")
            began = time.monotonic()
            for i in range(RUNS):
                client.trigger_workflow("hostile_mix", {"run": i}, workflow_id=f"mix-{i}")

            done = "SELECT count(*) FROM history WHERE type = 'TaskCompleted'"
            wait_until(lambda: (_scalar(lab, done) or 0) >= RUNS, 120, f"{RUNS} completions")
            frozen = _worker_running(lab, procs, "gil") or procs[0]
            frozen.stop()
            time.sleep(3.0)  # the fault itself: a worker frozen for three seconds
            frozen.resume()
            victim = _worker_running(lab, [p for p in procs if p is not frozen], None)
            assert victim is not None, "no worker was running a step"
            victim.kill()
            print(f"froze {frozen.name} for 3 s, then SIGKILLed {victim.name}")

            open_runs = "SELECT count(*) FROM runs WHERE status = 'running'"
            wait_until(lambda: _scalar(lab, open_runs) == 0, 200, "every run to end")
            took = time.monotonic() - began
            # A worker that restarted itself for hung threads ended its running bodies
            # with its old process image, as a kill would.
            restarted = {p.pid for p in procs if "restarting in a fresh process" in p.stderr()}
            faulty = {frozen.pid, victim.pid} | restarted
            reasons = _check(client, effects / "effects.log", faulty)
        restarts = sum(p.stderr().count("restarting in a fresh process") for p in procs)
        print(f"{RUNS} runs in {took:.1f}s; attempts failed: {dict(reasons)}; "
              f"restarts for hung threads: {restarts}")  # fmt: skip
        assert reasons["timeout"] >= 1 and reasons["error"] >= 1
        assert all(p.alive() for p in procs if p is not victim)
    finally:
        for proc in procs:
            proc.reap()
        for proc in procs:
            print(proc.report()[-3000:])


def _worker_running(lab: Lab, procs: list[WorkerProcess], kind: str | None) -> WorkerProcess | None:
    """A worker (of ``procs``) running a step, of ``kind`` if given (the busiest one)."""
    names = {"gil": "holds_gil"}
    only = f"AND t.name = '{names[kind]}' " if kind else ""
    with psycopg.connect(lab.socket_url) as conn:
        rows = conn.execute(
            "SELECT t.lease_owner FROM tasks t WHERE t.status = 'running' "
            f"{only}GROUP BY t.lease_owner ORDER BY count(*) DESC"
        ).fetchall()
    by_pid = {p.pid: p for p in procs}
    for (owner,) in rows:
        proc = by_pid.get(pid_of(str(owner)))
        if proc is not None and proc.alive():
            return proc
    return None


def _check(client: keepgoing.Client, log: Path, faulty: set[int]) -> collections.Counter[str]:
    started: collections.Counter[tuple[str, int]] = collections.Counter()
    for line in log.read_text().splitlines():
        key, attempt, _pid = line.split()
        started[(key, int(attempt))] += 1
    reasons: collections.Counter[str] = collections.Counter()
    recorded: set[tuple[str, int]] = set()
    gil_attempts: collections.Counter[str] = collections.Counter()
    gil_failures: list[tuple[str, int, int, str]] = []
    for i in range(RUNS):
        run = client.get_run(f"mix-{i}")
        history = client.history(f"mix-{i}")
        # 1. Every run ends, with the result its steps' kinds dictate: a healthy step
        # gives its value unless every attempt of it ran out its deadline (GIL holders
        # starving a worker, the deadline then doing its job); nothing else fails it.
        assert run.status == "completed", (run, history)
        (ended,) = [e for e in history if isinstance(e, ev.WorkflowCompleted)]
        failed = [
            (e.cmd, e.attempt, e.reason, e.worker, e.error.message if e.error else None)
            for e in history
            if isinstance(e, ev.TaskAttemptFailed)
        ]
        steps = {e.cmd: int(e.args[1]) for e in history if isinstance(e, ev.TaskScheduled)}
        assert sorted(steps.values()) == list(range(STEPS))
        timed_out = {n for cmd, n in steps.items() if _timed_out(history, cmd)}
        expected = [-1 if n in timed_out else v for n, v in enumerate(_expected(i))]
        assert ended.result == expected, (i, failed)
        for cmd, n in steps.items():
            # 2. No step recorded completed twice.
            done = [e for e in history if isinstance(e, ev.TaskCompleted) and e.cmd == cmd]
            assert len(done) <= 1, (i, n, done)
            outcomes = [
                e
                for e in history
                if isinstance(e, ev.TaskCompleted | ev.TaskAttemptFailed) and e.cmd == cmd
            ]
            for e in outcomes:
                recorded.add((f"{i}-{n}", e.attempt))
                if _kind(i, n) == "gil":
                    gil_attempts[f"{i}-{n}"] += 1
                    if isinstance(e, ev.TaskAttemptFailed) and e.reason != "timeout":
                        gil_failures.append((f"{i}-{n}", e.attempt, pid_of(e.worker), e.reason))
        reasons.update(e.reason for e in history if isinstance(e, ev.TaskAttemptFailed))
    # 3. No side effect outside a recorded attempt.
    assert set(started) <= recorded, sorted(set(started) - recorded)[:10]
    # 4. A GIL holder is never run twice because its live worker looked dead: each
    # attempt's body ran at most once, and an attempt whose body ran was taken from
    # its worker only if that worker was the frozen, the killed or a restarted one, or at its
    # deadline (a timeout takes a living worker's attempt by design). (An attempt
    # claimed by a worker that was killed or restarted before its body began is
    # recorded without a body run; that is not a second run.)
    for key, count in gil_attempts.items():
        runs_of_key = sum(n for (k, _), n in started.items() if k == key)
        assert runs_of_key <= count, (key, runs_of_key, count)
    assert all(n == 1 for (k, _), n in started.items() if k in gil_attempts), started
    for key, attempt, pid, reason in gil_failures:
        if (key, attempt) in started:
            assert pid in faulty, (key, attempt, pid, reason, faulty)
    return reasons


def _timed_out(history: list[ev.Event], cmd: int) -> bool:
    """The step never completed, and its last attempt failed at its deadline: its
    retries ran out on timeouts, not on lost workers."""
    ends = [e for e in history if isinstance(e, ev.TaskCompleted | ev.TaskAttemptFailed)]
    mine = [e for e in ends if e.cmd == cmd]
    last = mine[-1] if mine else None
    return isinstance(last, ev.TaskAttemptFailed) and last.reason == "timeout"
