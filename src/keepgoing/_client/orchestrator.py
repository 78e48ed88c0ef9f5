"""The background orchestrator: deploy-then-trigger with nothing else started.

In store mode (no server), a deployed group's replicas are started by an autoscaler
and its runs' timers fired by the orchestrator services; ``keepgoing server``,
``keepgoing dev`` and ``keepgoing groups serve`` run both. When none of them runs
for a store, the first deploy, or the first trigger on a group's queue, starts one
in the background (:func:`ensure_orchestrator`): ``keepgoing orchestrator run`` in a
session of its own, which runs the autoscaler and the orchestrator services on the
store, writes its log under ``.keepgoing/orchestrator/``, and stops itself once the
store has had no work for a stretch (:data:`DEFAULT_IDLE` seconds): no group with a
replica, no open run on a group's queue (a run that waits on a timer, a message or
an event is open), nothing queued or running. A server that takes the store's
autoscaler lease meanwhile makes it stop too.

Found again by the next call, in any process: the running orchestrator holds an
exclusive ``flock`` on ``<key>.lock`` for its whole life (the kernel frees it when
the process dies, however it dies), and writes ``<key>.json`` (its pid, store and
log) beside it; ``<key>`` is a hash of the store's URL. A starter takes
``<key>.start.lock`` while it looks and starts, so two callers at once start one.

``KEEPGOING_ORCHESTRATOR=off`` turns the background start off (a deploy then only
warns, as before); ``KEEPGOING_ORCHESTRATOR_IDLE`` sets the idle stretch.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from keepgoing._clock import system_clock
from keepgoing._groups.autoscaler import SERVICE
from keepgoing._groups.service import group_autoscaler, worker_store_url
from keepgoing._schedules.service import Scheduler
from keepgoing._store.protocol import Store
from keepgoing._store.url import PROJECT_FOLDER, project_folder, redact_url
from keepgoing._worker.orchestrator import Orchestrator
from keepgoing.errors import ConfigurationError, StoreError

__all__ = [
    "DEFAULT_IDLE",
    "OrchestratorState",
    "enabled",
    "ensure_orchestrator",
    "find_orchestrator",
    "idle_seconds",
    "serve_in_background",
    "shareable_url",
    "state_folder",
    "stop_orchestrator",
    "store_is_idle",
    "TriggerWatch",
]

log = logging.getLogger("keepgoing.orchestrator")

#: Seconds with no work after which a background orchestrator stops itself.
DEFAULT_IDLE = 300.0
_START_WAIT = 15.0  # seconds a starter waits for the new process to hold its lock
_CHECK = 2.0  # seconds between idle checks
_DISPLACED = 30.0  # seconds another autoscaler may hold the lease before we leave


@dataclass(frozen=True)
class OrchestratorState:
    """A background orchestrator of one store, as its files describe it."""

    running: bool
    pid: int | None
    store: str  # redacted
    folder: Path
    log: Path
    started_at: float | None = None
    idle_seconds: float | None = None
    started_now: bool = False  # this call started it


def enabled() -> bool:
    """Whether a deploy or trigger may start a background orchestrator."""
    return os.environ.get("KEEPGOING_ORCHESTRATOR", "on").strip().lower() not in (
        "off",
        "0",
        "no",
        "false",
    )


def idle_seconds(value: float | None = None) -> float:
    """The idle stretch: ``value``, else ``KEEPGOING_ORCHESTRATOR_IDLE``, else 300 s.

    Raises:
        ConfigurationError: not a positive number of seconds.
    """
    text = os.environ.get("KEEPGOING_ORCHESTRATOR_IDLE") if value is None else None
    try:
        seconds = float(text) if text else (DEFAULT_IDLE if value is None else float(value))
    except ValueError:
        raise ConfigurationError(
            f"KEEPGOING_ORCHESTRATOR_IDLE must be a number of seconds, not {text!r}"
        ) from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ConfigurationError(f"the idle stretch must be positive seconds, not {seconds!r}")
    return seconds


def _key(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


def state_folder(url: str) -> Path:
    """Where the background orchestrator of store ``url`` keeps its files: the
    ``.keepgoing/`` folder that holds a SQLite store, else the project's."""
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :].partition("?")[0])
        if path.parent.name == PROJECT_FOLDER:
            return path.parent.absolute() / "orchestrator"
    return project_folder() / "orchestrator"


