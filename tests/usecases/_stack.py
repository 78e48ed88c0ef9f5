"""A :class:`~keepgoing._demo.usecases.DemoStack` on real processes, for the use-case tests.

A SQLite store; ``keepgoing groups serve`` (the autoscaler, the orchestrator
services and the local backend, whose replicas are ``keepgoing worker``
processes); a store-mode client; kills through the client's kill API. No
server: ``server_url`` is None.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import keepgoing
from keepgoing._client.deploy import WorkflowWorker

__all__ = ["ProcessStack"]


class ProcessStack:
    def __init__(self, root: Path, *, fast: bool = True, store: str | None = None) -> None:
        self.root = root
        self.url = store or f"sqlite:///{root / 'demo.db'}"
        self._fast = fast
        self._cleanups: list[Callable[[], None]] = []
        env = {k: v for k, v in os.environ.items() if k not in ("KEEPGOING_STORE", "KEEPGOING_URL")}
        env.update(
            KEEPGOING_GROUPS_DIR=str(root / "groups"),
            KEEPGOING_GROUPS_LOG_DIR=str(root / "logs"),
            PYTHONUNBUFFERED="1",
        )
        self._log: IO[bytes] = open(root / "scaler.log", "wb")  # noqa: SIM115
        argv = [sys.executable, "-m", "keepgoing.cli", "groups", "serve", "--store", self.url]
        self._scaler = subprocess.Popen(argv, cwd=root, env=env, stdout=self._log, stderr=self._log)
        self._client = keepgoing.Client(store=self.url)

    # -- DemoStack ---------------------------------------------------------------------
    @property
    def client(self) -> keepgoing.Client:
        return self._client

    @property
    def workdir(self) -> Path:
        return self.root

    @property
    def fast(self) -> bool:
        return self._fast

    @property
    def server_url(self) -> str | None:
        return None

    def deploy(self, source: Path, name: str, **options: Any) -> WorkflowWorker:
        return keepgoing.deploy_workflow_worker(
            str(source), name=name, client=self._client, **options
        )

    def kill_worker_during(self, workflow_id: str, step: str, *, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            owner = self._running(workflow_id, step)
            if owner is not None:
                try:
                    self._client.kill_worker(owner)
                except keepgoing.InvalidRequestError:
                    continue  # it finished or moved between the read and the kill
                return owner
            time.sleep(0.02)
        raise TimeoutError(f"{step} of {workflow_id} was not seen running within {timeout:g}s")

    def add_cleanup(self, cleanup: Callable[[], None]) -> None:
        self._cleanups.append(cleanup)

    # -- the rest ----------------------------------------------------------------------
    def _running(self, workflow_id: str, step: str) -> str | None:
        run = self._client.get_run(workflow_id)
        backend: Any = self._client._backend  # the store backend runs store calls on its loop
        rows = backend.run(self._client.store.run_tasks(run.run_id))
        for row in rows:
            if row.name == step and row.status == "running" and row.lease_owner:
                return str(row.lease_owner)
        return None

    def scaler_log(self) -> str:
        self._log.flush()
        return (self.root / "scaler.log").read_text(errors="replace")

    def close(self) -> None:
        while self._cleanups:
            with contextlib.suppress(Exception):
                self._cleanups.pop()()
        if self._scaler.poll() is None:
            self._scaler.send_signal(signal.SIGTERM)
            try:
                self._scaler.wait(60)
            except subprocess.TimeoutExpired:
                self._scaler.kill()
                self._scaler.wait(30)
        self._client.close()
        self._log.close()
