"""The scripted model: deterministic, honest about what it is, tools when offered."""

from __future__ import annotations

import json

from keepgoing._gateway.config import SCRIPTED_MODEL, ProviderConfig
from keepgoing._gateway.providers.scripted import FINGERPRINT, ScriptedProvider, count_tokens

MODEL = ScriptedProvider(ProviderConfig("scripted", "scripted"))


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


async def test_answers_are_deterministic_and_labelled() -> None:
    first = await MODEL.chat(SCRIPTED_MODEL, user("What is 12 * 7?"))
    again = await MODEL.chat(SCRIPTED_MODEL, user("What is 12 * 7?"))
    assert first["choices"] == again["choices"] and first["id"] == again["id"]
    assert first["choices"][0]["message"]["content"] == "12 * 7 = 84"
    assert first["model"] == "keepgoing-scripted-1" and first["system_fingerprint"] == FINGERPRINT
    assert first["id"].startswith("chatcmpl-scripted-")
    usage = first["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_rules() -> None:
    async def say(text: str) -> str:
        answer = await MODEL.chat(SCRIPTED_MODEL, user(text))
        return str(answer["choices"][0]["message"]["content"])

    assert await say('Repeat "keep going"') == "keep going"
    assert await say("Summarize: Workers die. Runs carry on.") == "Summary: Workers die."
    assert "no language model" in await say("Tell me a story")
    assert await say("what is 1 / 0") == "Division by zero has no answer."


async def test_tool_calls_when_tools_are_offered() -> None:
    tools = [
        {"type": "function", "function": {"name": "search_docs", "description": "Search docs"}},
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city", "days"],
                },
            },
        },
    ]
    body = {**user('What is the weather in "Lyon" for 3 days?'), "tools": tools}
    answer = await MODEL.chat(SCRIPTED_MODEL, body)
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]["function"]
    assert call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Lyon", "days": 3}


async def test_max_tokens_cuts_with_length_and_streams_match() -> None:
    body = {**user("Tell me about durable execution in some detail please"), "max_tokens": 5}
    answer = await MODEL.chat(SCRIPTED_MODEL, body)
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] <= 5
    chunks = [c async for c in MODEL.stream(SCRIPTED_MODEL, body)]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == answer["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"] == answer["usage"]


async def test_embeddings_are_unit_vectors() -> None:
    answer = await MODEL.embed(SCRIPTED_MODEL, {"input": ["a", "b"], "dimensions": 8})
    vectors = [d["embedding"] for d in answer["data"]]
    assert len(vectors) == 2 and all(len(v) == 8 for v in vectors)
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-9
    assert vectors[0] != vectors[1]


def test_token_counts_are_realistic() -> None:
    assert count_tokens("Hello, world!") == 4
    assert 8 <= count_tokens("The quick brown fox jumps over the lazy dog.") <= 12


async def test_its_work_runs_off_the_event_loop() -> None:
    """A large embeddings answer or prompt is computed on a thread: the loop that serves
    every other request never waits for it."""
    import threading  # noqa: PLC0415

    loop_thread = threading.get_ident()
    seen: list[int] = []
    provider = ScriptedProvider(ProviderConfig("scripted", "scripted"))
    for name in ("_embed", "_chat", "_respond"):
        original = getattr(provider, name)

        def spy(*args: object, _original: object = original) -> object:
            seen.append(threading.get_ident())
            return _original(*args)  # type: ignore[operator]

        setattr(provider, name, spy)
    await provider.embed(SCRIPTED_MODEL, {"input": ["a", "b"], "dimensions": 512})
    await provider.chat(SCRIPTED_MODEL, user("What is 2 + 2?"))
    chunks = [c async for c in provider.stream(SCRIPTED_MODEL, user("say hi"))]
    assert chunks and len(seen) >= 3
    assert loop_thread not in seen
