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
import time
from collections import Counter

from keepgoing._client.deploy import WorkflowWorker
from keepgoing._demo.files import tickets_file
from keepgoing._demo.support import GROUP, Pace, deploy_agent, model_label
from keepgoing._demo.usecases.base import DemoStack, Evidence
from keepgoing._demo.usecases.holdback import lookups_of
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

MEMORY = "support-digest"
KILL_STEP = "summarise_ticket"  # the step headless mode kills its worker in


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
    lookups = lookups_of(history)  # held back by the `directory` limit, not refused
    fact(lookups.held > 0 and lookups.refused <= 1 and not lookups.failed, lookups.line())
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
