"""The workflow `bench.gateway` deploys as a group: its step measures, from inside a
replica, model calls through the server's gateway against the same calls straight to
the fake provider (``BENCH_FAKE_URL``).

Through the gateway, a plain call is ``keepgoing.gateway.chat`` (with the replica's
``KEEPGOING_URL`` and minted ``KEEPGOING_TOKEN``, tied to the step as every call a task
makes); a streamed call is an OpenAI-style stream to ``$KEEPGOING_URL/v1`` with that key.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

import httpx

from keepgoing import gateway, task, workflow

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def _has_text(line: str) -> bool:
    if not line.startswith("data: {"):
        return False
    choices = json.loads(line[6:]).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


def _first_token(client: httpx.Client, url: str, headers: dict[str, str], body: Any) -> float:
    started = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as response:
        for line in response.iter_lines():
            if _has_text(line):
                return time.perf_counter() - started
    raise RuntimeError(f"{url} streamed no text")


@task(timeout=1800)
def measure(samples: int, warmup: int) -> dict[str, float]:
    direct = os.environ["BENCH_FAKE_URL"] + "/chat/completions"
    through = os.environ["KEEPGOING_URL"] + "/v1/chat/completions"
    key = {"Authorization": f"Bearer {os.environ['KEEPGOING_TOKEN']}"}
    body: dict[str, Any] = {"model": "bench-model", "messages": MESSAGES}
    streamed: dict[str, Any] = {"model": "fast", "messages": MESSAGES, "stream": True}
    times: dict[str, list[float]] = {"direct": [], "through": [], "ttft_d": [], "ttft_t": []}
    with httpx.Client(timeout=30) as client:
        for i in range(warmup + samples):
            started = time.perf_counter()
            client.post(direct, json=body).raise_for_status()
            middle = time.perf_counter()
            gateway.chat(model="fast", messages=MESSAGES)
            ended = time.perf_counter()
            ttft_d = _first_token(client, direct, {}, {**body, "stream": True})
            ttft_t = _first_token(client, through, key, streamed)
            if i >= warmup:
                times["direct"].append(middle - started)
                times["through"].append(ended - middle)
                times["ttft_d"].append(ttft_d)
                times["ttft_t"].append(ttft_t)
    return {name: statistics.median(values) for name, values in times.items()}


@workflow
async def gateway_from_replica(samples: int, warmup: int) -> dict[str, float]:
    return await measure(samples, warmup)
