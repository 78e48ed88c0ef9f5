"""Tasks a hostile user writes: they call sys.exit, raise KeyboardInterrupt, kill their
process, hold the GIL for seconds, hang forever in a thread, raise exceptions that
cannot be described, or raise UncertainOutcome from inside a TaskGroup."""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import sys
import threading
import time

from kg_effects import attempt, record, wait_for_marker

import keepgoing

_PATTERN = re.compile(r"(a+)+$")


def hold_gil(seconds: float) -> None:
    """Hold the GIL for at least ``seconds`` in one C call (a regex that backtracks).

    Each extra ``a`` doubles the time; the length is measured on this machine, and
    the call repeated if it was too short.
    """
    began = time.perf_counter()
    unit = min(_timed(16) for _ in range(5))  # the fastest: the least disturbed by load
    length = 16 + max(0, math.ceil(math.log2(seconds / unit)))
    while time.perf_counter() - began < seconds:
        _PATTERN.match("a" * length + "b")


def _timed(length: int) -> float:
    began = time.perf_counter()
    _PATTERN.match("a" * length + "b")
    return max(time.perf_counter() - began, 1e-6)


@keepgoing.task(retries=1)
def exits_sync(key: str) -> str:
    record("start", "exits_sync", key, attempt())
    sys.exit(3)


@keepgoing.task(retries=1)
async def interrupts_async(key: str) -> str:
    record("start", "interrupts_async", key, attempt())
    raise KeyboardInterrupt("stop right there")


@keepgoing.task(retries=1)
def raises_system_exit(key: str) -> str:
    record("start", "raises_system_exit", key, attempt())
    raise SystemExit("bye")


@keepgoing.task(max_worker_losses=0)
def kills_process(key: str) -> str:
    record("start", "kills_process", key, attempt())
    os._exit(9)


@keepgoing.task(retry_delay="50ms")  # max_worker_losses: the default, 3
def kills_its_worker(key: str) -> str:
    record("start", "kills_its_worker", key, attempt())
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"


@keepgoing.task(timeout="60s")
def holds_gil(key: str, seconds: float) -> str:
    n = attempt()
    record("start", "holds_gil", key, n)
    hold_gil(seconds)
    record("done", "holds_gil", key, n)
    return f"held the GIL for {seconds}s"


_never = threading.Event()


@keepgoing.task(timeout="0.3s")
def hangs(key: str) -> str:
    record("start", "hangs", key, attempt())
    _never.wait()  # a thread cannot be cancelled: it stays hung after the timeout
    return "never"


@keepgoing.task(timeout="60s")
def waits(key: str) -> str:
    record("start", "waits", key, attempt())
    wait_for_marker(f"release-{key}")
    return f"released {key}"


@keepgoing.task(timeout="5s")
def healthy(key: str) -> str:
    n = attempt()
    record("start", "healthy", key, n)
    record("done", "healthy", key, n)
    return f"healthy {key}"


class _Unprintable(Exception):
    """``str()`` raises; so does ``repr()``."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


class _NotText(Exception):
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]  # noqa: PLE0307


class _ExitsWhenPrinted(Exception):
    def __str__(self) -> str:
        raise SystemExit("printing me exits")


@keepgoing.task()  # retries=0: one attempt, then the step fails
def unprintable(key: str) -> str:
    record("start", "unprintable", key, attempt())
    raise _Unprintable()


@keepgoing.task()
def not_text(key: str) -> str:
    record("start", "not_text", key, attempt())
    raise _NotText()


@keepgoing.task()
async def exits_when_printed(key: str) -> str:
    record("start", "exits_when_printed", key, attempt())
    raise _ExitsWhenPrinted()


@keepgoing.task(retries=3)
async def uncertain_in_group(key: str) -> str:
    record("start", "uncertain_in_group", key, attempt())

    async def write() -> None:
        raise keepgoing.UncertainOutcome(f"the write for {key} may have happened")

    async def other() -> None:
        raise ValueError("and something else went wrong")

    async with asyncio.TaskGroup() as group:
        group.create_task(write())
        group.create_task(other())
    return "never"


@keepgoing.workflow
async def run_one(task: str, key: str) -> str:
    steps = {
        "exits_sync": exits_sync,
        "interrupts_async": interrupts_async,
        "raises_system_exit": raises_system_exit,
        "kills_process": kills_process,
        "kills_its_worker": kills_its_worker,
        "hangs": hangs,
        "healthy": healthy,
        "waits": waits,
        "unprintable": unprintable,
        "not_text": not_text,
        "exits_when_printed": exits_when_printed,
        "uncertain_in_group": uncertain_in_group,
    }
    return str(await steps[task](key))


@keepgoing.workflow
async def run_gil(key: str, seconds: float) -> str:
    return await holds_gil(key, seconds)


@keepgoing.workflow
async def healthy_after_hangs(key: str) -> str:
    return await healthy(key)
