"""Helpers for the messaging, events, children and cancellation tests.

The tests run workflows durably in this process with ``Client.run_workflow``
on a SQLite file: :class:`Background` starts the run first (on a private
queue no worker serves, so it exists and can be sent messages before it takes
a step), then drives it to its end on a thread while the test talks to it
through a second client.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import keepgoing
from keepgoing._history import events as ev

__all__ = ["Background", "Runs", "count_rows", "of_type", "wait_until"]

T = TypeVar("T")
POLL = 0.005


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, what: str = "a condition") -> T:
    """Poll ``predicate`` until it returns something truthy; return that value.

    Raises:
        AssertionError: ``timeout`` seconds passed first.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(POLL)


def of_type(history: list[ev.Event], kind: type[Any], **fields: Any) -> list[Any]:
    """The events of ``kind`` whose attributes equal ``fields``."""
    return [
        e
        for e in history
        if isinstance(e, kind) and all(getattr(e, k) == v for k, v in fields.items())
    ]


def count_rows(db: Path, table: str) -> int:
    """Rows in ``table`` of the SQLite file ``db``, read with a plain connection."""
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


class Background:
    """One run of ``workflow``, created now and driven by ``run_workflow`` on a thread.

    ``start()`` only creates the run (nothing executes until ``drive()``), so a
    test can send it messages or cancel it before its first step.
    """

    def __init__(
        self,
        url: str,
        workflow: keepgoing.WorkflowDefinition[..., Any],
        input: Any = None,
        *,
        workflow_id: str | None = None,
    ) -> None:
        self.url = url
        self.workflow = workflow
        self.workflow_id = workflow_id or f"{workflow.name}-{uuid.uuid4().hex[:8]}"
        self._input = input
        self._thread: threading.Thread | None = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._client = keepgoing.Client(store=url)
        with warnings.catch_warnings():
            # Parked on a queue nothing serves, on purpose: run_workflow drives it.
            warnings.simplefilter("ignore", keepgoing.UnknownQueueWarning)
            self.handle = self._client.trigger_workflow(
                workflow,
                input,
                workflow_id=self.workflow_id,
                task_queue=f"parked.{uuid.uuid4().hex[:12]}",
            )

    def drive(self) -> Background:
        """Start driving the run to its end on a thread."""
        self._thread = threading.Thread(
            target=self._run, name=f"drive-{self.workflow_id}", daemon=True
        )
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._result = self._client.run_workflow(self.workflow, workflow_id=self.workflow_id)
        except BaseException as exc:
            self._error = exc

    def join(self, timeout: float = 15.0) -> Any:
        """Wait for the run to end; return its result or raise its error."""
        assert self._thread is not None, "drive() first"
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self.workflow_id} did not end within {timeout:g}s")
        self._client.close()
        if self._error is not None:
            raise self._error
        return self._result

    def close(self) -> None:
        """Teardown: cancel the run if it is still going, then release the client."""
        if self._thread is not None and self._thread.is_alive():
            with (
                contextlib.suppress(keepgoing.KeepgoingError),
                keepgoing.Client(store=self.url) as other,
            ):
                other.cancel_workflow(self.workflow_id, "test teardown")
            self._thread.join(10)
        if self._thread is None or not self._thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self._client.close()


class Runs:
    """Makes :class:`Background` runs on one store and tears them all down."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[Background] = []

    def start(
        self,
        workflow: keepgoing.WorkflowDefinition[..., Any],
        input: Any = None,
        *,
        workflow_id: str | None = None,
    ) -> Background:
        run = Background(self.url, workflow, input, workflow_id=workflow_id)
        self.made.append(run)
        return run

    def close(self) -> None:
        for run in self.made:
            run.close()
