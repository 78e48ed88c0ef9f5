"""DIR-0429, held back, not retried (flow control): the agent's lookups wait for their turn.

The customer directory the support-digest agent calls allows two lookups a
second across all its callers, and answers 429 to a caller over that rate
(``examples/support_digest/agent.py``). Retries would only recover from the
refusals: each one costs a failed attempt and a retry delay. Instead
``lookup_customer`` carries ``rate_limit="directory"``, a named limit of the same
two a second shared by every worker, so the claim holds a lookup back until a
token is free, and the directory sees no more than it allows. The run's lookups
start one every half second, none has a failed attempt, and while they wait the
run says so ("rate-limited by directory until 12:00:01.250").

The scenario is one batch of eight tickets, whose eight customers the agent looks
up at once. Its evidence comes from the run's history (when each lookup was
scheduled and when its first attempt started; the attempts that failed), from
what the run says it waits for while it runs, and from the directory's own log of
its answers.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from keepgoing._demo.files import tickets_file
from keepgoing._demo.support import Pace, deploy_agent
from keepgoing._demo.usecases.base import DemoStack, Evidence, UseCase
from keepgoing._demo.usecases.common import Facts, short_id, wait_for
from keepgoing._history import events as ev
from keepgoing.errors import UnknownWorkflowWarning

__all__ = ["HOLDBACK", "Lookups", "directory_answers", "lookups_of"]

KEY = "DIR-0429"
GROUP = "uc-dir-0429"
TICKETS = 8  # one batch: eight customers looked up at once
PER_SECOND = 2  # the directory's quota, and the agent's `directory` limit
#: A first attempt that started this long after its step was scheduled waited for the
#: limit (half a token's period: claiming a free step takes far less).
HELD = 0.5 / PER_SECOND


@dataclass(frozen=True)
class Lookups:
    """What a run's history says about its ``lookup_customer`` steps."""

    lookups: int  # steps
    held: int  # steps whose first attempt waited at least HELD seconds to start
    longest: float  # the longest such wait, in seconds
    refused: int  # attempts that failed with the directory's 429
    failed: int  # steps that failed for good

    def line(self) -> str:
        return (
            f"{self.lookups} lookups under rate_limit='directory' ({PER_SECOND}/s): "
            f"{self.held} held back before they were sent (the longest "
            f"{self.longest:.1f} s); the directory answered 429 to {self.refused} "
            f"(retried), and {self.failed} failed"
        )


def lookups_of(history: Sequence[ev.Event]) -> Lookups:
    """Count the run's lookups, how long each waited to start, and its 429s."""
    scheduled = {
        e.cmd: e.at
        for e in history
        if isinstance(e, ev.TaskScheduled) and e.name == "lookup_customer"
    }
    first: dict[int, float] = {}
    refused = 0
    for e in history:
        if not isinstance(e, ev.TaskAttemptFailed | ev.TaskCompleted) or e.cmd not in scheduled:
            continue
        if e.started_at is not None:
            first[e.cmd] = min(first.get(e.cmd, e.started_at), e.started_at)
        refused += isinstance(e, ev.TaskAttemptFailed) and "429" in e.error.message
    waits = [first[cmd] - at for cmd, at in scheduled.items() if cmd in first]
    held = [wait for wait in waits if wait >= HELD]
    failed = sum(isinstance(e, ev.TaskFailed) and e.cmd in scheduled for e in history)
    return Lookups(len(scheduled), len(held), max(held, default=0.0), refused, failed)


def directory_answers(stack: DemoStack, since: float = 0.0) -> tuple[int, int]:
    """The directory's own log: (requests, 429s) answered at or after ``since``."""
    log = Path(stack.workdir) / "directory" / "directory.log"
    lines = log.read_text(encoding="utf-8").split("\n") if log.exists() else []
    answers = [line.split() for line in lines if line.strip()]
    mine = [a for a in answers if len(a) == 3 and float(a[0]) >= since]
    return len(mine), sum(a[2] == "429" for a in mine)


def start(stack: DemoStack) -> str:
    """Deploy the agent as this case's group and start a digest of one batch of eight."""
    worker = deploy_agent(stack, GROUP)
    week = json.loads(tickets_file().read_text(encoding="utf-8"))["tickets"]
    workflow_id = short_id(KEY)
    with warnings.catch_warnings():
        # The agent's own group has served support_digest, this one not yet: it was
        # deployed a moment ago, and its first replica serves the run.
        warnings.simplefilter("ignore", UnknownWorkflowWarning)
        stack.client.trigger_workflow(
            "support_digest",
            {
                "run_key": workflow_id,
                "ticket_ids": [t["id"] for t in week[:TICKETS]],
                "batch_size": TICKETS,
                "pause_seconds": Pace.of(stack.fast).pause_seconds,
            },
            workflow_id=workflow_id,
            task_queue=worker.task_queue,
            wait=False,
        )
    return workflow_id


def headless(stack: DemoStack, out: Callable[[str], None]) -> Evidence:
    out(f"{KEY} · Held back, not retried: {TICKETS} customers looked up at once, {PER_SECOND}/s")
    workflow_id = start(stack)
    out(f"  started {workflow_id}; its lookups wait for the directory limit")
    said = _waiting_said(stack, workflow_id)
    stack.client.result(workflow_id, timeout=120 if stack.fast else 600)
    history = stack.client.history(workflow_id)
    found = lookups_of(history)
    since = min((e.at for e in history if isinstance(e, ev.TaskScheduled)), default=0.0)
    requests, refused = directory_answers(stack, since)
    facts = Facts(out)
    facts.check(
        found.lookups == TICKETS and found.held >= TICKETS - 2 * PER_SECOND and not found.failed,
        found.line(),
    )
    facts.check(
        said is not None,
        f"while they waited the run said: {said!r}"
        if said
        else "the run never said it was rate-limited by directory",
    )
    facts.check(
        refused <= 1 and requests >= found.lookups,
        f"the directory's log: {requests} requests, {refused} answered 429 (its quota "
        f"refuses all but {PER_SECOND} of {TICKETS} sent at once)",
    )
    return Evidence(KEY, tuple(facts.lines), facts.ok)


def _waiting_said(stack: DemoStack, workflow_id: str) -> str | None:
    """What the run says it waits for while the limit holds a lookup back (as its page
    and ``keepgoing show`` say it), or None if the run ended without saying so."""

    def said() -> str | None:
        run = stack.client.get_run(workflow_id)
        text = run.waiting_for or ""
        if "rate-limited by directory" in text:
            return text
        return "" if run.status == "running" else "-"

    try:
        found = wait_for(lambda: said() or None, 60 if stack.fast else 300, "a lookup to wait")
    except TimeoutError:
        return None
    return None if found == "-" else found


HOLDBACK = UseCase(
    key=KEY,
    title="Held back, not retried",
    area="Flow control",
    summary="Retries recover from a 429 once it has happened, at a failed attempt and a "
    "delay each. A rate limit matching the customer directory's quota holds each lookup "
    "back until its turn instead, holding no worker: the run says it is rate-limited by "
    "directory, and no lookup fails.",
    start=start,
    headless=headless,
)
