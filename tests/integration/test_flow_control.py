"""Flow control with four worker processes on one store (SQLite and PostgreSQL).

Overlap is measured from the intervals the tasks themselves write (the
side-effects log), never from the store's own view.
"""

from __future__ import annotations

import time

import pytest

import keepgoing

from ._support import Effect, Sandbox, Workers, wait_until

pytestmark = pytest.mark.integration

WORKERS = 4
LEASE_TTL = 1.5


def intervals(kg: Sandbox, task: str) -> list[tuple[float, float, str]]:
    """(start, done, key) of every finished attempt of ``task``."""
    done = {(e.key, e.attempt, e.pid): e.at for e in kg.effects("done", task)}
    return [
        (s.at, done[(s.key, s.attempt, s.pid)], s.key)
        for s in kg.effects("start", task)
        if (s.key, s.attempt, s.pid) in done
    ]


def most_at_once(spans: list[tuple[float, float, str]]) -> int:
    """The largest number of intervals open at one instant."""
    edges = sorted([(a, 1) for a, _, _ in spans] + [(b, -1) for _, b, _ in spans])
    now = peak = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        now += step
        peak = max(peak, now)
    return peak


def start_pool(workers: Workers, kg: Sandbox) -> None:
    app = kg.app("limited")
    for _ in range(WORKERS):
        workers.start(app, "--concurrency", "8", "--lease-ttl", str(LEASE_TTL))


@pytest.mark.timeout(90)
def test_forty_attempts_of_a_cap_of_three_never_overlap_more_than_three(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    start_pool(workers, kg)
    handles = [
        client.trigger_workflow("fan_capped", {"prefix": f"r{r}", "n": 10}) for r in range(4)
    ]
    results = [client.result(h, timeout=60) for h in handles]

    assert sorted(k for r in results for k in r) == sorted(
        f"r{r}-{i}" for r in range(4) for i in range(10)
    )
    spans = intervals(kg, "capped")
    assert len(spans) == 40
    assert most_at_once(spans) <= 3
    assert most_at_once(spans) == 3  # the cap is used, not just respected
    assert len({e.pid for e in kg.effects("start", "capped")}) > 1  # several workers took part


@pytest.mark.timeout(90)
def test_a_keyed_cap_holds_per_key_while_keys_run_side_by_side(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    start_pool(workers, kg)
    handle = client.trigger_workflow("fan_customers", {"customers": ["a", "b", "c"], "n": 4})
    assert len(client.result(handle, timeout=60)) == 12

    spans = intervals(kg, "per_customer")
    assert len(spans) == 12
    for customer in "abc":
        assert most_at_once([s for s in spans if s[2].startswith(customer + ":")]) == 1
    assert most_at_once(spans) >= 2


@pytest.mark.timeout(90)
def test_a_killed_worker_gives_its_slot_back_within_one_lease(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    start_pool(workers, kg)
    handle = client.trigger_workflow("two_held", {})
    first: Effect = wait_until(lambda: next(iter(kg.effects("start", "held")), None), 30, "a start")
    holder = next(w for w in workers.started if w.pid == first.pid)
    assert len(kg.effects("start", "held")) == 1  # the other waits for the slot

    holder.kill()
    killed_at = time.time()
    second = wait_until(lambda: kg.effects("start", "held")[1:], 30, "the slot to be reused")[0]
    kg.release("go")

    assert second.at - killed_at <= LEASE_TTL
    assert sorted(client.result(handle, timeout=30)) == ["first", "second"]


@pytest.mark.timeout(90)
def test_a_rate_of_five_a_second_never_starts_more_than_five_plus_the_burst(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    start_pool(workers, kg)
    handle = client.trigger_workflow("fan_rated", {"prefix": "x", "n": 50})  # about 10 s
    assert len(client.result(handle, timeout=60)) == 50

    starts = sorted(e.at for e in kg.effects("start", "rated"))
    assert len(starts) == 50
    worst = max(sum(1 for t in starts if s <= t < s + 1.0) for s in starts)
    assert worst <= 5 + 2
    assert starts[-1] - starts[0] >= (50 - 2) / 5 - 0.5  # the rate holds over the whole run
