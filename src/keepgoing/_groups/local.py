"""The local backend (the default): a group's replicas are ``keepgoing worker`` processes here.

Each replica runs ``python -m keepgoing.cli worker <source> --queue <queue>`` in
the group's environment (:mod:`keepgoing._groups.envs`). Its process environment
is an allowlist (:mod:`keepgoing._groups.replica_env`): the group's ``env``, its
decrypted secrets, the store URL (in ``KEEPGOING_STORE``, never on the command
line), ``PATH`` and the locale, and ``KEEPGOING_GROUP`` /
``KEEPGOING_GROUP_REVISION`` naming it; nothing else of this process's
environment, and never the secret key. A replica's instance id is ``<group>-<pid>``.

Pinning: every revision ensured here keeps its environment and its source file
(``<workdir>/<group>/<revision>/``) until :meth:`LocalBackend.retire_revision`,
so the runs pinned to an old revision are served by its own code; the autoscaler
scales each revision on its own (:meth:`LocalBackend.set_replicas` takes the
revision), to zero while its runs wait.

Limits, and what is really enforced:

* ``memory``: ``RLIMIT_AS`` (address space) is set on the process right after it
  starts: enforced by the kernel (an allocation past it fails with
  ``MemoryError``). It limits virtual memory, which is larger than resident
  memory, so leave headroom (Python's threads reserve stack address space).
* ``cpu``: the process is pinned to ``ceil(cpu)`` CPUs with
  ``sched_setaffinity``: enforced (it can never use more cores). A fraction
  below one core is not enforced; such a replica only runs at ``nice`` 10.

A replica that fails within 10 s of starting (a file that does not import)
backs its group off: 1, 2, 4 ... up to 30 s before the next one starts.

Scaling down sends SIGTERM (a worker hands back its work and exits within its
shutdown grace); :meth:`LocalBackend.kill_instance` sends SIGKILL. Before each
signal it calls :attr:`LocalBackend.on_stop` with the cause (``scaled_down``,
``replaced``, ``drain_timeout`` when :meth:`LocalBackend.close` SIGKILLs a
replica whose grace ran out, ``killed_by_request``), so the worker's losses are
recorded with it (``_groups/worker_stops.py``).
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from keepgoing import _supervisor as supervisor
from keepgoing._backoff import backoff
from keepgoing._groups.envs import BuiltEnv, build_env
from keepgoing._groups.replica_env import ReplicaAccess, replica_environment
from keepgoing._groups.spec import GroupRevision, Instance, cpu_cores, memory_bytes
from keepgoing._groups.worker_stops import StopHook
from keepgoing._store.worker_stops import DRAIN_TIMEOUT, KILLED_BY_REQUEST, REPLACED, SCALED_DOWN
from keepgoing.errors import GroupNotFoundError

__all__ = ["LocalBackend", "kill_local_instance"]

_KEEP_EXITED = 20
_QUICK = 10.0  # a replica that fails sooner than this after starting backs its group off
_MAX_BACKOFF = 30.0


@dataclass
class _Replica:
    instance_id: str
    revision: int
    proc: subprocess.Popen[bytes]
    started_at: float
    ended_at: float | None = None
    stopping: bool = False


class LocalBackend:
    """Replicas as child processes of this process.

    Args:
        store_url: the store the workers use (a file or PostgreSQL URL: never memory; on
            PostgreSQL, best a worker role's: ``docs/groups.md``).
        workdir: where each revision's source file is written.
        progress: called with each line of an environment build.
        log_dir: where each replica's output goes (default: inherited).
    """

    name = "local"

    def __init__(
        self,
        store_url: str,
        *,
        workdir: Path,
        progress: Callable[[str], None] = lambda line: None,
        log_dir: Path | None = None,
        worker_args: tuple[str, ...] = (),
    ) -> None:
        self.store_url = store_url
        #: How replicas reach keepgoing (the only such values they are given).
        self.access = ReplicaAccess(store_url)
        self.workdir = workdir
        self.progress = progress
        self.log_dir = log_dir
        self.worker_args = worker_args
        self._lock = threading.Lock()
        self._revisions: dict[str, dict[int, GroupRevision]] = {}
        self._current: dict[str, int] = {}
        self._envs: dict[tuple[str, int], BuiltEnv] = {}
        self._files: dict[tuple[str, int], Path] = {}
        self._secrets: dict[tuple[str, int], dict[str, str]] = {}
        self._access: dict[tuple[str, int], ReplicaAccess] = {}
        self._replicas: dict[str, list[_Replica]] = {}
        self._exited: dict[str, list[_Replica]] = {}
        # failures, next spawn (monotonic), per group revision
        self._backoff: dict[tuple[str, int], tuple[int, float]] = {}
        self._cpus = sorted(os.sched_getaffinity(0))
        self._next_cpu = 0
        #: Told of each replica this backend stops on purpose, before its signal.
        self.on_stop: StopHook | None = None

    # -- GroupBackend --------------------------------------------------------------
    def ensure_group(self, revision: GroupRevision) -> None:
        key = (revision.group, revision.revision)
        with self._lock:
            if key in self._envs:
                self._current[revision.group] = max(
                    revision.revision, self._current.get(revision.group, 0)
                )
                return
        built = build_env(
            revision.image,
            revision.dependencies,
            progress=lambda line: self.progress(f"[{revision.group}] {line}"),
        )
        folder = self.workdir / revision.group / str(revision.revision)
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / Path(revision.filename).name
        source.write_text(revision.source)
        with self._lock:
            self._revisions.setdefault(revision.group, {})[revision.revision] = revision
            self._envs[key] = built
            self._files[key] = source
            self._current[revision.group] = max(
                revision.revision, self._current.get(revision.group, 0)
            )

    def set_secrets(
        self, group: str, secrets: Mapping[str, str], revision: int | None = None
    ) -> None:
        with self._lock:
            rev = self._current.get(group, 0) if revision is None else revision
            self._secrets[(group, rev)] = dict(secrets)

    def set_gateway_access(self, group: str, revision: int, pairs: Mapping[str, str]) -> None:
        """The server URL and gateway key the replicas of ``revision`` started from now
        on get (``KEEPGOING_URL``, ``KEEPGOING_TOKEN``)."""
        with self._lock:
            self._access[(group, revision)] = ReplicaAccess(
                self.store_url,
                server_url=pairs.get("KEEPGOING_URL", ""),
                gateway_key=pairs.get("KEEPGOING_TOKEN", ""),
            )

    def revisions(self, group: str) -> list[int]:
        """The revisions of ``group`` whose environment and source are kept here."""
        with self._lock:
            return sorted(self._revisions.get(group, {}))

    def set_replicas(self, group: str, replicas: int, revision: int | None = None) -> None:
        with self._lock:
            self._reap(group)
            rev = self._current.get(group) if revision is None else revision
            if revision is None:
                # No revision named: the caller runs the current one only, so the replicas
                # of older revisions are replaced (the autoscaler names each revision it
                # keeps for pinned runs instead).
                for replica in self._replicas.get(group, []):
                    if replica.revision != rev and not replica.stopping:
                        replica.stopping = True
                        self._stop(group, replica, signal.SIGTERM, REPLACED)
            mine = [r for r in self._replicas.get(group, []) if r.revision == rev]
            live = [r for r in mine if not r.stopping]
            if replicas > len(live) and (rev is None or rev not in self._revisions.get(group, {})):
                what = "no revision" if rev is None else f"no revision {rev}"
                raise GroupNotFoundError(f"group {group!r} has {what} here to run")
            assert rev is not None or replicas == 0
            slot = (group, rev or 0)
            if len(live) < replicas and time.monotonic() < self._backoff.get(slot, (0, 0.0))[1]:
                return  # its replicas keep failing at start: wait before the next one
            while len(live) < replicas:
                replica = self._spawn(group, rev or 0)
                self._replicas.setdefault(group, []).append(replica)
                live.append(replica)
            for replica in sorted(live, key=lambda r: r.started_at, reverse=True)[
                : max(0, len(live) - replicas)
            ]:
                replica.stopping = True
                self._stop(group, replica, signal.SIGTERM, SCALED_DOWN)

    def retire_revision(self, group: str, revision: int) -> None:
        """Stop ``revision``'s replicas and forget its environment and source file."""
        with self._lock:
            for replica in self._replicas.get(group, []):
                if replica.revision == revision and not replica.stopping:
                    replica.stopping = True  # a newer revision took over its last run
                    self._stop(group, replica, signal.SIGTERM, REPLACED)
            self._revisions.get(group, {}).pop(revision, None)
            self._envs.pop((group, revision), None)
            self._secrets.pop((group, revision), None)
            self._access.pop((group, revision), None)
            self._backoff.pop((group, revision), None)
            source = self._files.pop((group, revision), None)
        if source is not None:
            shutil.rmtree(source.parent, ignore_errors=True)

    def list_instances(self, group: str) -> list[Instance]:
        with self._lock:
            self._reap(group)
            host = socket.gethostname()
            return [
                Instance(
                    instance_id=r.instance_id,
                    group=group,
                    revision=r.revision,
                    state="running" if r.proc.returncode is None else "exited",
                    started_at=r.started_at,
                    pid=r.proc.pid,
                    host=host,
                    ended_at=r.ended_at,
                    exit_status=r.proc.returncode,
                )
                for r in (*self._replicas.get(group, []), *self._exited.get(group, []))
            ]

    def kill_instance(self, group: str, instance_id: str) -> None:
        with self._lock:
            self._reap(group)
            for replica in self._replicas.get(group, []):
                if replica.instance_id == instance_id:
                    self._stop(group, replica, signal.SIGKILL, KILLED_BY_REQUEST)
                    return
        kill_local_instance(group, instance_id)

    # -- this process --------------------------------------------------------------
    def running(self, group: str) -> int:
        with self._lock:
            self._reap(group)
            return sum(not r.stopping for r in self._replicas.get(group, []))

    def close(self, grace: float = 15.0) -> None:
        """Stop every replica (SIGTERM, then SIGKILL after ``grace`` seconds)."""
        with self._lock:
            replicas = [(g, r) for g, group in self._replicas.items() for r in group]
        for group, replica in replicas:
            if not replica.stopping:
                replica.stopping = True
                self._stop(group, replica, signal.SIGTERM, SCALED_DOWN)
        deadline = time.monotonic() + grace
        for group, replica in replicas:
            try:
                replica.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._stop(group, replica, signal.SIGKILL, DRAIN_TIMEOUT)
                replica.proc.wait()

    def _stop(self, group: str, replica: _Replica, sig: int, cause: str) -> None:
        """Signal ``replica`` on purpose, telling :attr:`on_stop` why first."""
        if replica.proc.poll() is not None:
            return
        hook = self.on_stop
        settle = hook(group, replica.proc.pid, socket.gethostname(), cause) if hook else None
        sent = _signal(replica.proc, sig)
        if settle is not None:
            settle(sent)

    def _reap(self, group: str) -> None:
        alive, now = [], time.time()
        for replica in self._replicas.get(group, []):
            if replica.proc.poll() is None:
                alive.append(replica)
            else:
                replica.ended_at = replica.ended_at or now
                self._exited.setdefault(group, []).append(replica)
                slot = (group, replica.revision)
                failures, _ = self._backoff.get(slot, (0, 0.0))
                if replica.proc.returncode not in (0, -signal.SIGTERM, -signal.SIGKILL) and (
                    replica.ended_at - replica.started_at < _QUICK
                ):
                    delay = backoff(failures, base=1.0, cap=_MAX_BACKOFF, jitter=0.0)
                    self._backoff[slot] = (failures + 1, time.monotonic() + delay)
                elif replica.ended_at - replica.started_at >= _QUICK:
                    self._backoff.pop(slot, None)
        self._replicas[group] = alive
        self._exited[group] = self._exited.get(group, [])[-_KEEP_EXITED:]

    def _spawn(self, group: str, number: int) -> _Replica:
        key = (group, number)
        revision, built = self._revisions[group][number], self._envs[key]
        names = {
            "KEEPGOING_GROUP": group,
            "KEEPGOING_GROUP_REVISION": str(number),
            # The replica stops when this process dies, even by SIGKILL (_supervisor.py).
            supervisor.ENV: str(os.getpid()),
        }
        if revision.task_queues:
            names["KEEPGOING_TASK_QUEUES"] = ",".join(
                f"{task}={queue}" for task, queue in sorted(revision.task_queues.items())
            )
        env = replica_environment(
            python=built.python,
            image_env=built.env,
            group_env=revision.env,
            secrets=self._secrets.get(key, {}),
            access=self._access.get(key, self.access),
            names=names,
            home=self.workdir / group / str(number) / "home",
        )
        argv = [
            built.python,
            "-m",
            "keepgoing.cli",
            "worker",
            str(self._files[key]),
            "--queue",
            revision.task_queue,
            "--concurrency",
            str(revision.concurrency),
            *self.worker_args,
        ]
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{group}.log", "ab")  # noqa: SIM115 (the child holds it)
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=built.cwd or str(self._files[key].parent),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                start_new_session=True,
            )
        finally:
            if out is not None:
                out.close()
        self._limit(proc.pid, revision)
        return _Replica(f"{group}-{proc.pid}", revision.revision, proc, time.time())

    def _limit(self, pid: int, revision: GroupRevision) -> None:
        try:
            if revision.memory is not None:
                size = memory_bytes(revision.memory)
                resource.prlimit(pid, resource.RLIMIT_AS, (size, size))
            if revision.cpu is not None:
                cores = cpu_cores(revision.cpu)
                count = max(1, min(len(self._cpus), math.ceil(cores)))
                start = self._next_cpu
                self._next_cpu = (self._next_cpu + count) % len(self._cpus)
                chosen = {self._cpus[(start + i) % len(self._cpus)] for i in range(count)}
                os.sched_setaffinity(pid, chosen)
                if cores < 1:
                    os.setpriority(os.PRIO_PROCESS, pid, 10)
        except (ProcessLookupError, PermissionError, OSError):
            pass  # it already exited: its exit status says why


def kill_local_instance(group: str, instance_id: str) -> None:
    """SIGKILL a replica of ``group`` on this machine, whoever started it: its pid is in
    its id, and its environment must name the group (a reused pid is never killed).

    Raises:
        GroupNotFoundError: no such live replica here.
    """
    pid = _pid_of(group, instance_id)
    if pid is None or _environ_value(pid, "KEEPGOING_GROUP") != group:
        raise GroupNotFoundError(f"group {group!r} has no running instance {instance_id!r}")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        raise GroupNotFoundError(
            f"group {group!r} has no running instance {instance_id!r}"
        ) from None


def _signal(proc: subprocess.Popen[bytes], sig: int) -> bool:
    """Send ``sig`` to a child still running; whether it was sent."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
            return True
    return False


def _pid_of(group: str, instance_id: str) -> int | None:
    prefix = f"{group}-"
    tail = instance_id[len(prefix) :] if instance_id.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


def _environ_value(pid: int, name: str) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        key, _, value = entry.partition(b"=")
        if key.decode(errors="replace") == name:
            return value.decode(errors="replace")
    return None


if sys.platform != "linux":  # pragma: no cover
    raise ImportError("the local group backend needs Linux (affinity, prlimit, /proc)")
