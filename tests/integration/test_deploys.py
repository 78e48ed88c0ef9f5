"""Start-up order and deploys, with real ``keepgoing worker`` processes.

* A run triggered by name before any worker served the name is queued, says
  it waits for a worker that serves it, keeps the messages sent to it, and
  runs once a worker starts.
* A run blocked by code that does not replay its history resumes when a
  worker with fixed code starts, and no finished step runs again.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WAITING = "waiting for a worker that serves deployed"


def _version(app: Path) -> str:
    return hashlib.sha256(app.read_bytes()).hexdigest()[:12]


def _cli(kg: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**kg.env(), "COLUMNS": "400"}
    argv = [sys.executable, "-m", "keepgoing.cli", *args, "--store", kg.url]
    return subprocess.run(
        argv, check=False, cwd=kg.root, env=env, capture_output=True, text=True, timeout=60
    )


def _deploy_broken(app: Path) -> None:
    text = app.read_text()
    assert "n = await fetch(key)  # DEPLOY" in text
    app.write_text(text.replace("n = await fetch(key)  # DEPLOY", "n = await audit(key)  # DEPLOY"))


def _deploy_fixed(app: Path, original: str) -> None:
    app.write_text(original + "\n# fixed: fetch comes first again\n")


def _starts(kg: Sandbox, task: str, key: str) -> int:
    return len(kg.effects("start", task, key))


def test_a_run_triggered_before_any_worker_waits_for_one(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("deploys")
    key = uuid.uuid4().hex[:8]
    handle = client.trigger_workflow("deployed", {"key": key})  # no worker has served it
    run = client.get_run(handle.workflow_id)
    assert (run.status, run.waiting_for, run.code_version) == ("running", WAITING, "")
    listed = _cli(kg, "runs")
    assert listed.returncode == 0 and WAITING in listed.stdout, listed.stdout + listed.stderr
    client.send_workflow_message(handle.workflow_id, "go", {"note": "early"})  # kept for it

    workers.start(app)
    assert client.result(handle, timeout=60) == {"n": 1, "note": "early"}
    assert (_starts(kg, "fetch", key), _starts(kg, "save", key)) == (1, 1)
    done = client.get_run(handle.workflow_id)
    assert done.waiting_for is None
    assert done.code_version == _version(app) and done.code_versions == (_version(app),)
    started = client.history(handle.workflow_id)[0]
    assert isinstance(started, ev.WorkflowStarted) and started.code_version == _version(app)


def test_a_blocked_run_resumes_when_fixed_code_is_deployed(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("deploys")
    original = app.read_text()
    first = workers.start(app)
    key = uuid.uuid4().hex[:8]
    handle = client.trigger_workflow("deployed", {"key": key})
    wait_until(
        lambda: of_type(client.history(handle.workflow_id), ev.MessageWaitStarted),
        what="the run to wait for its message",
    )
    assert first.terminate() == 0

    _deploy_broken(app)
    broken = workers.start(app)
    client.send_workflow_message(handle.workflow_id, "go", {"note": "hi"})
    wait_until(
        lambda: client.get_run(handle.workflow_id).status == "blocked",
        what="the broken code to block the run",
    )
    blocked = client.get_run(handle.workflow_id)
    assert blocked.blocked_reason and "audit" in blocked.blocked_reason
    (event,) = of_type(client.history(handle.workflow_id), ev.WorkflowBlocked)
    assert event.code_version == _version(app)

    # Retrying by hand while only the broken code runs: blocked again, with the diff.
    retried = _cli(kg, "runs", "unblock", handle.workflow_id)
    assert retried.returncode == 0, retried.stderr
    wait_until(
        lambda: (
            len(of_type(client.history(handle.workflow_id), ev.WorkflowBlocked)) == 2
            and client.get_run(handle.workflow_id).status == "blocked"
        ),
        what="the retry with the same broken code to block the run again",
    )
    assert broken.terminate() == 0

    _deploy_fixed(app, original)
    workers.start(app)  # a new code version: it retries the blocked run as it starts
    assert client.result(handle, timeout=60) == {"n": 1, "note": "hi"}
    assert _starts(kg, "fetch", key) == 1  # finished before the block: never again
    assert (_starts(kg, "audit", key), _starts(kg, "save", key)) == (0, 1)
    done = client.get_run(handle.workflow_id)
    assert len(done.code_versions) == 3 and done.code_versions[-1] == _version(app)
    shown = _cli(kg, "show", handle.workflow_id)
    assert shown.returncode == 0 and _version(app) in shown.stdout
    assert "code versions" in shown.stdout
    as_json = json.loads(_cli(kg, "show", handle.workflow_id, "--json").stdout)
    assert as_json["run"]["code_versions"] == list(done.code_versions)
