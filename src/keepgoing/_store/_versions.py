"""Code versions a run has seen, and when a blocked run is retried (every store).

A run is *blocked* when the code of a worker cannot replay its history. Two
things retry it, both by claiming it as an activation (status back to
``running``, the activation lease held by the claiming worker):

* a worker whose code version for the run's workflow is not among the
  versions that already blocked it (``blocked_versions``): new code gets one
  try, and two workers with different code never take turns forever;
* any worker serving the run once ``retry_blocked_at`` has passed: a slow
  periodic retry, every :data:`RETRY_BLOCKED_FIRST` seconds at first, doubling
  up to :data:`RETRY_BLOCKED_CAP`.

If the code replays, the run continues; if not, it is blocked again with the
new diff.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "RETRY_BLOCKED_CAP",
    "RETRY_BLOCKED_FIRST",
    "retry_blocked_after",
    "should_retry",
    "with_version",
]

RETRY_BLOCKED_FIRST = 300.0
RETRY_BLOCKED_CAP = 3600.0


def retry_blocked_after(block_count: int) -> float:
    """Seconds until the periodic retry of a run blocked ``block_count`` times (from 1)."""
    return min(RETRY_BLOCKED_CAP, RETRY_BLOCKED_FIRST * float(2 ** min(max(block_count - 1, 0), 8)))


def with_version(versions: Sequence[str], version: str) -> list[str]:
    """``versions`` with ``version`` added at the end if it is new (and not empty)."""
    if not version or version in versions:
        return list(versions)
    return [*versions, version]


def should_retry(
    workflow_name: str,
    blocked_versions: Sequence[str],
    retry_at: float | None,
    versions: Mapping[str, str],
    now: float,
) -> bool:
    """Whether a worker whose code versions are ``versions`` (by workflow name) retries
    a blocked run of ``workflow_name`` at ``now``."""
    mine = versions.get(workflow_name)
    if mine is None:
        return False
    if mine and mine not in blocked_versions:
        return True
    return retry_at is not None and retry_at <= now
