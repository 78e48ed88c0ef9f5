"""A run sent to a queue that no group, worker or deploy has ever served: a warning
naming the closest known queue, a refusal with ``strict=True``, and ``get_run``'s
"waiting on queue Q, which nothing serves"."""

from __future__ import annotations

import textwrap
import time
import warnings
from pathlib import Path

import pytest

import keepgoing
from keepgoing._client import orchestrator as background
from keepgoing._client.deploy import build_plan
from keepgoing._store.records import WorkerRecord
from keepgoing._workflow.registry import registry

SEED_QUEUE = "chalkcompute-workflows.wf-score-batch"
PIPELINE = textwrap.dedent(
    """
    from keepgoing import task, workflow

    @task
    def score(rows: list[int]) -> list[float]:
        return [row * 0.1 for row in rows]

    @workflow
    async def score_batch(batch_id: str, rows: list[int]) -> dict:
        return {"batch_id": batch_id, "scores": await score(rows)}
    """
)


@pytest.fixture
def deployed(client: keepgoing.Client, tmp_path: Path) -> keepgoing.Client:
    """The store knows the group wf-score-batch (queue workflows.wf-score-batch): it
    was deployed, and no replica has run yet."""
    source = tmp_path / "pipeline.py"
    source.write_text(PIPELINE)
    client.groups.deploy(build_plan(source, name="wf-score-batch"))
    return client


def test_the_seeds_literal_queue_warns_naming_the_deployed_one(deployed: keepgoing.Client) -> None:
    with pytest.warns(keepgoing.UnknownQueueWarning) as caught:
        run = deployed.trigger_workflow(
            "score_batch", {"batch_id": "b", "rows": [1]}, task_queue=SEED_QUEUE
        )
    [warning] = caught
    text = str(warning.message)
    assert f"queue {SEED_QUEUE!r}" in text
    assert "the closest known queue is 'workflows.wf-score-batch'" in text
    assert warning.filename == __file__  # issued at the caller's line
    assert isinstance(warning.message, keepgoing.UnknownWorkflowWarning)  # its subclass
    found = deployed.get_run(run.workflow_id)
    assert found.status == "running"
    assert found.waiting_for == f"waiting on queue {SEED_QUEUE}, which nothing serves"


def test_strict_refuses_an_unserved_queue_and_starts_nothing(deployed: keepgoing.Client) -> None:
    with pytest.raises(keepgoing.QueueNotFoundError, match="closest known queue") as raised:
        deployed.trigger_workflow(
            "score_batch", {"batch_id": "b", "rows": [1]}, task_queue=SEED_QUEUE, strict=True
        )
    assert raised.value.code == "queue_not_found"
    assert isinstance(raised.value, keepgoing.WorkflowNotFoundError)
    with pytest.raises(keepgoing.QueueNotFoundError):
        deployed.trigger_many(
            "score_batch", [{"batch_id": "b", "rows": []}], task_queue="x", strict=True
        )
    assert deployed.list_runs() == []


def test_a_deployed_queue_and_the_default_queue_start_quietly(deployed: keepgoing.Client) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = deployed.trigger_workflow(
            "score_batch", {"batch_id": "b", "rows": [1]}, task_queue="workflows.wf-score-batch"
        )
        other = deployed.trigger_workflow("anything_yet_to_be_written", {})
    # Deployed but no replica up yet: it waits for a worker, not on an unknown queue.
    waiting = deployed.get_run(run.workflow_id).waiting_for
    assert (
        waiting == "waiting for a worker that serves score_batch on queue workflows.wf-score-batch"
    )
    assert deployed.get_run(other.workflow_id).waiting_for == (
        "waiting for a worker that serves anything_yet_to_be_written"
    )


def test_a_definition_on_an_unserved_queue_warns_too(client: keepgoing.Client) -> None:
    @keepgoing.workflow
    async def unserved_queue_probe() -> int:
        return 1

    with pytest.warns(keepgoing.UnknownQueueWarning, match="'emials'"):
        client.trigger_workflow(unserved_queue_probe, task_queue="emials")
    # Once a worker has served a queue it is known for good.
    with pytest.warns(keepgoing.UnknownQueueWarning):
        client.trigger_many(unserved_queue_probe, [None], task_queue="emails")


def test_a_queue_a_registered_worker_serves_is_known(client: keepgoing.Client) -> None:
    async def register() -> None:
        now = time.time()
        await client.store.register_worker(
            WorkerRecord("w-1", ["reports"], "host", 1, started_at=now, heartbeat_at=now)
        )

    client.groups._s.run(register())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client.trigger_workflow("unserved_weekly_probe", task_queue="reports")
    with pytest.warns(keepgoing.UnknownQueueWarning, match="closest known queue is 'reports'"):
        client.trigger_workflow("unserved_weekly_probe", task_queue="reprots")


def test_a_producers_triggers_read_the_catalog_and_groups_once(
    deployed: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue check and the background orchestrator's check cost a producer no store
    read per start: a queue once served stays known, and the groups are read again at
    most every few seconds."""
    store = deployed.store
    calls: dict[str, int] = {}
    for name in ("known_workflows", "list_groups", "list_workers", "service_holder"):
        real = getattr(store, name)

        def counted(*args: object, _real: object = real, _name: str = name, **kw: object) -> object:
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(store, name, counted)
    monkeypatch.setenv("KEEPGOING_ORCHESTRATOR", "on")
    started: list[str] = []  # the background orchestrator, counted and not started here

    def ensure(url: str, **_: object) -> background.OrchestratorState:
        started.append(url)
        return background.OrchestratorState(True, 1, url, Path("."), Path("x.log"))

    monkeypatch.setattr(background, "ensure_orchestrator", ensure)
    # Started by a name this process never imported (another test may have).
    monkeypatch.delitem(registry.workflows, "score_batch", raising=False)
    for n in range(50):
        deployed.trigger_workflow(
            "score_batch", {"batch_id": f"b{n}", "rows": [n]}, task_queue="workflows.wf-score-batch"
        )
    assert len(started) == 1  # the first trigger found nothing scaling the group's store
    # Added by the queue check and the orchestrator's: one read of each, at the first start
    # (the name check, which reads the catalog per start by a name not imported here, was
    # there before).
    assert calls["known_workflows"] == 50 + 1
    assert calls["list_groups"] == 2  # the queue check's, and the orchestrator check's
    assert calls["list_workers"] == 1
    assert calls["service_holder"] == 1
