"""Tasks that stop their own worker, run by real `keepgoing worker`s: a signal from
inside the attempt, a kill request through the server, a stop recorded through the
store (from the task, or from a process it started); and a bystander step."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import httpx

from keepgoing import task, workflow
from keepgoing._open_store import store_from_url
from keepgoing._runtime.context import current_task_context
from keepgoing._store.records import WorkerStop

#: Records a stop for a worker, as any program with the store's URL can.
RECORD = """
import asyncio, sys, time
from keepgoing._store.records import WorkerStop
from keepgoing._open_store import store_from_url

async def main():
    store = store_from_url(sys.argv[1])
    await store.open()
    stop = WorkerStop(sys.argv[2], "scaled_down", "user", "ops", "autoscaler")
    stop_id = await store.record_worker_stop(stop, now=time.time())
    await store.settle_worker_stop(stop_id, signalled=True)
    await store.close()

asyncio.run(main())
"""


def _marker(name: str) -> str:
    return os.path.join(os.environ["KG_TEST_DIR"], name)


def _note(key: str) -> None:
    ctx = current_task_context()
    assert ctx is not None
    line = json.dumps({"key": key, "attempt": ctx.attempt, "pid": os.getpid()}) + "\n"
    with open(_marker(f"attempts-{key}.log"), "a") as f:
        f.write(line)


def _hold(key: str, limit: float = 50.0) -> str:
    deadline = time.monotonic() + limit
    while not os.path.exists(_marker(f"release-{key}")):
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return f"released on {os.getpid()}"


@task(timeout="60s", retry_delay="50ms", max_worker_losses=1)
def signals_itself(key: str, how: str) -> str:
    _note(key)
    if how == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    elif how == "sigint":
        os.kill(os.getpid(), signal.SIGINT)
    elif how == "killpg":
        os.killpg(0, signal.SIGTERM)
    return _hold(key)  # past the worker's shutdown grace: handed back


@task(timeout="60s", retry_delay="50ms", max_worker_losses=1)
def kills_itself_through_the_api(key: str) -> str:
    _note(key)
    ctx = current_task_context()
    assert ctx is not None
    headers = {"Authorization": f"Bearer {os.environ['KG_KILL_TOKEN']}"}
    url = f"{os.environ['KG_SERVER_URL']}/api/v1/workers/{ctx.worker_id}/kill"
    with contextlib.suppress(httpx.HTTPError):  # the answer never comes: this process dies
        httpx.post(url, headers=headers, json={"via": "ui"}, timeout=30)
    return _hold(key)


@task(timeout="60s", retry_delay="50ms", max_worker_losses=1)
def records_its_stop(key: str, from_child: bool) -> str:
    _note(key)
    ctx = current_task_context()
    assert ctx is not None
    url = os.environ["KG_STORE_URL"]
    if from_child:
        subprocess.run([sys.executable, "-c", RECORD, url, ctx.worker_id], check=True)
    else:

        async def record() -> None:
            store = store_from_url(url)
            await store.open()
            stop = WorkerStop(ctx.worker_id, "scaled_down", "user", "ops", "autoscaler")
            stop_id = await store.record_worker_stop(stop, now=time.time())
            await store.settle_worker_stop(stop_id, signalled=True)
            await store.close()

        asyncio.run(record())
    os.kill(os.getpid(), signal.SIGKILL)  # "scaled down": now die
    return "never"


@task(timeout="60s", retry_delay="50ms", max_worker_losses=0)
def bystander(key: str) -> str:
    _note(key)
    return _hold(key)


@workflow
async def self_stop(key: str, kind: str, how: str = "") -> str:
    if kind == "signal":
        return await signals_itself(key, how)
    if kind == "api":
        return await kills_itself_through_the_api(key)
    if kind == "record":
        return await records_its_stop(key, how == "child")
    return await bystander(key)
