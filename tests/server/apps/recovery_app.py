"""Workflows for the recovery routes: published progress, and a run to resume and fork.

``three_steps`` fails at step 2 until the file ``fixed`` exists in ``KG_TEST_DIR``
(the test's stand-in for a code fix). ``then`` (default: ``word``) is the word of
steps 2 and 3 only, so a fork from step 2 may change it.
"""

from __future__ import annotations

import os

import keepgoing


@keepgoing.task
def part(n: int, word: str) -> str:
    if n == 2 and not os.path.exists(os.path.join(os.environ["KG_TEST_DIR"], "fixed")):
        raise keepgoing.NonRetryableError("part 2 is broken")
    return f"{word}-{n}"


@keepgoing.workflow
async def three_steps(word: str = "w", then: str | None = None) -> list[str]:
    done = []
    for n in (1, 2, 3):
        done.append(await part(n, word if n == 1 or then is None else then))
        keepgoing.set_status("progress", n)
    return done
