"""A long step whose worker the test kills again and again, run by real `keepgoing worker`s."""

from __future__ import annotations

import os
import time

from keepgoing import task, workflow


def _marker(name: str) -> str:
    return os.path.join(os.environ["KG_TEST_DIR"], name)


@task(timeout="120s", retry_delay="50ms")  # max_worker_losses: the default, 3
def long_step(key: str) -> str:
    # Tells the test which process runs this attempt, then waits (its own
    # condition, with a deadline) for the test to release it.
    open(_marker(f"running-{key}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 110
    while not os.path.exists(_marker(f"release-{key}")):
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return f"released on {os.getpid()}"


@workflow
async def survives_kills(key: str) -> str:
    return await long_step(key)
