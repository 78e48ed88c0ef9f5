"""Values no store can carry fail once, at the right place, on a real worker process;
and a task never shares an object with its workflow."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, of_type

pytestmark = pytest.mark.integration


@pytest.mark.timeout(40)
def test_a_task_result_no_store_can_carry_fails_its_one_attempt(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    worker = workers.start(kg.app("values"))
    handle = client.trigger_workflow("run_bad_task_result", {"key": "k"})

    with pytest.raises(keepgoing.WorkflowFailedError) as caught:
        client.result(handle, timeout=30)

    assert "PayloadError" in str(caught.value)
    history = client.history(handle.workflow_id)
    (gave_up,) = of_type(history, ev.TaskFailed)
    assert gave_up.attempts == 1 and gave_up.reason == "error"  # retries=0: one attempt
    assert gave_up.error.type == "keepgoing.errors.PayloadError"
    assert "task 'decode_rows'" in gave_up.error.message
    assert "result['rows'][3]" in gave_up.error.message
    assert "lone surrogate" in gave_up.error.message
    assert len(kg.effects("start", "decode_rows")) == 1
    assert worker.alive()


@pytest.mark.timeout(40)
@pytest.mark.parametrize(
    "workflow,problem",
    [
        ("run_bad_argument", "argument 'value' of task 'store_it'['name'] contains the lone"),
        ("run_bad_result", "the result of workflow 'run_bad_result'['big'] is an int too long"),
    ],
)
def test_a_task_argument_or_workflow_result_no_store_can_carry_fails_the_run(
    kg: Sandbox, workers: Workers, client: keepgoing.Client, workflow: str, problem: str
) -> None:
    worker = workers.start(kg.app("values"))
    handle = client.trigger_workflow(workflow, {"key": "k"})

    with pytest.raises(keepgoing.WorkflowFailedError) as caught:
        client.result(handle, timeout=30)

    assert problem in str(caught.value)
    assert client.get_run(handle.workflow_id).status == "failed"
    history = client.history(handle.workflow_id)
    (failed,) = of_type(history, ev.WorkflowFailed)
    assert failed.error.type == "keepgoing.errors.PayloadError"
    assert len(of_type(history, ev.ActivationCompleted)) == 2  # no activation was retried
    assert len(kg.effects("start", "prepare")) == 1  # the completed step did not run again
    assert kg.effects("start", "store_it") == []
    assert worker.alive()


@pytest.mark.timeout(40)
def test_a_task_that_mutates_its_argument_leaves_the_workflow_copy_alone(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("values"))

    result = client.trigger_workflow("run_checkout", {"key": "k"}, wait=True, timeout=30)

    assert result == {"card_kept": True, "paid_is_list": True}
    assert len(kg.effects("start", "charge")) == 1
