"""The support-digest agent on the demo's stack: deploy it, run it, show the evidence.

The agent is ``examples/support_digest/agent.py``, deployed and triggered the way
its page shows (``deploy_workflow_worker(source="agent.py",
name="wf-durable-agent", shutdown_delay_seconds=20, env=...)``, then
``trigger_workflow("support_digest", ..., task_queue=worker.task_queue,
wait=False)``). The evidence comes from the store alone: the run's history, and
the versions of its memory volume.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

from keepgoing._client.deploy import WorkflowWorker
from keepgoing._demo.files import agent_file, tickets_file
from keepgoing._demo.usecases.base import DemoStack, Evidence
from keepgoing._groups.secrets import Secret
from keepgoing._history import events as ev
from keepgoing._volumes.volume import Volume

__all__ = [
    "GROUP",
    "KILL_STEP",
    "Pace",
    "deploy_agent",
    "evidence",
    "kill_mid_run",
    "model_label",
    "start_run",
]

GROUP = "wf-durable-agent"
MEMORY = "support-digest"
KILL_STEP = "summarise_ticket"  # the step headless mode kills its worker in
ROUTER_KEY = "KEEPGOING_ROUTER_API_KEY"


@dataclass(frozen=True)
class Pace:
    """How long the demo's run takes: tickets, batch size, the wait between batches
    and the least time a model call takes (the scripted model answers at once)."""

    tickets: int
    batch_size: int
    pause_seconds: float
    model_seconds: float

    @classmethod
    def of(cls, fast: bool) -> Pace:
        # Live: 48 tickets, 6 batches, 5 waits of 60 s and about 1 s a model call:
        # about seven minutes. Fast (CI): 16 tickets, 1 s waits, under 30 s.
        return cls(16, 4, 1.0, 0.12) if fast else cls(48, 8, 60.0, 1.0)


def model_label() -> str:
    """What the demo says about its model, on the page and in the terminal."""
    if os.environ.get(ROUTER_KEY) and os.environ.get("DIGEST_MODEL"):
        return f"{os.environ['DIGEST_MODEL']} (a real model through the gateway)"
    return "scripted: keepgoing's offline, deterministic model (not a language model)"


def deploy_agent(stack: DemoStack) -> WorkflowWorker:
    """Load the week's tickets into the helpdesk volume and deploy the agent's group."""
    _load_inbox(stack)
    pace = Pace.of(stack.fast)
    env: dict[str, str | Secret] = {
        "DIGEST_PACE": str(pace.model_seconds),
        "SUPPORT_DIGEST_STATE": str(stack.workdir / "directory"),
    }
    if os.environ.get(ROUTER_KEY):
        # A provider key: the same agent, a real model (keepgoing.toml names the
        # provider, whose api_key_env is ROUTER_API_KEY, and DIGEST_MODEL its alias).
        stack.client.groups.set_secret(ROUTER_KEY, os.environ[ROUTER_KEY])
        env["ROUTER_API_KEY"] = Secret.from_env(ROUTER_KEY)
        for passed in ("DIGEST_MODEL", "KEEPGOING_CONFIG"):
            if os.environ.get(passed):
                env[passed] = os.environ[passed]
    return stack.deploy(
        agent_file(), GROUP, shutdown_delay_seconds=2 if stack.fast else 20, env=env
    )


def start_run(
    stack: DemoStack, worker: WorkflowWorker, run_key: str, *, tickets: int | None = None
) -> str:
    """Trigger a digest of the week (or of its first ``tickets``; fewer when fast) and
    return its workflow id."""
    pace = Pace.of(stack.fast)
    week = json.loads(tickets_file().read_text(encoding="utf-8"))["tickets"]
    handle = stack.client.trigger_workflow(
        "support_digest",
        {
            "run_key": run_key,
            "ticket_ids": [t["id"] for t in week[: tickets or pace.tickets]],
            "batch_size": pace.batch_size,
            "pause_seconds": pace.pause_seconds,
        },
        task_queue=worker.task_queue,
        wait=False,
    )
    workflow_id: str = handle.workflow_id
    return workflow_id


def kill_mid_run(stack: DemoStack, workflow_id: str, *, timeout: float = 300.0) -> str:
    """Once the first batch is done (its durable wait has fired), kill the worker in
    the middle of a :data:`KILL_STEP` through the kill API; the killed worker's id."""
    deadline = time.monotonic() + timeout
    while not any(isinstance(e, ev.TimerFired) for e in stack.client.history(workflow_id)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{workflow_id} did not finish its first batch in {timeout:.0f}s")
        time.sleep(0.1)
    return stack.kill_worker_during(workflow_id, KILL_STEP, timeout=timeout)


def _load_inbox(stack: DemoStack) -> None:
    # In a child process: importing the agent here would register its task names
    # in this process, beside those of the use cases' files.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from agent import load_inbox; "
        "print(load_inbox(sys.argv[2], store=sys.argv[3]))"
    )
    store = getattr(stack, "store_url", None) or os.environ.get("KEEPGOING_STORE", "")
    done = subprocess.run(
        [sys.executable, "-c", code, str(agent_file().parent), str(tickets_file()), store],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"loading the tickets failed: {done.stderr.strip()[-500:]}")


