"""Telling a SIGTERM a task sent its own worker from one sent from outside
(``_worker/signals.py``): the audit hook notes the attempt that sent it, and the
stop the worker records for it is traced to that attempt."""

from __future__ import annotations

import os
import signal

import pytest

from keepgoing._runtime.context import TaskContext, task_context
from keepgoing._worker import signals


@pytest.fixture(autouse=True)
def _clean() -> None:
    signals.taken()  # nothing left from another test


def _as_attempt(run_id: str = "r1", cmd: int = 3, worker: str = "w1") -> object:
    return task_context.set(TaskContext(run_id, "wf", cmd, "t", 1, worker))


@pytest.mark.parametrize(
    ("event", "target", "signum"),
    [
        ("os.kill", os.getpid(), signal.SIGTERM),
        ("os.kill", os.getpid(), signal.SIGINT),
        ("os.kill", 0, signal.SIGTERM),
        ("os.kill", -os.getpgrp(), signal.SIGTERM),
        ("os.killpg", 0, signal.SIGTERM),
        ("os.killpg", os.getpgrp(), signal.SIGINT),
        ("signal.pthread_kill", 12345, signal.SIGTERM),
    ],
)
def test_a_stopping_signal_a_task_sends_its_own_process_is_noted(
    event: str, target: int, signum: int
) -> None:
    token = _as_attempt()
    try:
        signals._hook(event, (target, signum))
    finally:
        task_context.reset(token)  # type: ignore[arg-type]
    assert signals.taken() == [signals.Sent("w1", "r1", 3, signum)]
    assert signals.taken() == []  # taken once


@pytest.mark.parametrize(
    ("event", "args", "in_attempt"),
    [
        ("os.kill", (os.getpid(), signal.SIGTERM), False),  # the engine's own, not a task's
        ("os.kill", (os.getpid(), signal.SIGUSR1), True),  # not a signal that stops it
        ("os.kill", (os.getpid() + 100_000, signal.SIGTERM), True),  # another process
        ("os.killpg", (os.getpgrp() + 100_000, signal.SIGTERM), True),
        ("open", ("/etc/hosts", "r", 0), True),  # any other audited event
        ("os.kill", ("x",), True),
    ],
)
def test_what_is_not_noted(event: str, args: tuple[object, ...], in_attempt: bool) -> None:
    token = _as_attempt() if in_attempt else None
    try:
        signals._hook(event, args)
    finally:
        if token is not None:
            task_context.reset(token)  # type: ignore[arg-type]
    assert signals.taken() == []


def test_the_stop_recorded_for_a_signal() -> None:
    outside = signals.stop_for("w1", signal.SIGTERM, [])
    assert (outside.cause, outside.via, outside.blame_run_id) == ("shutdown", "signal", None)
    assert outside.detail == "SIGTERM from outside the worker's own code"

    sent = [signals.Sent("w1", "r1", 3, signal.SIGINT), signals.Sent("w0", "r9", 1, 15)]
    mine = signals.stop_for("w1", signal.SIGINT, sent)
    assert (mine.cause, mine.blame_run_id, mine.blame_cmd) == ("signalled_by_task", "r1", 3)
    assert mine.actor_id == "run r1 step 3" and mine.detail == "SIGINT sent by run r1 step 3"

    two = signals.stop_for("w1", signal.SIGTERM, [*sent, signals.Sent("w1", "r2", 5, 15)])
    assert (two.cause, two.blame_run_id) == ("signalled_by_task", None)  # each counts it
