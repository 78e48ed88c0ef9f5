"""Values no store can carry, and tasks that mutate what they are given."""

from __future__ import annotations

import json
from typing import Any

from kg_effects import attempt, record

import keepgoing

SURROGATE = json.loads('"\\ud800"')  # a lone surrogate, as decoded from a user's file


@keepgoing.task
def decode_rows(key: str) -> dict[str, Any]:
    record("start", "decode_rows", key, attempt())
    return {"rows": [0, 1, 2, f"caf{SURROGATE}"]}


@keepgoing.task
def prepare(key: str) -> str:
    record("start", "prepare", key, attempt())
    return "ready"


@keepgoing.task
def store_it(key: str, value: Any) -> None:
    record("start", "store_it", key, attempt())


@keepgoing.task
def charge(key: str, order: dict[str, Any]) -> tuple[str, int]:
    record("start", "charge", key, attempt())
    card = order.pop("card_number")
    return (card[-4:], order["total"])


@keepgoing.workflow
async def run_bad_task_result(key: str) -> Any:
    return await decode_rows(key)


@keepgoing.workflow
async def run_bad_argument(key: str) -> None:
    await prepare(key)
    await store_it(key, {"name": f"caf{SURROGATE}"})


@keepgoing.workflow
async def run_bad_result(key: str) -> Any:
    await prepare(key)
    return {"big": 10**5000}


@keepgoing.workflow
async def run_checkout(key: str) -> dict[str, Any]:
    order = {"card_number": "4242424242424242", "total": 30}
    paid = await charge(key, order)
    return {"card_kept": "card_number" in order, "paid_is_list": isinstance(paid, list)}
