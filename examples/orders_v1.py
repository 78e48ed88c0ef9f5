"""The first revision of an order workflow: reserve stock, wait for the go-ahead, ship.

Deployed by examples/safe_change.py; orders_v2.py is the next revision.
"""

from __future__ import annotations

from keepgoing import task, wait_for_message, workflow


@task
def reserve(order_id: str) -> str:
    return f"reserved {order_id}"


@task
def ship(order_id: str) -> str:
    return f"shipped {order_id}"


@workflow
async def order(order_id: str) -> list[str]:
    steps = [await reserve(order_id)]
    await wait_for_message("ship")
    steps.append(await ship(order_id))
    return steps
