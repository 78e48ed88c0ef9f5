"""The support workflow the browser tests drive: three steps, memory in a volume.

``enrich`` writes notes to the volume ``notes-<ticket>`` and, with ``hold``, waits on
its first attempt for the marker ``release-<ticket>`` in ``KG_TEST_DIR``, so a
test can kill its worker mid-step. ``route`` writes the decision to the same
volume, so a run leaves two versions to browse and compare.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import keepgoing
from keepgoing import Volume, gateway
from keepgoing._runtime.context import current_task_context


def _attempt() -> int:
    ctx = current_task_context()
    return ctx.attempt if ctx is not None else 0


def _wait_for(marker: str, limit: float = 60.0) -> None:
    path = Path(os.environ["KG_TEST_DIR"]) / marker
    deadline = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"marker {marker} did not appear within {limit}s")
        time.sleep(0.01)


@keepgoing.task
def intake(ticket: str) -> dict:
    return {"ticket": ticket, "customer": "C-42", "topic": "billing"}


@keepgoing.task
def enrich(ticket: str, context: dict, hold: bool = False) -> dict:
    memory = Volume(f"notes-{ticket}")
    memory.put_file("notes.md", f"# {ticket}\ncustomer {context['customer']} asks about billing\n")
    if hold and _attempt() == 1:
        # Tell the test which process holds the step, then wait to be released (or killed).
        folder = Path(os.environ["KG_TEST_DIR"])
        (folder / f"holding-{ticket}.tmp").write_text(str(os.getpid()))
        (folder / f"holding-{ticket}.tmp").rename(folder / f"holding-{ticket}")
        _wait_for(f"release-{ticket}")
    return {**context, "plan": "refund", "attempt": _attempt()}


@keepgoing.task
def route(ticket: str, enriched: dict) -> str:
    memory = Volume(f"notes-{ticket}")
    notes = memory.read_text("notes.md")
    memory.put_file("notes.md", notes + f"routed to billing ({enriched['plan']})\n")
    memory.put_file("decision.md", "billing\n")
    return "billing"


@keepgoing.workflow
async def support(ticket: str, hold: bool = False) -> dict:
    context = await intake(ticket)
    enriched = await enrich(ticket, context, hold)
    queue = await route(ticket, enriched)
    return {"ticket": ticket, "queue": queue, "plan": enriched["plan"]}


@keepgoing.workflow
async def progress(ticket: str) -> str:
    """Publishes its progress: the run page shows the newest value of each key."""
    keepgoing.set_status("stage", "intake")
    await intake(ticket)
    keepgoing.set_status("stage", "routed")
    keepgoing.set_status("counts", {"done": 1, "of": 1})
    return ticket


@keepgoing.task
async def tick(i: int) -> int:
    return i


@keepgoing.workflow
async def wide(n: int) -> int:
    """Many small steps at once: a long history for the timeline's speed."""
    done = await asyncio.gather(*(tick(i) for i in range(n)))
    return sum(done)


@keepgoing.task
def push_record(customer: str, fields: dict) -> dict:
    """A CRM write whose answer is lost: the outcome is uncertain."""
    print(f"sent PUT /customers/{customer} {fields} as {keepgoing.operation_id()}")
    raise keepgoing.UncertainOutcome(
        f"the CRM closed the connection after PUT /customers/{customer}"
    )


@keepgoing.workflow
async def crm_update(customer: str, fields: dict) -> dict:
    written = await push_record(customer, fields)
    return {"customer": customer, "crm": written}


class RateLimitedError(Exception):
    """The customer directory answered 429 Too Many Requests."""


@keepgoing.task(retries=3, retry_delay="50ms")
def lookup(ticket: str) -> dict:
    """Refused with a 429 on its first two attempts, like a rate-limited directory."""
    if _attempt() <= 2:
        raise RateLimitedError("429 Too Many Requests from the customer directory; retry in 1s")
    return {"ticket": ticket, "customer": "C-42", "topic": "billing"}


@keepgoing.workflow
async def troubled(ticket: str, hold: bool = True) -> dict:
    """Two 429 retries, then a step a test can kill its worker in."""
    context = await lookup(ticket)
    enriched = await enrich(ticket, context, hold)
    return {"ticket": ticket, "plan": enriched["plan"]}


@keepgoing.task
def note(book: str, day: int) -> int:
    Volume(f"journal-{book}").put_file(f"day-{day % 3}.md", f"day {day}\n")
    return day


@keepgoing.workflow
async def journal(book: str, days: int) -> int:
    """A volume with many versions: one per step, each writing one of three files."""
    for day in range(days):
        await note(book, day)
    return days


@keepgoing.task(retries=1, retry_delay="0.1s")
def ask_model(question: str) -> str:
    """A model step whose first attempt asks the model and then fails: the ledger keeps
    what both attempts' calls cost (the gateway runs in this worker, on the scripted
    model)."""
    answer = gateway.chat(
        model="scripted", messages=[{"role": "user", "content": f"Summarize: {question}"}]
    )
    if _attempt() == 1:
        raise RuntimeError("the answer was cut off; asking again")
    return answer.text or ""


@keepgoing.workflow
async def ask(question: str) -> str:
    return await ask_model(question)


@keepgoing.task(retries=3, retry_delay="50ms", give_up_on=(ValueError,))
def validate(ticket: str) -> str:
    """Retried once for a flaky check, then refused for good: a ValueError is not retried."""
    if _attempt() == 1:
        raise ConnectionError("the validator did not answer")
    raise ValueError(f"ticket {ticket} is malformed")


@keepgoing.workflow
async def strict(ticket: str) -> str:
    """One step with an error retried, then an error not retried: the run fails."""
    return await validate(ticket)
