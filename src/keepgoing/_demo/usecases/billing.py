"""TKT-2418, billing question (customer operations): the worker is killed mid-step.

The run takes the ticket in, looks up the customer, routes the ticket and
drafts a reply (``examples/billing_question.py``). Headless, the demo kills the
worker while ``draft_reply`` runs, through the kill API as the page's button
does; a replacement worker of the group retries that step, and the evidence
shows from the task's own journal that the customer context and the routing
decision ran once, and from the checkpoint inspector's rules that the
replacement worker reused their saved outputs.
"""

from __future__ import annotations

from collections.abc import Callable

from keepgoing._demo.usecases.base import DemoStack, Evidence, UseCase
from keepgoing._demo.usecases.common import (
    FLOWS,
    Facts,
    executions,
    journal_path,
    only_step,
    short_id,
    step_env,
    steps_of,
)

__all__ = ["BILLING"]

KEY = "TKT-2418"
GROUP = "uc-tkt-2418"


def start(stack: DemoStack) -> str:
    """Deploy the billing workflow's group and start a run; returns its workflow id."""
    worker = stack.deploy(
        FLOWS / "billing_question.py",
        GROUP,
        shutdown_delay_seconds=1 if stack.fast else 20,
        env=step_env(stack, KEY),
    )
    handle = stack.client.trigger_workflow(
        "billing_question",
        {"ticket_id": KEY},
        workflow_id=short_id(KEY),
        task_queue=worker.task_queue,
        wait=False,
    )
    return str(handle.workflow_id)


def headless(stack: DemoStack, out: Callable[[str], None]) -> Evidence:
    out(f"{KEY} · Billing question: intake, customer context, routing, reply draft")
    workflow_id = start(stack)
    out(f"  started {workflow_id}; waiting for draft_reply to run, then killing its worker")
    killed = stack.kill_worker_during(workflow_id, "draft_reply")
    out(f"  killed worker {killed} during draft_reply (SIGKILL through the kill API)")
    result = stack.client.result(workflow_id, timeout=120 if stack.fast else 600)
    steps = steps_of(stack.client, workflow_id)
    journal = journal_path(stack, KEY)
    facts = Facts(out)
    for name, label in (
        ("customer_context", "customer context"),
        ("route_ticket", "routing decision"),
    ):
        step = only_step(steps, name)
        ran = len(executions(journal, name, _key(name)))
        reused = step is not None and step.reused_output
        by = step.reused_by if step is not None else None
        facts.check(
            ran == 1 and reused,
            f"{label} reused: ran once ({ran} execution in the journal); the replacement "
            f"worker {by} read its saved output",
        )
    draft = only_step(steps, "draft_reply")
    attempts = draft.attempts if draft is not None else []
    first = attempts[0] if attempts else None
    facts.check(
        len(attempts) == 2
        and first is not None
        and first.cause == "killed_by_request"
        and first.worker == killed
        and attempts[1].outcome == "completed",
        "draft_reply retried: attempt 1 lost with the killed worker "
        f"({first.cause if first else '?'}), attempt 2 completed on "
        f"{attempts[1].worker if len(attempts) > 1 else '?'}",
    )
    facts.check(
        isinstance(result, dict) and result.get("routing", {}).get("queue") == "billing-refunds",
        f"the run completed: routed to {result.get('routing', {}).get('queue')}, reply drafted",
    )
    return Evidence(KEY, tuple(facts.lines), facts.ok)


def _key(step: str) -> str:
    return "CUS-5521" if step == "customer_context" else KEY


BILLING = UseCase(
    key=KEY,
    title="Billing question",
    area="Customer operations",
    summary="Recover an interrupted support workflow with its customer context and routing "
    "decisions intact.",
    start=start,
    headless=headless,
)
