"""Resuming a failed run and forking a run from a step, on real worker processes: the
reused steps are not run again (side-effect counters), the rest runs on the code
and input given, and the original run is left as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = pytest.mark.integration

EXPECTED = ["w-1", "w-2", "w-3", "w-4", "w-5"]


def _fix(app: Path) -> None:
    text = app.read_text()
    assert "BROKEN = True" in text
    app.write_text(text.replace("BROKEN = True", "BROKEN = False"))


def _starts(kg: Sandbox, key: str) -> dict[int, int]:
    return {n: len(kg.effects("start", f"step{n}", key)) for n in range(1, 6)}


@pytest.mark.timeout(120)
def test_a_run_failed_at_step_3_resumes_on_fixed_code_reusing_steps_1_and_2(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("recovery")
    broken = workers.start(app)
    failed = client.trigger_workflow("five_steps", {"key": "r"}, workflow_id="res")
    with pytest.raises(keepgoing.WorkflowFailedError, match="step 3 of r is broken"):
        client.result(failed, timeout=30)
    assert _starts(kg, "r") == {1: 1, 2: 1, 3: 1, 4: 0, 5: 0}
    with pytest.raises(keepgoing.InvalidRequestError, match="from_step"):
        client.fork_workflow("res", 0)
    with pytest.raises(keepgoing.InvalidRequestError, match="revision 7"):
        client.resume_workflow("res", revision=7)

    broken.terminate()
    _fix(app)
    workers.start(app)
    resumed = client.resume_workflow("res")

    assert resumed.workflow_id == "res" and resumed.run_id != failed.run_id
    assert client.result(resumed, timeout=60) == EXPECTED
    assert _starts(kg, "r") == {1: 1, 2: 1, 3: 2, 4: 1, 5: 1}
    assert client.get_run("res", run_id=failed.run_id).status == "failed"  # left as it was
    assert client.get_status("res", "progress") == {"done": 5, "of": 5}
    (entry,) = client.list_audit(action="workflow.resume")
    assert (entry.workflow_id, entry.run_id) == ("res", resumed.run_id)
    assert entry.detail["resumed_run_id"] == failed.run_id
    with pytest.raises(keepgoing.InvalidRequestError, match="completed"):
        client.resume_workflow("res")


@pytest.mark.timeout(120)
def test_forks_rerun_from_their_step_and_leave_the_original_unchanged(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("recovery")
    _fix(app)
    workers.start(app)
    original = client.trigger_workflow("five_steps", {"key": "f"}, workflow_id="orig")
    assert client.result(original, timeout=30) == EXPECTED
    before = client.history("orig")

    fork = client.fork_workflow("orig", 3, input={"key": "f", "word": "v"}, workflow_id="f3")
    assert client.result(fork, timeout=60) == ["w-1", "w-2", "v-3", "v-4", "v-5"]
    assert _starts(kg, "f") == {1: 1, 2: 1, 3: 2, 4: 2, 5: 2}
    assert client.history("orig") == before  # the original is unchanged

    # A fork from step 1 is a rerun with the same input; a fork of a fork works.
    again = client.fork_workflow("f3", 1)
    assert again.workflow_id.startswith("f3-fork-")
    assert client.result(again, timeout=60) == ["w-1", "w-2", "v-3", "v-4", "v-5"]
    assert _starts(kg, "f") == {1: 2, 2: 2, 3: 3, 4: 3, 5: 3}
    started = of_type(client.history(again.workflow_id), ev.WorkflowStarted)[0]
    assert started.input["kwargs"] == {"key": "f", "word": "v"}

    lineage = client.lineage("f3")
    assert lineage["origin"]["workflow_id"] == "orig" and lineage["origin"]["step"] == 3
    assert [d["workflow_id"] for d in lineage["derived"]] == [again.workflow_id]
    assert [d["workflow_id"] for d in client.lineage("orig")["derived"]] == ["f3"]
    with pytest.raises(keepgoing.InvalidRequestError, match="no step 9"):
        client.fork_workflow("orig", 9)
    with pytest.raises(keepgoing.RunNotFoundError):
        client.fork_workflow("nope", 1)


@pytest.mark.timeout(60)
def test_an_open_run_is_neither_resumed_nor_forked(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("recovery"))
    client.trigger_workflow("publishes", {"key": "o"}, workflow_id="open")
    with pytest.raises(keepgoing.WorkflowAlreadyRunningError):
        client.fork_workflow("open", 1)
    with pytest.raises(keepgoing.WorkflowAlreadyRunningError):
        client.resume_workflow("open")
    with pytest.raises(keepgoing.WorkflowFailedError):  # the code is broken at step 3
        client.trigger_workflow("five_steps", {"key": "d"}, workflow_id="done", wait=True)
    with pytest.raises(keepgoing.WorkflowAlreadyRunningError):  # the fork's id is taken
        client.fork_workflow("done", 1, workflow_id="open")
    kg.release("release-o")


def _cli(kg: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "keepgoing.cli", *args, "--store", kg.url]
    env = {**kg.env(), "COLUMNS": "400"}
    return subprocess.run(
        argv, check=False, cwd=kg.root, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.timeout(120)
def test_the_cli_resumes_forks_and_reads_status(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("recovery")
    broken = workers.start(app)
    failed = client.trigger_workflow("five_steps", {"key": "c"}, workflow_id="cli")
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(failed, timeout=30)
    assert json.loads(_cli(kg, "runs", "status", "cli", "progress").stdout) == {"done": 2, "of": 5}
    broken.terminate()
    _fix(app)
    workers.start(app)

    done = _cli(kg, "runs", "resume", "cli")
    assert done.returncode == 0, done.stderr
    assert "resumed cli as run" in done.stdout
    resumed = client.get_run("cli")
    handle = keepgoing.WorkflowRunHandle("five_steps", "cli", resumed.run_id)
    assert client.result(handle, timeout=60) == EXPECTED
    forked = _cli(
        kg,
        "runs",
        "fork",
        "cli",
        "--from-step",
        "3",
        "--input",
        '{"key": "c", "word": "z"}',
        "--workflow-id",
        "cli-fork",
    )
    assert forked.returncode == 0, forked.stderr
    fork = keepgoing.WorkflowRunHandle("five_steps", "cli-fork", client.get_run("cli-fork").run_id)
    assert client.result(fork, timeout=60) == ["w-1", "w-2", "z-3", "z-4", "z-5"]
    bad = _cli(kg, "runs", "fork", "cli", "--from-step", "4", "--input", "{nope")
    assert bad.returncode != 0 and "--input" in bad.stderr
    missing = _cli(kg, "runs", "resume", "no-such")
    assert missing.returncode == 1 and "no-such" in missing.stderr


@pytest.mark.timeout(90)
def test_a_run_cancelled_in_a_step_resumes_back_into_that_step(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("recovery"))
    first = client.trigger_workflow("publishes", {"key": "c1"}, workflow_id="cancelled")
    wait_until(lambda: kg.effects("start", "held", "c1"), 30, "the held step to start")
    client.cancel_workflow("cancelled", reason="by mistake")
    with pytest.raises(keepgoing.WorkflowCancelledError):
        client.result(first, timeout=30)
    token = client.get_status("cancelled", "token")

    resumed = client.resume_workflow("cancelled")
    assert client.get_status("cancelled", "stage") == "started"  # the reused prefix's value
    wait_until(lambda: len(kg.effects("start", "held", "c1")) == 2, 30, "the step to run again")
    kg.release("release-c1")
    assert client.result(resumed, timeout=30) == token  # the same recorded uuid
    assert client.get_status("cancelled", "stage") == "done"
