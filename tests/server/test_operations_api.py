"""``/api/v1/operations`` and ``/api/v1/reviews`` on a real server and worker, and
``Client.get_operation`` / ``review_operation`` over HTTP: statuses, evidence,
permissions, audit, and bad input (unknown 404, malformed or overlong 400)."""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest

import keepgoing
from keepgoing import errors

from ._support import Stack, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
def client(stack: Stack) -> Iterator[keepgoing.Client]:
    with keepgoing.Client(stack.url, token=stack.admin) as c:
        yield c


def _waiting(client: keepgoing.Client, workflow_id: str) -> keepgoing.Operation:
    def found() -> keepgoing.Operation | None:
        mine = [o for o in client.list_reviews() if o.workflow_id == workflow_id]
        return mine[0] if mine else None

    return wait_until(found, 30, f"{workflow_id} to wait for review")


def test_a_completed_step_reads_completed_with_its_result(
    client: keepgoing.Client, admin: httpx.Client
) -> None:
    handle = client.trigger_workflow("sum_two", {"a": 2, "b": 3}, wait=False)
    assert client.result(handle, timeout=20) == 5
    op = f"op-{handle.run_id}-1"
    found = client.get_operation(op)
    assert (found.status, found.result, found.task, found.rounds) == ("completed", 5, "add", (1,))
    body = admin.get(f"/api/v1/operations/{op}").json()
    assert (body["status"], body["result"], body["waiting_for_review"]) == ("completed", 5, False)


def test_an_uncertain_step_waits_for_review_and_an_approval_resumes_it(
    client: keepgoing.Client, admin: httpx.Client, stack: Stack
) -> None:
    handle = client.trigger_workflow("unsure", {"key": f"k-{uuid.uuid4().hex[:6]}"}, wait=False)
    waiting = _waiting(client, handle.workflow_id)
    assert waiting.status == "uncertain" and waiting.evidence is not None
    assert "connection dropped" in waiting.evidence["error"]["message"]
    assert "sent the write" in waiting.evidence["logs"]  # what the attempt printed
    listed = admin.get("/api/v1/reviews").json()["operations"]
    assert waiting.operation_id in [o["operation_id"] for o in listed]

    reviewer = stack.token("reviewer-a", "runs.read", "messages.send")
    with keepgoing.Client(stack.url, token=reviewer) as c:
        c.review_operation(waiting.operation_id, "approve", result="confirmed by phone")
    assert client.result(handle, timeout=20) == "confirmed by phone"
    done = client.get_operation(waiting.operation_id)
    assert done.status == "completed" and done.result == "confirmed by phone"
    ((review,),) = [done.reviews]
    assert review["decision"] == "approve" and review["sender_kind"] == "user"
    (audit,) = client.list_audit(action="operation.review", workflow_id=handle.workflow_id)
    assert audit.actor_id == review["sender_id"] and audit.detail["decision"] == "approve"
    with pytest.raises(errors.OperationNotUncertainError):
        client.review_operation(waiting.operation_id, "approve", result=1)


def test_a_retry_runs_the_step_again_under_the_same_operation_id(
    client: keepgoing.Client,
) -> None:
    handle = client.trigger_workflow("unsure", {"key": "again"}, wait=False)
    waiting = _waiting(client, handle.workflow_id)
    client.review_operation(waiting.operation_id, "retry", reason="not in the CRM")
    assert client.result(handle, timeout=20) == "written again"
    done = client.get_operation(waiting.operation_id)
    assert (done.status, len(done.rounds), done.attempts) == ("completed", 2, 2)


def test_bad_operation_ids(client: keepgoing.Client, admin: httpx.Client) -> None:
    unknown = admin.get("/api/v1/operations/op-0123456789abcdef-3")
    assert unknown.status_code == 404 and unknown.json()["code"] == "operation_not_found"
    long = admin.get("/api/v1/operations/op-" + "a" * 300 + "-1")
    assert long.status_code == 400
    assert long.json()["code"] == "invalid_operation_id"
    assert "at most 220 characters" in long.json()["message"]
    malformed = admin.get("/api/v1/operations/not-an-operation")
    assert malformed.status_code == 400 and "op-<run_id>-<step>" in malformed.json()["message"]
    with pytest.raises(errors.OperationNotFoundError):
        client.get_operation("op-0123456789abcdef-3")
    with pytest.raises(errors.InvalidRequestError, match="at most 220"):
        client.get_operation("op-" + "a" * 300 + "-1")
    bad = admin.post("/api/v1/operations/op-0123456789abcdef-3/review", json={"decision": "no"})
    assert bad.status_code == 400
    missing = admin.post(
        "/api/v1/operations/op-0123456789abcdef-3/review", json={"decision": "retry"}
    )
    assert missing.status_code == 404
    assert admin.get("/api/v1/reviews", params={"limit": 0}).status_code == 400


