"""What a demo use case is, and what the demo gives it to run on.

The demo command (``keepgoing demo``, its page and its headless mode) owns a
running stack: a store, a server with the UI, and the local worker-group
backend. Each use case is a workflow file plus the code that starts it on that
stack and reports the evidence of its recovery.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from keepgoing._client.client import Client
from keepgoing._client.deploy import WorkflowWorker


class DemoStack(Protocol):
    """The running demo, as a use case sees it."""

    @property
    def client(self) -> Client:
        """A client of the demo's store."""
        ...

    @property
    def workdir(self) -> Path:
        """A scratch folder of this demo (side services' state and logs go here)."""
        ...

    @property
    def fast(self) -> bool:
        """True in the short CI mode: clocks and waits are shortened."""
        ...

    @property
    def server_url(self) -> str | None:
        """The base URL of the demo's server and UI, or None when it runs without one."""
        ...

    def deploy(self, source: Path, name: str, **options: Any) -> WorkflowWorker:
        """Deploy ``source`` as a worker group on the local backend and return it."""
        ...

    def kill_worker_during(self, workflow_id: str, step: str, *, timeout: float = 120.0) -> str:
        """Wait until ``step`` of the run is running on a worker, kill that worker through
        the kill API (as the UI's button does), and return the worker's id."""
        ...

    def add_cleanup(self, cleanup: Callable[[], None]) -> None:
        """Run ``cleanup`` when the demo stops (stop side services, for example)."""
        ...


@dataclass(frozen=True)
class Evidence:
    """What a use case shows once it has run: one line per fact, and whether it held."""

    use_case: str
    lines: tuple[str, ...]
    ok: bool


@dataclass(frozen=True)
class UseCase:
    """One scenario the demo offers (TKT-2418, OP-4C01, JOB-B772)."""

    key: str  # "TKT-2418"
    title: str  # "Billing question"
    area: str  # "Customer operations"
    summary: str  # one sentence for the demo page
    start: Callable[[DemoStack], str]  # starts the scenario live; returns its workflow id
    headless: Callable[[DemoStack, Callable[[str], None]], Evidence]  # runs it to the end
