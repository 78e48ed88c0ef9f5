"""Reading the progress a run publishes (``keepgoing.set_status``), waiting for it.

One reader serves the store-mode client and the HTTP route: it finds the
workflow id's newest run, reads the value from the store's ``run_status``
table, and, asked to wait, sleeps on the store's change signal
(``Store.wait_for_change``: the doorbell on SQLite, ``LISTEN`` on PostgreSQL),
which a commit that publishes a status rings. ``SAFETY_POLL`` only covers a
wake-up lost between processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from keepgoing._clock import system_clock
from keepgoing._store.protocol import Store
from keepgoing._store.records import TERMINAL, RunRecord
from keepgoing._store.recovery_protocol import StatusValue
from keepgoing._workflow.status import check_status_name
from keepgoing.errors import InvalidRequestError, RunNotFoundError

__all__ = ["SAFETY_POLL", "StatusRead", "check_wait", "read_status"]

SAFETY_POLL = 1.0


@dataclass(frozen=True)
class StatusRead:
    """What a read found: the run read, and its values (one, for a read of one key)."""

    run: RunRecord
    values: list[StatusValue]

    def value(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` if ``key`` was published, else ``(False, None)``."""
        for found in self.values:
            if found.name == key:
                return True, found.value
        return False, None


def check_wait(wait: object) -> float | None:
    """``wait`` as seconds (None: do not wait), or ``InvalidRequestError`` naming it."""
    if wait is None:
        return None
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not math.isfinite(wait):
        raise InvalidRequestError(f"wait must be a number of seconds or None, not {wait!r}")
    if wait < 0:
        raise InvalidRequestError(f"wait must not be negative, not {wait!r}")
    return float(wait)


async def read_status(
    store: Store, workflow_id: str, key: str | None = None, wait: float | None = None
) -> StatusRead:
    """The values the newest run of ``workflow_id`` published (only ``key``'s, if given).

    With ``key`` and ``wait``, waits up to ``wait`` seconds for the value to appear,
    and returns at once when it does or when the run has ended without it.

    Raises:
        RunNotFoundError: no run has this workflow id.
        ValueError: ``key`` is not a usable status key.
    """
    if key is not None:
        check_status_name(key, "get_status()")
    waiter = _Waiter()
    deadline = None if wait is None else system_clock.monotonic() + wait
    if wait:
        await store.wait_for_change(0, waiter)  # from here on no change is missed
    while True:
        run = await store.find_run(workflow_id)
        if run is None:
            raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
        found = StatusRead(run, await store.run_status(run.run_id, key))
        if key is None or found.values or deadline is None or run.status in TERMINAL:
            return found
        left = deadline - system_clock.monotonic()
        if left <= 0:
            return found
        await store.wait_for_change(min(SAFETY_POLL, left), waiter)


class _Waiter:
    """A wait's identity for ``wait_for_change`` (a plain object() is not weak-referable)."""
