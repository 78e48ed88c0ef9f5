"""The gateway through a real ``keepgoing server``, driven by the official ``openai`` SDK,
against fake OpenAI- and Anthropic-compatible providers over real HTTP."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ._fakes import Fake
from ._support import ANTHROPIC_KEY, OPENAI_KEY, GatewayStack

pytestmark = pytest.mark.integration

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
HELLO = [{"role": "user", "content": "What is the capital of France?"}]


def client(stack: GatewayStack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key=key, max_retries=0, timeout=20)


def test_plain_call_answers_and_leaves_a_ledger_row(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    fake_openai, _ = fakes
    key = gateway_stack.key("plain")
    answer = client(gateway_stack, key).chat.completions.create(model="gpt", messages=HELLO)
    assert answer.choices[0].message.content == "Paris is the capital of France."
    assert answer.usage is not None and answer.usage.prompt_tokens == 21
    # The provider got its own key and model name, never the caller's token.
    seen = fake_openai.requests[-1]
    assert seen.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert seen.body["model"] == "gpt-4o-mini"
    [row] = gateway_stack.calls(key_id=key.split("_")[1])
    assert (row.model_asked, row.model_answered, row.provider) == ("gpt", "gpt-4o-mini", "oa")
    assert (row.input_tokens, row.output_tokens, row.status) == (21, 7, "ok")
    assert row.cost == pytest.approx((21 * 300 + 7 * 600) / 1e6)
    assert row.attempt_state == "none" and row.latency > 0
    assert json.loads(row.prompt or "null") == HELLO
    assert json.loads(row.answer or "{}")["content"] == "Paris is the capital of France."


def test_streaming_ends_with_done_and_counts_final_usage(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    key = gateway_stack.key("streamer")
    stream = client(gateway_stack, key).chat.completions.create(
        model="gpt", messages=HELLO, stream=True, stream_options={"include_usage": True}
    )
    text, usage = [], None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            usage = chunk.usage
    assert "".join(text) == "Paris is the capital of France."
    assert usage is not None and usage.completion_tokens == 7
    [row] = gateway_stack.calls(key_id=key.split("_")[1])
    assert row.streamed and row.status == "ok"
    assert (row.input_tokens, row.output_tokens) == (21, 7)
    assert row.cost > 0  # a streamed call is billed, not logged at 0
    assert row.ttft is not None and 0 < row.ttft <= row.latency


def test_raw_stream_has_done_after_usage(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    key = gateway_stack.key("raw-streamer")
    body = {"model": "gpt", "messages": HELLO, "stream": True}
    with httpx.stream(
        "POST",
        gateway_stack.url + "/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=20,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert json.loads(data[-2])["usage"]["total_tokens"] == 28


def test_tool_calls_plain_and_streamed(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    sdk = client(gateway_stack, gateway_stack.key("tools"))
    answer = sdk.chat.completions.create(model="gpt", messages=HELLO, tools=TOOLS)  # type: ignore[arg-type]
    call = answer.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert answer.choices[0].finish_reason == "tool_calls"
    pieces = []
    for chunk in sdk.chat.completions.create(
        model="gpt",
        messages=HELLO,
        tools=TOOLS,
        stream=True,  # type: ignore[arg-type]
    ):
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or ():
                pieces.append(delta.function.arguments or "")  # type: ignore[union-attr]
    assert json.loads("".join(pieces)) == {"city": "Paris"}


def test_anthropic_is_translated_with_tools_and_streaming(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    _, fake_anthropic = fakes
    sdk = client(gateway_stack, gateway_stack.key("claude-user"))
    messages = [{"role": "system", "content": "Be brief."}, *HELLO]
    answer = sdk.chat.completions.create(model="claude", messages=messages)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "Paris is the capital of France."
    assert answer.usage is not None and (
        answer.usage.prompt_tokens,
        answer.usage.completion_tokens,
    ) == (30, 9)
    seen = fake_anthropic.requests[-1]
    assert seen.path == "/v1/messages" and seen.headers["x-api-key"] == ANTHROPIC_KEY
    assert seen.body["system"] == "Be brief." and seen.body["max_tokens"] == 1024
    assert seen.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": HELLO[0]["content"]}]}
    ]
    tooled = sdk.chat.completions.create(model="claude", messages=HELLO, tools=TOOLS)  # type: ignore[arg-type]
    call = tooled.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert (call.id, call.function.name) == ("toolu_1", "get_weather")
    assert fake_anthropic.requests[-1].body["tools"][0]["input_schema"]["required"] == ["city"]
    # The tool's result goes back as a tool_result block.
    follow = [
        *HELLO,
        tooled.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
    ]
    sdk.chat.completions.create(model="claude", messages=follow)  # type: ignore[arg-type]
    turns = fake_anthropic.requests[-1].body["messages"]
    assert turns[1]["content"][-1]["type"] == "tool_use"
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
    ]
    text = "".join(
        c.choices[0].delta.content or ""
        for c in sdk.chat.completions.create(model="claude", messages=HELLO, stream=True)  # type: ignore[arg-type]
        if c.choices
    )
    assert text.strip() == "Paris is the capital of France."


@pytest.mark.parametrize("failure", ["429", "500", "cut"])
def test_fallback_to_the_next_provider(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake], failure: str
) -> None:
    fake_openai, fake_anthropic = fakes
    key = gateway_stack.key(f"fallback-{failure}")
    sdk = client(gateway_stack, key)
    fake_openai.plan("cut_early" if failure == "cut" else failure)
    if failure == "cut":
        # A stream cut before its first words reached the caller falls back.
        stream = sdk.chat.completions.create(model="primary", messages=HELLO, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    else:
        answer = sdk.chat.completions.create(model="primary", messages=HELLO)
        text = answer.choices[0].message.content or ""
    assert text.strip() == "Paris is the capital of France."
    assert len(fake_openai.requests) == 1 and len(fake_anthropic.requests) == 1
    [row] = gateway_stack.calls(key_id=key.split("_")[1])
    assert (row.model_asked, row.provider, row.tries) == ("primary", "an", 2)
    assert row.model_answered == "claude-3-5-haiku-latest"


def test_a_stream_cut_after_words_were_sent_ends_with_an_error_event(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    fake_openai, fake_anthropic = fakes
    key = gateway_stack.key("cut-late")
    fake_openai.plan("cut")
    body = {"model": "primary", "messages": HELLO, "stream": True}
    with httpx.stream(
        "POST",
        gateway_stack.url + "/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=20,
    ) as response:
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert "[DONE]" not in data
    assert json.loads(data[-1])["error"]["code"] == "stream_truncated"
    assert fake_anthropic.requests == []  # words had reached the caller: no fallback
    [row] = gateway_stack.calls(key_id=key.split("_")[1])
    assert row.status == "truncated" and row.streamed


def test_every_provider_failing_is_a_502_naming_each(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    fake_openai, fake_anthropic = fakes
    fake_openai.plan("500")
    fake_anthropic.plan("500")
    with pytest.raises(openai.APIStatusError) as caught:
        client(gateway_stack, gateway_stack.key("all-fail")).chat.completions.create(
            model="primary", messages=HELLO
        )
    assert caught.value.status_code == 502
    assert "oa answered 500" in str(caught.value) and "an answered 500" in str(caught.value)


def test_a_budget_stops_the_third_call(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    key = gateway_stack.key("budgeted", total_budget=0.015)  # each call costs $0.0105
    sdk = client(gateway_stack, key)
    sdk.chat.completions.create(model="gpt", messages=HELLO)
    sdk.chat.completions.create(model="gpt", messages=HELLO)
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.chat.completions.create(model="gpt", messages=HELLO)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "budget_exceeded" and error["limit"] == "total_budget"
    assert "resets_at" in error
    assert len(fakes[0].requests) == 2  # the third call never reached the provider
    rows = gateway_stack.calls(key_id=key.split("_")[1])
    assert sorted(r.status for r in rows) == ["ok", "ok", "refused"]


def test_requests_per_minute_answers_429_with_when_it_resets(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    key = gateway_stack.key("rpm", requests_per_minute=1)
    response = httpx.post(
        gateway_stack.url + "/v1/chat/completions",
        json={"model": "scripted", "messages": HELLO},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 200
    response = httpx.post(
        gateway_stack.url + "/v1/chat/completions",
        json={"model": "scripted", "messages": HELLO},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["limit"] == "requests_per_minute" and error["type"] == "rate_limit_error"
    assert 0 < int(response.headers["retry-after"]) <= 60


def test_a_key_not_allowed_a_model(gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]) -> None:
    key = gateway_stack.key("narrow", models=("scripted",))
    sdk = client(gateway_stack, key)
    with pytest.raises(openai.PermissionDeniedError) as caught:
        sdk.chat.completions.create(model="gpt", messages=HELLO)
    assert "may not use model 'gpt'" in str(caught.value)
    assert fakes[0].requests == []
    assert [m.id for m in sdk.models.list()] == ["scripted"]
    assert (
        sdk.chat.completions.create(model="scripted", messages=HELLO).model
        == "keepgoing-scripted-1"
    )


def test_a_token_without_gateway_use_is_refused(gateway_stack: GatewayStack) -> None:
    from ._support import make_token  # noqa: PLC0415

    reader = make_token(gateway_stack.store_url, "reader", ["runs.read"])
    with pytest.raises(openai.PermissionDeniedError):
        client(gateway_stack, reader).chat.completions.create(model="scripted", messages=HELLO)
    with pytest.raises(openai.AuthenticationError):
        client(gateway_stack, "kg_0000000000000000_notavalidsecretatallreally").models.list()


def test_embeddings(gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]) -> None:
    sdk = client(gateway_stack, gateway_stack.key("embedder"))
    answer = sdk.embeddings.create(model="embed", input=["a", "b"])
    assert [d.embedding[0] for d in answer.data] == pytest.approx([0.1, 0.2])
    scripted = sdk.embeddings.create(model="scripted", input="hello")
    assert len(scripted.data[0].embedding) == 64
    with pytest.raises(openai.BadRequestError):
        sdk.embeddings.create(model="claude", input="anthropic has no embeddings")


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (b'{"model": 5, "messages": []}', 400, "model must be"),
        (b'{"model": "gpt", "messages": []}', 400, "non-empty list"),
        (b'{"model": "gpt", "messages": [{"role": "wizard", "content": "x"}]}', 400, "role"),
        (b'{"model": "gpt", "messages": [{"role": "user", "content": 7}]}', 400, "content"),
        (
            b'{"model": "gpt", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
            400,
            "stream",
        ),
        (
            b'{"model": "gpt", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}',
            400,
            "max_tokens",
        ),
        (
            b'{"model": "gpt", "messages": [{"role": "user", "content": "x"}], "tools": [{}]}',
            400,
            "tools[0]",
        ),
        (
            b'{"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}',
            404,
            "does not exist",
        ),
    ],
)
def test_hostile_bodies_get_a_clear_4xx(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake], body: bytes, status: int, needle: str
) -> None:
    key = gateway_stack.key("hostile")
    response = httpx.post(
        gateway_stack.url + "/v1/chat/completions",
        content=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    assert response.status_code == status, response.text
    assert needle in response.json()["error"]["message"]
    assert fakes[0].requests == []


def test_a_huge_body_is_413(gateway_stack: GatewayStack) -> None:
    key = gateway_stack.key("huge")
    text = "x" * (2 * 1024 * 1024)
    response = httpx.post(
        gateway_stack.url + "/v1/chat/completions",
        json={"model": "scripted", "messages": [{"role": "user", "content": text}]},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 413


def test_a_planted_provider_key_never_leaks(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    fake_openai, fake_anthropic = fakes
    key = gateway_stack.key("leaky")
    sdk = client(gateway_stack, key)
    # Providers that echo the key they got in their error message.
    fake_openai.plan("echo_key")
    with pytest.raises(openai.APIStatusError) as caught:
        sdk.chat.completions.create(model="gpt", messages=HELLO)
    fake_anthropic.plan("echo_key")
    with pytest.raises(openai.APIStatusError) as caught_too:
        sdk.chat.completions.create(model="claude", messages=HELLO)
    sdk.chat.completions.create(model="gpt", messages=HELLO)
    from ._support import make_token  # noqa: PLC0415

    root = make_token(gateway_stack.store_url, "root", ["admin"])
    texts = [str(caught.value), str(caught.value.body), str(caught_too.value)]
    with httpx.Client(
        base_url=gateway_stack.url, headers={"Authorization": f"Bearer {root}"}
    ) as api:
        texts.append(api.get("/metrics").text)
        texts.append(api.get("/api/v1/audit").text)
        texts.append(api.get("/v1/models").text)
        texts.append(api.get("/openapi.json").text)
    texts += [json.dumps(r.to_json()) for r in gateway_stack.calls()]
    texts += [p.output() for p in gateway_stack.processes]
    texts.append((gateway_stack.root / "kg.db").read_bytes().decode("latin-1"))
    for text in texts:
        assert OPENAI_KEY not in text and ANTHROPIC_KEY not in text
    assert "***" in str(caught.value)  # the echo was scrubbed, not dropped silently


def test_metrics_have_token_cost_and_latency_series_per_model(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    from ._support import make_token  # noqa: PLC0415

    client(gateway_stack, gateway_stack.key("metered")).chat.completions.create(
        model="gpt", messages=HELLO
    )
    root = make_token(gateway_stack.store_url, "metrics-reader", ["admin"])
    text = httpx.get(
        gateway_stack.url + "/metrics", headers={"Authorization": f"Bearer {root}"}
    ).text
    series = {
        (s.name, frozenset(s.labels.items()))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    labels = {("model", "gpt-4o-mini"), ("provider", "oa")}
    assert (
        "keepgoing_gateway_tokens_total",
        frozenset({*labels, ("direction", "input")}),
    ) in series
    assert ("keepgoing_gateway_cost_usd_total", frozenset(labels)) in series
    assert ("keepgoing_gateway_latency_seconds_count", frozenset(labels)) in series
    assert ("keepgoing_gateway_calls_total", frozenset({*labels, ("outcome", "ok")})) in series
