"""Every command against a live server (and the store, where that is the point),
checking what it prints, in human form and with ``--json``."""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path
from subprocess import CompletedProcess

import httpx
import pytest
from typer.testing import CliRunner

import keepgoing
from keepgoing.cli.__main__ import app
from server._support import APPS, Process, Stack, free_port, wait_until

from .conftest import Kg, run_kg

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run_wait(kg: Kg, workflow: str, input: object, workflow_id: str) -> CompletedProcess[str]:
    return kg("run", workflow, "-i", json.dumps(input), "--workflow-id", workflow_id, "--wait")


def _commands() -> list[list[str]]:
    found: list[list[str]] = []
    for command in app.registered_commands:
        found.append([command.name or command.callback.__name__])  # type: ignore[union-attr]
    for group in app.registered_groups:
        for command in group.typer_instance.registered_commands:
            found.append([group.name or "", command.name or ""])
    return found


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_command_has_help_with_an_example(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Example" in result.output


def test_run_wait_shows_the_steps_and_the_result(kg: Kg) -> None:
    workflow_id = _id("cli-run")
    done = run_wait(kg, "two_steps", {"key": workflow_id}, workflow_id)
    assert done.returncode == 0
    assert "add" in done.stdout and "flaky" in done.stdout
    assert f'completed: "{workflow_id}"' in done.stdout


def test_run_json_and_failures(kg: Kg) -> None:
    done = kg("run", "sum_two", "-i", '{"a": 20, "b": 22}', "--wait", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["result"] == 42
    started = kg("run", "sum_two", "-i", '{"a": 1, "b": 1}', "--json")
    handle = json.loads(started.stdout)
    assert set(handle) == {"workflow_name", "workflow_id", "run_id", "existing"}
    failed = kg("run", "broken", "--wait")
    assert failed.returncode == 1
    assert "failed" in failed.stdout and "broken on purpose" in failed.stdout
    unknown = kg("run", "nope", "--strict")
    assert unknown.returncode == 1 and "workflow_not_found" in unknown.stderr
    queued = kg("run", "sum_twoo", "--json")  # no worker serves it: queued, with a warning
    assert queued.returncode == 0 and json.loads(queued.stdout)["workflow_name"] == "sum_twoo"
    assert "did you mean 'sum_two'" in queued.stderr
    bad = kg("run", "sum_two", "-i", "{not json")
    assert bad.returncode == 2 and "not JSON" in bad.stderr


def test_runs_lists_a_table_and_json(kg: Kg) -> None:
    workflow_id = _id("cli-list")
    assert run_wait(kg, "sum_two", {"a": 1, "b": 2}, workflow_id).returncode == 0
    table = kg("runs", "--workflow", "sum_two", "--since", "10m")
    assert table.returncode == 0 and workflow_id in table.stdout and "completed" in table.stdout
    listed = json.loads(kg("runs", "--status", "completed", "--json", "--limit", "1000").stdout)
    assert workflow_id in [r["workflow_id"] for r in listed]
    assert all(r["status"] == "completed" for r in listed)
    bad = kg("runs", "--status", "asleep")
    assert bad.returncode == 1 and "invalid_request" in bad.stderr


def test_workers_lists_the_workers_and_their_hung_threads(kg: Kg) -> None:
    table = kg("workers")
    assert table.returncode == 0, table.stderr
    assert "hung" in table.stdout and "worker(s)" in table.stdout
    listed = json.loads(kg("workers", "--json").stdout)
    assert listed and all(w["info"]["hung_threads"] == 0 for w in listed)
    assert all(w["worker_id"] in table.stdout for w in listed)


def test_show_draws_the_timeline(kg: Kg) -> None:
    workflow_id = _id("cli-show")
    run_wait(kg, "two_steps", {"key": workflow_id}, workflow_id)
    shown = kg("show", workflow_id)
    assert shown.returncode == 0
    out = shown.stdout
    assert "Steps" in out and "flaky" in out and "2 (1 retried)" in out
    assert "Attempts of retried steps" in out and "first attempt fails" in out
    assert "completed after" in out
    data = json.loads(kg("show", workflow_id, "--json").stdout)
    steps = data["timeline"]["steps"]
    assert [s["name"] for s in steps.values()] == ["add", "flaky"]
    assert [a["outcome"] for a in steps["2"]["attempts"]] == ["error", "ok"]
    assert kg("show", "no-such-run").returncode == 1


def test_send_and_show_the_message(kg: Kg, stack: Stack) -> None:
    started = json.loads(kg("run", "await_review", "-i", '{"account": "a"}', "--json").stdout)
    workflow_id = started["workflow_id"]
    sent = kg("send", workflow_id, "review", '{"approved": true}')
    assert sent.returncode == 0 and f"sent 'review' to {workflow_id}" in sent.stdout
    with stack.api(stack.admin) as api:
        run = api.get(f"/api/v1/runs/{workflow_id}/result", params={"timeout": 20}).json()["run"]
    assert run["result"]["sender_id"] == "root"
    shown = kg("show", workflow_id).stdout
    assert "message 'review' from user:root" in shown
    late = kg("send", workflow_id, "review", "--json")
    assert late.returncode == 1 and "workflow_not_running" in late.stderr


def test_event_is_published_once(kg: Kg) -> None:
    job = _id("job")
    started = json.loads(kg("run", "await_job", "-i", json.dumps({"job": job}), "--json").stdout)
    published = kg("event", "job.done", job, '{"rows": 3}', "--event-id", f"{job}-done")
    assert published.returncode == 0 and f"(event {job}-done)" in published.stdout
    again = json.loads(kg("event", "job.done", job, "--event-id", f"{job}-done", "--json").stdout)
    assert again["event_id"] == f"{job}-done"
    shown = kg("show", started["workflow_id"])
    assert f"event job.done / {job}" in shown.stdout


def test_cancel(kg: Kg) -> None:
    started = json.loads(kg("run", "sleeper", "-i", '{"seconds": 60}', "--json").stdout)
    workflow_id = started["workflow_id"]
    done = kg("cancel", workflow_id, "--reason", "changed my mind")
    assert done.returncode == 0 and f"cancel requested for {workflow_id}" in done.stdout
    waited = kg("run", "sum_two", "-i", '{"a": 0, "b": 0}', "--wait")  # the worker is still fine
    assert waited.returncode == 0
    again = kg("cancel", workflow_id, "--json")
    assert again.returncode in (0, 1)  # 1 once the cancel has landed: the run has ended


def test_audit_lists_actors(kg: Kg) -> None:
    kg("run", "sum_two", "-i", '{"a": 1, "b": 1}')
    table = kg("audit", "--limit", "200")
    assert table.returncode == 0
    assert "workflow.trigger" in table.stdout and "user:root" in table.stdout
    entries = json.loads(kg("audit", "--action", "workflow.trigger", "--json").stdout)
    assert entries and {e["action"] for e in entries} == {"workflow.trigger"}


def test_tokens_through_the_server_and_the_store(kg: Kg, stack: Stack) -> None:
    created = kg(
        "token", "create", "--name", "ci-bot", "--kind", "service", "-p", "runs.read,runs.cancel"
    )
    assert created.returncode == 0 and "Store the secret now" in created.stdout
    secret = created.stdout.split()[0]
    assert secret.startswith("kg_")
    token_id = secret.split("_")[1]
    listed = kg("token", "list").stdout
    assert token_id in listed and "ci-bot" in listed and secret not in listed
    with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {secret}"}) as api:
        assert api.get("/api/v1/runs").status_code == 200
        revoked = run_kg(stack.root, "token", "revoke", token_id, "--store", stack.store_url)
        assert revoked.returncode == 0 and f"revoked token {token_id}" in revoked.stdout
        assert api.get("/api/v1/runs").status_code == 401
    listing = run_kg(stack.root, "token", "list", "--all", "--json", "--store", stack.store_url)
    stored = json.loads(listing.stdout)
    assert any(t["token_id"] == token_id and t["revoked_at"] for t in stored)
    bad = kg("token", "create", "--name", "x", "-p", "root")
    assert bad.returncode == 1 and "unknown permission" in bad.stderr


def test_history_export_then_replay(kg: Kg, stack: Stack, tmp_path: Path) -> None:
    workflow_id = _id("cli-replay")
    run_wait(kg, "two_steps", {"key": workflow_id}, workflow_id)
    target = tmp_path / "history.json"
    exported = kg("history", "export", workflow_id, "-o", str(target))
    assert exported.returncode == 0 and f"to {target}" in exported.stdout
    assert json.loads(target.read_text())["events"][0]["type"] == "WorkflowStarted"
    on_stdout = kg("history", "export", workflow_id)
    assert json.loads(on_stdout.stdout) == json.loads(target.read_text())

    app_file = stack.root / "service_app.py"
    ok = run_kg(tmp_path, "replay", str(app_file), str(target))
    assert ok.returncode == 0 and "ok" in ok.stdout
    changed = tmp_path / "service_app.py"
    changed.write_text(
        (APPS / "service_app.py")
        .read_text()
        .replace("    await add(1, 2)\n    return await flaky(key)", "    return await flaky(key)")
    )
    drifted = run_kg(tmp_path, "replay", str(changed), str(target), "--json")
    assert drifted.returncode == 1
    report = json.loads(drifted.stdout)
    assert report["ok"] is False and "add" in report["error"]


def test_server_refuses_an_open_bind_without_auth(tmp_path: Path) -> None:
    done = run_kg(tmp_path, "server", "--no-auth", "--host", "0.0.0.0", "--store", "memory://")
    assert done.returncode == 2 and "authentication disabled" in done.stderr


def test_dev_runs_a_server_and_a_worker(tmp_path: Path) -> None:
    (tmp_path / "service_app.py").write_text((APPS / "service_app.py").read_text())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["dev", "service_app.py", "--port", str(port), "--store", "sqlite:///dev.db"]
    dev = Process("dev", args, tmp_path)
    try:

        def ready() -> bool:
            assert dev.alive(), dev.stderr()
            try:
                return bool(httpx.get(f"{url}/api/v1/workers", timeout=1).json()["workers"])
            except httpx.TransportError:
                return False

        wait_until(ready, 30, "keepgoing dev to serve")
        done = run_kg(tmp_path, "run", "sum_two", "-i", '{"a": 2, "b": 3}', "--wait", "--url", url)
        assert done.returncode == 0 and "completed: 5" in done.stdout
        dev.proc.send_signal(signal.SIGTERM)
        assert dev.proc.wait(timeout=30) == 0
        assert "authentication off" in dev.out_path.read_text()
    finally:
        dev.reap()
        print(dev.report())


def test_operation_reviews_and_review(kg: Kg, stack: Stack) -> None:
    started = json.loads(kg("run", "unsure", "-i", '{"key": "cli"}', "--json").stdout)
    workflow_id = started["workflow_id"]

    def waiting() -> list[dict[str, object]]:
        listed = json.loads(kg("reviews", "--json").stdout)
        return [o for o in listed if o["workflow_id"] == workflow_id]

    deadline = time.monotonic() + 30
    while not (found := waiting()):
        assert time.monotonic() < deadline, "the run never waited for review"
    op = str(found[0]["operation_id"])
    shown = kg("operation", op)
    assert "uncertain" in shown.stdout and "waiting for review" in shown.stdout
    assert op in kg("reviews").stdout
    assert kg("review", op, "maybe").returncode != 0
    sent = kg("review", op, "approve", "--result", '"by cli"', "--reason", "checked")
    assert sent.returncode == 0 and "sent approve" in sent.stdout
    with keepgoing.Client(stack.url, token=stack.admin) as client:
        assert client.result(workflow_id, timeout=30) == "by cli"
    done = json.loads(kg("operation", op, "--json").stdout)
    assert done["status"] == "completed" and done["reviews"][0]["reason"] == "checked"
    bad = kg("operation", "op-nope")
    assert bad.returncode != 0 and "not an operation id" in bad.stderr
