"""The load of the hostile chaos test: five steps per run, some of them hostile.

Step ``n`` of run ``r`` is, by ``(r + n) % 12``: 3 a sync ``sys.exit``, 6 a sync
body that hangs past its timeout, 9 a C call that holds the GIL for 2 s (longer
than a lease), anything else a plain step. Every body appends one line to the
effects log (``KG_CHAOS_DIR``) when it starts: ``<cmd-key> <attempt> <pid>``.
The workflow catches the steps that fail for good, so every run completes.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time

import keepgoing
from keepgoing._runtime.context import current_task_context

_PATTERN = re.compile(r"(a+)+$")
_never = threading.Event()


def kind_of(run: int, n: int) -> str:
    return {3: "exit", 6: "hang", 9: "gil"}.get((run + n) % 12, "plain")


def _effect(run: int, n: int) -> None:
    ctx = current_task_context()
    assert ctx is not None
    line = f"{run}-{n} {ctx.attempt} {os.getpid()}\n"
    fd = os.open(os.path.join(os.environ["KG_CHAOS_DIR"], "effects.log"),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # fmt: skip
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _hold_gil(seconds: float) -> None:
    began = time.perf_counter()
    unit = min(_timed(16) for _ in range(5))  # the fastest: the least disturbed by load
    length = 16 + max(0, math.ceil(math.log2(seconds / unit)))
    while time.perf_counter() - began < seconds:
        _PATTERN.match("a" * length + "b")


def _timed(length: int) -> float:
    began = time.perf_counter()
    _PATTERN.match("a" * length + "b")
    return max(time.perf_counter() - began, 1e-6)


@keepgoing.task(retries=1, timeout="20s")
def step(run: int, n: int) -> int:
    _effect(run, n)
    time.sleep(0.02)
    return run * 10 + n


@keepgoing.task(retries=1, timeout="20s")
def exits(run: int, n: int) -> int:
    _effect(run, n)
    sys.exit(3)


@keepgoing.task(retries=1, timeout="0.5s")
def hangs(run: int, n: int) -> int:
    _effect(run, n)
    _never.wait()
    return -1


# Generous: on a loaded machine several GIL holders in one worker take turns; a timeout
# (the deadline taking a living worker's attempt, as it should) is then retried.
@keepgoing.task(retries=1, timeout="60s")
def holds_gil(run: int, n: int) -> int:
    _effect(run, n)
    _hold_gil(2.0)
    return run * 10 + n


_TASKS = {"plain": step, "exit": exits, "hang": hangs, "gil": holds_gil}


@keepgoing.workflow
async def hostile_mix(run: int) -> list[int]:
    results = []
    for n in range(5):
        try:
            results.append(await _TASKS[kind_of(run, n)](run, n))
        except keepgoing.TaskFailedError:
            results.append(-1)
    return results
