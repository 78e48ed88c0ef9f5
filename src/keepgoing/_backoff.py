"""The one retry delay: exponential, capped, jittered.

Every place that waits before trying again (a worker after a store error, a
PostgreSQL connection after a lost database or a serialization conflict, a
store that is not up yet, the HTTP client after a failed call, a replica that
keeps crashing) takes its delay from :func:`backoff`, with its own base, cap
and jitter.
"""

from __future__ import annotations

import random

__all__ = ["backoff"]

_MAX_DOUBLINGS = 20  # 2**20 times the base is past every cap in use
_random = random.Random()


def backoff(attempt: int, *, base: float, cap: float, jitter: float = 1.0) -> float:
    """The seconds to wait before retry number ``attempt + 1`` (``attempt`` 0: the first).

    The delay is ``base * 2**attempt``, at most ``cap``; then up to the ``jitter``
    fraction of it is taken off at random, so callers that failed together do not
    retry together (``1.0``: anywhere from 0 to the full delay; ``0.5``: from half
    of it to all of it; ``0.0``: exactly the delay).
    """
    if base < 0 or cap < 0 or not 0.0 <= jitter <= 1.0:
        raise ValueError(
            f"backoff needs base >= 0, cap >= 0 and jitter in [0, 1], "
            f"not base={base}, cap={cap}, jitter={jitter}"
        )
    delay = min(cap, base * 2.0 ** min(max(attempt, 0), _MAX_DOUBLINGS))
    if jitter == 0.0:
        return delay
    return _random.uniform((1.0 - jitter) * delay, delay)
