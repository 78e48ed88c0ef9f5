"""The check of a fork's (or a resume's) reused steps on plain workers (``keepgoing
worker app.py``, no deployed revision): at the copied run's first activation a
reused step the new input or the new code schedules with other arguments fails
the run, before any step past the reused ones runs (side-effect counters)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = pytest.mark.integration

REFUSED = (
    "fork refused: step 3 lookup_customer was recorded with customer_id='c1', the new "
    "input schedules customer_id='c9'; fork from step 3 or earlier"
)


def _set(app: Path, **flags: bool) -> None:
    text = app.read_text()
    for name, on in flags.items():
        text = text.replace(f"{name} = {not on}", f"{name} = {on}")
    app.write_text(text)


def _count(kg: Sandbox, task: str, key: str | None = None) -> int:
    return len(kg.effects("start", task, key))


def _original(kg: Sandbox, client: keepgoing.Client, ticket: str) -> None:
    run = client.trigger_workflow(
        "fork_support", {"ticket": ticket, "customer_id": "c1"}, workflow_id=ticket
    )
    assert client.result(run, timeout=30)[-1] == f"closed {ticket}"


@pytest.mark.timeout(120)
def test_a_fork_whose_new_input_changes_a_reused_argument_is_refused(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("forks"))
    _original(kg, client, "t1")
    before = client.history("t1")

    changed = {"ticket": "t1", "customer_id": "c9"}
    fork = client.fork_workflow("t1", 4, input=changed, workflow_id="t1-c9")
    with pytest.raises(keepgoing.WorkflowFailedError) as failed:
        client.result(fork, timeout=30)
    assert REFUSED in str(failed.value)
    (end,) = of_type(client.history("t1-c9"), ev.WorkflowFailed)
    assert end.error.type == "keepgoing.errors.ReuseRefusedError"
    assert end.error.message == REFUSED

    # wait_for_check raises the refusal itself, naming the refused run.
    with pytest.raises(keepgoing.ReuseRefusedError) as refused:
        client.fork_workflow("t1", 4, input=changed, workflow_id="t1-c9b", wait_for_check=True)
    assert str(refused.value) == REFUSED
    assert refused.value.workflow_id == "t1-c9b"
    assert refused.value.run_id == client.get_run("t1-c9b").run_id
    assert client.get_run("t1-c9b").status == "failed"

    # No step past the reused ones ran, for either fork; the original is unchanged.
    assert _count(kg, "lookup", "c9") == _count(kg, "reply", "c9") == 0
    assert (_count(kg, "reply"), _count(kg, "close")) == (1, 1)
    assert client.history("t1") == before


@pytest.mark.timeout(120)
def test_a_fork_whose_new_input_only_changes_later_steps_runs(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("forks"))
    _original(kg, client, "t2")
    new = {"ticket": "t2", "customer_id": "c1", "note": "sorry"}
    fork = client.fork_workflow("t2", 4, input=new, workflow_id="t2-sorry", wait_for_check=True)
    # Returned once past the reused steps: the fork's first activation scheduled step 4.
    assert any(e.cmd == 4 for e in of_type(client.history("t2-sorry"), ev.TaskScheduled))
    assert client.result(fork, timeout=30) == [
        "hello t2",
        "billing",
        "customer c1",
        "sorry c1",
        "closed t2",
    ]
    assert [_count(kg, t) for t in ("greet", "classify", "lookup", "reply", "close")] == [
        1,
        1,
        1,
        2,
        2,
    ]
    started = of_type(client.history("t2-sorry"), ev.WorkflowStarted)[0]
    assert started.reused_by == "fork_input" and started.reused_upto is not None


@pytest.mark.timeout(120)
def test_a_resume_onto_code_that_schedules_a_reused_step_otherwise_is_refused(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("forks")
    _set(app, CLOSE_BROKEN=True)
    broken = workers.start(app)
    run = client.trigger_workflow("fork_support", {"ticket": "t3", "customer_id": "c3"})
    with pytest.raises(keepgoing.WorkflowFailedError, match="closing t3 is broken"):
        client.result(run, timeout=30)
    broken.terminate()
    _set(app, CLOSE_BROKEN=False, UPPER_IDS=True)  # step 3 now schedules "C3"
    workers.start(app)

    resumed = client.resume_workflow(run.workflow_id)
    with pytest.raises(keepgoing.WorkflowFailedError) as failed:
        client.result(resumed, timeout=30)
    assert (
        "resume refused: step 3 lookup_customer was recorded with customer_id='c3', the code "
        "now schedules customer_id='C3'; fork from step 3 or earlier"
    ) in str(failed.value)
    assert _count(kg, "close") == 1 and _count(kg, "lookup", "C3") == 0


def _cli(kg: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "keepgoing.cli", *args, "--store", kg.url]
    env = {**kg.env(), "COLUMNS": "400"}
    return subprocess.run(
        argv, check=False, cwd=kg.root, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.timeout(120)
def test_the_cli_waits_for_the_check(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("forks"))
    _original(kg, client, "t4")
    fork = ["runs", "fork", "t4", "--from-step", "4", "--wait-for-check"]
    bad = _cli(kg, *fork, "--input", '{"ticket": "t4", "customer_id": "c9"}')
    assert bad.returncode == 1
    assert "customer_id='c9'" in bad.stderr and "reuse_refused" in bad.stderr
    good = _cli(kg, *fork, "--input", '{"ticket": "t4", "customer_id": "c1", "note": "x"}')
    assert good.returncode == 0, good.stderr
    assert "forked t4 from step 4" in good.stdout


@pytest.mark.timeout(120)
def test_a_step_still_open_in_the_reused_prefix_waits_for_the_check(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("forks"))
    run = client.trigger_workflow(
        "parallel", {"ticket": "p1", "customer_id": "c1"}, workflow_id="par"
    )

    def classified() -> bool:
        return any(e.cmd == 3 for e in of_type(client.history("par"), ev.TaskCompleted))

    wait_until(classified, 30, "step 3 to finish while step 1 is open")
    kg.release("release-c1")
    assert client.result(run, timeout=30)[-1] == "found c1"
    assert _count(kg, "slow", "c1") == 1

    # Step 1 was open at step 3's activation: a fork from step 3 reuses it as a step to
    # run again. A new customer id changes its argument: refused before it can run.
    with pytest.raises(keepgoing.ReuseRefusedError, match="step 1 slow_lookup"):
        client.fork_workflow(
            "par", 3, input={"ticket": "p1", "customer_id": "c9"}, wait_for_check=True
        )
    assert _count(kg, "slow", "c1") == 1 and _count(kg, "slow", "c9") == 0
    # The same input passes the check, and then step 1 runs again.
    same = client.fork_workflow("par", 3, wait_for_check=True)
    assert client.result(same, timeout=30) == ["hello p1", "billing", "found c1"]
    assert _count(kg, "slow", "c1") == 2 and _count(kg, "classify") == 2
