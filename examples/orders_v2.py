"""The second revision: stock is now reserved with a hold that expires.

Runs that reserved stock before this change have ``reserve`` in their history,
so the new step sits behind ``keepgoing.patched``: replaying those runs takes
the old branch, and every run that reaches this point on the new code takes
the new one. Once ``keepgoing runs --needs-patch reserve-with-hold`` lists no
run, replace the ``if`` with ``keepgoing.deprecate_patch("reserve-with-hold")``
and the new branch alone.
"""

from __future__ import annotations

import keepgoing
from keepgoing import task, wait_for_message, workflow


@task
def reserve(order_id: str) -> str:
    return f"reserved {order_id}"


@task
def reserve_with_hold(order_id: str, minutes: int) -> str:
    return f"held {order_id} for {minutes} min"


@task
def ship(order_id: str) -> str:
    return f"shipped {order_id}"


@workflow
async def order(order_id: str) -> list[str]:
    if keepgoing.patched("reserve-with-hold"):
        steps = [await reserve_with_hold(order_id, 30)]
    else:
        steps = [await reserve(order_id)]
    await wait_for_message("ship")
    steps.append(await ship(order_id))
    return steps
