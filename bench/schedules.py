"""``python -m bench.schedules``: how late a schedule's slot starts its run.

A ``keepgoing server`` process runs on a fresh SQLite store (or ``--store URL``)
with nothing else to do. A schedule ``every="1s"`` (``overlap="allow_all"``,
no jitter) is given ``--slots`` slots (100 by default), starting two seconds
after it is created. For each slot the lateness is the instant the server's
fire transaction started the run (the action's ``started_at``, from the
server's clock) minus the slot. Reported: p50, p99 and the worst, in
milliseconds. Target: p99 at most 100 ms on an idle server.

Examples::

    python -m bench.schedules
    python -m bench.schedules --slots 20          # a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

from bench._harness import percentile
from keepgoing._open_store import store_from_url
from keepgoing._schedules import commands as ops
from keepgoing._schedules.commands import Actor, ScheduleRequest

TARGET_P99_MS = 100.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _create(url: str, slots: int) -> float:
    store = store_from_url(url)
    await store.open()
    try:
        now = time.time()
        await store.record_workflows(["bench_tick"], ["default"], now)
        first = float(int(now)) + 2
        req = ScheduleRequest(
            workflow="bench_tick",
            every="1s",
            overlap="allow_all",
            start_at=first,
            end_at=first + slots - 1,
        )
        await ops.create(store, "bench", req, actor=Actor("user", "bench"), now=now)
        return first
    finally:
        await store.close()


async def _actions(url: str) -> list[Any]:
    store = store_from_url(url)
    await store.open()
    try:
        return await store.schedule_actions("bench", limit=100_000)
    finally:
        await store.close()


def measure(url: str, slots: int) -> dict[str, Any]:
    port = _free_port()
    env = {**os.environ, "KEEPGOING_ORCHESTRATOR": "off"}
    server = subprocess.Popen(
        [sys.executable, "-m", "keepgoing.cli", "server", "--store", url, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)
        first = asyncio.run(_create(url, slots))
        time.sleep(max(0.0, first + slots - time.time()) + 1.0)
        actions = asyncio.run(_actions(url))
    finally:
        server.terminate()
        server.wait(timeout=20)
    late = sorted((a.started_at - a.slot_at) * 1000 for a in actions if a.started_at is not None)
    if len(late) != slots:
        raise RuntimeError(f"{len(late)} of {slots} slots started a run")
    return {
        "slots": slots,
        "p50_ms": round(percentile(late, 50), 2),
        "p99_ms": round(percentile(late, 99), 2),
        "max_ms": round(late[-1], 2),
        "target_p99_ms": TARGET_P99_MS,
        "met": percentile(late, 99) <= TARGET_P99_MS,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.schedules", description=__doc__)
    parser.add_argument("--slots", type=int, default=100)
    parser.add_argument("--store", help="a store URL (default: a fresh SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{tmp}/kg.db"
        result = measure(url, args.slots)
    print(json.dumps(result, indent=2))
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
