"""The instant up to which a worker knows every task lease the store granted it.

A store call that can claim task attempts (a claim, an activation commit with
eager claims, a completion that takes the next step) grants leases the worker
learns of only when the answer is back on its loop and the attempts are
started. Until then a heartbeat cannot name them. Each such call is therefore
*pending* from just before it is issued until its claims are started (or it
failed), and :meth:`ClaimWindow.known_through` is the issue time of the oldest
pending call: every lease granted before that instant is one the worker has
started, or one whose answer it never got (a ``COMMIT`` whose connection
dropped). The heartbeat hands back the leases it holds that were granted
before that instant and that it does not run (see ``Store.heartbeat``).

No rule based on time alone can tell those apart: a process frozen by a GIL
holder may resume with a claim's answer still queued behind its heartbeat.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

from keepgoing._clock import Clock

__all__ = ["ClaimWindow"]


class ClaimWindow:
    """The issue times of the claim-capable store calls whose claims are not started yet."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending: dict[int, float] = {}
        self._ids = itertools.count()

    @contextlib.contextmanager
    def pending(self, since: float | None = None) -> Iterator[None]:
        """Around a store call that may claim attempts and the start of those attempts.

        ``since``: the instant the call will stamp its claims with, when that was
        taken before now (a completion claims the next step at the outcome's time).
        """
        key = next(self._ids)
        now = self._clock.now()
        self._pending[key] = now if since is None else min(since, now)
        try:
            yield
        finally:
            del self._pending[key]

    def known_through(self) -> float:
        """Every lease granted to this worker before this instant has reached it."""
        return min(self._pending.values(), default=self._clock.now())