def _paths(url: str, folder: Path | None) -> tuple[Path, Path, Path, Path]:
    stem = (folder or state_folder(url)) / _key(url)
    return (
        stem.with_suffix(".lock"),
        stem.with_suffix(".start.lock"),
        stem.with_suffix(".json"),
        stem.with_suffix(".log"),
    )


def _held(lock: Path) -> bool:
    """Whether a live process holds ``lock`` (taking it for an instant if nobody does)."""
    if not lock.exists():
        return False
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def find_orchestrator(url: str, *, folder: Path | None = None) -> OrchestratorState:
    """The background orchestrator of ``url``, running or not (its files say which)."""
    lock, _, state, logfile = _paths(url, folder)
    running = _held(lock)
    found: dict[str, Any] = {}
    if running:
        with contextlib.suppress(OSError, ValueError):
            found = json.loads(state.read_text(encoding="utf-8"))
    return OrchestratorState(
        running=running,
        pid=int(found["pid"]) if running and "pid" in found else None,
        store=redact_url(url),
        folder=lock.parent,
        log=logfile,
        started_at=found.get("started_at"),
        idle_seconds=found.get("idle_seconds"),
    )


def ensure_orchestrator(
    url: str, *, folder: Path | None = None, idle: float | None = None
) -> OrchestratorState:
    """The background orchestrator of store ``url``: the one running, or one started now.

    Raises:
        StoreError: the process it started did not come up (its log is named).
    """
    lock, start_lock, _, logfile = _paths(url, folder)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(start_lock, "a+") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one starter at a time; held while it looks
        found = find_orchestrator(url, folder=folder)
        if found.running:
            return found
        proc = _start(url, lock.parent, logfile, idle_seconds(idle))
        deadline = time.monotonic() + _START_WAIT
        while not _held(lock):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise StoreError(
                    f"the background orchestrator for {redact_url(url)} did not start "
                    f"(exit {proc.poll()}); see {logfile}"
                )
            time.sleep(0.02)
    found = find_orchestrator(url, folder=folder)
    log.info(
        "started a background orchestrator (pid %s) for %s: log %s",
        proc.pid,
        redact_url(url),
        logfile,
    )
    return OrchestratorState(**{**found.__dict__, "started_now": True})


def _start(url: str, folder: Path, logfile: Path, idle: float) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    # Its groups' files and replicas' logs live beside it, wherever it was started from.
    env.setdefault("KEEPGOING_GROUPS_DIR", str(folder.parent / "groups"))
    env.setdefault("KEEPGOING_GROUPS_LOG_DIR", str(folder / "logs"))
    argv = [sys.executable, "-m", "keepgoing.cli", "orchestrator", "run", "--store", url]
    argv += ["--idle", repr(idle), "--folder", str(folder)]
    with open(logfile, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # not in the caller's process group: Ctrl-C spares it
            cwd=folder.parent,
        )
    # Reaped by this process if it outlives the orchestrator (no zombie), else by init.
    threading.Thread(target=proc.wait, name="orchestrator-reaper", daemon=True).start()
    return proc


def stop_orchestrator(url: str, *, folder: Path | None = None, timeout: float = 60.0) -> bool:
    """SIGTERM the background orchestrator of ``url`` and wait for it to end; False when
    none was running.

    Raises:
        TimeoutError: it still held its lock after ``timeout`` seconds.
    """
    found = find_orchestrator(url, folder=folder)
    if not found.running or found.pid is None:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    lock = _paths(url, folder)[0]
    deadline = time.monotonic() + timeout
    while _held(lock):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the background orchestrator (pid {found.pid}) is still running")
        time.sleep(0.05)
    return True


async def store_is_idle(store: Store, now: float) -> bool:
    """No group has a replica or an instance running, and no run on a group's queue is
    open (waiting ones included), queued or running."""
    groups = await store.list_groups()
    if any(g.replicas > 0 for g in groups):
        return False
    loads = await store.group_loads([g.task_queue for g in groups], now) if groups else []
    if any(x.queued or x.running or x.open_runs for x in loads):
        return False
    for group in groups:
        if any(i.state == "running" for i in await store.list_instances(group.name)):
            return False
    return True


