"""``messages``: message latency and message throughput on embedded SQLite.

Run it alone with ``python -m bench.messages`` (``--repeat N``, ``--quick``).

**Latency** (one worker subprocess, default store settings: WAL,
``synchronous=FULL``). One ``ping_pong`` run waits for a message, then runs
one sync step, then waits again. Each sample, taken while the run is idle in
its wait (its ``MessageWaitStarted`` is committed and 5 ms have passed), is::

    the step's first line: time.time()  -  time.time() just before send_workflow_message

Both clocks are the same machine's wall clock (the client and the worker are
processes on one host). The figure covers the client's commit of the message,
the doorbell wake-up, the worker's activation (delivering the message,
committing the step with its eager claim) and the attempt starting in the
worker's thread pool. The step writes its timestamp to a file, which the
benchmark polls, so reading the figure never touches the store being
measured. 200 samples per repetition after 10 of warm-up; the p50 and p95 of
each repetition are reported as medians over repetitions. Target: p50 <= 5 ms.

**Throughput.** 100 ``collect`` runs each wait for 10 messages (no steps).
Once all 100 are waiting, 10 client threads send 1,000 messages (each thread
owns 10 runs and sends to them round-robin, so each run's messages keep
their order). Throughput is ``1000 / (last WorkflowCompleted commit - the
instant before the first send)``. Measured with one worker and with two, on
a fresh store for each repetition. The client's own send rate and how long
after the last send the last run ended are reported alongside: when the lag
is small, the figure is bounded by how fast one client can send.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench._harness import (
    BenchError,
    Config,
    Measurement,
    WorkerProcess,
    Workspace,
    median,
    percentile,
)
from keepgoing import WorkflowRunHandle, task, wait_for_message, workflow
from keepgoing._history import events as ev

__all__ = ["NAME", "main", "run"]

NAME = "messages"
THIS_FILE = os.path.abspath(__file__)
REPO_ROOT = os.path.dirname(os.path.dirname(THIS_FILE))
LATENCY_TARGET_MS = 5.0
WARMUP = 10
IDLE_BEFORE_SEND = 0.005
RUNS = 100
PER_RUN = 10
SENDER_THREADS = 10
_SCRUBBED_ENV = ("KEEPGOING_STORE", "KEEPGOING_URL", "KEEPGOING_LEASE_TTL", "KEEPGOING_HEARTBEAT")


# -- the workflows (loaded by the worker subprocess from this file) ----------------------------


@task
def stamp(folder: str, i: int) -> None:
    """The step after each message: note when it started, in ``folder/stamps``."""
    started = time.time()
    fd = os.open(os.path.join(folder, "stamps"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{i} {started!r}\n".encode())
    finally:
        os.close(fd)


@workflow
async def ping_pong(folder: str, n: int) -> int:
    """Wait for a message, run one step; ``n`` times."""
    for i in range(n):
        await wait_for_message("ping")
        await stamp(folder, i)
    return n


@workflow
async def collect(n: int) -> int:
    """Receive ``n`` messages called ``item``; return the sum of their payloads."""
    total = 0
    for _ in range(n):
        total += (await wait_for_message("item")).payload
    return total


# -- worker processes on this file ------------------------------------------------------------


class _Worker(WorkerProcess):
    """The harness's worker process, serving this file instead of ``bench/_workflows.py``."""

    def __init__(self, workspace: Workspace, name: str, concurrency: int) -> None:
        self.name = name
        self.log_path = os.path.join(workspace.folder, f"{name}.log")
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        # The worker imports this file as ``messages``; it imports ``bench._harness``.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
        command = [
            sys.executable,
            "-m",
            "keepgoing.cli",
            "worker",
            THIS_FILE,
            "--store",
            workspace.store_url,
            "--concurrency",
            str(concurrency),
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=workspace.folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )


