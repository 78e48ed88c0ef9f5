"""Shared machinery: workspaces, worker subprocesses, deadlines, statistics, results."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import keepgoing
from bench._workflows import WORKFLOWS_FILE
from keepgoing import Client, WorkflowRunHandle
from keepgoing._history.events import WorkflowCompleted, WorkflowStarted

__all__ = [
    "BenchError",
    "Config",
    "Measurement",
    "WorkerProcess",
    "Workspace",
    "machine_facts",
    "median",
    "percentile",
    "run_duration",
    "wait_until",
]

# Worker settings come from the defaults: nothing in the environment may change them.
_SCRUBBED_ENV = ("KEEPGOING_STORE", "KEEPGOING_URL", "KEEPGOING_LEASE_TTL", "KEEPGOING_HEARTBEAT")


class BenchError(RuntimeError):
    """A benchmark could not produce a figure (a deadline passed, a worker died)."""


@dataclass(frozen=True)
class Config:
    """How hard to measure: ``repeat`` repetitions; ``quick`` shrinks each one."""

    repeat: int
    quick: bool
    log: Callable[[str], None] = print


@dataclass
class Measurement:
    """One reported figure: the median over repetitions, and its target.

    ``op`` is ``"<="`` (at most ``target``), ``">="`` (at least) or ``None``
    (reported without a target). ``runs`` holds the per-repetition figures.
    """

    name: str
    label: str
    unit: str
    runs: list[float]
    target: float | None = None
    op: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def value(self) -> float:
        return median(self.runs)

    @property
    def met(self) -> bool | None:
        if self.target is None or self.op is None:
            return None
        return self.value <= self.target if self.op == "<=" else self.value >= self.target

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "median": self.value,
            "unit": self.unit,
            "target": self.target,
            "op": self.op,
            "met": self.met,
            "runs": self.runs,
            "detail": self.detail,
        }


# -- statistics ------------------------------------------------------------------
def median(values: Sequence[float]) -> float:
    if not values:
        raise BenchError("no samples")
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linearly interpolated between samples."""
    if not values:
        raise BenchError("no samples")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# -- waiting -----------------------------------------------------------------------
def wait_until(
    check: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.01
) -> None:
    """Poll ``check`` until it is true; raise :class:`BenchError` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


# -- workspaces and workers ------------------------------------------------------------
class Workspace:
    """A temporary folder holding one fresh SQLite store (WAL, synchronous=FULL).

    The default store URL setting (``synchronous=full``) is used. The client
    opens the store first, so the schema exists before any worker starts.
    """

    def __init__(self, label: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"keepgoing-bench-{label}-")
        self.folder = self._tmp.name
        self.db_path = os.path.join(self.folder, "bench.db")
        self.store_url = f"sqlite:///{self.db_path}"
        self.client = Client(store=self.store_url)
        self.workers: list[WorkerProcess] = []

    def start_worker(
        self,
        *,
        concurrency: int = 16,
        wait: bool = True,
        file: str = WORKFLOWS_FILE,
        env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        """Start ``keepgoing worker FILE`` (default: the benchmark workflows).

        ``env`` adds variables to the worker's environment. With ``wait``,
        returns once the worker has registered with the store.
        """
        before = self.registered_workers()
        name = f"w{len(self.workers) + 1}"
        worker = WorkerProcess(self, name, concurrency, file=file, env=env)
        self.workers.append(worker)
        if wait:
            wait_until(
                lambda: worker.check_alive() and self.registered_workers() > before,
                timeout=30.0,
                what=f"worker {worker.name} to register",
            )
        return worker

    def registered_workers(self) -> int:
        return len(self.client.list_workers())

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        with contextlib.suppress(Exception):
            self.client.close()
        self._tmp.cleanup()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WorkerProcess:
    """``python -m keepgoing.cli worker FILE --store URL`` with default settings.

    ``KEEPGOING_*`` variables are removed from the worker's environment so it
    runs with the default settings; ``env`` adds variables after that.
    """

    def __init__(
        self,
        workspace: Workspace,
        name: str,
        concurrency: int,
        *,
        file: str = WORKFLOWS_FILE,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = os.path.join(workspace.folder, f"{name}.log")
        environment = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        environment.update(env or {})
        command = [
            sys.executable,
            "-m",
            "keepgoing.cli",
            "worker",
            file,
            "--store",
            workspace.store_url,
            "--concurrency",
            str(concurrency),
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=workspace.folder,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def check_alive(self) -> bool:
        code = self.process.poll()
        if code is not None:
            raise BenchError(f"worker {self.name} exited with {code}:\n{self.log_tail()}")
        return True

    def kill(self) -> float:
        """SIGKILL the worker; return ``time.time()`` taken just before the signal."""
        self.check_alive()
        killed_at = time.time()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        return killed_at

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if it has not stopped within ``timeout`` seconds."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError), open(self.log_path, encoding="utf-8") as log:
            return "".join(log.readlines()[-lines:])
        return ""


# -- reading results ----------------------------------------------------------------------
def run_duration(client: Client, handle: WorkflowRunHandle) -> float:
    """Seconds from the run's ``WorkflowStarted`` commit to its ``WorkflowCompleted`` commit."""
    events = client.history(handle.workflow_id, run_id=handle.run_id)
    started = next((e.at for e in events if isinstance(e, WorkflowStarted)), None)
    ended = next((e.at for e in events if isinstance(e, WorkflowCompleted)), None)
    if started is None or ended is None:
        kinds = ", ".join(type(e).__name__ for e in events)
        raise BenchError(f"run {handle.run_id} did not complete; history: {kinds}")
    return ended - started


# -- the machine -------------------------------------------------------------------------
def machine_facts() -> dict[str, Any]:
    """CPU, Python, SQLite, and the durability settings of a store made from a default URL."""
    with Workspace("facts") as workspace:
        synchronous = str(getattr(workspace.client.store, "synchronous", "unknown"))
        with contextlib.closing(sqlite3.connect(workspace.db_path)) as conn:
            journal_mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "journal_mode": journal_mode.upper(),
        "synchronous": synchronous.upper(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "keepgoing_source": _source_revision(),
    }


def _source_revision() -> str:
    """The git commit of the keepgoing package being measured, if it is a git checkout."""
    folder = os.path.dirname(os.path.abspath(keepgoing.__file__))

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", folder, *args], capture_output=True, text=True, timeout=10, check=True
        )
        return done.stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return f"{folder} (not a git checkout)"
    return f"commit {commit}" + (" with uncommitted changes" if dirty else "")


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"
