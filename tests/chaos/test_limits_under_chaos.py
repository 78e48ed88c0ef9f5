"""A concurrency limit holds while workers are SIGKILLed and frozen (SIGSTOP), and
every attempt completes.

Four workers serve ``integration/apps/limited.py``; 80 attempts of a
``concurrency=3`` task (0.3 s each) run while a seeded monkey kills a worker
(a replacement starts, as a supervisor would) or freezes one for longer than
its lease. Overlap is measured from the intervals the tasks write: a body runs
from its start until it ends or its worker is killed or frozen, whichever is
first. A frozen worker cannot hold a slot past its lease (the slot is given to
another attempt once the lease expires), so the limit promises nothing about
the body it resumes after a freeze longer than its lease: that attempt has
lost its lease, is retried elsewhere, and its late result is refused.
"""

from __future__ import annotations

import random
import signal
import time

import pytest

import keepgoing
from integration._support import Sandbox, WorkerProcess, Workers
from integration.conftest import client, kg, workers
from integration.test_flow_control import LEASE_TTL, most_at_once

__all__ = ["client", "kg", "workers"]  # the integration suite's fixtures

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(240)]

RUNS, PER_RUN, CAP, ROUNDS = 8, 10, 3, 5


def _monkey(kg: Sandbox, pool: Workers, live: list[WorkerProcess], seed: int) -> dict[int, float]:
    """Kill or freeze a random worker each round; return when each pid stopped holding."""
    rng = random.Random(seed)
    cut: dict[int, float] = {}  # pid -> the instant its slots were no longer its own
    app = kg.root / "limited.py"
    for _ in range(ROUNDS):
        time.sleep(rng.uniform(0.5, 1.0))  # the monkey's pace, not a synchronisation
        victim = rng.choice(live)
        if rng.random() < 0.5:
            victim.kill()
            cut.setdefault(victim.pid, time.time())
            live.remove(victim)
            live.append(pool.start(app, "--lease-ttl", str(LEASE_TTL), ready=False))
        else:
            victim.signal(signal.SIGSTOP)
            cut.setdefault(victim.pid, time.time())
            time.sleep(LEASE_TTL * 1.5)
            victim.resume()
    return cut


def test_a_cap_holds_under_kills_and_freezes_and_all_complete(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("limited")
    live = [workers.start(app, "--lease-ttl", str(LEASE_TTL)) for _ in range(4)]
    handles = [
        client.trigger_workflow("fan_capped", {"prefix": f"r{r}", "n": PER_RUN})
        for r in range(RUNS)
    ]
    cut = _monkey(kg, workers, live, seed=29)
    results = [client.result(h, timeout=180) for h in handles]

    assert sorted(k for r in results for k in r) == sorted(
        f"r{r}-{i}" for r in range(RUNS) for i in range(PER_RUN)
    )
    done = {(e.key, e.attempt, e.pid): e.at for e in kg.effects("done", "capped")}
    spans = []
    for s in kg.effects("start", "capped"):
        end = done.get((s.key, s.attempt, s.pid), float("inf"))
        if s.pid in cut and s.at < cut[s.pid]:
            end = min(end, cut[s.pid])
        assert end != float("inf"), f"attempt {s} never ended"
        spans.append((s.at, end, s.key))
    assert most_at_once(spans) <= CAP
