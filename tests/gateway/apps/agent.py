"""A workflow whose step calls its model through the gateway.

``ask`` calls ``keepgoing.gateway.chat``; on its first attempt, when the marker
``hold-<key>`` exists, it writes ``called-<key>-<attempt>`` after the call and
waits (for a SIGKILL). ``flaky`` calls the model, then raises on its first attempt.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import keepgoing
from keepgoing import gateway

FOLDER = Path(os.environ["KG_TEST_DIR"])


@keepgoing.task(retries=2, retry_delay=0)
def ask(key: str, question: str) -> dict:
    ctx_attempt = _attempt()
    answer = gateway.chat(model="gpt", messages=[{"role": "user", "content": question}])
    (FOLDER / f"called-{key}-{ctx_attempt}").write_text(answer.call_id)
    if ctx_attempt == 1 and (FOLDER / f"hold-{key}").exists():
        while True:  # held here until the worker is killed
            time.sleep(0.05)
    return {"text": answer.text, "attempt": ctx_attempt, "call_id": answer.call_id}


@keepgoing.task(retries=2, retry_delay=0)
def flaky(key: str) -> str:
    answer = gateway.chat(model="scripted", messages=[{"role": "user", "content": "say 'hi'"}])
    if _attempt() == 1:
        raise RuntimeError("the first attempt fails after its model call")
    return answer.text or ""


def _attempt() -> int:
    from keepgoing._runtime.context import current_task_context  # noqa: PLC0415

    ctx = current_task_context()
    assert ctx is not None
    return ctx.attempt


@keepgoing.workflow
async def agent(key: str, question: str) -> dict:
    return await ask(key, question)


@keepgoing.workflow
async def flaky_agent(key: str) -> str:
    return await flaky(key)
