"""Workflow concurrency, priorities and singletons with real worker processes.

The client starts every run by name, without the workflows' code: the limits
hold because the workers recorded them. Overlap is measured from the intervals
the runs' steps write (``apps/flowruns_app.py``), not from the store's view.
"""

from __future__ import annotations

import pytest

import keepgoing

from ._support import Effect, Sandbox, Workers, wait_until

pytestmark = pytest.mark.integration


def most_at_once(effects: list[Effect]) -> int:
    """The most intervals open at once (a start at the instant of a done counts after it)."""
    edges = sorted((e.at, 0 if e.kind == "done" else 1) for e in effects)
    now = peak = 0
    for _, rising in edges:
        now += 1 if rising else -1
        peak = max(peak, now)
    return peak


def status(client: keepgoing.Client, workflow_id: str) -> str:
    return client.get_run(workflow_id).status


@pytest.mark.timeout(90)
def test_concurrency_two_never_runs_more_than_two_and_all_complete(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("flowruns_app")
    workers.start(app, "--concurrency", "8")
    workers.start(app, "--concurrency", "8")

    handles = [
        client.trigger_workflow("two_at_a_time", {"key": f"r{i}"}, workflow_id=f"two-{i}")
        for i in range(8)
    ]
    queued = [h for h in handles if status(client, h.workflow_id) == "queued"]
    assert queued, "with 8 starts and a limit of 2, some start waits"
    waiting = client.get_run(queued[-1].workflow_id).waiting_for
    assert waiting is not None and waiting.startswith(
        "queued: waiting for a concurrency slot of two_at_a_time ("
    )
    results = [client.result(h, timeout=60) for h in handles]

    assert results == [f"r{i}" for i in range(8)]
    assert most_at_once(kg.effects(task="step")) == 2


@pytest.mark.timeout(90)
def test_a_keyed_limit_holds_per_key_while_keys_run_side_by_side(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("flowruns_app")
    workers.start(app, "--concurrency", "8")
    workers.start(app, "--concurrency", "8")

    handles = [
        client.trigger_workflow(
            "one_per_account", {"account": acct, "key": f"{acct}{i}", "seconds": 0.3}
        )
        for i in range(3)
        for acct in ("a", "b")
    ]
    for h in handles:
        client.result(h, timeout=60)

    steps = kg.effects(task="step")
    for acct in ("a", "b"):
        assert most_at_once([e for e in steps if e.key.startswith(acct)]) == 1
    assert most_at_once(steps) == 2  # the two accounts ran side by side


@pytest.mark.timeout(90)
def test_queued_runs_start_in_priority_order(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("flowruns_app")
    workers.start(app)
    client.trigger_workflow("one_at_a_time", {"key": "blocker", "gate": "g"}, workflow_id="b")
    wait_until(lambda: kg.effects("start", "step", "blocker"), 30, "the blocker to start")
    for key, priority in (("low", 0), ("mid", 1), ("high", 5)):
        client.trigger_workflow("one_at_a_time", {"key": key}, workflow_id=key, priority=priority)
    assert [status(client, k) for k in ("low", "mid", "high")] == ["queued"] * 3
    assert client.get_run("high").priority == 5

    kg.release("release-g")
    for key in ("b", "low", "mid", "high"):
        client.result(client.get_run(key).handle, timeout=60)

    assert [e.key for e in kg.effects("start", "step")] == ["blocker", "high", "mid", "low"]


@pytest.mark.timeout(90)
def test_each_singleton_mode_does_what_it_says(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("flowruns_app")
    workers.start(app, "--concurrency", "8")
    for name in ("sync_skip", "sync_queue", "sync_replace"):
        first = {"account": "a", "key": f"{name}-1", "gate": name}
        client.trigger_workflow(name, first, workflow_id=f"{name}-1")
    for name in ("sync_skip", "sync_queue", "sync_replace"):
        wait_until(lambda n=name: kg.effects("start", "step", f"{n}-1"), 30, f"{name} to start")

    skipped = client.trigger_workflow(
        "sync_skip", {"account": "a", "key": "sync_skip-2"}, workflow_id="sync_skip-2"
    )
    queued = client.trigger_workflow(
        "sync_queue", {"account": "a", "key": "sync_queue-2"}, workflow_id="sync_queue-2"
    )
    replacing = client.trigger_workflow(
        "sync_replace", {"account": "a", "key": "sync_replace-2"}, workflow_id="sync_replace-2"
    )
    other = client.trigger_workflow("sync_skip", {"account": "b", "key": "sync_skip-b"})

    assert skipped.existing and skipped.workflow_id == "sync_skip-1"
    assert not other.existing and client.result(other, timeout=60) == "sync_skip-b"
    assert status(client, "sync_queue-2") == "queued"
    # The open run is asked to cancel; the new one is admitted once it has ended.
    wait_until(lambda: status(client, "sync_replace-1") == "cancelled", 30, "the cancel")
    for name in ("sync_skip", "sync_queue", "sync_replace"):
        kg.release(f"release-{name}")
    assert client.result(queued, timeout=60) == "sync_queue-2"
    assert client.result(replacing, timeout=60) == "sync_replace-2"
    assert status(client, "sync_replace-1") == "cancelled"
    assert status(client, "sync_queue-1") == "completed"
    queue_steps = [e for e in kg.effects(task="step") if e.key.startswith("sync_queue")]
    assert most_at_once(queue_steps) == 1


@pytest.mark.timeout(120)
def test_a_sigkilled_worker_does_not_leak_a_run_slot(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("flowruns_app")
    doomed = workers.start(app)
    client.trigger_workflow("one_at_a_time", {"key": "first", "gate": "g"}, workflow_id="first")
    wait_until(lambda: kg.effects("start", "step", "first"), 30, "the first run to start")
    client.trigger_workflow("one_at_a_time", {"key": "second"}, workflow_id="second")

    doomed.kill()
    workers.start(app)
    # The first run resumes on the new worker, still holding its slot; the second waits.
    wait_until(
        lambda: [e for e in kg.effects("start", "step", "first") if e.attempt == 2],
        60,
        "the first run's step to be retried elsewhere",
    )
    assert status(client, "second") == "queued"

    kg.release("release-g")
    assert client.result(client.get_run("first").handle, timeout=60) == "first"
    assert client.result(client.get_run("second").handle, timeout=60) == "second"
    starts = kg.effects("start", "step")
    assert [e.key for e in starts] == ["first", "first", "second"]
