"""A workflow deployed as a group whose step calls its model through the gateway.

``ask`` returns the answer, its ledger call id and the pid of the replica that ran it.
"""

from __future__ import annotations

import os

import keepgoing
from keepgoing import gateway


@keepgoing.task(retries=2, retry_delay=0)
def ask(question: str) -> dict:
    answer = gateway.chat(model="gpt", messages=[{"role": "user", "content": question}])
    return {"text": answer.text, "call_id": answer.call_id, "pid": os.getpid()}


@keepgoing.workflow
async def deployed_agent(question: str) -> dict:
    return await ask(question)