def evidence(stack: DemoStack, workflow_id: str, killed: str | None) -> Evidence:
    """What the run's history and memory show: steps that ran once, retried steps,
    the memory versions, and (``killed``) that the killed worker's step was retried."""
    history = stack.client.history(workflow_id)
    run = stack.client.get_run(workflow_id)
    done = [e for e in history if isinstance(e, ev.TaskCompleted)]
    names = {e.cmd: e.name for e in history if isinstance(e, ev.TaskScheduled)}
    lost = [e for e in history if isinstance(e, ev.TaskAttemptFailed)]
    per_cmd = Counter(e.cmd for e in done)
    lines: list[str] = []
    facts: list[bool] = []

    def fact(ok: bool, line: str) -> None:
        facts.append(ok)
        lines.append(("ok   " if ok else "FAIL ") + line)

    fact(run.status == "completed", f"the run {workflow_id} is {run.status}")
    twice = sorted(cmd for cmd, n in per_cmd.items() if n > 1)
    fact(
        not twice and len(per_cmd) == len(names),
        f"{len(per_cmd)} of {len(names)} steps completed, each exactly once"
        + (f" (twice: {twice})" if twice else ""),
    )
    by_reason = Counter(e.reason for e in lost)
    for reason, count in sorted(by_reason.items()):
        which = sorted({f"{names[e.cmd]} #{e.cmd}" for e in lost if e.reason == reason})
        shown = ", ".join(which[:4]) + (" ..." if len(which) > 4 else "")
        lines.append(f"     retried after {reason}: {count} attempt(s) of {shown}")
    if killed is not None:
        hit = [e for e in lost if e.reason == "worker_lost" and e.worker == killed]
        fact(
            bool(hit),
            f"the killed worker {killed}'s step was retried on another worker: "
            + ", ".join(f"{e.name} #{e.cmd} attempt {e.attempt}" for e in hit),
        )
        retried = {e.cmd for e in hit}
        reran = [e for e in done if e.cmd in retried and e.worker != killed]
        fact(len(reran) == len(retried), "each retried step completed once, on a new worker")
    fact(
        any(e.reason == "error" and names.get(e.cmd) == "lookup_customer" for e in lost),
        "the rate-limited customer directory's 429s were retried by its task's retries",
    )
    fired = sum(isinstance(e, ev.TimerFired) for e in history)
    fact(fired > 0, f"durable timers fired between batches: {fired}")
    fact(*_memory(stack, run.run_id, history))
    return Evidence(use_case="support-digest", lines=tuple(lines), ok=all(facts))


def _memory(stack: DemoStack, run_id: str, history: list[ev.Event]) -> tuple[bool, str]:
    """Every memory version the run made belongs to a completed attempt."""
    store = getattr(stack, "store_url", None)
    versions = [v for v in Volume(MEMORY, store=store).versions(limit=1000) if v.run_id == run_id]
    completed = {(e.cmd, e.attempt) for e in history if isinstance(e, ev.TaskCompleted)}
    committed = [e for e in history if isinstance(e, ev.MemoryCommitted) and e.volume == MEMORY]
    stray = [v for v in versions if (v.step, v.attempt) not in completed]
    files = Counter(path for v in versions for path in v.paths)
    shown = ", ".join(f"{path} x{count}" for path, count in sorted(files.items()))
    return (
        bool(versions) and not stray and len(committed) == len(versions),
        f"{len(versions)} memory versions survived, all from completed attempts ({shown})",
    )