def _start_worker(workspace: Workspace, concurrency: int = 16) -> _Worker:
    before = workspace.registered_workers()
    worker = _Worker(workspace, f"w{len(workspace.workers) + 1}", concurrency)
    workspace.workers.append(worker)
    _wait(
        lambda: worker.check_alive() and workspace.registered_workers() > before,
        30.0,
        f"worker {worker.name} to register",
    )
    return worker


def _wait(check: Any, timeout: float, what: str, interval: float = 0.0005) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


class _History:
    """Reads one run's new history events through the store, incrementally."""

    def __init__(self, workspace: Workspace, run_id: str) -> None:
        self._store = workspace.client.store
        self._run_id = run_id
        self._loop = asyncio.new_event_loop()
        self.seen = 0
        self.waits = 0

    def poll(self) -> int:
        """Read what is new; return how many message waits have started so far."""
        events = self._loop.run_until_complete(self._store.read_history(self._run_id, self.seen))
        for event in events:
            self.seen = event.seq
            if isinstance(event, ev.MessageWaitStarted):
                self.waits += 1
        return self.waits

    def close(self) -> None:
        self._loop.close()


# -- latency ----------------------------------------------------------------------------------


def _latency_once(workspace: Workspace, samples: int) -> list[float]:
    """One ``ping_pong`` run; return ``samples`` latencies in ms (after the warm-up)."""
    client = workspace.client
    folder = os.path.join(workspace.folder, f"latency-{time.monotonic_ns()}")
    os.mkdir(folder)
    stamps_path = os.path.join(folder, "stamps")
    total = WARMUP + samples
    handle = client.trigger_workflow(ping_pong, {"folder": folder, "n": total})
    history = _History(workspace, handle.run_id)
    latencies: list[float] = []
    try:
        for i in range(total):
            _wait(lambda i=i: history.poll() >= i + 1, 30.0, f"wait {i + 1} to start")
            time.sleep(IDLE_BEFORE_SEND)  # the run is idle in its wait, the worker parked
            sent_at = time.time()
            client.send_workflow_message(handle.workflow_id, "ping", i)
            _wait(lambda i=i: _lines(stamps_path) > i, 30.0, f"step {i} to start")
            started_at = float(_last_line(stamps_path).split()[1])
            if i >= WARMUP:
                latencies.append((started_at - sent_at) * 1000.0)
        if client.result(handle, timeout=30) != total:
            raise BenchError("ping_pong returned the wrong count")
    finally:
        history.close()
    return latencies


