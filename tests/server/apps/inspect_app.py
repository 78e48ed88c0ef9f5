"""Workflows for the logs, kill and steps tests, run by real `keepgoing worker`s."""

from __future__ import annotations

import logging
import os
import sys
import time

from keepgoing import Volume, register_secret, task, workflow

register_secret(os.environ.get("APP_SECRET", "unset-secret-value"))
log = logging.getLogger("inspect_app")


def _marker(name: str) -> str:
    return os.path.join(os.environ["KG_TEST_DIR"], name)


@task(retries=1, retry_delay="10ms")
def chatty(key: str) -> str:
    first = not os.path.exists(_marker(f"chatty-{key}"))
    print(f"stdout line of {key}, first={first}")
    sys.stderr.write(f"stderr line with secret {os.environ.get('APP_SECRET')}\n")
    log.warning("a logging record of %s", key)
    if first:
        open(_marker(f"chatty-{key}"), "w").close()
        raise RuntimeError("first attempt fails")
    return f"done {key}"


@task
def flood(megabytes: int) -> int:
    line = "y" * 1023 + "\n"
    for _ in range(megabytes * 1024):
        sys.stdout.write(line)
    return megabytes


@task
def closer() -> str:
    sys.stdout.buffer.write(b"raw \xff\xfe bytes\n")
    sys.stdout.close()
    print("printed after closing stdout")
    return "closed"


@task
async def async_talker(key: str) -> str:
    print(f"async task {key} speaks")
    return key


@task
def writes_memory(key: str) -> int:
    Volume(f"mem-{key}").put_file("notes.txt", b"remember")
    return 1


@task(timeout="60s")
def waits_for_release(key: str) -> str:
    # Tells the test it runs, then waits (its own condition, with a deadline) for the
    # test to release it; a killed attempt never returns.
    print(f"waiting on {os.getpid()}")  # lost with the attempt if its worker is killed
    open(_marker(f"running-{key}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 50
    while not os.path.exists(_marker(f"release-{key}")):
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return f"released on {os.getpid()}"


@workflow
async def logged(key: str) -> list:
    return [
        await chatty(key),
        await flood(10),
        await closer(),
        await async_talker(key),
    ]


@workflow
async def killable(key: str) -> str:
    await writes_memory(key)
    await async_talker(key)
    return await waits_for_release(key)
