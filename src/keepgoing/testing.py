"""Testing helpers: a fake clock that skips durable timers and runs schedules, and replay checks.

Example::

    from keepgoing.testing import fake_clock

    with fake_clock() as clock:
        result = asyncio.run(nightly_report("acme"))   # sleeps two days, returns at once
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from keepgoing._client.client import Client
from keepgoing._durations import Duration, parse_duration
from keepgoing._history import events as ev
from keepgoing._history.codec import loads_history
from keepgoing._runtime.instance import WorkflowInstance
from keepgoing._schedules.service import fire_due
from keepgoing._worker.inprocess import use_clock
from keepgoing._workflow.workflow import WorkflowDefinition

__all__ = ["FakeClock", "fake_clock", "replay"]

DEFAULT_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class FakeClock:
    """A clock that moves only when told to, or when the in-process engine jumps it
    to the next due timer because nothing else can happen."""

    def __init__(self, start: float = DEFAULT_START) -> None:
        self._now = float(start)
        self._monotonic = 0.0

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go back")
        self._now += seconds
        self._monotonic += seconds

    def run_schedules(self, client: Client, duration: Duration) -> int:
        """Move the clock ``duration`` on, firing ``client``'s schedules (store mode) at
        each due instant on the way, in order; the runs they started. A week of a daily
        schedule takes milliseconds::

            with fake_clock() as clock:
                client.create_schedule("daily", report, cron="0 8 * * *", overlap="allow_all")
                assert clock.run_schedules(client, "7d") == 7
        """
        end = self._now + parse_duration(duration, what="duration")
        store = client.store

        async def run() -> int:
            started = 0
            while True:
                due = await store.next_schedule_due()
                if due is None or due > end:
                    break
                self.jump_to(due)
                started += await fire_due(store, self._now)
            self.jump_to(end)
            return started + await fire_due(store, self._now)

        started: int = client._backend.run(run())  # type: ignore[attr-defined]
        return started

    def jump_to(self, moment: float) -> None:
        """Move to ``moment`` if it is in the future."""
        if moment > self._now:
            self.advance(moment - self._now)


@contextmanager
def fake_clock(start: float = DEFAULT_START) -> Iterator[FakeClock]:
    """In-process runs started in this block use a :class:`FakeClock`."""
    clock = FakeClock(start)
    with use_clock(clock):
        yield clock


def replay(
    history: Sequence[ev.Event] | str | bytes, workflow: WorkflowDefinition[..., Any]
) -> None:
    """Check that ``workflow``'s current code replays ``history`` (events or JSON text).

    Raises:
        NondeterminismError: the code takes a different path; the message has the diff.
    """
    events = loads_history(history) if isinstance(history, str | bytes) else list(history)
    started = next((e for e in events if isinstance(e, ev.WorkflowStarted)), None)
    if started is None:
        raise ValueError("the history has no WorkflowStarted event")
    instance = WorkflowInstance(
        workflow.fn,
        run_id=started.run_id,
        workflow_id=started.workflow_id,
        workflow_name=started.workflow_name,
    )
    try:
        instance.activate(events)
    finally:
        instance.close()