def _lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def _last_line(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read().rstrip("\n").rsplit("\n", 1)[-1]


def latency(config: Config, samples: int) -> list[Measurement]:
    p50s: list[float] = []
    p95s: list[float] = []
    with Workspace(f"{NAME}-latency") as workspace:
        _start_worker(workspace)
        for rep in range(config.repeat):
            times = _latency_once(workspace, samples)
            p50s.append(percentile(times, 50))
            p95s.append(percentile(times, 95))
            config.log(
                f"  {NAME} latency rep {rep + 1}: p50={p50s[-1]:.2f} ms p95={p95s[-1]:.2f} ms "
                f"(min {min(times):.2f}, max {max(times):.2f}, n={len(times)})"
            )
    detail = {"samples_per_repetition": samples, "warmup": WARMUP, "workers": 1}
    return [
        Measurement(
            f"{NAME}_latency",
            "send_workflow_message -> next step starts, p50",
            "ms",
            p50s,
            target=LATENCY_TARGET_MS,
            op="<=",
            detail=detail,
        ),
        Measurement(
            f"{NAME}_latency_p95",
            "send_workflow_message -> next step starts, p95",
            "ms",
            p95s,
            detail=detail,
        ),
    ]


# -- throughput --------------------------------------------------------------------------------


def _throughput_once(workspace: Workspace, runs: int, per_run: int) -> tuple[float, float, float]:
    """Return (messages/s end to end, messages/s the client sent, ms from last send to end)."""
    client = workspace.client
    handles: list[WorkflowRunHandle] = [
        client.trigger_workflow(collect, {"n": per_run}) for _ in range(runs)
    ]
    readers = [_History(workspace, h.run_id) for h in handles]
    try:
        for reader in readers:
            _wait(lambda reader=reader: reader.poll() >= 1, 60.0, "every run to wait", 0.002)
    finally:
        for reader in readers:
            reader.close()
    groups = [handles[i::SENDER_THREADS] for i in range(SENDER_THREADS)]

    def send(group: list[WorkflowRunHandle]) -> None:
        for k in range(per_run):
            for handle in group:
                client.send_workflow_message(handle.workflow_id, "item", k)

    began = time.time()
    with ThreadPoolExecutor(SENDER_THREADS) as pool:
        list(pool.map(send, groups))
    sent = time.time()
    expected = sum(range(per_run))
    ended = began
    for handle in handles:
        if client.result(handle, timeout=120) != expected:
            raise BenchError(f"run {handle.run_id} summed the wrong payloads")
        events = client.history(handle.workflow_id, run_id=handle.run_id)
        ended = max([ended, *(e.at for e in events if isinstance(e, ev.WorkflowCompleted))])
    total = runs * per_run
    return total / (ended - began), total / (sent - began), (ended - sent) * 1000.0


def throughput(config: Config, workers: int, runs: int, per_run: int) -> Measurement:
    rates: list[float] = []
    send_rates: list[float] = []
    lags: list[float] = []
    for rep in range(config.repeat):
        with Workspace(f"{NAME}-throughput") as workspace:  # a fresh store each time
            for _ in range(workers):
                _start_worker(workspace)
            rate, send_rate, lag = _throughput_once(workspace, runs, per_run)
            rates.append(rate)
            send_rates.append(send_rate)
            lags.append(lag)
            config.log(
                f"  {NAME} throughput ({workers} worker{'s' if workers > 1 else ''}) "
                f"rep {rep + 1}: {rate:.0f} messages/s (sends alone: {send_rate:.0f}/s; "
                f"last run ended {lag:.0f} ms after the last send)"
            )
    return Measurement(
        f"{NAME}_throughput_{workers}w",
        f"{runs * per_run} messages to {runs} waiting runs, {workers} worker(s)",
        "messages/s",
        rates,
        detail={
            "runs": runs,
            "messages_per_run": per_run,
            "sender_threads": SENDER_THREADS,
            "workers": workers,
            "send_rate_median": median(send_rates),
            "lag_after_last_send_ms_median": median(lags),
        },
    )


# -- entry points --------------------------------------------------------------------------------


def run(config: Config) -> list[Measurement]:
    """Every figure of this benchmark (the ``python -m bench`` interface)."""
    samples = 50 if config.quick else 200
    runs = 20 if config.quick else RUNS
    results = latency(config, samples)
    for workers in (1, 2):
        results.append(throughput(config, workers, runs, PER_RUN))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.messages", description="Message latency and throughput."
    )
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (at least 3)")
    parser.add_argument("--quick", action="store_true", help="fewer samples: a smoke test")
    args = parser.parse_args(argv)
    if args.repeat < 3:
        parser.error("--repeat must be at least 3: each figure is a median of repetitions")
    config = Config(repeat=args.repeat, quick=args.quick, log=lambda s: print(s, flush=True))
    began = time.perf_counter()
    try:
        results = run(config)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"\n{NAME}: medians over {args.repeat} repetitions ({time.perf_counter() - began:.0f} s)")
    for m in results:
        target = "" if m.target is None else f"  (target {m.op} {m.target:g}: "
        verdict = "" if m.met is None else ("met)" if m.met else "NOT met)")
        runs = ", ".join(f"{r:.2f}" for r in m.runs)
        print(f"  {m.label:<58} {m.value:10.2f} {m.unit}{target}{verdict}  [runs: {runs}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
