"""Runs that leave trouble behind, for the runs list's markers and filters.

``flaky_lookup`` is refused with a 429 on its first two attempts; ``held`` waits
for the marker ``release-<key>`` so a test can kill its worker mid-step;
``push_record`` raises ``UncertainOutcome``, so its run waits for a review.
"""

from __future__ import annotations

import os
import time

import keepgoing
from keepgoing import task, workflow
from keepgoing._runtime.context import current_task_context


class RateLimitedError(Exception):
    """The directory answered 429 Too Many Requests."""


def _marker(name: str) -> str:
    return os.path.join(os.environ["KG_TEST_DIR"], name)


@task(retries=3, retry_delay="50ms")
def flaky_lookup(key: str) -> str:
    ctx = current_task_context()
    if ctx is not None and ctx.attempt <= 2:
        raise RateLimitedError("429 Too Many Requests from the directory; retry in 1s")
    return f"found {key}"


@task(timeout="120s", retry_delay="50ms")
def held(key: str) -> str:
    open(_marker(f"running-{key}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 110
    while not os.path.exists(_marker(f"release-{key}")):
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return f"released on {os.getpid()}"


@task
def push_record(key: str) -> dict:
    raise keepgoing.UncertainOutcome(f"the CRM closed the connection after PUT {key}")


@workflow
async def troubled(key: str) -> dict:
    found = await flaky_lookup(key)
    done = await held(key)
    return {"found": found, "done": done}


@workflow
async def needs_review(key: str) -> dict:
    written = await push_record(key)
    return {"written": written}
