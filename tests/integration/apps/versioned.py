# /// script
# dependencies = ["keepgoing"]
# ///
"""A deployed app whose code the pinning tests change between deploys.

Revision 1 is this file. The tests write later revisions from it: renaming the
step ``prepare`` (without a guard: replaying an old history blocks), putting
the new step behind ``keepgoing.patched("rename-prepare")``, or renaming the
parameter of the child workflow ``shipment``. Every task returns
the group revision of the worker that ran it, so a test sees which code ran.
"""

from __future__ import annotations

import os

import kg_effects

from keepgoing import continue_as_new, start_child, task, wait_for_message, workflow


def revision() -> str:
    return os.environ.get("KEEPGOING_GROUP_REVISION", "-")


@task
def prepare(key: str) -> str:
    kg_effects.record("done", "prepare", key, kg_effects.attempt())
    return f"prepare@{revision()}"


@task
def finish(key: str, note: str) -> str:
    kg_effects.record("done", "finish", key, kg_effects.attempt())
    return f"finish:{note}@{revision()}"


@workflow
async def order(key: str) -> list[str]:
    steps = [await prepare(key)]  # STEP-ONE
    message = await wait_for_message("go")
    steps.append(await finish(key, str(message.payload)))
    return steps


@task
def ship(key: str) -> str:
    kg_effects.record("done", "ship", key, kg_effects.attempt())
    return f"ship@{revision()}"


@workflow
async def shipment(key: str) -> str:  # SHIPMENT
    return await ship(key)


@workflow
async def parent_order(key: str, round: int = 0) -> list[str]:
    """Waits for "go", ships through a child, continues as new once and ships again."""
    if round == 0:
        await wait_for_message("go")
    child = await start_child(shipment, {"key": key}, workflow_id=f"{key}-ship-{round}")
    shipped = await child
    if round == 0:
        continue_as_new(key=key, round=1)
    return [shipped, f"parent@{revision()}"]
