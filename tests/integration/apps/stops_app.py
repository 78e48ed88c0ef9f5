"""A step held until the test releases it, served by replicas of a local group."""

from __future__ import annotations

import os
import time

import keepgoing


def _marker(name: str) -> str:
    return os.path.join(os.environ["KG_TEST_DIR"], name)


@keepgoing.task(timeout="120s", max_worker_losses=0)  # a loss that counted would fail it
def held(key: str) -> str:
    open(_marker(f"running-{key}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 110
    while not os.path.exists(_marker(f"release-{key}")):
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return f"released on {os.getpid()}"


@keepgoing.workflow
async def hold(key: str) -> str:
    return await held(key)
