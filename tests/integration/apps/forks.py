"""A support workflow for the check of a fork's (or a resume's) reused steps.

``fork_support`` runs five steps for a ticket: ``greet`` and ``classify`` (from the
ticket), ``lookup_customer(customer_id)``, ``reply(customer_id, note)`` and
``close(ticket)``. A fork from step 4 reuses steps 1 to 3: a new
``customer_id`` changes step 3's argument (refused), a new ``note`` only step
4's (it runs). While this file says ``CLOSE_BROKEN = True`` step 5 fails for
good; ``UPPER_IDS = True`` is a code change a resume is refused for: step 3
then schedules the customer id upper-cased. ``parallel`` keeps step 1 open
(held on the marker ``release-<customer_id>``) while steps 2 and 3 run, so a
fork from step 3 reuses a step that was still open at its cut.
"""

from __future__ import annotations

from kg_effects import attempt, record, wait_for_marker

import keepgoing

CLOSE_BROKEN = False
UPPER_IDS = False


@keepgoing.task
def greet(ticket: str) -> str:
    record("start", "greet", ticket, attempt())
    return f"hello {ticket}"


@keepgoing.task
def classify(ticket: str) -> str:
    record("start", "classify", ticket, attempt())
    return "billing"


@keepgoing.task
def lookup_customer(customer_id: str) -> str:
    record("start", "lookup", customer_id, attempt())
    return f"customer {customer_id}"


@keepgoing.task
def reply(customer_id: str, note: str) -> str:
    record("start", "reply", customer_id, attempt())
    return f"{note} {customer_id}"


@keepgoing.task
def close(ticket: str) -> str:
    record("start", "close", ticket, attempt())
    if CLOSE_BROKEN:
        raise keepgoing.NonRetryableError(f"closing {ticket} is broken")
    return f"closed {ticket}"


@keepgoing.workflow
async def fork_support(ticket: str, customer_id: str, note: str = "thanks") -> list[str]:
    done = [await greet(ticket), await classify(ticket)]
    done.append(await lookup_customer(customer_id.upper() if UPPER_IDS else customer_id))
    done.append(await reply(customer_id, note))
    done.append(await close(ticket))
    return done


@keepgoing.task(timeout="60s")
def slow_lookup(customer_id: str) -> str:
    record("start", "slow", customer_id, attempt())
    wait_for_marker(f"release-{customer_id}")
    return f"found {customer_id}"


@keepgoing.workflow
async def parallel(ticket: str, customer_id: str) -> list[str]:
    pending = slow_lookup.submit(customer_id)
    done = [await greet(ticket), await classify(ticket)]
    done.append(await pending)
    return done
