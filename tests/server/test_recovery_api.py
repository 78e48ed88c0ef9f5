"""The recovery routes on a real server and worker: ``GET /runs/{id}/status`` (with
``runs.read``, a long poll with ``wait``), and ``Client.get_status`` over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import keepgoing

from ._support import Stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("recovery"))
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        s.start_worker("recovery_app")
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def client(stack: Stack) -> Iterator[keepgoing.Client]:
    with keepgoing.Client(stack.url, token=stack.admin) as c:
        yield c


def _fixed(stack: Stack) -> Path:
    return stack.root / "fixed"


def test_published_progress_is_read_over_http_with_runs_read(
    stack: Stack, client: keepgoing.Client
) -> None:
    handle = client.trigger_workflow("three_steps", {"word": "s"}, workflow_id="status-1")
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(handle, timeout=30)
    assert client.get_status("status-1", "progress", wait=10) == 1
    assert client.get_status("status-1", "missing") is None
    with pytest.raises(TimeoutError):
        client.get_status("status-1", "missing", wait=0.5)

    reader = stack.token("reader", "runs.read")
    nobody = stack.token("nobody", "messages.send")
    with stack.api(reader) as api:
        body = api.get("/api/v1/runs/status-1/status").json()
        assert body["run_id"] == handle.run_id and body["ended"] is True
        assert body["values"]["progress"]["value"] == 1
        assert api.get("/api/v1/runs/status-1/status", params={"wait": -1}).status_code in (
            400,
            422,
        )
        assert api.get("/api/v1/runs/nope/status").status_code == 404
        assert api.get("/api/v1/runs/status-1/status", params={"key": ""}).status_code == 400
    with stack.api(nobody) as api:
        assert api.get("/api/v1/runs/status-1/status").status_code == 403
    with httpx.Client(base_url=stack.url) as anonymous:
        assert anonymous.get("/api/v1/runs/status-1/status").status_code == 401


def test_resume_and_fork_over_http_need_their_permissions_and_are_audited(
    stack: Stack, client: keepgoing.Client
) -> None:
    handle = client.trigger_workflow("three_steps", {"word": "r"}, workflow_id="resume-1")
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(handle, timeout=30)
    reader = stack.token("reader2", "runs.read")
    resumer = stack.token("bob", "runs.resume", "runs.read")
    with stack.api(reader) as api:
        refused = api.post("/api/v1/runs/resume-1/resume", json={})
        assert refused.status_code == 403 and "runs.resume" in refused.text
        assert api.post("/api/v1/runs/resume-1/fork", json={"from_step": 1}).status_code == 403
    _fixed(stack).touch()
    with stack.api(resumer) as api:
        assert api.post("/api/v1/runs/nope/resume", json={}).status_code == 404
        answer = api.post("/api/v1/runs/resume-1/resume", json={})
        assert answer.status_code == 201, answer.text
        body = answer.json()
        assert body["origin"]["run_id"] == handle.run_id
        assert body["run"]["workflow_id"] == "resume-1"
    resumed = keepgoing.WorkflowRunHandle("three_steps", "resume-1", body["run"]["run_id"])
    assert client.result(resumed, timeout=30) == ["r-1", "r-2", "r-3"]
    entries = client.list_audit(action="workflow.resume")
    assert any(e.actor_id == "bob" and e.workflow_id == "resume-1" for e in entries)

    # Over the HTTP client: a fork from step 2 with new input, and its lineage.
    new = {"word": "r", "then": "f"}
    fork = client.fork_workflow("resume-1", 2, input=new, workflow_id="fork-1")
    assert client.result(fork, timeout=30) == ["r-1", "f-2", "f-3"]
    lineage = client.lineage("fork-1")
    assert lineage["origin"]["workflow_id"] == "resume-1" and lineage["origin"]["kind"] == "fork"
    assert [d["workflow_id"] for d in client.lineage("resume-1")["derived"]] == ["fork-1"]
    with stack.api(stack.admin) as api:
        assert api.post("/api/v1/runs/fork-1/fork", json={"from_step": 0}).status_code in (400, 422)
        assert api.post("/api/v1/runs/fork-1/fork", json={"from_step": 7}).status_code == 400
        assert api.post("/api/v1/runs/fork-1/fork", json={}).status_code in (400, 422)
    assert client.list_audit(action="workflow.fork")[0].workflow_id == "fork-1"


def test_a_fork_waits_for_the_check_of_its_reused_steps_over_http(
    stack: Stack, client: keepgoing.Client
) -> None:
    _fixed(stack).touch()
    done = client.trigger_workflow("three_steps", {"word": "a"}, workflow_id="check-1", wait=True)
    assert done == ["a-1", "a-2", "a-3"]
    refused = (
        "fork refused: step 1 part was recorded with word='a', the new input schedules "
        "word='b'; fork from step 1 or earlier"
    )
    with pytest.raises(keepgoing.ReuseRefusedError) as caught:
        client.fork_workflow(
            "check-1", 2, input={"word": "b"}, workflow_id="check-b", wait_for_check=True
        )
    assert str(caught.value) == refused and caught.value.workflow_id == "check-b"
    with stack.api(stack.admin) as api:
        body = {"from_step": 2, "input": {"word": "b"}, "workflow_id": "check-q"}
        answer = api.post("/api/v1/runs/check-1/fork?wait_for_check=true", json=body)
        assert answer.status_code == 400 and answer.json()["code"] == "reuse_refused"
        assert answer.json()["message"] == refused
        assert answer.json()["details"]["workflow_id"] == "check-q"
        later = api.get("/api/v1/runs/check-q/check")
        assert later.status_code == 400 and later.json()["code"] == "reuse_refused"

        body = {"from_step": 2, "input": {"word": "a", "then": "c"}, "wait_for_check": True}
        passed = api.post("/api/v1/runs/check-1/fork", json=body)
        assert passed.status_code == 201 and passed.json()["check"] == "passed"
        fork_id = passed.json()["run"]["workflow_id"]
        again = api.get(f"/api/v1/runs/{fork_id}/check", params={"wait": 1})
        assert again.json()["check"] == "passed"
        plain = api.post("/api/v1/runs/check-1/fork", json={"from_step": 1})
        assert plain.json()["check"] is None
        assert api.get("/api/v1/runs/nope/check").status_code == 404
    fork = keepgoing.WorkflowRunHandle("three_steps", fork_id, passed.json()["run"]["run_id"])
    assert client.result(fork, timeout=30) == ["a-1", "c-2", "c-3"]
