"""Real server and worker processes for the API and CLI tests.

* :class:`Process` runs ``python -m keepgoing.cli ...`` with its output in files
  (printed at teardown, so a failing test shows them) and is always reaped.
* :class:`Stack` is one store, one server and optionally one worker.
* :func:`wait_until` polls a condition against a deadline (never a bare sleep).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import httpx

from integration._support import free_port, wait_until
from keepgoing._open_store import store_from_url
from keepgoing._server import tokens
from keepgoing._store.protocol import Store

APPS = Path(__file__).parent / "apps"


def cli_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
    env["PYTHONUNBUFFERED"] = "1"
    env["KG_TEST_DIR"] = str(root)
    env["KEEPGOING_USER"] = "cli-tester"
    # The suite's own autoscalers only (tests/conftest.py): no background orchestrator.
    env["KEEPGOING_ORCHESTRATOR"] = os.environ.get("KEEPGOING_ORCHESTRATOR", "off")
    return env


class Process:
    """One ``keepgoing`` subprocess; output in ``<name>.out`` / ``<name>.err``."""

    def __init__(
        self, name: str, args: Sequence[str], root: Path, *, new_session: bool = False
    ) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", "keepgoing.cli", *args]
        self.out_path = root / f"{name}.out"
        self.err_path = root / f"{name}.err"
        self._out: IO[bytes] = open(self.out_path, "wb")  # noqa: SIM115
        self._err: IO[bytes] = open(self.err_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.argv,
            cwd=root,
            env=cli_env(root),
            stdout=self._out,
            stderr=self._err,
            start_new_session=new_session,  # its own process group, for killpg
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        self._err.flush()
        return self.err_path.read_text(errors="replace")

    def terminate(self, timeout: float = 20.0) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def reap(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=20)
        self._out.close()
        self._err.close()

    def report(self) -> str:
        out = self.out_path.read_text(errors="replace")
        err = self.err_path.read_text(errors="replace")
        return (
            f"----- {self.name} (pid {self.proc.pid}, exit {self.proc.returncode}) -----\n"
            f"argv: {' '.join(self.argv)}\nstdout:\n{out}\nstderr:\n{err}"
        )


def run_store(url: str, work: Callable[[Store], Any]) -> Any:
    """Run ``await work(store)`` on an opened store at ``url`` from this (test) process."""

    async def main() -> Any:
        store = store_from_url(url)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def make_token(url: str, name: str, permissions: Sequence[str], kind: str = "user") -> str:
    """A token made straight in the store, as `keepgoing token create` does."""
    _, text = run_store(
        url,
        lambda s: tokens.create_token(
            s,
            name=name,
            kind=kind,
            permissions=permissions,
            actor_kind="user",
            actor_id="test-setup",
            now=time.time(),
        ),
    )
    return str(text)


class Stack:
    """A store in ``root``, a server on a free port, and optionally a worker."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "kg.db"
        self.store_url = f"sqlite:///{self.db}?synchronous=normal"
        self.processes: list[Process] = []
        self.url = ""
        self.admin = ""

    def start_server(self, *args: str, name: str = "server", port: int | None = None) -> Process:
        port = port or free_port()
        server = Process(
            name, ["server", "--store", self.store_url, "--port", str(port), *args], self.root
        )
        self.processes.append(server)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: self._healthy(server, url), 30, f"{name} to answer /healthz")
        self.url = self.url or url
        server.url = url  # type: ignore[attr-defined]
        return server

    def _healthy(self, server: Process, url: str) -> bool:
        if not server.alive():
            raise AssertionError(f"{server.name} exited:\n{server.stderr()}")
        try:
            return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
        except httpx.TransportError:
            return False

    def start_worker(
        self,
        app: str = "service_app",
        name: str = "worker",
        args: Sequence[str] = (),
        *,
        new_session: bool = False,
    ) -> Process:
        source = (APPS / f"{app}.py").read_text()
        target = self.root / f"{app}.py"
        target.write_text(source)
        argv = ["worker", str(target), "--store", self.store_url, *args]
        worker = Process(name, argv, self.root, new_session=new_session)
        self.processes.append(worker)
        wait_until(lambda: self._serving(worker), 30, f"{name} to serve")
        return worker

    def _serving(self, worker: Process) -> bool:
        if not worker.alive():
            raise AssertionError(f"{worker.name} exited:\n{worker.stderr()}")
        found = run_store(self.store_url, lambda s: s.list_workers())
        return any(w.pid == worker.proc.pid and w.heartbeat_at > w.started_at for w in found)

    def token(self, name: str, *permissions: str, kind: str = "user") -> str:
        return make_token(self.store_url, name, permissions, kind)

    def api(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0, **kwargs)

    def cleanup(self) -> None:
        for process in self.processes:
            process.reap()
        for process in self.processes:
            print(process.report())


def stack_on(backend: str, request: Any, root: Path, admin: str = "alice") -> Stack:
    """A stack with a server (no worker) on ``backend``: ``"sqlite"``, or ``"postgresql"``
    (the session's database, emptied); its admin token is ``admin``'s."""
    s = Stack(root)
    try:
        if backend == "postgresql":
            from postgres_support import migrated, reset  # noqa: PLC0415

            s.store_url = migrated(request.getfixturevalue("postgres_url"))
            reset(s.store_url)
        s.admin = s.token(admin, "admin")
        s.start_server()
    except BaseException:
        s.cleanup()
        raise
    return s
