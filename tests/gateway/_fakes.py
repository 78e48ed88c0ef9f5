"""Fake model providers over real HTTP, started by the tests: one OpenAI-compatible,
one Anthropic-compatible (the Messages API), each in a uvicorn thread.

Each answers from a plan: ``fake.plan("429", "ok")`` makes the next call answer 429
and the one after it normally. Behaviours: ``ok``, ``429``, ``500``, ``cut`` (a
stream that stops mid-answer: some text, then the connection ends with no finish
reason and no ``[DONE]``), ``echo_key`` (a 401 whose message repeats the key the
caller sent, as some providers do), ``cut_early`` (a stream that ends after its
opening role chunk, before any words), ``slow`` (answers after the client's timeout).
Every request is kept in ``fake.requests`` (headers and JSON body).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from integration._support import free_port


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Fake:
    kind: str  # "openai" | "anthropic"
    answer: str = "Paris is the capital of France."
    port: int = 0
    requests: list[Seen] = field(default_factory=list)
    _plan: deque[str] = field(default_factory=deque)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        suffix = "/v1" if self.kind == "openai" else ""
        return f"http://127.0.0.1:{self.port}{suffix}"

    def plan(self, *behaviours: str) -> None:
        self._plan.clear()
        self._plan.extend(behaviours)

    def reset(self) -> None:
        self._plan.clear()
        self.requests.clear()

    def _next(self) -> str:
        return self._plan.popleft() if self._plan else "ok"

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> Fake:
        routes = [
            Route("/v1/chat/completions", self._openai_chat, methods=["POST"]),
            Route("/v1/embeddings", self._openai_embed, methods=["POST"]),
            Route("/v1/messages", self._anthropic, methods=["POST"]),
        ]
        self.port = free_port()
        config = uvicorn.Config(
            Starlette(routes=routes), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise AssertionError("the fake provider did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    async def _seen(self, request: Request) -> dict[str, Any]:
        body = json.loads(await request.body())
        self.requests.append(Seen(request.url.path, dict(request.headers), body))
        return body

    def _refusal(self, behaviour: str, request: Request) -> Response | None:
        if behaviour == "429":
            return JSONResponse({"error": {"message": "rate limited", "type": "rate"}}, 429)
        if behaviour == "500":
            return JSONResponse({"error": {"message": "the model fell over"}}, 500)
        if behaviour == "echo_key":
            sent = request.headers.get("authorization") or request.headers.get("x-api-key", "")
            return JSONResponse({"error": {"message": f"Incorrect API key provided: {sent}"}}, 401)
        return None

    # -- OpenAI-compatible ---------------------------------------------------------
    async def _openai_chat(self, request: Request) -> Response:
        body = await self._seen(request)
        behaviour = self._next()
        if behaviour == "slow":
            await asyncio.sleep(5)
        refusal = self._refusal(behaviour, request)
        if refusal is not None:
            return refusal
        model = body["model"]
        tools = body.get("tools")
        usage = {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28}
        if tools:
            call = {
                "id": "call_fake_1",
                "type": "function",
                "function": {
                    "name": tools[0]["function"]["name"],
                    "arguments": json.dumps({"city": "Paris"}),
                },
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": self.answer}, "stop"
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 1,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
        cut = behaviour == "cut"
        if behaviour == "cut_early":
            # Headers and the opening role chunk, then the connection ends: no words yet.
            async def opening() -> AsyncIterator[bytes]:
                payload = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": model,
                    "choices": [
                        {"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}
                    ],
                }
                yield b"data: " + json.dumps(payload).encode() + b"\n\n"

            return StreamingResponse(opening(), media_type="text/event-stream")
        include_usage = (body.get("stream_options") or {}).get("include_usage")

        async def events() -> AsyncIterator[bytes]:
            def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
                payload = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
                }
                return b"data: " + json.dumps(payload).encode() + b"\n\n"

            yield chunk({"role": "assistant", "content": ""})
            if message.get("tool_calls"):
                yield chunk({"tool_calls": [{"index": 0, **message["tool_calls"][0]}]})
            else:
                words = self.answer.split(" ")
                for i, word in enumerate(words):
                    yield chunk({"content": word + (" " if i < len(words) - 1 else "")})
                    if cut and i == 1:
                        return  # the connection ends mid-answer: no finish, no [DONE]
            yield chunk({}, finish)
            if include_usage:
                payload = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
                yield b"data: " + json.dumps(payload).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def _openai_embed(self, request: Request) -> Response:
        body = await self._seen(request)
        refusal = self._refusal(self._next(), request)
        if refusal is not None:
            return refusal
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3]}
            for i in range(len(inputs))
        ]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 5 * len(inputs), "total_tokens": 5 * len(inputs)},
            }
        )

    # -- Anthropic Messages API ----------------------------------------------------
    async def _anthropic(self, request: Request) -> Response:
        body = await self._seen(request)
        behaviour = self._next()
        refusal = self._refusal(behaviour, request)
        if refusal is not None:
            return refusal
        model = body["model"]
        tools = body.get("tools")
        if tools:
            content: list[dict[str, Any]] = [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": tools[0]["name"],
                    "input": {"city": "Paris"},
                },
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": self.answer}], "end_turn"
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": stop,
                    "usage": {"input_tokens": 30, "output_tokens": 9},
                }
            )
        cut = behaviour == "cut"

        async def events() -> AsyncIterator[bytes]:
            def event(name: str, payload: dict[str, Any]) -> bytes:
                return f"event: {name}\ndata: {json.dumps({'type': name, **payload})}\n\n".encode()

            yield event(
                "message_start",
                {"message": {"id": "msg_fake", "model": model, "usage": {"input_tokens": 30}}},
            )
            for index, block in enumerate(content):
                if block["type"] == "text":
                    yield event(
                        "content_block_start",
                        {"index": index, "content_block": {"type": "text", "text": ""}},
                    )
                    for i, word in enumerate(block["text"].split(" ")):
                        yield event(
                            "content_block_delta",
                            {"index": index, "delta": {"type": "text_delta", "text": word + " "}},
                        )
                        if cut and i == 1:
                            return
                else:
                    yield event(
                        "content_block_start",
                        {
                            "index": index,
                            "content_block": {
                                "type": "tool_use",
                                "id": block["id"],
                                "name": block["name"],
                                "input": {},
                            },
                        },
                    )
                    yield event(
                        "content_block_delta",
                        {
                            "index": index,
                            "delta": {
                                "type": "input_json_delta",
                                "partial_json": json.dumps(block["input"]),
                            },
                        },
                    )
                yield event("content_block_stop", {"index": index})
            yield event(
                "message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}
            )
            yield event("message_stop", {})

        return StreamingResponse(events(), media_type="text/event-stream")
