"""Gateway limits against hostile callers, on a real server, on SQLite and PostgreSQL:
twenty concurrent calls against a limit of three, a budget raced by a burst, a prompt
the store cannot hold, oversized embeddings, and run ids a key may not claim."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import keepgoing
from keepgoing._gateway.config import load_config
from keepgoing._gateway.requests import MAX_DIMENSIONS, chat_request, chat_reservation

from ._fakes import Fake
from ._support import GatewayStack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

HELLO = [{"role": "user", "content": "What is the capital of France?"}]
BURST = 20


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fake_openai: Fake,
    fake_anthropic: Fake,
) -> Iterator[GatewayStack]:
    url = None
    if request.param == "postgresql":
        from postgres_support import migrated, reset  # noqa: PLC0415

        url = migrated(request.getfixturevalue("postgres_url"))
        reset(url)
    root = tmp_path_factory.mktemp(f"limits-{request.param}")
    s = GatewayStack(root, fake_openai, fake_anthropic, store_url=url)
    try:
        s.start_server()
        yield s
    finally:
        s.cleanup()


def _burst(stack: GatewayStack, key: str, body: dict[str, object]) -> list[int]:
    """``BURST`` calls at once (they wait for each other at a barrier first)."""
    barrier = threading.Barrier(BURST)

    def call(_: int) -> int:
        barrier.wait(timeout=30)
        answer = httpx.post(
            stack.url + "/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
        return answer.status_code

    with ThreadPoolExecutor(BURST) as pool:
        return list(pool.map(call, range(BURST)))


def test_twenty_concurrent_calls_against_three_per_minute_let_three_through(
    stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    key = stack.key("rpm-burst", requests_per_minute=3)
    statuses = _burst(stack, key, {"model": "gpt", "messages": HELLO})
    assert sorted(statuses) == [200] * 3 + [429] * (BURST - 3)
    assert len(fakes[0].requests) == 3  # the refused never reached the provider
    rows = stack.calls(key_id=key.split("_")[1])
    assert sorted(r.status for r in rows) == ["ok"] * 3 + ["refused"] * (BURST - 3)


def test_a_budget_raced_by_a_burst_is_overspent_by_at_most_one_reservation(
    stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    budget = 0.05  # each call costs $0.0105 (21 tokens in, 7 out)
    key = stack.key("budget-burst", total_budget=budget)
    body = {"model": "gpt", "messages": HELLO, "max_tokens": 20}
    statuses = _burst(stack, key, body)
    rows = stack.calls(key_id=key.split("_")[1])
    spent = sum(r.cost for r in rows)
    tokens_in, tokens_out = chat_reservation(chat_request(body))
    config = load_config(stack.config)
    reservation = max(t.price.cost(tokens_in, tokens_out) for t in config.resolve("gpt"))
    assert reservation >= 0.0105  # it covers what a call of at most 20 tokens can cost
    assert spent <= budget + reservation, (spent, statuses)
    assert statuses.count(200) == len([r for r in rows if r.status == "ok"]) >= 1
    assert statuses.count(200) + statuses.count(429) == BURST
    assert not [r for r in rows if r.status == "pending"]  # every reservation settled


def test_a_prompt_with_a_lone_surrogate_is_answered_and_metered(
    stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    key = stack.key("surrogate", requests_per_minute=1)
    raw = '{"model":"scripted","stream":true,"messages":[{"role":"user","content":"hi \\ud800"}]}'
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with httpx.stream(
        "POST", stack.url + "/v1/chat/completions", content=raw, headers=headers, timeout=30
    ) as answer:
        assert answer.status_code == 200
        text = "".join(answer.iter_text())
    assert text.rstrip().endswith("data: [DONE]")
    rows = stack.calls(key_id=key.split("_")[1])
    assert [r.status for r in rows] == ["ok"]
    assert rows[0].prompt is not None and "\\ud800" in rows[0].prompt  # kept, escaped
    assert json.loads(rows[0].prompt)[0]["content"] == "hi \ud800"
    # It counted: the key's one call a minute is spent.
    again = httpx.post(stack.url + "/v1/chat/completions", content=raw, headers=headers)
    assert again.status_code == 429, again.text
    # A model name with one is refused as unknown, and the refusal is on record too.
    odd = '{"model":"gpt\\udfff","messages":[{"role":"user","content":"x"}]}'
    other = stack.key("surrogate-model")
    refused = httpx.post(
        stack.url + "/v1/chat/completions",
        content=odd,
        headers={"Authorization": f"Bearer {other}", "Content-Type": "application/json"},
    )
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "model_not_found"
    assert [r.status for r in stack.calls(key_id=other.split("_")[1])] == ["refused"]


def test_embeddings_past_the_caps_are_refused_at_once(
    stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    key = stack.key("embed-caps")
    headers = {"Authorization": f"Bearer {key}"}
    cases = [
        ({"model": "scripted", "input": "x", "dimensions": 100_000}, "dimensions"),
        ({"model": "scripted", "input": "x", "dimensions": MAX_DIMENSIONS + 1}, "dimensions"),
        ({"model": "scripted", "input": "x", "dimensions": 0}, "dimensions"),
        ({"model": "scripted", "input": ["x"] * 2048, "dimensions": 4096}, "dimensions"),
    ]
    for body, param in cases:
        answer = httpx.post(stack.url + "/v1/embeddings", json=body, headers=headers, timeout=10)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["param"] == param
    fine = httpx.post(
        stack.url + "/v1/embeddings",
        json={"model": "scripted", "input": ["a", "b"], "dimensions": 256},
        headers=headers,
        timeout=30,
    )
    assert fine.status_code == 200 and len(fine.json()["data"][1]["embedding"]) == 256


def test_a_run_id_is_taken_only_from_a_key_that_may_reach_the_run(
    stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    client = keepgoing.Client(store=stack.store_url)
    try:
        handle = client.trigger_workflow("nobody_serves_this", {})
        run_id = client.get_run(handle.workflow_id).run_id
    finally:
        client.close()
    body = {"model": "scripted", "messages": HELLO}

    def call(key: str, **extra: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}", "X-Keepgoing-Run-Id": run_id, **extra}
        return httpx.post(stack.url + "/v1/chat/completions", json=body, headers=headers)

    plain = stack.key("no-runs")
    refused = call(plain)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "run_not_allowed"
    assert stack.calls(run_id=run_id) == []
    reader = stack.key("reader", also=["runs.read"])
    # Naming an attempt that is not running is a claim the server does not take either.
    claimed = call(reader, **{"X-Keepgoing-Step": "1", "X-Keepgoing-Attempt": "1"})
    assert claimed.status_code == 403, claimed.text
    missing = httpx.post(
        stack.url + "/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {reader}", "X-Keepgoing-Run-Id": "no-such-run"},
    )
    assert missing.status_code == 403 and "no such run" in missing.json()["error"]["message"]
    taken = call(reader)
    assert taken.status_code == 200, taken.text
    assert [r.key_id for r in stack.calls(run_id=run_id)] == [reader.split("_")[1]]
