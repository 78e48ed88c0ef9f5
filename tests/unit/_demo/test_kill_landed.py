"""The demo's kill counts only when it cut an attempt short.

The kill API finds a running step and signals its worker; the step can finish in
between, and then no attempt is lost and the demo's evidence ("the killed worker's
step was retried") cannot hold. ``LocalStack._cut_short`` reads the run's history
after the kill to tell the two apart, so the demo kills again during a later step.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from keepgoing._demo.stack import DemoError, LocalStack
from keepgoing._history import events as ev


class _History:
    """A client whose run history grows by one batch of events per read."""

    def __init__(self, *batches: list[ev.Event]) -> None:
        self._batches = list(batches)
        self._seen: list[ev.Event] = []

    def history(self, workflow_id: str, **_: Any) -> list[ev.Event]:
        if self._batches:
            self._seen.extend(self._batches.pop(0))
        return list(self._seen)


def _stack(tmp_path: Path, client: _History) -> LocalStack:
    stack = LocalStack(tmp_path)
    stack._client = client  # type: ignore[assignment]
    return stack


def _lost(cmd: int, worker: str, reason: str = "worker_lost") -> ev.TaskAttemptFailed:
    error = ev.ErrorInfo(type="WorkerLost", message="lost")
    return ev.TaskAttemptFailed(
        cmd=cmd, name="summarise_ticket", attempt=1, error=error, reason=reason, worker=worker
    )


def _done(cmd: int, worker: str) -> ev.TaskCompleted:
    return ev.TaskCompleted(cmd=cmd, result=None, attempt=1, worker=worker)


def test_a_kill_that_lost_the_attempt_landed(tmp_path: Path) -> None:
    client = _History([], [_done(3, "w-other"), _lost(5, "w-other")], [_lost(5, "w-killed")])
    assert _stack(tmp_path, client)._cut_short("wf", 5, "w-killed", time.monotonic() + 10)


def test_a_step_its_worker_completed_before_the_kill_did_not(tmp_path: Path) -> None:
    # Its attempt failing on its own first says nothing of the kill.
    client = _History([_lost(5, "w-killed", reason="error")], [_done(5, "w-killed")])
    assert not _stack(tmp_path, client)._cut_short("wf", 5, "w-killed", time.monotonic() + 10)


def test_no_outcome_by_the_deadline_is_an_error_that_says_so(tmp_path: Path) -> None:
    with pytest.raises(DemoError, match="no outcome after its worker's kill"):
        _stack(tmp_path, _History())._cut_short("wf", 5, "w-killed", time.monotonic() - 1)
