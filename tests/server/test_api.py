"""The HTTP API through real HTTP on a real server process, with a real worker.

Every status code the API promises is provoked here: 200/201/202, 400 (bad
JSON, bad schema), 401 (no token, bad token, revoked token), 403 (missing
permission, and then nothing is stored), 404, 409, 413.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from ._support import Stack, run_store, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def start(api: httpx.Client, workflow: str, input: Any = None, **extra: Any) -> dict[str, Any]:
    response = api.post("/api/v1/runs", json={"workflow": workflow, "input": input, **extra})
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def result(api: httpx.Client, workflow_id: str, timeout: float = 20) -> dict[str, Any]:
    response = api.get(f"/api/v1/runs/{workflow_id}/result", params={"timeout": timeout})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["done"], body
    return body["run"]


def wait_status(api: httpx.Client, workflow_id: str, status: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        run = api.get(f"/api/v1/runs/{workflow_id}").json()
        return run if run["status"] == status else None

    return wait_until(check, 20, f"{workflow_id} to be {status}")


def waiting_for(api: httpx.Client, workflow_id: str, event_type: str) -> bool:
    events = api.get(f"/api/v1/runs/{workflow_id}/history").json()["events"]
    return any(e["type"] == event_type for e in events)


def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert body["message"]
    return body


# -- health, docs ----------------------------------------------------------------------
def test_healthz_needs_no_token_and_the_spec_is_served(stack: Stack) -> None:
    with stack.api() as anonymous:
        assert anonymous.get("/healthz").json()["status"] == "ok"
        # A readiness probe carries no token either, on a server with authentication.
        assert anonymous.get("/readyz").json() == {"status": "ready"}
        spec = anonymous.get("/openapi.json").json()
    assert "/api/v1/runs/{workflow_id}/messages" in spec["paths"]
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            # FastAPI's validation 422 never: schema violations are 400s.
            assert "422" not in operation["responses"], path


# -- 401 -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Bearer not-a-token", "Basic abc", "Bearer kg_0123456789abcdef_" + "x" * 43],
)
def test_no_or_bad_token_is_401(stack: Stack, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    with stack.api() as client:
        response = client.get("/api/v1/runs", headers=headers)
    error(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"] == "Bearer"


def test_a_revoked_token_gets_401(stack: Stack, admin: httpx.Client) -> None:
    created = admin.post(
        "/api/v1/tokens", json={"name": "temp", "kind": "service", "permissions": ["runs.read"]}
    )
    assert created.status_code == 201, created.text
    secret, info = created.json()["token"], created.json()["info"]
    with stack.api(secret) as client:
        assert client.get("/api/v1/runs").status_code == 200
        revoked = admin.delete(f"/api/v1/tokens/{info['token_id']}")
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
        body = error(client.get("/api/v1/runs"), 401, "unauthenticated")
    assert "revoked" in body["message"]
    listed = admin.get("/api/v1/tokens").json()["tokens"]
    assert info["token_id"] not in [t["token_id"] for t in listed]
    assert all("hash" not in json.dumps(t) and secret not in json.dumps(t) for t in listed)


def test_a_wrong_secret_for_a_real_token_id_is_401(stack: Stack, admin: httpx.Client) -> None:
    token_id = admin.get("/api/v1/tokens").json()["tokens"][0]["token_id"]
    with stack.api(f"kg_{token_id}_" + "A" * 43) as client:
        error(client.get("/api/v1/runs"), 401, "unauthenticated")


# -- 403 -----------------------------------------------------------------------------------
def test_a_token_without_messages_send_gets_403_and_nothing_is_stored(
    stack: Stack, admin: httpx.Client
) -> None:
    workflow_id = _id("review")
    start(admin, "await_review", {"account": "a-1"}, workflow_id=workflow_id)
    wait_until(lambda: waiting_for(admin, workflow_id, "MessageWaitStarted"), 20, "the wait")
    reader = stack.token("reader", "runs.read", "workflows.trigger")
    with stack.api(reader) as client:
        body = error(
            client.post(
                f"/api/v1/runs/{workflow_id}/messages",
                json={"name": "review", "payload": {"approved": True}},
            ),
            403,
            "permission_denied",
        )
    assert body["details"] == {"permission": "messages.send"}
    history = admin.get(f"/api/v1/runs/{workflow_id}/history").json()["events"]
    assert not [e for e in history if e["type"] == "MessageReceived"]
    audit = admin.get("/api/v1/audit", params={"workflow_id": workflow_id}).json()["entries"]
    assert [e["action"] for e in audit] == ["workflow.trigger"]
    assert admin.post(f"/api/v1/runs/{workflow_id}/cancel", json={}).status_code == 202


@pytest.mark.parametrize(
    ("method", "path", "permission"),
    [
        ("POST", "/api/v1/runs", "workflows.trigger"),
        ("POST", "/api/v1/events", "events.publish"),
        ("POST", "/api/v1/runs/x/cancel", "runs.cancel"),
        ("GET", "/api/v1/audit", "admin"),
        ("GET", "/api/v1/tokens", "admin"),
    ],
)
def test_each_permission_is_checked(stack: Stack, method: str, path: str, permission: str) -> None:
    with stack.api(stack.token("nobody", "volumes.read")) as client:
        body = error(client.request(method, path, json={}), 403, "permission_denied")
    assert body["details"]["permission"] == permission


# -- the sender comes from the token -----------------------------------------------------
@pytest.mark.parametrize("kind", ["user", "service"])
def test_a_forged_sender_in_the_body_is_ignored(
    stack: Stack, admin: httpx.Client, kind: str
) -> None:
    workflow_id = _id("forge")
    start(admin, "await_review", {"account": "a-2"}, workflow_id=workflow_id)
    secret = stack.token("alice", "messages.send", kind=kind)
    token_id = secret.split("_")[1]
    body = {
        "name": "review",
        "payload": {"approved": True},
        "sender_kind": "workflow",
        "sender_id": "ceo",
    }
    with stack.api(secret) as client:
        sent = client.post(f"/api/v1/runs/{workflow_id}/messages", json=body)
    assert sent.status_code == 202, sent.text
    expected = ("user", "alice") if kind == "user" else ("service_token", token_id)
    assert (sent.json()["sender_kind"], sent.json()["sender_id"]) == expected
    outcome = result(admin, workflow_id)["result"]
    assert (outcome["sender_kind"], outcome["sender_id"]) == expected
    assert secret not in json.dumps(outcome)
    audit = admin.get("/api/v1/audit", params={"action": "message.send"}).json()["entries"]
    mine = [e for e in audit if e["workflow_id"] == workflow_id]
    assert [(e["actor_kind"], e["actor_id"]) for e in mine] == [expected]


# -- 400 -----------------------------------------------------------------------------------
def test_bad_json_is_400(admin: httpx.Client) -> None:
    response = admin.post(
        "/api/v1/runs", content=b'{"workflow": ', headers={"content-type": "application/json"}
    )
    body = error(response, 400, "invalid_request")
    assert "JSON" in body["message"]


@pytest.mark.parametrize(
    ("method", "path", "payload", "params"),
    [
        ("POST", "/api/v1/runs", {"input": {}}, None),
        ("POST", "/api/v1/runs", {"workflow": "sum_two", "workflow_id": "-bad"}, None),
        ("POST", "/api/v1/runs", {"workflow": "sum_two", "input": "text"}, None),
        ("POST", "/api/v1/events", {"event_type": "x"}, None),
        ("POST", "/api/v1/tokens", {"name": "a", "kind": "robot", "permissions": ["admin"]}, None),
        ("GET", "/api/v1/runs", None, {"limit": 0}),
        ("GET", "/api/v1/runs", None, {"status": "sleeping"}),
        ("GET", "/api/v1/runs", None, {"created_after": "nan"}),
        ("GET", "/api/v1/runs/x/result", None, {"timeout": 3600}),
    ],
)
def test_a_body_or_query_outside_the_schema_is_400(
    admin: httpx.Client, method: str, path: str, payload: Any, params: Any
) -> None:
    body = error(admin.request(method, path, json=payload, params=params), 400, "invalid_request")
    assert body["details"]["errors"]


def test_an_unknown_permission_is_400(admin: httpx.Client) -> None:
    response = admin.post(
        "/api/v1/tokens", json={"name": "a", "kind": "user", "permissions": ["root"]}
    )
    assert "root" in error(response, 400, "invalid_request")["message"]


def test_a_payload_that_is_not_json_data_is_400(admin: httpx.Client) -> None:
    response = admin.post(
        "/api/v1/runs",
        content=b'{"workflow": "sum_two", "input": {"a": NaN, "b": 1}}',
        headers={"content-type": "application/json"},
    )
    error(response, 400, "invalid_payload")


def test_payloads_nested_too_deep_are_400(admin: httpx.Client) -> None:
    deep = "[" * 101 + "]" * 101
    for path, body in (
        ("/api/v1/runs", '{"workflow": "sum_two", "input": {"a": ' + deep + "}}"),
        ("/api/v1/runs/anyone/messages", '{"name": "m", "payload": ' + deep + "}"),
        ("/api/v1/events", '{"event_type": "t", "correlation_id": "c", "payload": ' + deep + "}"),
    ):
        response = admin.post(path, content=body, headers={"content-type": "application/json"})
        assert "100 levels" in error(response, 400, "invalid_payload")["message"]
    too_deep_to_parse = '{"name": "m", "payload": ' + "[" * 5000 + "]" * 5000 + "}"
    response = admin.post(
        "/api/v1/runs/anyone/messages",
        content=too_deep_to_parse,
        headers={"content-type": "application/json"},
    )
    error(response, 400, "invalid_request")


# -- 404 -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs/no-such-id",
        "/api/v1/runs/no-such-id/history",
        "/api/v1/runs/no-such-id/result?timeout=0",
        "/api/v1/runs/no-such-id/lineage",
    ],
)
def test_an_unknown_run_is_404(admin: httpx.Client, path: str) -> None:
    error(admin.get(path), 404, "run_not_found")


def test_an_unknown_workflow_or_token_is_404(admin: httpx.Client) -> None:
    strict = {"workflow": "nope", "strict": True}
    error(admin.post("/api/v1/runs", json=strict), 404, "workflow_not_found")
    error(admin.post("/api/v1/runs/nope/messages", json={"name": "review"}), 404, "run_not_found")
    error(admin.delete("/api/v1/tokens/0123456789abcdef"), 404, "token_not_found")
    error(admin.get("/api/v1/nothing-here"), 404, "not_found")


# -- 409 -----------------------------------------------------------------------------------
def test_starting_a_running_id_with_other_input_is_409(admin: httpx.Client) -> None:
    workflow_id = _id("busy")
    first = start(admin, "sleeper", {"seconds": 30}, workflow_id=workflow_id)
    response = admin.post(
        "/api/v1/runs",
        json={"workflow": "sleeper", "input": {"seconds": 5}, "workflow_id": workflow_id},
    )
    body = error(response, 409, "workflow_running")
    assert body["details"] == {"workflow_id": workflow_id, "run_id": first["run_id"]}
    admin.post(f"/api/v1/runs/{workflow_id}/cancel", json={"reason": "test over"})


def test_messages_and_cancels_to_an_ended_run_are_409(admin: httpx.Client) -> None:
    workflow_id = _id("ended")
    start(admin, "sum_two", {"a": 1, "b": 2}, workflow_id=workflow_id)
    assert result(admin, workflow_id)["result"] == 3
    message = admin.post(f"/api/v1/runs/{workflow_id}/messages", json={"name": "late"})
    error(message, 409, "workflow_not_running")
    error(admin.post(f"/api/v1/runs/{workflow_id}/cancel"), 409, "workflow_not_running")


# -- 413 -----------------------------------------------------------------------------------
def test_an_oversized_message_is_413_and_not_stored(admin: httpx.Client) -> None:
    workflow_id = _id("big")
    start(admin, "await_review", {"account": "a-3"}, workflow_id=workflow_id)
    response = admin.post(
        f"/api/v1/runs/{workflow_id}/messages",
        json={"name": "review", "payload": "x" * (300 * 1024)},
    )
    assert "256 KiB" in error(response, 413, "payload_too_large")["message"]
    history = admin.get(f"/api/v1/runs/{workflow_id}/history").json()["events"]
    assert not [e for e in history if e["type"] == "MessageReceived"]
    admin.post(f"/api/v1/runs/{workflow_id}/cancel", json={})


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_server_limit_is_413(admin: httpx.Client, chunked: bool) -> None:
    blob = b'{"name": "x", "payload": "' + b"y" * (2 * 1024 * 1024) + b'"}'
    content: Any = iter([blob[:1000], blob[1000:]]) if chunked else blob
    response = admin.post(
        "/api/v1/runs/whatever/messages",
        content=content,
        headers={"content-type": "application/json"},
    )
    error(response, 413, "payload_too_large")


# -- runs ------------------------------------------------------------------------------------
def test_start_is_idempotent(admin: httpx.Client) -> None:
    workflow_id, request_id = _id("idem"), uuid.uuid4().hex
    body = {"input": {"seconds": 30}, "workflow_id": workflow_id, "request_id": request_id}
    first = admin.post("/api/v1/runs", json={"workflow": "sleeper", **body})
    again = admin.post("/api/v1/runs", json={"workflow": "sleeper", **body})
    same_input = admin.post(
        "/api/v1/runs",
        json={"workflow": "sleeper", "input": {"seconds": 30}, "workflow_id": workflow_id},
    )
    assert first.status_code == 201 and first.json()["created"] is True
    assert again.status_code == 200 and again.json() == {**first.json(), "created": False}
    assert same_input.status_code == 200 and same_input.json()["run_id"] == first.json()["run_id"]
    runs = admin.get("/api/v1/runs", params={"workflow": "sleeper"}).json()["runs"]
    assert len([r for r in runs if r["workflow_id"] == workflow_id]) == 1
    admin.post(f"/api/v1/runs/{workflow_id}/cancel", json={})
    wait_status(admin, workflow_id, "cancelled")
    # The run has ended: the same request id still names it, never a second run.
    late = admin.post("/api/v1/runs", json={"workflow": "sleeper", **body})
    assert late.status_code == 200 and late.json()["run_id"] == first.json()["run_id"]


def test_result_long_poll(admin: httpx.Client) -> None:
    workflow_id = _id("poll")
    start(admin, "sleeper", {"seconds": 0.3}, workflow_id=workflow_id)
    pending = admin.get(f"/api/v1/runs/{workflow_id}/result", params={"timeout": 0})
    assert pending.status_code == 200
    assert pending.json()["done"] is False and pending.json()["run"]["status"] == "running"
    run = result(admin, workflow_id)
    assert (run["status"], run["result"]) == ("completed", "woke")


def test_a_failed_run_reports_its_error(admin: httpx.Client) -> None:
    workflow_id = _id("broken")
    start(admin, "broken", workflow_id=workflow_id)
    run = result(admin, workflow_id)
    assert run["status"] == "failed"
    assert run["error"]["type"].endswith("ValueError")
    assert run["error"]["message"] == "broken on purpose"


def test_list_runs_filters_and_pages(admin: httpx.Client, stack: Stack) -> None:
    ids = [_id("page") for _ in range(3)]
    for n, workflow_id in enumerate(ids):
        start(admin, "sum_two", {"a": n, "b": 1}, workflow_id=workflow_id)
    for workflow_id in ids:
        result(admin, workflow_id)
    created = admin.get(f"/api/v1/runs/{ids[0]}").json()["created_at"]
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = admin.get(
            "/api/v1/runs",
            params={
                "workflow": "sum_two",
                "status": "completed",
                "created_after": created,
                "limit": 2,
                "offset": offset,
            },
        ).json()
        seen += [r["workflow_id"] for r in page["runs"]]
        offset = page["next_offset"]
    assert [i for i in seen if i in ids] == list(reversed(ids))  # newest first
    before = admin.get("/api/v1/runs", params={"created_before": created, "workflow": "sum_two"})
    assert not set(ids) & {r["workflow_id"] for r in before.json()["runs"]}
    failed = admin.get("/api/v1/runs", params={"status": "failed"}).json()["runs"]
    assert all(r["status"] == "failed" for r in failed)


def test_history_has_every_step_with_its_attempts(admin: httpx.Client) -> None:
    workflow_id = _id("steps")
    start(admin, "two_steps", {"key": workflow_id}, workflow_id=workflow_id)
    assert result(admin, workflow_id)["result"] == workflow_id
    events = admin.get(f"/api/v1/runs/{workflow_id}/history").json()["events"]
    types = [e["type"] for e in events]
    assert types[0] == "WorkflowStarted" and types[-1] == "WorkflowCompleted"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    failed = [e for e in events if e["type"] == "TaskAttemptFailed"]
    assert [(e["name"], e["attempt"], e["reason"]) for e in failed] == [("flaky", 1, "error")]


def test_events_are_delivered_and_deduplicated(admin: httpx.Client) -> None:
    workflow_id, job = _id("job"), _id("corr")
    start(admin, "await_job", {"job": job}, workflow_id=workflow_id)
    wait_until(lambda: waiting_for(admin, workflow_id, "EventWaitStarted"), 20, "the wait")
    body = {"event_type": "job.done", "correlation_id": job, "payload": {"rows": 7}}
    first = admin.post("/api/v1/events", json={**body, "event_id": f"{job}-done"})
    again = admin.post("/api/v1/events", json={**body, "event_id": f"{job}-done"})
    assert first.status_code == again.status_code == 202
    assert first.json()["duplicate"] is False and again.json()["duplicate"] is True
    assert result(admin, workflow_id)["result"] == {
        "event_id": f"{job}-done",
        "payload": {"rows": 7},
    }
    # Without an event id the server makes one.
    anonymous = admin.post("/api/v1/events", json={"event_type": "x", "correlation_id": "y"})
    assert anonymous.status_code == 202 and anonymous.json()["event_id"]


def test_cancel(admin: httpx.Client) -> None:
    workflow_id = _id("cancel")
    start(admin, "sleeper", {"seconds": 60}, workflow_id=workflow_id)
    response = admin.post(f"/api/v1/runs/{workflow_id}/cancel", json={"reason": "no longer needed"})
    assert response.status_code == 202 and response.json()["run"]["workflow_id"] == workflow_id
    wait_status(admin, workflow_id, "cancelled")
    audit = admin.get("/api/v1/audit", params={"workflow_id": workflow_id}).json()["entries"]
    assert {(e["action"], e["actor_kind"], e["actor_id"]) for e in audit} == {
        ("workflow.trigger", "user", "root"),
        ("run.cancel", "user", "root"),
    }


def test_lineage(admin: httpx.Client) -> None:
    workflow_id = _id("parent")
    start(admin, "parent", {"n": 2}, workflow_id=workflow_id)
    assert result(admin, workflow_id)["result"] == [0, 2]
    found = admin.get(f"/api/v1/runs/{workflow_id}/lineage").json()
    assert found["parent"] is None and found["run"]["workflow_id"] == workflow_id
    children = found["children"]
    assert [c["workflow_name"] for c in children] == ["sum_two", "sum_two"]
    child = admin.get(f"/api/v1/runs/{children[0]['workflow_id']}/lineage").json()
    assert child["parent"]["workflow_id"] == workflow_id


def test_workers_and_queues(admin: httpx.Client, stack: Stack) -> None:
    workers = admin.get("/api/v1/workers").json()["workers"]
    worker_pids = {p.proc.pid for p in stack.processes if p.name == "worker"}
    assert worker_pids <= {w["pid"] for w in workers}
    queues = {q["queue"]: q for q in admin.get("/api/v1/queues").json()["queues"]}
    assert queues["default"]["workers"] >= 1
    assert queues["default"]["depth"] >= 0


def test_metrics(admin: httpx.Client) -> None:
    workflow_id = _id("metrics")
    start(admin, "sum_two", {"a": 2, "b": 2}, workflow_id=workflow_id)
    result(admin, workflow_id)
    response = admin.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for line in response.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples['keepgoing_runs{status="completed"}'] >= 1
    assert samples["keepgoing_step_duration_seconds_count"] >= 1
    assert (
        samples['keepgoing_step_duration_seconds_bucket{le="+Inf"}']
        == samples["keepgoing_step_duration_seconds_count"]
    )
    assert "keepgoing_lease_expiries_total" in samples
    assert samples["keepgoing_workers"] >= 1
    hung = [v for name, v in samples.items() if name.startswith("keepgoing_worker_hung_threads{")]
    assert len(hung) == samples["keepgoing_workers"] and set(hung) == {0.0}
    assert samples['keepgoing_server_http_requests_total{status="200"}'] >= 1


def test_the_audit_log_names_every_actor(stack: Stack, admin: httpx.Client) -> None:
    entries = admin.get("/api/v1/audit", params={"limit": 1000}).json()["entries"]
    actions = {e["action"] for e in entries}
    assert {"workflow.trigger", "message.send", "event.publish", "run.cancel"} <= actions
    assert {"token.create", "token.revoke"} <= actions
    assert all(e["actor_kind"] and e["actor_id"] for e in entries)
    assert [e["id"] for e in entries] == sorted((e["id"] for e in entries), reverse=True)


def test_the_server_logs_one_json_object_per_line(stack: Stack) -> None:
    server = next(p for p in stack.processes if p.name == "server")
    lines = [line for line in server.stderr().splitlines() if line.strip()]
    parsed = [json.loads(line) for line in lines]
    requests = [p for p in parsed if p.get("event") == "request"]
    assert requests and {"method", "path", "status", "duration_ms", "actor"} <= set(requests[0])
    assert any(r["actor"] == "user:root" for r in requests)


def test_the_token_secret_is_stored_only_as_a_hash(stack: Stack) -> None:
    secret = stack.token("hashcheck", "runs.read")
    token_id = secret.split("_")[1]
    record = run_store(stack.store_url, lambda s: s.get_token(token_id))
    assert record is not None and secret.split("_", 2)[2] not in repr(record)
    assert len(record.secret_hash) == 64
    assert secret.encode() not in stack.db.read_bytes()


# -- starts before any worker, and unblocking ------------------------------------------------
def test_a_start_by_a_name_no_worker_serves_is_queued(admin: httpx.Client) -> None:
    started = admin.post("/api/v1/runs", json={"workflow": "ghost.report"})
    assert started.status_code == 201, started.text
    assert started.json()["warning"] is None
    run = admin.get(f"/api/v1/runs/{started.json()['workflow_id']}").json()
    assert (run["status"], run["waiting_for"]) == (
        "running",
        "waiting for a worker that serves ghost.report",
    )
    typo = admin.post("/api/v1/runs", json={"workflow": "sum_twoo", "input": {"a": 1, "b": 2}})
    assert typo.status_code == 201 and "did you mean 'sum_two'" in typo.json()["warning"]
    served = admin.post("/api/v1/runs", json={"workflow": "sum_two", "input": {"a": 1, "b": 2}})
    assert served.json()["warning"] is None
    done = admin.get(f"/api/v1/runs/{served.json()['workflow_id']}/result").json()
    assert done["done"] and done["run"]["waiting_for"] is None
    assert len(done["run"]["code_versions"]) == 1


def _blocked_run(stack: Stack, workflow_id: str) -> None:
    async def block(store: Any) -> None:
        from keepgoing._store.records import ActivationCommit, StartRequest  # noqa: PLC0415

        await store.start_run(
            StartRequest(f"r-{workflow_id}", workflow_id, "ghost.blocked", {}, "default", "", 1.0)
        )
        (claim,) = await store.claim_activations(
            worker_id="old",
            queues=["default"],
            workflow_names=["ghost.blocked"],
            limit=1,
            lease_ttl=15,
            now=1.0,
        )
        await store.commit_activation(
            ActivationCommit(
                run_id=claim.run.run_id,
                fence=claim.fence,
                worker_id="old",
                saw_upto=1,
                time=1.0,
                commands=[],
                now=1.0,
                blocked_reason="a diff",
                code_version="old-code",
            )
        )

    run_store(stack.store_url, block)


def test_unblock_retries_a_blocked_run_and_needs_runs_cancel(
    stack: Stack, admin: httpx.Client
) -> None:
    workflow_id = f"blocked-{uuid.uuid4().hex[:8]}"
    _blocked_run(stack, workflow_id)
    blocked = admin.get(f"/api/v1/runs/{workflow_id}").json()
    assert (blocked["status"], blocked["code_versions"]) == ("blocked", ["old-code"])
    with stack.api(stack.token("reader", "runs.read")) as reader:
        error(reader.post(f"/api/v1/runs/{workflow_id}/unblock"), 403, "permission_denied")
    with stack.api(stack.token("canceller", "runs.cancel")) as canceller:
        unblocked = canceller.post(f"/api/v1/runs/{workflow_id}/unblock")
    assert unblocked.status_code == 200, unblocked.text
    assert unblocked.json()["run"]["status"] == "running"
    error(admin.post(f"/api/v1/runs/{workflow_id}/unblock"), 409, "workflow_not_running")
    error(admin.post("/api/v1/runs/no-such-id/unblock"), 404, "run_not_found")
    (entry,) = admin.get(
        "/api/v1/audit", params={"action": "workflow.unblock", "workflow_id": workflow_id}
    ).json()["entries"]
    assert entry["actor_id"] == "canceller"
