"""The quickstart workflow: a small support digest, one checkpointed step at a time.

``keepgoing demo`` runs it on a worker, kills that worker with SIGKILL in the
middle of ``draft_digest``, starts a fresh worker, and shows how the run
finished. Each task appends to a journal file (``KEEPGOING_DEMO_DIR``) so
the demo can prove from real side effects which steps ran once.
"""

from __future__ import annotations

import asyncio
import os
import time

from keepgoing import task, workflow
from keepgoing._runtime.context import current_task_context

TICKETS = {
    "FH-1041": "Invoice charged twice after plan upgrade",
    "FH-1042": "Export to CSV times out for large projects",
    "FH-1043": "Cannot reset password: email never arrives",
    "FH-1044": "Feature request: dark mode for the dashboard",
}


def _journal(line: str) -> None:
    folder = os.environ.get("KEEPGOING_DEMO_DIR")
    if not folder:
        return
    ctx = current_task_context()
    attempt = ctx.attempt if ctx else 0
    with open(os.path.join(folder, "journal.log"), "a", encoding="utf-8") as out:
        out.write(f"{time.time():.6f} {os.getpid()} {line} {attempt}\n")
        out.flush()
        os.fsync(out.fileno())


@task(retries=2, retry_delay="1s")
def load_tickets(ticket_ids: list[str]) -> list[dict[str, str]]:
    _journal("start load_tickets")
    tickets = [{"id": t, "subject": TICKETS.get(t, "(unknown ticket)")} for t in ticket_ids]
    _journal("done load_tickets")
    return tickets


@task(retries=2, retry_delay="1s")
def triage(ticket: dict[str, str]) -> dict[str, str]:
    _journal(f"start triage:{ticket['id']}")
    subject = ticket["subject"].lower()
    if "invoice" in subject or "charged" in subject:
        queue = "billing"
    elif "request" in subject:
        queue = "product"
    else:
        queue = "engineering"
    _journal(f"done triage:{ticket['id']}")
    return {**ticket, "queue": queue}


@task(retries=2, retry_delay="1s", timeout="2m")
def draft_digest(triaged: list[dict[str, str]]) -> str:
    """The long step: the demo kills the worker while this runs."""
    _journal("start draft_digest")
    for _ in range(30):  # about three seconds of "model calls"
        time.sleep(0.1)
    lines = [f"- [{t['queue']}] {t['id']}: {t['subject']}" for t in triaged]
    _journal("done draft_digest")
    return "Support digest\n" + "\n".join(lines)


@task
def publish(digest: str) -> dict[str, object]:
    _journal("start publish")
    _journal("done publish")
    return {"published": True, "lines": digest.count("\n")}


@workflow
async def support_digest(run_key: str, ticket_ids: list[str]) -> dict[str, object]:
    tickets = await load_tickets(ticket_ids)
    triaged = await asyncio.gather(*(triage(t) for t in tickets))
    digest = await draft_digest(list(triaged))
    await asyncio.sleep(1)  # a durable timer: no worker is held while it waits
    published = await publish(digest)
    return {"run_key": run_key, **published}
