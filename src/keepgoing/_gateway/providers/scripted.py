"""The scripted model: deterministic, offline, shipped with keepgoing.

It is not a language model and says so: its model id is
``keepgoing-scripted-1``, every answer's ``system_fingerprint`` is
``keepgoing-scripted``, and its ids start with ``chatcmpl-scripted-``. The
same request always gets the same answer, which makes it the model of the
demo and of tests that have no provider key.

Rules, applied to the last message:

* tools offered and the last message is not a tool result: it calls the tool
  whose name (or a word of whose description) the prompt mentions, else the
  first one, with arguments filled from the prompt by the tool's JSON schema;
* a tool result: it answers with what the tool returned;
* ``what is 2 + 3`` (``+ - * /`` on numbers): the arithmetic;
* ``summarize ...``: the first sentence of the text;
* ``repeat "..."`` / ``say "..."``: the quoted text;
* anything else: a short acknowledgement quoting the prompt.

Token counts come from a word-piece estimate (words, numbers and punctuation,
long words counted per eight letters), close to what real tokenizers give for
English. ``max_tokens`` cuts the answer (finish reason ``length``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from keepgoing._gateway.providers.base import Provider

__all__ = ["FINGERPRINT", "ScriptedProvider", "count_tokens"]

FINGERPRINT = "keepgoing-scripted"
_PIECES = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")
_ARITH = re.compile(r"(-?\d+(?:\.\d+)?)\s*([-+*/x])\s*(-?\d+(?:\.\d+)?)")
_QUOTED = re.compile(r"[\"“']([^\"”']+)[\"”']")


def count_tokens(text: str) -> int:
    """An estimate of a tokenizer's count: a word of up to eight letters, a number or a
    punctuation mark is one token; longer words one per eight letters."""
    return sum(1 + (len(p) - 1) // 8 if p.isalpha() else 1 for p in _PIECES.findall(text))


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


def _prompt_tokens(messages: list[dict[str, Any]], tools: list[Any] | None) -> int:
    total = 3
    for message in messages:
        total += 4 + count_tokens(_content_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            total += count_tokens(json.dumps(call.get("function", {})))
    if tools:
        total += count_tokens(json.dumps(tools))
    return total


def _digest(model: str, body: dict[str, Any]) -> str:
    text = json.dumps([model, body.get("messages"), body.get("tools")], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _number(text: str) -> float | None:
    found = re.search(r"-?\d+(?:\.\d+)?", text)
    return float(found.group()) if found else None


def _argument(name: str, schema: dict[str, Any], prompt: str) -> Any:
    kind = schema.get("type", "string")
    if schema.get("enum"):
        for option in schema["enum"]:
            if str(option).lower() in prompt.lower():
                return option
        return schema["enum"][0]
    if kind in ("integer", "number"):
        value = _number(prompt)
        if value is None:
            value = 1
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "array":
        return [_argument(name, schema.get("items", {}), prompt)]
    if kind == "object":
        return {}
    quoted = _QUOTED.search(prompt)
    if quoted:
        return quoted.group(1)
    words = prompt.split()
    return " ".join(words[-6:]) if words else name


def _tool_call(tools: list[dict[str, Any]], prompt: str, digest: str) -> dict[str, Any]:
    lowered = prompt.lower()
    chosen = tools[0]
    for tool in tools:
        function = tool.get("function", {})
        name = str(function.get("name", ""))
        words = {w for w in re.findall(r"[a-z]{4,}", str(function.get("description", "")).lower())}
        if name.lower() in lowered or name.replace("_", " ").lower() in lowered:
            chosen = tool
            break
        if words & set(re.findall(r"[a-z]{4,}", lowered)) and chosen is tools[0]:
            chosen = tool
    function = chosen.get("function", {})
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or list(properties)
    arguments = {
        key: _argument(key, properties.get(key, {}), prompt)
        for key in required
        if key in properties
    }
    return {
        "id": f"call_scripted_{digest[:12]}",
        "type": "function",
        "function": {"name": function.get("name", ""), "arguments": json.dumps(arguments)},
    }


def _answer(messages: list[dict[str, Any]]) -> str:
    last = messages[-1] if messages else {"role": "user", "content": ""}
    text = _content_text(last.get("content")).strip()
    if last.get("role") == "tool":
        return f"The tool returned: {text[:400]}"
    lowered = text.lower()
    arith = _ARITH.search(text)
    if arith and re.search(r"\b(what|compute|calculate|how much)\b", lowered):
        a, op, b = float(arith.group(1)), arith.group(2), float(arith.group(3))
        if op == "/" and b == 0:
            return "Division by zero has no answer."
        value = {"+": a + b, "-": a - b, "*": a * b, "x": a * b}.get(op, a / (b or 1))
        shown = int(value) if value == int(value) else round(value, 6)
        return f"{arith.group(0)} = {shown}"
    if re.match(r"(repeat|say|echo)\b", lowered):
        quoted = _QUOTED.search(text)
        return quoted.group(1) if quoted else text.split(None, 1)[-1]
    if re.match(r"summari[sz]e\b", lowered):
        body = text.split(":", 1)[-1].strip() if ":" in text else text.split(None, 1)[-1]
        first = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0]
        return f"Summary: {first}"
    words = text.split()
    opening = " ".join(words[:12]) + (" ..." if len(words) > 12 else "")
    return f"Scripted reply (no language model): I read {len(words)} words: {opening!r}."


class ScriptedProvider(Provider):
    def _respond(self, model: str, body: dict[str, Any]) -> tuple[dict[str, Any], str, int, int]:
        messages = body.get("messages") or []
        tools = body.get("tools") or []
        digest = _digest(model, body)
        prompt_tokens = _prompt_tokens(messages, tools)
        last = messages[-1] if messages else {}
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if tools and last.get("role") != "tool" and body.get("tool_choice") != "none":
            call = _tool_call(tools, _content_text(last.get("content")), digest)
            message["tool_calls"] = [call]
            finish = "tool_calls"
            completion_tokens = count_tokens(json.dumps(call["function"])) + 3
        else:
            text = _answer(messages)
            limit = body.get("max_tokens") or body.get("max_completion_tokens")
            finish = "stop"
            if isinstance(limit, int) and limit > 0 and count_tokens(text) > limit:
                words = text.split()
                while words and count_tokens(" ".join(words)) > limit:
                    words.pop()
                text, finish = " ".join(words), "length"
            message["content"] = text
            completion_tokens = count_tokens(text)
        return message, finish, prompt_tokens, completion_tokens

    def _envelope(self, digest: str, model: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-scripted-{digest}",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": FINGERPRINT,
        }

    async def chat(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        # The answer is computed on a thread: a large prompt never holds the event loop.
        return await asyncio.to_thread(self._chat, model, body)

    def _chat(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        message, finish, prompt, completion = self._respond(model, body)
        return {
            **self._envelope(_digest(model, body), model),
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    async def stream(self, model: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        message, finish, prompt, completion = await asyncio.to_thread(self._respond, model, body)
        envelope = {
            **self._envelope(_digest(model, body), model),
            "object": "chat.completion.chunk",
        }

        def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
            return {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

        yield chunk({"role": "assistant", "content": ""})
        if message.get("tool_calls"):
            call = message["tool_calls"][0]
            yield chunk({"tool_calls": [{"index": 0, **call}]})
        else:
            for piece in re.findall(r"\S+\s*", message["content"] or ""):
                yield chunk({"content": piece})
        yield chunk({}, finish)
        yield {
            **envelope,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    async def embed(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self._embed, model, body)

    def _embed(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body["input"]
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        size = body.get("dimensions") or 64
        data = []
        tokens = 0
        for index, text in enumerate(texts):
            tokens += count_tokens(str(text))
            vector = []
            for i in range(size):
                h = hashlib.sha256(f"{i}:{text}".encode()).digest()
                vector.append(int.from_bytes(h[:4], "big") / 2**31 - 1.0)
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            data.append(
                {"object": "embedding", "index": index, "embedding": [v / norm for v in vector]}
            )
        return {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
