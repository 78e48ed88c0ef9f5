"""Workflows for the recovery controls: published progress, resume and fork.

``five_steps`` runs ``step`` 1 to 5 in order, publishing its progress (``word``
reaches steps 3 to 5 only, so a fork from step 3 may change it); step 3
fails with a NonRetryableError while this file says ``BROKEN = True`` (the
tests fix the code by rewriting that line). ``held`` waits for a marker file.
"""

from __future__ import annotations

from kg_effects import attempt, record, wait_for_marker

import keepgoing

BROKEN = True


@keepgoing.task(retries=3)
def step(key: str, n: int, word: str) -> str:
    record("start", f"step{n}", key, attempt())
    if n == 3 and BROKEN:
        raise keepgoing.NonRetryableError(f"step 3 of {key} is broken")
    return f"{word}-{n}"


@keepgoing.task(timeout="60s")
def held(key: str) -> str:
    record("start", "held", key, attempt())
    wait_for_marker(f"release-{key}")
    return key


@keepgoing.workflow
async def five_steps(key: str, word: str = "w") -> list[str]:
    done: list[str] = []
    for n in range(1, 6):
        done.append(await step(key, n, word if n >= 3 else "w"))
        keepgoing.set_status("progress", {"done": n, "of": 5})
    return done


@keepgoing.workflow
async def publishes(key: str) -> str:
    token = str(keepgoing.uuid4())  # the same on every replay
    keepgoing.set_status("stage", "started")
    keepgoing.set_status("token", token)
    await held(key)
    keepgoing.set_status("stage", "done")
    return token


@keepgoing.workflow
async def publishes_badly(key: str) -> list[str]:
    problems = []
    for value in (float("nan"), "\ud800", 10**5000, {1: "int key"}):
        try:
            keepgoing.set_status("bad", value)
        except keepgoing.PayloadError as exc:
            problems.append(str(exc))
    for name in ("", "x" * 201, "a\nb"):
        try:
            keepgoing.set_status(name, 1)
        except ValueError as exc:
            problems.append(str(exc))
    return problems
