"""The pure rules of worker stops (``_store/worker_stops.py``) and how ``decide_failure``
counts a loss by its cause."""

from __future__ import annotations

import pytest

from keepgoing._store import worker_stops as stops
from keepgoing._store.transitions import decide_failure
from keepgoing._store.worker_stops import StopRow, loss_stamp, release_stamp


def _stop(
    n: int, cause: str = "killed_by_request", state: str = "sent", at: float = 100.0
) -> StopRow:
    return StopRow(n, cause, "user", "alice", "ui", state, at)


def _decide(cause: str | None, losses: int = 3) -> tuple[int, float | None]:
    d = decide_failure(
        reason="worker_lost",
        failures=0,
        worker_losses=losses,
        retries=0,
        max_worker_losses=3,
        retry_delay=5.0,
        now=1000.0,
        cause=cause,
    )
    return d.worker_losses, d.retry_at


@pytest.mark.parametrize("cause", ["unexplained", "oom_killed", None, "something-new"])
def test_losses_that_blame_the_task_count_and_fail_it_past_the_limit(cause: str | None) -> None:
    assert _decide(cause) == (4, None)


@pytest.mark.parametrize(
    "cause", ["killed_by_request", "scaled_down", "drain_timeout", "replaced", "hung_restart"]
)
def test_losses_keepgoing_caused_are_retried_after_retry_delay_without_limit(cause: str) -> None:
    losses, retry_at = _decide(cause, losses=1000)
    assert losses == 1000 and retry_at is not None
    assert 1000.0 + 5.0 * 0.8 <= retry_at <= 1000.0 + 5.0 * 1.2


def test_the_newest_sent_stop_explains_a_loss() -> None:
    rows = [_stop(1, "scaled_down"), _stop(2, "drain_timeout", at=101.0)]
    stamp = loss_stamp(rows, lease_expires_at=150.0, owner_alive=False, now=200.0)
    assert stamp == stops.Stamp("drain_timeout", "alice", "ui")
    assert loss_stamp([], lease_expires_at=150.0, owner_alive=None, now=200.0) == stops.Stamp(
        "unexplained"
    )


def test_a_pending_stop_waits_then_is_ignored() -> None:
    pending = [_stop(1, state="pending", at=100.0)]
    assert loss_stamp(pending, lease_expires_at=150.0, owner_alive=False, now=101.0) is None
    late = 100.0 + stops.PENDING_GRACE + 1
    assert loss_stamp(pending, lease_expires_at=150.0, owner_alive=False, now=late) == stops.Stamp(
        "unexplained"
    )


def test_a_lapsed_lease_is_judged_by_the_liveness_token_when_there_is_one() -> None:
    rows = [_stop(1, at=100.0)]
    # No token: the lease had lapsed before the kill, so the loss was not the kill's.
    lapsed = loss_stamp(rows, lease_expires_at=90.0, owner_alive=None, now=120.0)
    assert lapsed == stops.Stamp("unexplained")
    # A token that was held until the kill (the signal reached a live process, its
    # heartbeats stalled by a GIL holder): the kill ended it.
    held = loss_stamp(rows, lease_expires_at=90.0, owner_alive=False, now=120.0)
    assert held is not None and held.cause == "killed_by_request"


def test_release_takes_the_newest_stop_pending_or_not() -> None:
    assert release_stamp([]) is None
    assert release_stamp([_stop(1, "replaced", state="pending")]) == stops.Stamp(
        "replaced", "alice", "ui"
    )
    service = StopRow(1, "scaled_down", "service", "", "autoscaler", "sent", 1.0)
    assert release_stamp([service]) == stops.Stamp("scaled_down", None, "autoscaler")
    # Handed back while the SIGKILL that ends the drain was being sent: the drain won.
    drain = StopRow(2, "drain_timeout", "service", "", "autoscaler", "pending", 2.0)
    assert release_stamp([service, drain]) == stops.Stamp("scaled_down", None, "autoscaler")
    assert release_stamp([drain]) is None
    token = StopRow(1, "killed_by_request", "service_token", "tok1", "api", "sent", 1.0)
    assert release_stamp([token]) == stops.Stamp("killed_by_request", "service_token tok1", "api")


@pytest.mark.parametrize(
    ("reason", "cause", "actor", "via", "text"),
    [
        ("worker_lost", "killed_by_request", "alice", "ui", "worker killed from the UI by alice"),
        ("worker_lost", "killed_by_request", "bob", "cli", "worker killed from the CLI by bob"),
        ("worker_lost", "killed_by_request", None, None, "worker killed on request"),
        ("worker_lost", "scaled_down", None, "autoscaler", "worker scaled down"),
        ("worker_lost", "unexplained", None, None, "worker lost (no known cause)"),
        ("released", "replaced", None, None, "worker replaced by a newer revision"),
        ("released", None, None, None, "worker shut down and handed the attempt back"),
        ("worker_lost", None, None, None, "worker lost"),
        ("error", None, None, None, None),
    ],
)
def test_how_a_cause_is_said(
    reason: str, cause: str | None, actor: str | None, via: str | None, text: str | None
) -> None:
    assert stops.describe(reason, cause, actor, via) == text
