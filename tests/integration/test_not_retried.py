"""Errors that are not retried, on a real worker process: NonRetryableError,
``retry_on`` and ``give_up_on``, counted by the side effects each attempt leaves."""

from __future__ import annotations

import subprocess
import sys

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, of_type

pytestmark = pytest.mark.integration


def _show(kg: Sandbox, workflow_id: str) -> str:
    argv = [sys.executable, "-m", "keepgoing.cli", "show", workflow_id, "--store", kg.url]
    env = {**kg.env(), "COLUMNS": "400"}
    done = subprocess.run(
        argv, check=False, cwd=kg.root, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.timeout(60)
def test_a_non_retryable_error_makes_exactly_one_attempt(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("not_retried"))
    handle = client.trigger_workflow("run_refuses", {"key": "k"})

    with pytest.raises(keepgoing.WorkflowFailedError) as caught:
        client.result(handle, timeout=30)

    assert "the account is closed" in str(caught.value)
    assert len(kg.effects("start", "refuses")) == 1
    history = client.history(handle.workflow_id)
    (attempt,) = of_type(history, ev.TaskAttemptFailed)
    assert (attempt.reason, attempt.cause, attempt.retry_at) == (
        "non_retryable",
        "raised_non_retryable",
        None,
    )
    (gave_up,) = of_type(history, ev.TaskFailed)
    assert (gave_up.reason, gave_up.attempts) == ("non_retryable", 1)
    assert "not retried: the task raised a NonRetryableError" in _show(kg, handle.workflow_id)


@pytest.mark.timeout(90)
def test_retry_on_and_give_up_on_choose_which_errors_are_retried(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("not_retried"))
    rate = client.trigger_workflow("run_picky", {"key": "rate", "kind": "rate"})
    key = client.trigger_workflow("run_picky", {"key": "key", "kind": "key"})
    value = client.trigger_workflow("run_careful", {"key": "value", "kind": "value"})
    transient = client.trigger_workflow("run_careful", {"key": "tr", "kind": "transient"})
    bad = client.trigger_workflow("run_careful", {"key": "bad", "kind": "badstr"})
    bad_str = client.trigger_workflow("run_bad_str", {"key": "bs"})

    # In retry_on: retried, then fine.
    assert client.result(rate, timeout=30) == "ok on attempt 2"
    assert len(kg.effects("start", "picky", "rate")) == 2
    # Not in retry_on: one attempt.
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(key, timeout=30)
    assert len(kg.effects("start", "picky", "key")) == 1
    (attempt,) = of_type(client.history(key.workflow_id), ev.TaskAttemptFailed)
    assert (attempt.reason, attempt.cause) == ("non_retryable", "not_in_retry_on")
    assert "not retried: KeyError is not in the task's retry_on" in _show(kg, key.workflow_id)
    # In give_up_on: one attempt; any other error is retried.
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(value, timeout=30)
    assert len(kg.effects("start", "careful", "value")) == 1
    (attempt,) = of_type(client.history(value.workflow_id), ev.TaskAttemptFailed)
    assert (attempt.reason, attempt.cause) == ("non_retryable", "give_up_on")
    assert "not retried: ValueError is in the task's give_up_on" in _show(kg, value.workflow_id)
    assert client.result(transient, timeout=30) == "ok on attempt 3"
    assert len(kg.effects("start", "careful", "tr")) == 3
    # An exception whose str() fails is still classified and recorded: retried when
    # the rules allow it, not retried when they do not.
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(bad, timeout=30)
    assert len(kg.effects("start", "careful", "bad")) == 6
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(bad_str, timeout=30)
    assert len(kg.effects("start", "bad_str_not_retried", "bs")) == 1
    (attempt,) = of_type(client.history(bad_str.workflow_id), ev.TaskAttemptFailed)
    assert attempt.reason == "non_retryable"
    assert attempt.error.type.endswith("BadStr")
    assert "str() of the" in attempt.error.message