def test_permissions_and_bad_reviews(stack: Stack, client: keepgoing.Client) -> None:
    handle = client.trigger_workflow("unsure", {"key": "perm"}, wait=False)
    waiting = _waiting(client, handle.workflow_id)
    reader = stack.token("op-reader", "runs.read")
    sender = stack.token("op-sender", "messages.send")
    with stack.api(reader) as r, stack.api(sender) as s:
        path = f"/api/v1/operations/{waiting.operation_id}"
        assert r.get(path).status_code == 200
        assert s.get(path).status_code == 403
        assert s.get("/api/v1/reviews").status_code == 403
        refused = r.post(f"{path}/review", json={"decision": "fail"})
        assert refused.status_code == 403 and "messages.send" in refused.json()["message"]
    with stack.api() as anonymous:
        assert anonymous.get(f"/api/v1/operations/{waiting.operation_id}").status_code == 401
    review = f"/api/v1/operations/{waiting.operation_id}/review"
    with stack.api(stack.admin) as admin:
        huge = admin.post(review, json={"decision": "approve", "result": "x" * 300_000})
        assert huge.status_code == 413
        deep: object = 1
        for _ in range(200):
            deep = [deep]
        nested = admin.post(review, json={"decision": "approve", "result": deep})
        assert nested.status_code == 400 and "levels deep" in nested.json()["message"]
        garbled = admin.post(review, content=b'{"decision": "approve", "result": "\\udc00"}')
        assert garbled.status_code == 400
        not_json = admin.post(review, content=b"{", headers={"Content-Type": "application/json"})
        assert not_json.status_code == 400
        with_result = admin.post(review, json={"decision": "fail", "result": 1})
        assert with_result.status_code == 400 and "only approve" in with_result.json()["message"]
    # None of those was sent: the run still waits, and nothing is in the audit log.
    assert client.get_operation(waiting.operation_id).waiting_for_review
    assert client.list_audit(action="operation.review", workflow_id=handle.workflow_id) == []
    client.review_operation(waiting.operation_id, "fail", reason="refused")
    with pytest.raises(keepgoing.WorkflowFailedError, match="failed by reviewer"):
        client.result(handle, timeout=20)


def test_two_reviewers_approving_at_once_one_is_accepted(
    client: keepgoing.Client, stack: Stack
) -> None:
    handle = client.trigger_workflow("unsure", {"key": f"race-{uuid.uuid4().hex[:6]}"})
    waiting = _waiting(client, handle.workflow_id)
    path = f"/api/v1/operations/{waiting.operation_id}/review"
    reviewers = [stack.token(f"racer-{i}", "runs.read", "messages.send") for i in range(2)]
    apis = [stack.api(token) for token in reviewers]
    barrier = threading.Barrier(len(apis))

    def approve(api: httpx.Client, i: int) -> httpx.Response:
        barrier.wait(10)
        return api.post(path, json={"decision": "approve", "result": f"by {i}"})

    try:
        with concurrent.futures.ThreadPoolExecutor(len(apis)) as pool:
            answers = list(pool.map(approve, apis, range(len(apis))))
    finally:
        for api in apis:
            api.close()
    codes = sorted(a.status_code for a in answers)
    assert codes == [202, 409], [a.text for a in answers]
    (accepted,) = [i for i, a in enumerate(answers) if a.status_code == 202]
    (refused,) = [a for a in answers if a.status_code == 409]
    assert refused.json()["code"] == "operation_not_uncertain"
    assert client.result(handle, timeout=20) == f"by {accepted}"
    audits = client.list_audit(action="operation.review", workflow_id=handle.workflow_id)
    assert [a.actor_id for a in audits] == [f"racer-{accepted}"]


def test_after_the_workflow_stops_waiting_the_operation_says_so_and_refuses_decisions(
    client: keepgoing.Client,
) -> None:
    handle = client.trigger_workflow(
        "unsure_with_deadline", {"key": f"late-{uuid.uuid4().hex[:6]}", "seconds": 1.0}
    )
    op = f"op-{handle.run_id}-1"

    def gave_up() -> keepgoing.Operation | None:
        try:
            found = client.get_operation(op)
        except errors.OperationNotFoundError:
            return None
        return found if found.abandoned_at is not None else None

    found = wait_until(gave_up, 30, "the workflow's own wait to time out")
    assert (found.status, found.waiting_for_review, found.run_status) == (
        "uncertain",
        False,
        "running",
    )
    assert found.evidence is not None and "stopped waiting" in found.evidence["note"]
    assert op not in [o.operation_id for o in client.list_reviews()]
    with pytest.raises(errors.OperationNotUncertainError, match="stopped waiting"):
        client.review_operation(op, "approve", result="too late")
    assert client.list_audit(action="operation.review", workflow_id=handle.workflow_id) == []
    client.send_workflow_message(handle.workflow_id, "finish")
    assert client.result(handle, timeout=20) == "gave up"
    after = client.get_operation(op)
    assert (after.status, after.result) == ("uncertain", None)  # never "completed"


def test_a_raw_message_named_like_a_decision_is_refused_over_http(
    client: keepgoing.Client, admin: httpx.Client
) -> None:
    handle = client.trigger_workflow("unsure", {"key": f"raw-{uuid.uuid4().hex[:6]}"})
    op = f"op-{handle.run_id}-1"
    forged = {"name": f"review:{op}", "payload": {"decision": "approve", "cmd": 1}}
    refused = admin.post(f"/api/v1/runs/{handle.workflow_id}/messages", json=forged)
    assert refused.status_code == 400 and "kept for review decisions" in refused.json()["message"]
    with pytest.raises(errors.InvalidRequestError, match="kept for review decisions"):
        client.send_workflow_message(handle.workflow_id, f"review:{op}", {"cmd": 1})
    waiting = _waiting(client, handle.workflow_id)  # it still waits: nothing approved it
    assert waiting.operation_id == op and waiting.reviews == ()
    client.review_operation(op, "fail", reason="cleanup")
