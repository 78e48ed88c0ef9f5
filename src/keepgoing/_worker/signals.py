"""Why a ``keepgoing worker`` got SIGTERM or SIGINT: from a task of its own, or from outside.

A task that signals its own worker (``os.kill(os.getpid(), SIGTERM)``,
``os.killpg(0, SIGINT)``, ``signal.pthread_kill`` on one of its threads) makes
the worker drain and hand its attempts back. That must count against the
task's ``max_worker_losses``, or the step runs again without limit. The worker
learns who sent the signal through a Python audit hook (PEP 578), which sees
those calls in the calling thread, before the signal goes out, with the
attempt's task context: :func:`watch` installs it, :func:`stop_for` turns the
signals noted since into the stop the worker records before it hands anything
back (``signalled_by_task``, traced to the attempt; ``shutdown`` for a signal
from outside: a terminal, a service manager, a container runtime).

Not seen: a signal sent by a child process the task started, or through
``ctypes``; those count as from outside. A SIGTERM the task raises in its own
thread (``signal.raise_signal``) is its thread's alone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

from keepgoing._runtime.context import current_task_context
from keepgoing._store.records import WorkerStop
from keepgoing._store.worker_stops import SHUTDOWN, SIGNALLED_BY_TASK

__all__ = ["Sent", "stop_for", "taken", "watch"]

#: The signals a worker stops on (gracefully).
STOPPING = frozenset({signal.SIGTERM, signal.SIGINT})
_WATCHED = frozenset({"os.kill", "os.killpg", "signal.pthread_kill"})


@dataclass(frozen=True)
class Sent:
    """A stopping signal an attempt sent to its own worker's process."""

    worker_id: str
    run_id: str
    cmd: int
    signum: int


_lock = threading.Lock()
_sent: list[Sent] = []
_installed = False


def watch() -> None:
    """Note every stopping signal a task attempt sends to this process (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    sys.addaudithook(_hook)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event not in _WATCHED:  # every audited event comes here: leave at once
        return
    try:
        target, signum = int(args[0]), int(args[1])
    except (IndexError, TypeError, ValueError):
        return
    if signum not in STOPPING or not _hits_this_process(event, target):
        return
    ctx = current_task_context()
    if ctx is None:
        return
    with _lock:
        _sent.append(Sent(ctx.worker_id, ctx.run_id, ctx.cmd, signum))


def _hits_this_process(event: str, target: int) -> bool:
    if event == "signal.pthread_kill":
        return True  # a thread of this process
    group = os.getpgrp()
    if event == "os.killpg":
        return target in (0, group)
    return target in (os.getpid(), 0, -group)


def taken() -> list[Sent]:
    """The signals noted since the last call (and forgets them)."""
    with _lock:
        found = list(_sent)
        _sent.clear()
    return found


def stop_for(worker_id: str, signum: int, sent: list[Sent]) -> WorkerStop:
    """The stop the worker records for a ``signum`` it received, given what its own
    attempts sent (:func:`taken`)."""
    name = signal.Signals(signum).name
    mine = [s for s in sent if s.worker_id == worker_id]
    if not mine:
        return WorkerStop(
            worker_id, SHUTDOWN, "", "", "signal", f"{name} from outside the worker's own code"
        )
    attempts = sorted({(s.run_id, s.cmd) for s in mine})
    first = mine[0]
    # Traced to one attempt when one sent it; several: each of them counts it.
    run_id, cmd = attempts[0] if len(attempts) == 1 else (None, None)
    names = ", ".join(f"run {r} step {c}" for r, c in attempts)
    return WorkerStop(
        worker_id,
        SIGNALLED_BY_TASK,
        "task",
        f"run {first.run_id} step {first.cmd}" if len(attempts) == 1 else names,
        "signal",
        f"{signal.Signals(first.signum).name} sent by {names}",
        blame_run_id=run_id,
        blame_cmd=cmd,
    )
