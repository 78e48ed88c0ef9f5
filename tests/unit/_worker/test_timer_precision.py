"""A worker's own timers fire when due, never before: it wakes a little early and
waits out the rest exactly, so the event loop's millisecond rounding adds nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from keepgoing import Client, task, workflow
from keepgoing._history import events as ev


@task(name="precision.mark")
def mark(i: int) -> int:
    return i


@workflow(name="precision.naps")
async def naps(pauses: list[float]) -> int:
    total = 0
    for i, pause in enumerate(pauses):
        total += await mark(i)
        await asyncio.sleep(pause)  # a durable timer, fired by the worker that holds the run
    return total


@pytest.mark.timeout(60)
def test_short_durable_sleeps_never_fire_before_they_are_due(tmp_path: Path) -> None:
    # 1 ms and 1.4 ms fall inside the exact wait; 3 ms and 20 ms wake early first.
    pauses = [0.001, 0.0014, 0.003, 0.02, 0.001]
    client = Client(store=f"sqlite:///{tmp_path / 'kg.db'}")
    try:
        result = client.run_workflow(naps, {"pauses": pauses}, workflow_id="naps-1")
        assert result == sum(range(len(pauses)))
        history = client.history("naps-1")
    finally:
        client.close()
    due = {e.cmd: e.fire_at for e in history if isinstance(e, ev.TimerStarted)}
    fired = {e.cmd: e.at for e in history if isinstance(e, ev.TimerFired)}
    assert len(due) == len(pauses) and fired.keys() == due.keys()
    for cmd, at in fired.items():
        assert at >= due[cmd], f"timer {cmd} fired {(due[cmd] - at) * 1000:.3f} ms early"
