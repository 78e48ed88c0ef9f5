# /// script
# dependencies = ["keepgoing"]
# ///
"""A deployed app for the worker-group tests: steps, a durable sleep, held steps, secrets."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import sys

import kg_effects

from keepgoing import Image, task, workflow

# This interpreter's version: the local backend builds it layered over this environment.
six_image = Image.debian_slim("{}.{}".format(*sys.version_info[:2])).pip_install("six")
log = logging.getLogger("groups_app")


@task
def step(key: str) -> str:
    kg_effects.record("done", "step", key, kg_effects.attempt())
    return key


@task(timeout="60s")
def held(key: str) -> str:
    """Waits for the marker ``release-<key>``."""
    kg_effects.record("start", "held", key, kg_effects.attempt())
    kg_effects.wait_for_marker(f"release-{key}")
    kg_effects.record("done", "held", key, kg_effects.attempt())
    return key


@task(image=six_image)
def with_six() -> dict[str, object]:
    import six  # noqa: PLC0415 (only this task's environment has it)

    return {"six": six.__version__, "pid": os.getpid()}


@task
def main_has_six() -> bool:
    try:
        import six  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


@task(retries=1)
def use_secret() -> str:
    value = os.environ["PLANTED"]
    log.warning("using the secret %s", value)
    print(f"stdout sees {value}", flush=True)
    if kg_effects.attempt() == 1:
        raise RuntimeError(f"first attempt fails holding {value}")
    return hashlib.sha256(value.encode()).hexdigest()


@workflow
async def sleeper(seconds: float) -> list[str]:
    first = await step("before")
    await asyncio.sleep(seconds)
    return [first, await step("after")]


@workflow
async def hold(key: str) -> str:
    return await held(key)


@workflow
async def images() -> dict[str, object]:
    return {"task": await with_six(), "main_has_six": await main_has_six(), "pid": os.getpid()}


@workflow
async def secret() -> str:
    return await use_secret()


@workflow
async def quick(key: str) -> str:
    return await step(key)
