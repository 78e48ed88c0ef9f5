"""The demo's running stack: a store, the server with the UI, the local group backend.

One process holds it all: the server (the API, the UI and the demo's own routes)
runs on a thread of its own, its lifespan runs the orchestrator services and the
worker-group autoscaler, and the autoscaler's replicas are ``keepgoing worker``
child processes. :meth:`LocalStack.close` stops the server, which stops the
autoscaler, which stops every replica (SIGTERM, then SIGKILL after its grace):
nothing outlives the demo.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn

from keepgoing._client.client import Client
from keepgoing._client.deploy import WorkflowWorker, deploy_workflow_worker
from keepgoing._groups.service import worker_store_url
from keepgoing._history import events as ev
from keepgoing._open_store import store_from_url
from keepgoing._server.app import create_app
from keepgoing._server.serve import bind
from keepgoing._store.protocol import Store
from keepgoing.errors import KeepgoingError

__all__ = ["DemoError", "LocalStack"]

log = logging.getLogger("keepgoing.demo")
T = TypeVar("T")


class DemoError(KeepgoingError):
    """The demo could not do what it set out to (the message says what)."""

    code = "demo_error"


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """Set environment variables for the block, then put back what was there."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the demo's main thread owns Ctrl-C."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        return


class LocalStack:
    """A :class:`~keepgoing._demo.usecases.DemoStack` on this machine.

    Args:
        folder: the demo's folder (the SQLite store, group sources, logs).
        store: a store URL (default: ``sqlite:///<folder>/demo.db``).
        fast: the short CI mode.
        host, port: where the server listens (port 0 picks a free one).
        extra: called with the app before it serves (the demo adds its routes).
    """

    def __init__(
        self,
        folder: Path,
        *,
        store: str | None = None,
        fast: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        extra: Callable[[Any], None] | None = None,
    ) -> None:
        self._folder = folder.resolve()
        self._folder.mkdir(parents=True, exist_ok=True)
        self.store_url = store or f"sqlite:///{self._folder / 'demo.db'}"
        self._fast = fast
        self._host, self._port = host, port
        self._extra = extra
        self._cleanups: list[Callable[[], None]] = []
        self._client: Client | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._store: Store | None = None
        self._url: str | None = None
        self._failure: BaseException | None = None

    # -- DemoStack -----------------------------------------------------------------
    @property
    def client(self) -> Client:
        if self._client is None:
            raise DemoError("the demo stack is not started")
        return self._client

    @property
    def workdir(self) -> Path:
        return self._folder

    @property
    def fast(self) -> bool:
        return self._fast

    @property
    def server_url(self) -> str | None:
        return self._url

    def deploy(self, source: Path, name: str, **options: Any) -> WorkflowWorker:
        return deploy_workflow_worker(str(source), name=name, client=self.client, **options)

    def kill_worker_during(self, workflow_id: str, step: str, *, timeout: float = 120.0) -> str:
        """Kill the worker running ``step`` through ``POST /runs/{id}/kill-worker``. A
        step that finished between seeing it and the kill (409), or between the kill
        API's check and the signal (its worker completed it), is waited for again: the
        worker returned is one whose attempt the kill cut short."""
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self._require_url(), timeout=10.0) as http:
            while time.monotonic() < deadline:
                cmd = self._running_step(workflow_id, step)
                if cmd is None:
                    time.sleep(0.01)
                    continue
                answer = http.post(f"/api/v1/runs/{workflow_id}/kill-worker", json={"cmd": cmd})
                if answer.status_code == 200:
                    worker_id: str = answer.json()["worker_id"]
                    if self._cut_short(workflow_id, cmd, worker_id, deadline):
                        log.info("killed worker %s during %s (step %d)", worker_id, step, cmd)
                        return worker_id
                    log.info("step %d finished on %s before the kill; again", cmd, worker_id)
                    continue
                if answer.status_code != 409:
                    raise DemoError(f"the kill API answered {answer.status_code}: {answer.text}")
        raise DemoError(f"{step} of {workflow_id} was not seen running within {timeout:.0f}s")

    def _cut_short(self, workflow_id: str, cmd: int, worker_id: str, deadline: float) -> bool:
        """After ``worker_id`` was killed: True once the run's history shows its attempt
        at step ``cmd`` lost, False if that worker completed the step after all."""
        while time.monotonic() < deadline:
            for event in self.client.history(workflow_id):
                if not isinstance(event, ev.TaskAttemptFailed | ev.TaskCompleted):
                    continue
                if (event.cmd, event.worker) != (cmd, worker_id):
                    continue
                if isinstance(event, ev.TaskCompleted):
                    return False
                if event.reason == "worker_lost":  # one that failed on its own says nothing
                    return True
            time.sleep(0.05)
        raise DemoError(f"step {cmd} of {workflow_id} showed no outcome after its worker's kill")

    def add_cleanup(self, cleanup: Callable[[], None]) -> None:
        self._cleanups.append(cleanup)

    # -- running it ------------------------------------------------------------------
    def start(self, *, timeout: float = 60.0) -> None:
        """Open the store, serve the API and UI, and run the autoscaler."""
        self._store = store_from_url(self.store_url)
        if worker_store_url(self._store) is None:
            raise DemoError(
                f"the demo's workers are other processes, which cannot reach {self.store_url}: "
                "use a SQLite file (the default) or a postgresql:// store"
            )
        with _environ(  # read by the autoscaler create_app makes: group files and logs here
            KEEPGOING_GROUPS_DIR=str(self._folder / "groups"),
            KEEPGOING_GROUPS_LOG_DIR=str(self._folder / "logs"),
        ):
            app = create_app(self._store, auth=False)
        if self._extra is not None:
            self._extra(app)
        sock = bind(self._host, self._port)
        host, port = sock.getsockname()[:2]
        self._url = f"http://{host}:{port}"
        config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=5
        )
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._serve, args=(self._server, sock), name="keepgoing-demo-server"
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if self._failure is not None or not self._thread.is_alive():
                raise DemoError(f"the demo's server did not start: {self._failure!r}")
            if time.monotonic() > deadline:
                raise DemoError(f"the demo's server did not start within {timeout:.0f}s")
            time.sleep(0.02)
        self._client = Client(store=self.store_url)

    def close(self) -> None:
        """Run the cleanups (newest first), then stop the server and every replica."""
        while self._cleanups:
            cleanup = self._cleanups.pop()
            try:
                cleanup()
            except Exception:
                log.exception("a demo cleanup failed")
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=60)
            if self._thread.is_alive():
                log.warning("the demo's server did not stop within 60 s")
        self._server = None

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def on_server(self, work: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``work`` on the server's event loop (where its store is open)."""
        if self._loop is None:
            raise DemoError("the demo's server is not running")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    @property
    def store(self) -> Store:
        if self._store is None:
            raise DemoError("the demo stack is not started")
        return self._store

    def _serve(self, server: _Server, sock: Any) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            await server.serve(sockets=[sock])

        try:
            asyncio.run(main())
        except BaseException as exc:
            self._failure = exc
            log.exception("the demo's server failed")
        finally:
            sock.close()

    def _require_url(self) -> str:
        if self._url is None:
            raise DemoError("the demo's server is not running")
        return self._url

    def _running_step(self, workflow_id: str, step: str) -> int | None:
        async def find() -> int | None:
            store = self.store
            run = await store.find_run(workflow_id)
            if run is None or run.status != "running":
                return None
            rows = [
                t
                for t in await store.run_tasks(run.run_id)
                if t.name == step and t.status == "running" and t.lease_owner
            ]
            return rows[-1].cmd if rows else None

        return self.on_server(find())
