"""Side effects the integration tests count: one line per event, appended to a shared log.

Copied next to each app file in the test's tmp_path; the worker puts the app's
folder first on ``sys.path``, so the apps import it as ``kg_effects``. The log
lives in the folder named by ``KG_TEST_DIR``. Each line is::

    <kind> <task> <key> <attempt> <pid> <unix time>

Appends use one ``write`` on an ``O_APPEND`` descriptor, so lines from several
processes never interleave.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

LOG = "effects.log"


def folder() -> Path:
    return Path(os.environ["KG_TEST_DIR"])


def attempt() -> int:
    """The running attempt's number (1, 2, ...), from keepgoing's task context."""
    from keepgoing._runtime.context import current_task_context  # noqa: PLC0415

    ctx = current_task_context()
    if ctx is None:
        raise RuntimeError("attempt() called outside a task attempt")
    return ctx.attempt


def record(kind: str, task: str, key: str, number: int) -> None:
    line = f"{kind} {task} {key} {number} {os.getpid()} {time.time():.6f}\n"
    fd = os.open(folder() / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def wait_for_marker(name: str, limit: float = 60.0) -> None:
    """Block (this thread) until the file ``name`` exists in the test folder."""
    path = folder() / name
    deadline = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"marker {name} did not appear within {limit}s")
        time.sleep(0.01)
