"""Deployed code that looks around: what a replica can see and reach (for the trust tests).

``look`` reports its environment, its command line and what the store URL it was
given lets it do; ``nosy`` runs it between the things a worker must be able to do
on its own role (a durable timer, a child run, a volume write, a message).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from keepgoing import (
    Volume,
    current_workflow_id,
    send_message,
    start_child,
    task,
    wait_for_message,
    workflow,
)


def _try(what: str, work: object) -> str:
    try:
        work()  # type: ignore[operator]
    except Exception as exc:
        return f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return f"done: {what}"


def _store_attempts() -> dict[str, str]:
    url = os.environ.get("KEEPGOING_STORE", "")
    if not url.startswith("postgres"):
        return {}
    import psycopg  # noqa: PLC0415

    conninfo = url

    def run(sql: str, params: tuple[object, ...] = ()) -> None:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(sql, params)

    now = time.time()
    return {
        "insert_token": _try(
            "token",
            lambda: run(
                "INSERT INTO tokens (token_id, name, kind, permissions, secret_hash, "
                "created_at, created_by) VALUES ('feedfacefeedface', 'mallory', 'user', "
                "'[\"admin\"]', 'x', %s, 'mallory')",
                (now,),
            ),
        ),
        "read_secrets": _try("secrets", lambda: run("SELECT * FROM secrets")),
        "write_audit": _try(
            "audit",
            lambda: run(
                "INSERT INTO audit_log (at, actor_kind, actor_id, action, detail) "
                "VALUES (%s, 'user', 'someone-else', 'token.create', '{}')",
                (now,),
            ),
        ),
        "read_runs": _try("runs", lambda: run("SELECT count(*) FROM runs")),
    }


@task
def look() -> str:
    cmdline = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode()
    seen = {
        "env": sorted(os.environ),
        "home": os.environ.get("HOME"),
        "cmdline": cmdline,
        "store": os.environ.get("KEEPGOING_STORE", ""),
        "attempts": _store_attempts(),
    }
    return json.dumps(seen)


@task
def remember(seen: str) -> int:
    notes = Volume("nosy-notes")
    notes.put_file("seen.json", seen)
    print("remembered what it saw")  # an attempt log
    return len(seen)


@workflow
async def helper(n: int) -> int:
    return n + 1


@workflow
async def nosy() -> str:
    seen = await look()
    await asyncio.sleep(0.2)  # a durable timer
    child = await (await start_child(helper, {"n": 1}))
    await remember(seen)
    await send_message(current_workflow_id(), "ping", {"n": child})
    await wait_for_message("ping", timeout=30)
    return seen
