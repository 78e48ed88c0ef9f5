"""The load of the self-stopping chaos test: five steps per run, some of them hostile
in the ways that once made a step run forever or a decision count twice.

Step ``n`` of run ``r`` is (:func:`kind_of`): a task that sends its own worker
SIGTERM or SIGINT and keeps running past the worker's drain (``signal``), one
whose exception cannot be printed (``unprintable``), one that raises
``UncertainOutcome`` from inside an ``asyncio.TaskGroup`` (``uncertain``: the
test's reviewers approve it), a sync ``sys.exit`` (``exit``), or a plain step.
Every body appends ``<run>-<n> <attempt> <pid>`` to the effects log
(``KG_CHAOS_DIR``) when it starts. The workflow catches the steps that fail for
good, so every run completes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import keepgoing
from keepgoing._runtime.context import current_task_context


def kind_of(run: int, n: int) -> str:
    if run % 6 == 5 and n == 3:
        return "signal"
    if run % 4 == 2 and n == 2:
        return "uncertain"
    if n and (run + n) % 6 == 1:
        return "unprintable"
    if n and (run + n) % 6 == 4:
        return "exit"
    return "plain"


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


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception has no text")


@keepgoing.task(retries=1, timeout="20s")
def step(run: int, n: int) -> int:
    _effect(run, n)
    time.sleep(0.2)
    return run * 10 + n


@keepgoing.task(retries=1, timeout="20s")
def unprintable(run: int, n: int) -> int:
    _effect(run, n)
    raise Unprintable()


@keepgoing.task(retries=1, timeout="20s")
def exits(run: int, n: int) -> int:
    _effect(run, n)
    sys.exit(3)


@keepgoing.task(retries=3, timeout="20s")
async def uncertain(run: int, n: int) -> int:
    _effect(run, n)

    async def write() -> None:
        raise keepgoing.UncertainOutcome(f"the write of {run}-{n} may have happened")

    async with asyncio.TaskGroup() as group:
        group.create_task(write())
    return -2


@keepgoing.task(timeout="60s", retry_delay="50ms", max_worker_losses=1)
def signals_its_worker(run: int, n: int) -> int:
    _effect(run, n)
    os.kill(os.getpid(), signal.SIGINT if run % 2 else signal.SIGTERM)
    time.sleep(30)  # past the drain: handed back
    return run * 10 + n


_TASKS = {
    "plain": step,
    "unprintable": unprintable,
    "exit": exits,
    "uncertain": uncertain,
    "signal": signals_its_worker,
}


@keepgoing.workflow
async def defiant_mix(run: int) -> list[int]:
    results = []
    for n in range(5):
        try:
            results.append(await _TASKS[kind_of(run, n)](run, n))
        except keepgoing.TaskFailedError:
            results.append(-1)
    return results
