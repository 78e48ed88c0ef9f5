"""A workflow whose ended runs the retention tests archive and replay."""

from __future__ import annotations

from keepgoing import workflow


@workflow(name="nightly", retention="1m")
async def nightly() -> dict[str, int]:
    return {"n": 3}
