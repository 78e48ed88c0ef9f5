"""Anthropic's Messages API, translated to and from OpenAI's chat format.

Requests: ``system`` messages become ``system``; ``tool`` messages become
``tool_result`` blocks of a user turn; an assistant's ``tool_calls`` become
``tool_use`` blocks; ``tools`` and ``tool_choice`` are mapped; ``max_tokens``
defaults to 1024 (the API requires it). Answers and stream events
(``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``)
are turned into a ``chat.completion`` and its chunks.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from keepgoing._gateway.providers.base import (
    HttpProvider,
    ProviderError,
    error_from,
    transport_error,
)
from keepgoing._sse import events

__all__ = ["AnthropicProvider", "to_messages_request"]

VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "pause_turn": "stop",
    "refusal": "content_filter",
}


def _bad(message: str) -> ProviderError:
    return ProviderError(message, status=400, retryable=False, kind="invalid_request")


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "text":
            raise _bad("the anthropic provider takes text content parts only")
        parts.append(str(part.get("text", "")))
    return "".join(parts)


def to_messages_request(model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The Messages API request for an OpenAI chat request."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in body["messages"]:
        role = message["role"]
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content")))
        elif role == "user":
            add("user", [{"type": "text", "text": _text_of(message.get("content"))}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            text = _text_of(message.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            for call in message.get("tool_calls") or ():
                function = call.get("function", {})
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    raise _bad("a tool call's arguments are not JSON") from None
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "input": arguments,
                    }
                )
            add("assistant", blocks or [{"type": "text", "text": ""}])
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
                "content": _text_of(message.get("content")),
            }
            add("user", [block])
        else:
            raise _bad(f"the anthropic provider does not take {role!r} messages")
    request: dict[str, Any] = {
        "model": model,
        "messages": turns,
        "max_tokens": body.get("max_tokens")
        or body.get("max_completion_tokens")
        or DEFAULT_MAX_TOKENS,
    }
    if system:
        request["system"] = "\n\n".join(system)
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            request[name] = body[name]
    stop = body.get("stop")
    if stop:
        request["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    tools = body.get("tools")
    if tools:
        request["tools"] = [
            {
                "name": tool["function"]["name"],
                "description": tool["function"].get("description", ""),
                "input_schema": tool["function"].get("parameters")
                or {"type": "object", "properties": {}},
            }
            for tool in tools
        ]
        choice = body.get("tool_choice")
        if choice == "required":
            request["tool_choice"] = {"type": "any"}
        elif choice == "none":
            request["tool_choice"] = {"type": "none"}
        elif isinstance(choice, dict) and "function" in choice:
            request["tool_choice"] = {"type": "tool", "name": choice["function"].get("name")}
    return request


def _completion(answer: dict[str, Any], model: str) -> dict[str, Any]:
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in answer.get("content") or ():
        if block.get("type") == "text":
            text.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": block.get("id", ""),
                    "type": "function",
                    "function": {
                        "name": block.get("name", ""),
                        "arguments": json.dumps(block.get("input", {})),
                    },
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None}
    if calls:
        message["tool_calls"] = calls
    usage = answer.get("usage") or {}
    prompt = int(usage.get("input_tokens", 0))
    completion = int(usage.get("output_tokens", 0))
    return {
        "id": "chatcmpl-" + str(answer.get("id", "")),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": answer.get("model", model),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _FINISH.get(answer.get("stop_reason") or "", "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


class AnthropicProvider(HttpProvider):
    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": VERSION}
        key = self.config.api_key()
        if key:
            headers["x-api-key"] = key
        return headers

    async def chat(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self._post("/v1/messages", to_messages_request(model, body))
        return _completion(answer, model)

    async def stream(self, model: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        request = {**to_messages_request(model, body), "stream": True}
        state = _StreamState(model)
        try:
            async with self.client.stream(
                "POST", self.config.base_url + "/v1/messages", json=request, headers=self._headers()
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise error_from(response, self)
                async for event, data in events(response.aiter_lines()):
                    try:
                        payload = json.loads(data)
                    except ValueError:
                        raise ProviderError(f"{self.name} sent an event that is not JSON") from None
                    kind = event or payload.get("type", "")
                    if kind == "error":
                        raise ProviderError(f"{self.name} ended its stream with an error")
                    for chunk in state.translate(kind, payload):
                        yield chunk
                    if kind == "message_stop":
                        break
        except httpx.HTTPError as exc:
            raise transport_error(exc, self) from None
        if not state.stopped:
            raise ProviderError(
                f"{self.name}'s stream ended before message_stop (cut mid-answer)",
                kind="truncated",
            )
        yield state.usage_chunk()

    async def embed(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        raise ProviderError(
            f"{self.name} is an anthropic provider, which has no embeddings API",
            status=400,
            retryable=False,
            kind="unsupported",
        )


class _StreamState:
    """Turns Messages API stream events into ``chat.completion.chunk`` objects."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = "chatcmpl-anthropic"
        self.created = int(time.time())
        self.input_tokens = 0
        self.output_tokens = 0
        self.stopped = False
        self.tools: dict[int, int] = {}  # content block index -> tool call index

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def translate(self, kind: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
        if kind == "message_start":
            message = payload.get("message", {})
            self.id = "chatcmpl-" + str(message.get("id", "anthropic"))
            self.model = message.get("model", self.model)
            self.input_tokens = int(message.get("usage", {}).get("input_tokens", 0))
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            block = payload.get("content_block", {})
            if block.get("type") == "tool_use":
                index = self.tools[int(payload.get("index", 0))] = len(self.tools)
                call = {
                    "index": index,
                    "id": block.get("id", ""),
                    "type": "function",
                    "function": {"name": block.get("name", ""), "arguments": ""},
                }
                return [self._chunk({"tool_calls": [call]})]
            return []
        if kind == "content_block_delta":
            delta = payload.get("delta", {})
            if delta.get("type") == "text_delta":
                return [self._chunk({"content": delta.get("text", "")})]
            if delta.get("type") == "input_json_delta":
                index = self.tools.get(int(payload.get("index", 0)), 0)
                call = {"index": index, "function": {"arguments": delta.get("partial_json", "")}}
                return [self._chunk({"tool_calls": [call]})]
            return []
        if kind == "message_delta":
            usage = payload.get("usage", {})
            self.output_tokens = int(usage.get("output_tokens", self.output_tokens))
            reason = payload.get("delta", {}).get("stop_reason")
            if reason:
                return [self._chunk({}, _FINISH.get(reason, "stop"))]
            return []
        if kind == "message_stop":
            self.stopped = True
        return []

    def usage_chunk(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": {
                "prompt_tokens": self.input_tokens,
                "completion_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
            },
        }
