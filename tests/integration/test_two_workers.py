"""Two worker processes sharing one SQLite store."""

from __future__ import annotations

import collections

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, of_type

pytestmark = pytest.mark.integration

RUNS = 20
STEPS = {"step_a": "a", "step_b": "b", "step_c": "c"}


@pytest.mark.timeout(50)
def test_two_workers_run_twenty_workflows_each_step_completing_once(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("steps")
    pool = [workers.start(app), workers.start(app)]  # both serving before the first trigger

    handles = [
        client.trigger_workflow("abc", {"key": f"r{i}", "x": i}, workflow_id=f"abc-{i}")
        for i in range(RUNS)
    ]
    results = [client.result(h, timeout=40) for h in handles]

    assert [r["value"] for r in results] == [(i + 1) * 10 + 1 for i in range(RUNS)]
    by_worker: collections.Counter[str] = collections.Counter()
    for i, handle in enumerate(handles):
        history = client.history(handle.workflow_id)
        scheduled = of_type(history, ev.TaskScheduled)
        assert sorted(s.name for s in scheduled) == sorted(STEPS)
        for step in scheduled:
            (completed,) = of_type(history, ev.TaskCompleted, cmd=step.cmd)
            by_worker[completed.worker] += 1
            # Every claim of the step shows up as one start of its body.
            starts = kg.effects("start", STEPS[step.name], f"r{i}")
            assert [s.attempt for s in starts] == list(range(1, completed.attempt + 1))
        assert len(of_type(history, ev.WorkflowCompleted)) == 1
    assert sum(by_worker.values()) == RUNS * len(STEPS)
    assert all(w.alive() for w in pool)
    print(f"steps completed per worker: {dict(by_worker)}")
