"""``Client(url=..., token=...)``: the store mode's methods over HTTP.

The first half runs against a real server and worker; the second uses
``httpx.MockTransport`` to pin down retries: idempotent calls are retried
with backoff on network failures and 5xx, everything else fails at once with
a clear error.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

import keepgoing
from keepgoing import errors
from keepgoing._client.client import Client
from keepgoing._client.http_backend import HttpBackend
from keepgoing._history import events as ev

from ._support import Stack

pytestmark = pytest.mark.timeout(60)


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(stack: Stack) -> Iterator[keepgoing.Client]:
    with keepgoing.Client(stack.url, token=stack.admin) as c:
        yield c


# -- against a real server -----------------------------------------------------------------
@pytest.mark.integration
def test_trigger_wait_read(client: keepgoing.Client) -> None:
    workflow_id = _id("http")
    assert (
        client.trigger_workflow("sum_two", {"a": 2, "b": 5}, workflow_id=workflow_id, wait=True)
        == 7
    )
    run = client.get_run(workflow_id)
    assert (run.status, run.result, run.workflow_name) == ("completed", 7, "sum_two")
    history = client.history(workflow_id)
    assert isinstance(history[0], ev.WorkflowStarted) and isinstance(
        history[-1], ev.WorkflowCompleted
    )
    assert workflow_id in [r.workflow_id for r in client.list_runs(workflow="sum_two", limit=1000)]
    assert client.list_runs(status="completed", limit=5)
    assert any(w.queues == ["default"] for w in client.list_workers())
    assert any(q["queue"] == "default" for q in client.list_queues())


@pytest.mark.integration
def test_handles_results_and_errors(client: keepgoing.Client) -> None:
    handle = client.trigger_workflow("broken")
    with pytest.raises(errors.WorkflowFailedError, match="broken on purpose"):
        client.result(handle, timeout=20)
    sleeping = client.trigger_workflow("sleeper", {"seconds": 30})
    with pytest.raises(TimeoutError):
        client.result(sleeping, timeout=0.2)
    with pytest.raises(errors.WorkflowAlreadyRunningError) as running:
        client.trigger_workflow("sleeper", {"seconds": 1}, workflow_id=sleeping.workflow_id)
    assert running.value.run_id == sleeping.run_id
    client.cancel_workflow(sleeping.workflow_id, "done with it")
    with pytest.raises(errors.WorkflowFailedError, match="done with it"):
        client.result(sleeping, timeout=20)
    with pytest.raises(errors.WorkflowNotRunningError):
        client.cancel_workflow(sleeping.workflow_id)
    with pytest.raises(errors.RunNotFoundError):
        client.get_run("no-such-workflow-id")
    with pytest.raises(errors.WorkflowNotFoundError):
        client.trigger_workflow("no_such_workflow", strict=True)
    with pytest.raises(errors.ConfigurationError, match="needs the store"):
        client.run_workflow(None)  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigurationError):
        _ = client.store


@pytest.mark.integration
def test_messages_events_lineage_audit(client: keepgoing.Client, stack: Stack) -> None:
    review = client.trigger_workflow("await_review", {"account": "acct-9"})
    message_id = client.send_workflow_message(review.workflow_id, "review", {"approved": True})
    assert message_id
    outcome = client.result(review, timeout=20)
    assert (outcome["sender_kind"], outcome["sender_id"]) == ("user", "root")
    job = _id("job")
    waiting = client.trigger_workflow("await_job", {"job": job})
    assert client.publish_event("job.done", job, {"ok": 1}, event_id=f"{job}-1") == f"{job}-1"
    assert client.result(waiting, timeout=20)["payload"] == {"ok": 1}
    family = client.lineage(review.workflow_id)
    assert family["run"].workflow_id == review.workflow_id and family["children"] == []
    sends = client.list_audit(action="message.send", workflow_id=review.workflow_id)
    assert [(e.actor_kind, e.actor_id) for e in sends] == [("user", "root")]
    with pytest.raises(errors.PayloadTooLargeError):
        client.send_workflow_message(review.workflow_id, "review", "x" * 300_000)


@pytest.mark.integration
def test_tokens_and_permissions(stack: Stack) -> None:
    bad_token = "kg_0000000000000000_" + "a" * 43
    with (
        keepgoing.Client(stack.url, token=bad_token) as bad,
        pytest.raises(errors.AuthenticationError),
    ):
        bad.list_runs()
    reader = stack.token("reader2", "runs.read")
    with keepgoing.Client(stack.url, token=reader) as c:
        assert isinstance(c.list_runs(), list)
        with pytest.raises(errors.PermissionDeniedError, match=r"workflows\.trigger"):
            c.trigger_workflow("sum_two", {"a": 1, "b": 1})


@pytest.mark.integration
def test_the_environment_selects_http_mode(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEPGOING_URL", stack.url)
    monkeypatch.setenv("KEEPGOING_TOKEN", stack.admin)
    with keepgoing.Client() as c:
        handle = c.trigger_workflow("sum_two", {"a": 1, "b": 1})
        assert c.result(handle, timeout=20) == 2
    with pytest.raises(errors.ConfigurationError, match="not both"):
        keepgoing.Client(stack.url, store="memory://")


def test_a_url_must_be_http() -> None:
    with pytest.raises(errors.ConfigurationError, match="http://"):
        keepgoing.Client("localhost:8711")


# -- retries, with a mock transport -----------------------------------------------------------
def _scripted(*answers: int | Exception) -> tuple[list[httpx.Request], httpx.MockTransport]:
    """A transport that answers with each status (or raises each error) in turn."""
    seen: list[httpx.Request] = []
    script = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if answer >= 500:
            return httpx.Response(answer, json={"code": "store_error", "message": "down"})
        return httpx.Response(answer, json=_RUN)

    return seen, httpx.MockTransport(handle)


_RUN = {
    "workflow_name": "wf",
    "workflow_id": "w",
    "run_id": "r",
    "status": "running",
    "input": {},
    "task_queue": "default",
    "code_version": "",
    "created_at": 1.0,
    "updated_at": 1.0,
}


def test_idempotent_calls_are_retried_on_network_errors_and_5xx() -> None:
    seen, transport = _scripted(httpx.ConnectError("refused"), 503, 502, 200)
    client = Client._over(HttpBackend("http://kg.test", "t", backoff=0, transport=transport))
    assert client.get_run("w").run_id == "r"
    assert len(seen) == 4
    assert seen[0].headers["authorization"] == "Bearer t"


def test_retries_run_out_with_a_clear_error() -> None:
    _, transport = _scripted(*[httpx.ConnectError("refused")] * 3)
    client = Client._over(HttpBackend("http://kg.test", retries=2, backoff=0, transport=transport))
    with pytest.raises(errors.ServerError, match=r"could not reach .* after 3 attempts"):
        client.get_run("w")
    _, transport = _scripted(503, 503, 503)
    client = Client._over(HttpBackend("http://kg.test", retries=2, backoff=0, transport=transport))
    with pytest.raises(errors.ServerError) as failed:
        client.get_run("w")
    assert failed.value.status == 503 and failed.value.error_code == "store_error"


@pytest.mark.parametrize("failure", [503, httpx.ReadTimeout("slow")])
def test_a_message_send_is_never_repeated(failure: int | Exception) -> None:
    seen, transport = _scripted(failure, 202)
    client = Client._over(HttpBackend("http://kg.test", backoff=0, transport=transport))
    with pytest.raises(errors.ServerError):
        client.send_workflow_message("w", "review", {"ok": True})
    assert len(seen) == 1


def test_starts_and_event_publishes_carry_idempotency_keys_across_retries() -> None:
    bodies: list[bytes] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        if len(bodies) == 1:
            return httpx.Response(503, json={"code": "store_error", "message": "down"})
        if request.url.path.endswith("/events"):
            return httpx.Response(
                202, json={"event_id": "e", "duplicate": False, "matched_runs": []}
            )
        return httpx.Response(201, json={"workflow_name": "wf", "workflow_id": "w", "run_id": "r"})

    client = Client._over(
        HttpBackend("http://kg.test", backoff=0, transport=httpx.MockTransport(handle))
    )
    client.trigger_workflow("wf", {"x": 1})
    assert len(bodies) == 2 and bodies[0] == bodies[1] and b'"request_id"' in bodies[0]
    bodies.clear()
    client.publish_event("t", "c", None)
    assert len(bodies) == 2 and bodies[0] == bodies[1] and b'"event_id"' in bodies[0]


def test_a_batch_is_retried_with_the_same_request_ids_and_answers_in_order() -> None:
    bodies: list[bytes] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        if len(bodies) == 1:
            raise httpx.ReadTimeout("the answer was lost")  # the batch may have committed
        sent = json.loads(request.content)
        runs = [
            {"workflow_name": "wf", "workflow_id": f"wf-{rid}", "run_id": rid, "created": False}
            for rid in sent["request_ids"]
        ]
        return httpx.Response(200, json={"runs": runs, "warning": None})

    client = Client._over(
        HttpBackend("http://kg.test", backoff=0, transport=httpx.MockTransport(handle))
    )
    handles = client.trigger_many("wf", [{"x": 1}, {"x": 2}])
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    sent = json.loads(bodies[0])
    assert sent["inputs"] == [{"x": 1}, {"x": 2}] and len(set(sent["request_ids"])) == 2
    assert [h.run_id for h in handles] == sent["request_ids"]


def test_a_running_workflow_id_of_a_batch_keeps_its_note_over_http() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        details = {"workflow_id": "w", "run_id": "r", "start": 1, "notes": ["start #1 of it"]}
        return httpx.Response(
            409, json={"code": "workflow_running", "message": "m", "details": details}
        )

    client = Client._over(
        HttpBackend("http://kg.test", backoff=0, transport=httpx.MockTransport(handle))
    )
    with pytest.raises(errors.WorkflowAlreadyRunningError, match="'w'") as caught:
        client.trigger_many("wf", [{}, {}], workflow_ids=["v", "w"])
    assert caught.value.__notes__ == ["start #1 of it"]
    assert (caught.value.workflow_id, caught.value.run_id) == ("w", "r")


def test_client_errors_are_not_retried_and_map_to_their_class() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"code": "run_not_found", "message": "no run"})

    calls = 0

    def counting(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return handle(request)

    client = Client._over(
        HttpBackend("http://kg.test", backoff=0, transport=httpx.MockTransport(counting))
    )
    with pytest.raises(errors.RunNotFoundError, match="no run"):
        client.get_run("w")
    assert calls == 1


def test_a_response_that_is_not_the_api_is_a_server_error() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(502, text="<html>bad gateway</html>"))
    client = Client._over(HttpBackend("http://kg.test", retries=0, transport=transport))
    with pytest.raises(errors.ServerError, match="bad gateway"):
        client.get_run("w")


def test_ids_are_escaped_into_the_path() -> None:
    seen, transport = _scripted(200)
    Client._over(HttpBackend("http://kg.test", transport=transport)).get_run("a/b c?d")
    # `/` too: the server routes on the raw path, so `a%2Fhistory` is run `a/history`
    assert seen[0].url.raw_path == b"/api/v1/runs/a%2Fb%20c%3Fd"


def test_over_http_a_start_by_an_unserved_name_waits_and_unblock_answers_like_the_store(
    client: keepgoing.Client,
) -> None:
    handle = client.trigger_workflow("ghost.http", workflow_id=_id("ghost"))
    run = client.get_run(handle.workflow_id)
    assert run.waiting_for == "waiting for a worker that serves ghost.http"
    assert client.send_workflow_message(handle.workflow_id, "go", {"n": 1})
    with pytest.warns(keepgoing.UnknownWorkflowWarning, match="did you mean 'sum_two'"):
        client.trigger_workflow("sum_twoo", {"a": 1, "b": 2})
    request_id = uuid.uuid4().hex
    first = client.trigger_workflow("sum_two", {"a": 1, "b": 2}, request_id=request_id)
    again = client.trigger_workflow("sum_two", {"a": 1, "b": 2}, request_id=request_id)
    assert first == again and first.run_id == request_id
    assert client.result(first, timeout=20) == 3
    assert len(client.get_run(first.workflow_id).code_versions) == 1
    with pytest.raises(errors.WorkflowNotRunningError, match="not blocked"):
        client.unblock_workflow(handle.workflow_id)
    with pytest.raises(errors.RunNotFoundError):
        client.unblock_workflow("no-such-workflow-id")
    with pytest.raises(errors.RunNotFoundError):
        client.send_workflow_message("no-such-workflow-id", "go")
