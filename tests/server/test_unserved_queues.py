"""A queue nothing has served, through a real server: the start's `warning_code`,
the client's UnknownQueueWarning, `strict`'s 404 and the run's `waiting_for`."""

from __future__ import annotations

import httpx
import pytest

import keepgoing

from ._support import Stack


def test_a_start_on_an_unserved_queue_warns_and_the_run_says_so(
    stack: Stack, admin: httpx.Client
) -> None:
    answer = admin.post(
        "/api/v1/runs", json={"workflow": "add", "input": {"a": 1, "b": 2}, "task_queue": "defualt"}
    )
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["warning_code"] == "unknown_queue"
    assert "the closest known queue is 'default'" in body["warning"]
    run = admin.get(f"/api/v1/runs/{body['workflow_id']}").json()
    assert run["waiting_for"] == "waiting on queue defualt, which nothing serves"


def test_strict_is_a_404_and_the_http_client_raises_and_warns(stack: Stack) -> None:
    with keepgoing.Client(stack.url, token=stack.admin) as client:
        with pytest.raises(keepgoing.QueueNotFoundError, match="'defualt'"):
            client.trigger_workflow("add", {"a": 1, "b": 2}, task_queue="defualt", strict=True)
        with pytest.warns(keepgoing.UnknownQueueWarning, match="closest known queue"):
            run = client.trigger_workflow("add", {"a": 1, "b": 2}, task_queue="nowhere")
        assert client.get_run(run.workflow_id).waiting_for == (
            "waiting on queue nowhere, which nothing serves"
        )
        with pytest.warns(keepgoing.UnknownQueueWarning):
            client.trigger_many("add", [{"a": 1, "b": 2}], task_queue="nowhere-either")
        # The queue the worker serves starts quietly and runs.
        assert client.trigger_workflow("sum_two", {"a": 1, "b": 2}, wait=True, timeout=30) == 3
