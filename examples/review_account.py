"""Wait for a reviewer's decision, for up to two days (docs: Wait for messages).

In-process:      python examples/review_account.py
On a worker:     keepgoing worker examples/review_account.py, then
                 client.trigger_workflow("review_account", {"account_id": "acct-1"})
                 client.send_workflow_message(workflow_id, "review", {"approved": True})
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from keepgoing import WorkflowMessageTimeoutError, local_messages, task, wait_for_message, workflow
from keepgoing.testing import fake_clock


@task
def apply_decision(account_id: str, approved: bool, reviewer: str) -> str:
    return f"{account_id}: {'approved' if approved else 'rejected'} by {reviewer}"


@workflow
async def review_account(account_id: str) -> str:
    try:
        review = await wait_for_message("review", timeout=timedelta(days=2))
    except WorkflowMessageTimeoutError:
        return "expired"
    await apply_decision(account_id, review.payload["approved"], review.sender_id)
    return "approved" if review.payload["approved"] else "rejected"


if __name__ == "__main__":
    with local_messages([("review", {"approved": True})]):
        print(asyncio.run(review_account("acct-1")))  # approved
    with fake_clock():
        print(asyncio.run(review_account("acct-2")))  # expired, two days in milliseconds
