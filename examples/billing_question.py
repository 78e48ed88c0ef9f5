# /// script
# dependencies = ["keepgoing"]
# ///
"""TKT-2418, a billing question: intake, customer context, routing, then a reply draft.

Each step is a task, so its output is checkpointed the moment it returns. Kill
the worker while ``draft_reply`` runs and a replacement worker retries that one
step: the customer context and the routing decision are read from the run's
history, not computed again. Each task appends a line to ``DEMO_JOURNAL`` (when
set) so the demo can show from real side effects which steps ran once.

    keepgoing worker billing_question.py
    keepgoing run billing_question -i '{"ticket_id": "TKT-2418"}' --wait
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from keepgoing import operation_id, task, workflow

TICKETS = {
    "TKT-2418": {
        "ticket_id": "TKT-2418",
        "customer_id": "CUS-5521",
        "subject": "Charged twice for the March invoice",
        "body": "Hi, my card was charged twice for invoice INV-3307 (EUR 129.00). "
        "Can you refund the duplicate? Thanks, Dana",
    },
}
CUSTOMERS = {
    "CUS-5521": {
        "customer_id": "CUS-5521",
        "name": "Dana Whitfield",
        "plan": "Team (annual)",
        "invoices": [
            {"invoice": "INV-3307", "amount": 129.0, "charges": 2, "status": "paid"},
            {"invoice": "INV-3189", "amount": 129.0, "charges": 1, "status": "paid"},
        ],
        "open_tickets": 0,
    },
}


def _journal(step: str, key: str) -> None:
    """One line per execution of a step body (what ran, where, which attempt)."""
    path = os.environ.get("DEMO_JOURNAL")
    if path:
        line = {"step": step, "key": key, "pid": os.getpid(), "operation": operation_id()}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def _work(seconds: float) -> None:
    """Stand-in for a model call's latency (``DEMO_STEP_SECONDS`` scales it)."""
    time.sleep(seconds * float(os.environ.get("DEMO_STEP_SECONDS", "1")))


@task(timeout="30s")
def intake(ticket_id: str) -> dict[str, str]:
    """Read the ticket from the help desk."""
    _journal("intake", ticket_id)
    return dict(TICKETS[ticket_id])


@task(timeout="30s")
def customer_context(customer_id: str) -> dict[str, Any]:
    """Look the customer up in billing: plan, invoices, duplicate charges."""
    _journal("customer_context", customer_id)
    _work(0.5)
    found: dict[str, Any] = dict(CUSTOMERS[customer_id])
    found["duplicate_charges"] = [i["invoice"] for i in found["invoices"] if i["charges"] > 1]
    return found


@task(timeout="30s")
def route_ticket(ticket: dict[str, str], context: dict[str, Any]) -> dict[str, str]:
    """Decide the queue and priority (a model call in a real deployment)."""
    _journal("route_ticket", ticket["ticket_id"])
    _work(0.5)
    duplicates = ", ".join(context["duplicate_charges"])
    if not duplicates:
        return {"queue": "billing", "priority": "normal", "reason": "a billing question"}
    return {
        "queue": "billing-refunds",
        "priority": "high",
        "reason": f"a duplicate charge on {duplicates}",
    }


@task(timeout="60s", retries=1)
def draft_reply(
    ticket: dict[str, str], context: dict[str, Any], routing: dict[str, str]
) -> dict[str, str]:
    """Write the reply draft (the long step the demo kills its worker in)."""
    _journal("draft_reply", ticket["ticket_id"])
    _work(3.0)
    invoice = ", ".join(context["duplicate_charges"]) or "your invoice"
    text = (
        f"Hi {str(context['name']).split()[0]}, thanks for flagging this. We found a "
        f"duplicate charge on {invoice} and have queued a refund to your card; it "
        "shows within 5 business days."
    )
    return {"queue": routing["queue"], "draft": text}


@workflow
async def billing_question(ticket_id: str) -> dict[str, Any]:
    ticket = await intake(ticket_id)
    context = await customer_context(ticket["customer_id"])
    routing = await route_ticket(ticket, context)
    reply = await draft_reply(ticket, context, routing)
    return {"ticket": ticket_id, "routing": routing, "reply": reply}