@contextlib.contextmanager
def _life_lock(lock: Path) -> Iterator[IO[str] | None]:
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield handle


async def serve_in_background(
    store: Store, url: str, *, folder: Path | None = None, idle: float | None = None
) -> int:
    """What ``keepgoing orchestrator run`` does: hold the lock, run the autoscaler and
    the orchestrator services on the opened ``store`` until the store has been idle for
    the stretch (or SIGTERM); 0 when it served, 1 when another one already runs."""
    lock, _, state, _ = _paths(url, folder)
    stretch = idle_seconds(idle)
    with _life_lock(lock) as held:
        if held is None:
            log.info("a background orchestrator already runs for %s", redact_url(url))
            return 1
        scaler = group_autoscaler(store)
        if scaler is None:
            raise ConfigurationError("a store in memory cannot be shared with replicas")
        services = Orchestrator(store)
        schedules = Scheduler(store)
        body = {
            "pid": os.getpid(),
            "store": redact_url(url),
            "started_at": system_clock.now(),
            "idle_seconds": stretch,
        }
        state.write_text(json.dumps(body), encoding="utf-8")
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        log.info("background orchestrator %s for %s (idle stretch %gs)", os.getpid(), url, stretch)
        tasks = [
            asyncio.create_task(scaler.run()),
            asyncio.create_task(services.run()),
            asyncio.create_task(schedules.run()),
        ]
        try:
            await _watch(store, scaler.owner, stretch, stopping)
        finally:
            scaler.request_stop()
            services.request_stop()
            schedules.request_stop()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(OSError):
                state.unlink()
            log.info("background orchestrator %s stopped", os.getpid())
    return 0


async def _watch(store: Store, owner: str, stretch: float, stopping: asyncio.Event) -> None:
    """Return once the store has been idle for ``stretch`` seconds, another autoscaler has
    held the lease for a while, or ``stopping`` is set."""
    idle_since: float | None = None
    other_since: float | None = None
    while not stopping.is_set():
        now = system_clock.now()
        try:
            holder = await store.service_holder(SERVICE, now)
            quiet = await store_is_idle(store, now)
        except StoreError as exc:
            log.warning("idle check failed (%s); retrying", exc)
            holder, quiet = owner, False
        if holder is not None and holder != owner:
            other_since = other_since if other_since is not None else now
            if now - other_since >= _DISPLACED:
                log.info("autoscaler %s scales this store now; stopping", holder)
                return
        else:
            other_since = None
        idle_since = (idle_since if idle_since is not None else now) if quiet else None
        if idle_since is not None and now - idle_since >= stretch:
            log.info("no work for %.0fs; stopping", now - idle_since)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=min(_CHECK, stretch))


def shareable_url(store: Store) -> str | None:
    """The URL a background process opens ``store`` with (None: in memory)."""
    return worker_store_url(store)


class TriggerWatch:
    """A store client's side of the rule: a trigger on a group's queue, on a store that
    nothing scales, starts the store's background orchestrator.

    It reads the groups at most every :data:`RECHECK` seconds and, once it found the
    autoscaler's lease held (or started one), looks again only after as long, so a
    producer's triggers cost no store read in between.
    """

    RECHECK = 10.0

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queues: frozenset[str] = frozenset()
        self._queues_at = -self.RECHECK
        self._fine_until = 0.0

    async def started(self, queue: str) -> None:
        """After a run was started on ``queue``."""
        if not enabled():
            return
        now = time.monotonic()
        if queue not in self._queues and now - self._queues_at >= self.RECHECK:
            groups = await self.store.list_groups()
            # Only local groups: a cluster's are scaled by KEDA, never from this machine.
            self._queues = frozenset(g.task_queue for g in groups if g.backend == "local")
            self._queues_at = now
        if queue not in self._queues or now < self._fine_until:
            return
        url = shareable_url(self.store)
        if url is None:
            return
        if await self.store.service_holder(SERVICE, system_clock.now()) is None:
            found = await asyncio.to_thread(ensure_orchestrator, url)
            if found.started_now:
                print(
                    f"started a background orchestrator (pid {found.pid}) to run queue "
                    f"{queue}'s group; log {found.log}",
                    file=sys.stderr,
                )
        self._fine_until = time.monotonic() + self.RECHECK
