"""When a run fails: errors that are not retried, resuming on fixed code, forking a
step with new input, and the progress a run publishes.

Run in-process:        python examples/recovery.py
"""

from __future__ import annotations

import tempfile

import keepgoing
from keepgoing import Client, NonRetryableError, task, workflow

CALLS: dict[str, int] = {}  # how often each step ran, to show what is reused
BROKEN = True  # the bug step 3 has until it is fixed


class RateLimitedError(Exception):
    """The provider said slow down: worth another attempt."""


@task(retries=5, retry_on=(TimeoutError, RateLimitedError))
def fetch(topic: str) -> str:
    CALLS["fetch"] = CALLS.get("fetch", 0) + 1
    return f"notes on {topic}"


@task(retries=5, give_up_on=(ValueError,))
def draft(notes: str) -> str:
    CALLS["draft"] = CALLS.get("draft", 0) + 1
    return notes.upper()


@task(retries=5)
def publish(text: str) -> str:
    CALLS["publish"] = CALLS.get("publish", 0) + 1
    if BROKEN:
        raise NonRetryableError("the publishing API rejects this account")  # 1 attempt
    return f"published: {text}"


@workflow
async def digest(topic: str) -> str:
    notes = await fetch(topic)
    keepgoing.set_status("stage", "fetched")
    text = await draft(notes)
    keepgoing.set_status("stage", "drafted")
    done = await publish(text)
    keepgoing.set_status("stage", "published")
    return done


def main() -> None:
    global BROKEN
    with tempfile.TemporaryDirectory() as folder, Client(store=f"sqlite:///{folder}/kg.db") as c:
        try:
            c.run_workflow(digest, {"topic": "billing"}, workflow_id="digest-1")
        except keepgoing.WorkflowFailedError as exc:
            print("failed:", exc)
        print("status:", c.get_status("digest-1", "stage"))  # drafted
        assert CALLS == {"fetch": 1, "draft": 1, "publish": 1}  # not retried

        BROKEN = False  # the fix is deployed: resume from the failed step
        c.resume_workflow("digest-1")
        print(c.run_workflow(digest, workflow_id="digest-1"))  # drives the resumed run here
        assert CALLS == {"fetch": 1, "draft": 1, "publish": 2}  # steps 1-2 reused

        # Fork from step 2: step 1's notes are reused, steps 2-3 run again.
        c.fork_workflow("digest-1", 2, workflow_id="digest-2")
        print(c.run_workflow(digest, workflow_id="digest-2"))
        assert CALLS == {"fetch": 1, "draft": 2, "publish": 3}
        # A fork from step 2 with a new topic would reuse notes fetched for the old one:
        # its first activation refuses it, before any step runs.
        c.fork_workflow("digest-1", 2, input={"topic": "refunds"}, workflow_id="digest-4")
        try:
            c.run_workflow(digest, workflow_id="digest-4")
        except keepgoing.WorkflowFailedError as exc:
            print("refused:", exc)  # fork refused: step 1 fetch was recorded with topic=...
        assert CALLS == {"fetch": 1, "draft": 2, "publish": 3}  # nothing ran
        # A new input changes what step 1 fetches: fork from step 1, a rerun.
        c.fork_workflow("digest-1", 1, input={"topic": "refunds"}, workflow_id="digest-3")
        print(c.run_workflow(digest, workflow_id="digest-3"))  # published: NOTES ON REFUNDS
        print("origin:", c.lineage("digest-3")["origin"])


if __name__ == "__main__":
    main()
