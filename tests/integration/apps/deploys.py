"""A workflow that the deploy tests change between worker starts (``test_deploys.py``).

The test rewrites the line marked ``DEPLOY`` to deploy code that no longer
replays the history (it calls ``audit`` first), and appends a comment to
deploy a fixed version whose source, and so whose code version, differs.
"""

from __future__ import annotations

from kg_effects import attempt, record

from keepgoing import task, wait_for_message, workflow


@task
def fetch(key: str) -> int:
    n = attempt()
    record("start", "fetch", key, n)
    record("done", "fetch", key, n)
    return 1


@task
def audit(key: str) -> int:
    n = attempt()
    record("start", "audit", key, n)
    record("done", "audit", key, n)
    return 0


@task
def save(key: str, n: int, note: str) -> dict:
    number = attempt()
    record("start", "save", key, number)
    record("done", "save", key, number)
    return {"n": n, "note": note}


@workflow
async def deployed(key: str) -> dict:
    n = await fetch(key)  # DEPLOY
    go = await wait_for_message("go")
    return await save(key, n, go.payload["note"])
