"""When a registered worker is lost, and why, in words.

A worker that stops cleanly deregisters. One that is killed, crashes or loses
its machine leaves its registry row behind; the services' sweep
(:meth:`Store.mark_lost_workers`, every second in each server and worker)
marks such a row lost, with the instant and the reason, by this rule:

* its liveness token is free (``_store/liveness.py``): its process ended. The
  reason is the newest stop recorded for it ("worker killed from the UI by
  alice"), else "its process ended without deregistering";
* its token is held: it is alive, however late its heartbeat (a process whose
  main thread waits behind a long C call holds its token and keeps its
  leases), so it is not lost;
* it has no token, or the token cannot tell: lost once its newest heartbeat
  is older than its deadline, :data:`HEARTBEAT_DEADLINE` or four of its
  heartbeat intervals, whichever is longer.

A lost worker is left out of the live workers, of the workers counted per
queue and of the workflows served; its row is kept :data:`KEEP_LOST` seconds
for the workers page, then removed by the same sweep. A heartbeat from a
worker marked lost (it was only frozen) makes it live again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from keepgoing._store.worker_stops import StopRow, describe, stamp_of

__all__ = ["HEARTBEAT_DEADLINE", "KEEP_LOST", "deadline_of", "lost_reason"]

#: Seconds without a heartbeat after which a worker whose token cannot tell is lost.
HEARTBEAT_DEADLINE = 10.0
#: Seconds a lost worker's row is kept, so the workers page can say what became of it.
KEEP_LOST = 86400.0


def deadline_of(info: Mapping[str, Any]) -> float:
    """A worker's heartbeat deadline: :data:`HEARTBEAT_DEADLINE`, or four of the
    heartbeat intervals it registered with, whichever is longer."""
    interval = info.get("heartbeat_interval")
    if isinstance(interval, int | float) and not isinstance(interval, bool) and interval > 0:
        return max(HEARTBEAT_DEADLINE, 4.0 * float(interval))
    return HEARTBEAT_DEADLINE


def _stopped(stops: Sequence[StopRow]) -> str | None:
    """The newest signalled stop, in words ("worker killed from the UI by alice")."""
    for stop in reversed(stops):
        if stop.state != "sent":
            continue
        said = stamp_of(stop)
        return describe("worker_lost", said.cause, said.actor, said.via)
    return None


def lost_reason(
    *,
    heartbeat_at: float,
    now: float,
    deadline: float,
    alive: bool | None,
    stops: Sequence[StopRow] = (),
) -> str | None:
    """Why the worker is lost, or None while it is not (the rule above).

    ``alive`` is its token's state: True held, False free, None unknown.
    """
    if alive is True:
        return None
    stopped = _stopped(stops)
    if alive is False:
        return (
            f"{stopped}: its process ended"
            if stopped
            else ("its process ended without deregistering (no known cause)")
        )
    late = now - heartbeat_at
    if late <= deadline:
        return None
    said = f"no heartbeat for {late:.0f} s (its deadline is {deadline:.0f} s)"
    return f"{stopped}; {said}" if stopped else said
