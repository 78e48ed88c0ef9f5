"""The worker's one retry delay: exponential, capped, jittered."""

from __future__ import annotations

import random

__all__ = ["backoff"]

FIRST = 0.1  # seconds: the delay after the first failure, before jitter


def backoff(failures: int, *, cap: float, jitter: float = 1.0) -> float:
    """The seconds to wait after ``failures`` consecutive failures (1 for the first).

    ``0.1 s`` after the first, doubling with each further failure up to ``cap``;
    then up to the ``jitter`` fraction of it is taken off at random, so workers
    that failed together do not retry together (``jitter=1.0``: anywhere from 0
    to the full delay; ``0.5``: from half of it to all of it).
    """
    delay = min(cap, FIRST * 2.0 ** min(max(failures, 1) - 1, 10))
    return random.uniform((1.0 - jitter) * delay, delay)
