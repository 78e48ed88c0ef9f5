"""Helpers for tests that run real ``keepgoing worker`` processes on a shared store.

The fixtures in ``conftest.py`` hand these out:

* ``kg``: the test's sandbox: the store URL (a SQLite file in ``tmp_path``, or the
  session's PostgreSQL database, emptied: every test runs on both), the side
  effects folder (``KG_TEST_DIR``), app files copied from ``apps/``, markers,
  and the parsed side-effects log.
* ``workers``: starts worker subprocesses and always reaps them (SIGKILL at
  teardown); their output goes to files that are printed at teardown, which
  pytest shows when the test fails.
* ``client``: a ``keepgoing.Client`` on the test's store, closed at teardown.
* :func:`wait_until`: poll a condition against a deadline (never a bare sleep).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import keepgoing
from keepgoing._history import events as ev

APPS = Path(__file__).parent / "apps"
POLL = 0.02
T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, what: str = "a condition") -> T:
    """Poll ``predicate`` until it returns something truthy; return that value.

    Raises:
        AssertionError: ``timeout`` seconds passed first (the message says what for).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(POLL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- side effects --------------------------------------------------------------------------
@dataclass(frozen=True)
class Effect:
    """One line of the side-effects log (see ``apps/kg_effects.py``)."""

    kind: str  # "start" | "done"
    task: str
    key: str
    attempt: int
    pid: int
    at: float


class Sandbox:
    """Paths and helpers of one test: store URL, effects folder, app files."""

    def __init__(self, tmp_path: Path, url: str | None = None) -> None:
        self.root = tmp_path
        self.db = tmp_path / "kg.db"  # the SQLite file, unless ``url`` names another store
        self.url = url or "sqlite:///" + str(self.db)  # absolute path: four slashes
        self.backend = self.url.split(":", 1)[0]
        self.effects_dir = tmp_path / "effects"
        self.effects_dir.mkdir()

    def app(self, name: str) -> Path:
        """Copy ``apps/<name>.py`` (and the effects helper) into tmp_path; return its path."""
        shutil.copy(APPS / "kg_effects.py", self.root / "kg_effects.py")
        target = self.root / f"{name}.py"
        shutil.copy(APPS / f"{name}.py", target)
        return target

    def release(self, marker: str) -> None:
        """Create the marker file a held step is waiting for."""
        (self.effects_dir / marker).touch()

    def effects(
        self,
        kind: str | None = None,
        task: str | None = None,
        key: str | None = None,
    ) -> list[Effect]:
        path = self.effects_dir / "effects.log"
        if not path.exists():
            return []
        text = path.read_text()
        found = []
        for line in text[: text.rfind("\n") + 1].splitlines():  # whole lines only
            k, t, kk, n, pid, at = line.split()
            e = Effect(k, t, kk, int(n), int(pid), float(at))
            if kind is not None and e.kind != kind:
                continue
            if task is not None and e.task != task:
                continue
            if key is not None and e.key != key:
                continue
            found.append(e)
        return found

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("KEEPGOING_STORE", "KEEPGOING_LEASE_TTL", "KEEPGOING_HEARTBEAT")
        }
        env["KG_TEST_DIR"] = str(self.effects_dir)
        env["PYTHONUNBUFFERED"] = "1"
        return env


# -- worker processes -------------------------------------------------------------------
class WorkerProcess:
    """One ``keepgoing worker`` subprocess, its output in ``<name>.out`` / ``<name>.err``."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.name = name
        self.argv = argv
        self.out_path = cwd / f"{name}.out"
        self.err_path = cwd / f"{name}.err"
        self._out: IO[bytes] = open(self.out_path, "wb")  # noqa: SIM115
        self._err: IO[bytes] = open(self.err_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=self._out, stderr=self._err)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL and reap."""
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGSTOP, then wait until the kernel reports the process stopped."""
        self.signal(signal.SIGSTOP)
        wait_until(lambda: _proc_state(self.pid) == "T", 10, f"{self.name} to be stopped")

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for the exit code."""
        self.signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stderr(self) -> str:
        self._err.flush()
        return self.err_path.read_text(errors="replace")

    def reap(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self._out.close()
        self._err.close()

    def report(self) -> str:
        code = self.proc.returncode
        out = self.out_path.read_text(errors="replace")
        err = self.err_path.read_text(errors="replace")
        return (
            f"----- {self.name} (pid {self.pid}, exit {code}) -----\n"
            f"argv: {' '.join(self.argv)}\nstdout:\n{out}\nstderr:\n{err}"
        )


def _proc_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "gone"
    return stat.rsplit(")", 1)[1].split()[0]


class Workers:
    """Starts worker subprocesses for one test; :meth:`cleanup` kills every leftover."""

    def __init__(self, sandbox: Sandbox, client: keepgoing.Client) -> None:
        self.sandbox = sandbox
        self.client = client
        self.started: list[WorkerProcess] = []

    def start(
        self, app: Path, *args: str, name: str | None = None, ready: bool = True
    ) -> WorkerProcess:
        """Start ``keepgoing worker app *args``; with ``ready``, wait until it serves.

        Ready means registered with the store and heartbeating, which is after
        it has recorded its workflow names (so the client can trigger them by name).
        """
        name = name or f"worker{len(self.started) + 1}"
        argv = [
            sys.executable,
            "-m",
            "keepgoing.cli",
            "worker",
            str(app),
            "--store",
            self.sandbox.url,
            *args,
        ]
        worker = WorkerProcess(name, argv, self.sandbox.root, self.sandbox.env())
        self.started.append(worker)
        if ready:
            wait_until(lambda: self._serving(worker), 30, f"{name} to serve")
        return worker

    def _serving(self, worker: WorkerProcess) -> bool:
        if not worker.alive():
            raise AssertionError(
                f"{worker.name} exited with {worker.proc.returncode}:\n{worker.stderr()}"
            )
        return any(
            w.pid == worker.pid and w.heartbeat_at > w.started_at
            for w in self.client.list_workers()
        )

    def cleanup(self) -> None:
        for worker in self.started:
            worker.reap()
        for worker in self.started:
            print(worker.report())


# -- history helpers ------------------------------------------------------------------------
def of_type(history: list[ev.Event], kind: type[Any], **fields: Any) -> list[Any]:
    """The events of ``kind`` whose attributes equal ``fields``."""
    return [
        e
        for e in history
        if isinstance(e, kind) and all(getattr(e, k) == v for k, v in fields.items())
    ]


def cmd_of(history: list[ev.Event], task_name: str) -> int:
    """The command number of the (single) step named ``task_name``."""
    (scheduled,) = of_type(history, ev.TaskScheduled, name=task_name)
    return int(scheduled.cmd)


def pid_of(worker_id: str) -> int:
    """The pid inside a worker id ``<host>-<pid>-<hex>``."""
    return int(worker_id.rsplit("-", 2)[-2])
