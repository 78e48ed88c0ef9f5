"""JOB-B772, monthly reconciliation (background jobs): wait for an external job, holding nothing.

The demo launches the batch system (``keepgoing._demo.services.jobs``, a process of its own
that publishes the completion event to keepgoing). The run submits the job,
records its id and waits for ``job.completed`` by correlation id with a
deadline. Headless, the job is held until the demo has seen the worker group
at zero replicas with the run still waiting; then it ends, its completion is
signalled twice (a webhook retry), and the run resumes on a fresh replica. A
second run gets its signal before it even waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from keepgoing._demo.services.jobs import JobService
from keepgoing._demo.usecases.base import DemoStack, Evidence, UseCase
from keepgoing._demo.usecases.common import (
    FLOWS,
    Facts,
    executions,
    journal_path,
    short_id,
    step_env,
    wait_for,
)
from keepgoing._history import events as ev

__all__ = ["RECONCILIATION"]

KEY = "JOB-B772"
GROUP = "uc-job-b772"
MONTH = "2026-11"


def _jobs(stack: DemoStack, base: str) -> JobService:
    service = JobService(stack.workdir / "jobs" / base, store=stack.client.store.url)
    stack.add_cleanup(service.stop)
    return service


def _deploy(stack: DemoStack) -> str:
    worker = stack.deploy(
        FLOWS / "monthly_reconciliation.py",
        GROUP,
        shutdown_delay_seconds=0.5 if stack.fast else 10,
        env=step_env(stack, KEY),
    )
    return worker.task_queue


def _trigger(
    stack: DemoStack, queue: str, jobs: JobService, job_id: str, options: dict[str, Any]
) -> str:
    handle = stack.client.trigger_workflow(
        "monthly_reconciliation",
        {
            "job_id": job_id,
            "month": MONTH,
            "jobs_url": jobs.url,
            "deadline_seconds": 300 if stack.fast else 3600,
            "options": options,
        },
        workflow_id=job_id,
        task_queue=queue,
        wait=False,
    )
    return str(handle.workflow_id)


def start(stack: DemoStack) -> str:
    """Launch the batch system and start a run whose job takes a while (20 s live)."""
    job_id = short_id(KEY)
    jobs = _jobs(stack, job_id)
    queue = _deploy(stack)
    return _trigger(
        stack, queue, jobs, job_id, {"seconds": 5 if stack.fast else 20, "duplicate": True}
    )


def _replicas(stack: DemoStack) -> int:
    status = stack.client.groups.show(GROUP, decisions=0)
    return sum(i.state == "running" for i in status.instances)


def _waiting(stack: DemoStack, workflow_id: str) -> bool:
    history = stack.client.history(workflow_id)
    return any(isinstance(e, ev.EventWaitStarted) for e in history)


def headless(stack: DemoStack, out: Callable[[str], None]) -> Evidence:
    out(f"{KEY} · Monthly reconciliation: an external job, a durable wait, a completion signal")
    job_id = short_id(KEY)
    jobs = _jobs(stack, job_id)
    queue = _deploy(stack)
    facts = Facts(out)
    timeout = 120 if stack.fast else 600
    workflow_id = _trigger(stack, queue, jobs, job_id, {"hold": True, "duplicate": True})
    out(f"  started {workflow_id}; the batch system runs the job")
    wait_for(lambda: _waiting(stack, workflow_id), timeout, f"{workflow_id} to wait for its job")
    wait_for(lambda: _replicas(stack) == 0 or None, timeout, f"group {GROUP} to scale to zero")
    still = stack.client.get_run(workflow_id).status
    facts.check(
        still == "running" and jobs.job(job_id)["state"] == "running",
        f"while the job runs the run waits ({still}) and group {GROUP} holds 0 replicas",
    )
    jobs.release(job_id)
    result = stack.client.result(workflow_id, timeout=timeout)
    _resume_facts(stack, facts, jobs, job_id, result)

    early_id = f"{job_id}-early"
    early = _trigger(stack, queue, jobs, early_id, {"early": True})
    ended = stack.client.result(early, timeout=timeout)
    received = [e for e in stack.client.history(early) if isinstance(e, ev.EventReceived)]
    facts.check(
        isinstance(ended, dict) and ended.get("status") == "reconciled" and len(received) == 1,
        f"{early_id}: its completion was signalled before the run waited; it was kept and matched",
    )
    return Evidence(KEY, tuple(facts.lines), facts.ok)


def _resume_facts(
    stack: DemoStack, facts: Facts, jobs: JobService, job_id: str, result: Any
) -> None:
    signals = jobs.signals(job_id)
    received = [e for e in stack.client.history(job_id) if isinstance(e, ev.EventReceived)]
    event_id = signals[0]["event_id"] if signals else "?"
    facts.check(
        len(signals) == 2 and len(received) == 1,
        f"the completion was signalled {len(signals)} times ({event_id}); "
        f"the run received it {len(received)} time",
    )
    journal = journal_path(stack, KEY)
    started = executions(journal, "start_job", job_id)
    posted = executions(journal, "post_to_ledger", job_id)
    facts.check(
        len(started) == 1 and len(posted) == 1 and started[0]["pid"] != posted[0]["pid"],
        "it resumed from its continuation point on a fresh replica: start_job ran once "
        f"(pid {started[0]['pid'] if started else '?'}), post_to_ledger once "
        f"(pid {posted[0]['pid'] if posted else '?'})",
    )
    decisions = stack.client.groups.show(GROUP, decisions=50).decisions
    moves = [f"{d.from_replicas}→{d.to_replicas}" for d in reversed(decisions)]
    booked = result.get("posted", {}).get("booked_rows") if isinstance(result, dict) else "?"
    facts.check(
        isinstance(result, dict) and result.get("status") == "reconciled",
        f"the run completed: {booked} rows booked; group decisions {' '.join(moves[-6:])}",
    )


RECONCILIATION = UseCase(
    key=KEY,
    title="Monthly reconciliation",
    area="Background jobs",
    summary="Keep the job ID and continuation point while an external process runs. Resume on "
    "its completion signal.",
    start=start,
    headless=headless,
)
