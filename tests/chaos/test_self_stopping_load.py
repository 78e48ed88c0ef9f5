"""Tasks that stop their own worker, exceptions that cannot be printed, uncertain writes
inside task groups and racing reviewers, under kills and freezes: four workers
(restarted whenever one exits, as a supervisor would), one throwaway PostgreSQL.

The load (``apps/defiant_mix.py``): steps that SIGTERM or SIGINT their own worker
and keep running past its drain, steps whose exception's ``str()`` raises, steps
that raise ``UncertainOutcome`` from an ``asyncio.TaskGroup`` (two reviewers
approve each at the same moment), ``sys.exit``, and plain steps. Meanwhile one
worker is frozen (SIGSTOP) for three seconds and another SIGKILLed.

Invariants, from every run's history, the effects log and the audit log:

1. **Every run ends**, completed, with the result its steps' kinds dictate.
2. **No step is recorded completed twice**, and no body ran outside a recorded attempt.
3. **A self-stopping step stops**: it fails after its ``max_worker_losses`` (1), each
   hand-back it caused counted (``signalled_by_task``), and it ran at most as many
   times as it has recorded attempts.
4. **An unprintable failure is a task error**, recorded with a placeholder, counted
   against ``retries``: two attempts, never a hand-back loop.
5. **An uncertain step ran once and was decided once**: one acceptance and one
   refusal per pair of racing reviewers, one ``operation.review`` audit entry,
   and the run got the accepted result.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

import keepgoing
from integration._support import WorkerProcess, wait_until
from keepgoing._history import events as ev

from ._lab import Lab
from .test_hostile_load import _scalar, _worker_running

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

RUNS = 48
STEPS = 5
APP = Path(__file__).parent / "apps" / "defiant_mix.py"


def kind_of(run: int, n: int) -> str:
    """As ``apps/defiant_mix.py`` says (the app is not imported here: its tasks would
    join this process's registry)."""
    if run % 6 == 5 and n == 3:
        return "signal"
    if run % 4 == 2 and n == 2:
        return "uncertain"
    if n and (run + n) % 6 == 1:
        return "unprintable"
    if n and (run + n) % 6 == 4:
        return "exit"
    return "plain"


class Keeper:
    """Restarts any worker that exited, as a process supervisor would."""

    def __init__(self, lab: Lab, root: Path, env: dict[str, str]) -> None:
        self.lab, self.root, self.env = lab, root, env
        self.slots = [self._start(i) for i in range(len(lab.hosts))]
        self.every: list[WorkerProcess] = list(self.slots)
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _start(self, i: int) -> WorkerProcess:
        host = self.lab.hosts[i]
        argv = self.lab.worker_argv(host, self.root / APP.name, "--shutdown-grace", "1")
        name = f"{host.name}-{int(time.monotonic() * 1000)}"
        return WorkerProcess(name, argv, self.root, self.env)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for i, proc in enumerate(self.slots):
                if not proc.alive():
                    fresh = self._start(i)
                    self.slots[i] = fresh
                    self.every.append(fresh)
                    self.restarts += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for proc in self.every:
            proc.reap()


class Reviewers:
    """Two reviewers who approve every waiting operation at the same moment."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.outcomes: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.errors: list[BaseException] = []

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            with (
                keepgoing.Client(store=self.url) as reader,
                keepgoing.Client(store=self.url) as ann,
                keepgoing.Client(store=self.url) as bob,
                concurrent.futures.ThreadPoolExecutor(2) as pool,
            ):
                while not self._stop.wait(0.2):
                    for op in reader.list_reviews():
                        if op.operation_id in self.outcomes:
                            continue
                        run, n = op.evidence["inputs"]["args"] if op.evidence else (0, 0)
                        barrier = threading.Barrier(2)
                        answers = pool.map(
                            lambda c, o=op.operation_id, v=run * 10 + n, b=barrier: _approve(
                                c, o, v, b
                            ),
                            (ann, bob),
                        )
                        self.outcomes[op.operation_id] = sorted(answers)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _approve(client: keepgoing.Client, op: str, value: int, barrier: threading.Barrier) -> str:
    barrier.wait(10)
    try:
        client.review_operation(op, "approve", result=value, reason="checked")
    except keepgoing.OperationNotUncertainError:
        return "refused"
    return "accepted"


def _expected(run: int, n: int) -> int:
    return -1 if kind_of(run, n) in ("signal", "unprintable", "exit") else run * 10 + n


def test_self_stopping_and_undescribable_tasks_under_kills_and_freezes(
    lab: Lab, tmp_path: Path
) -> None:
    shutil.copy(APP, tmp_path / APP.name)
    effects = tmp_path / "effects"
    effects.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
    env.update(PYTHONUNBUFFERED="1", KG_CHAOS_DIR=str(effects))
    keeper = Keeper(lab, tmp_path, env)
    reviewers = Reviewers(lab.socket_url)
    try:
        with keepgoing.Client(store=lab.socket_url) as client:
            wait_until(lambda: len(client.list_workers()) >= 4, 60, "every worker")
            keeper.start()
            reviewers.start()
            began = time.monotonic()
            for i in range(RUNS):
                client.trigger_workflow("defiant_mix", {"run": i}, workflow_id=f"defiant-{i}")
            done = "SELECT count(*) FROM history WHERE type = 'TaskCompleted'"
            half = RUNS * 2  # about a third of the steps: the faults land mid-load
            wait_until(lambda: (_scalar(lab, done) or 0) >= half, 120, f"{half} completions")
            frozen = _worker_running(lab, keeper.slots, None) or keeper.slots[0]
            frozen.stop()
            time.sleep(3.0)  # the fault itself: a worker frozen for three seconds
            frozen.resume()
            victim = wait_until(
                lambda: _worker_running(
                    lab, [p for p in list(keeper.slots) if p is not frozen and p.alive()], None
                ),
                30,
                "a worker running a step, to kill",
            )
            victim.kill()
            print(f"froze {frozen.name} for 3 s, then SIGKILLed {victim.name}")

            open_runs = "SELECT count(*) FROM runs WHERE status = 'running'"
            wait_until(lambda: _scalar(lab, open_runs) == 0, 220, "every run to end")
            took = time.monotonic() - began
            reviewers.close()
            assert reviewers.errors == []
            causes = _check(client, effects / "effects.log", reviewers.outcomes)
        print(f"{RUNS} runs in {took:.1f}s; worker restarts: {keeper.restarts}; "
              f"attempt endings: {dict(causes)}; reviews: {len(reviewers.outcomes)}")  # fmt: skip
        assert causes["released/signalled_by_task"] >= 1 and causes["error"] >= 1
    finally:
        reviewers.close()
        keeper.close()
        for proc in keeper.every[-8:]:
            print(proc.report()[-2000:])


def _check(
    client: keepgoing.Client, log: Path, reviews: dict[str, list[str]]
) -> collections.Counter[str]:
    started: collections.Counter[tuple[str, int]] = collections.Counter()
    for line in log.read_text().splitlines():
        key, attempt, _pid = line.split()
        started[(key, int(attempt))] += 1
    recorded: set[tuple[str, int]] = set()
    causes: collections.Counter[str] = collections.Counter()
    audits = client.list_audit(action="operation.review", limit=1000)
    for i in range(RUNS):
        run = client.get_run(f"defiant-{i}")
        history = client.history(f"defiant-{i}")
        assert run.status == "completed", (run, history)  # 1. every run ends
        (ended,) = [e for e in history if isinstance(e, ev.WorkflowCompleted)]
        steps = {e.cmd: int(e.args[1]) for e in history if isinstance(e, ev.TaskScheduled)}
        assert sorted(steps.values()) == list(range(STEPS))
        expected = [_expected(i, n) if not _timed_out(history, c) else -1 for c, n in _by_n(steps)]
        assert ended.result == expected, (i, history)
        for cmd, n in steps.items():
            key, kind = f"{i}-{n}", kind_of(i, n)
            done = [e for e in history if isinstance(e, ev.TaskCompleted) and e.cmd == cmd]
            assert len(done) <= 1, (key, done)  # 2. never completed twice
            failed = [e for e in history if isinstance(e, ev.TaskAttemptFailed) and e.cmd == cmd]
            for e in [*done, *failed]:
                recorded.add((key, e.attempt))
            for e in failed:
                causes[f"{e.reason}/{e.cause}" if e.cause else e.reason] += 1
            runs = sum(n for (k, _), n in started.items() if k == key)
            assert runs <= len(done) + len(failed), (key, runs, failed)
            if kind == "signal":  # 3. it stops, every hand-back it caused counted
                (gave_up,) = [e for e in history if isinstance(e, ev.TaskFailed) and e.cmd == cmd]
                assert "max_worker_losses=1" in gave_up.error.message, (key, failed)
                # Its own two counted; stops another self-stopping step caused were free.
                why = [(e.reason, e.cause) for e in failed]
                counted = [c for _, c in why if c in ("signalled_by_task", "unexplained")]
                assert len(counted) == 2, (key, why)
                free = ("stopped_by_other_step", "shutdown", "killed_by_request")
                assert all(c in (*counted, *free) for _, c in why), (key, why)
            if kind == "unprintable":  # 4. a task error with a placeholder
                errors = [e for e in failed if e.reason == "error"]
                assert len(errors) == 2, (key, failed)
                assert all("<str() of the" in e.error.message for e in errors), errors
            if kind == "uncertain":  # 5. once, decided once
                op = f"op-{run.run_id}-{cmd}"
                assert [e.reason for e in failed] in (["uncertain"], ["worker_lost", "uncertain"])
                assert reviews.get(op) == ["accepted", "refused"], (op, reviews.get(op))
                mine = [a for a in audits if a.detail.get("operation_id") == op]
                assert len(mine) == 1, mine
    assert set(started) <= recorded, sorted(set(started) - recorded)[:10]  # 2.
    return causes


def _by_n(steps: dict[int, int]) -> list[tuple[int, int]]:
    return sorted(steps.items(), key=lambda item: item[1])


def _timed_out(history: list[ev.Event], cmd: int) -> bool:
    ends = [e for e in history if isinstance(e, ev.TaskCompleted | ev.TaskAttemptFailed)]
    mine = [e for e in ends if e.cmd == cmd]
    last = mine[-1] if mine else None
    return isinstance(last, ev.TaskAttemptFailed) and last.reason == "timeout"
