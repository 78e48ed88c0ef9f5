"""Relaying a provider's stream to the caller as server-sent events.

The relay passes each ``chat.completion.chunk`` on as it arrives, gathers the
answer (text and tool calls) and the final usage, and when the stream ends
writes the ledger row and only then sends ``data: [DONE]``. If the provider
sent no usage, it is estimated and sent as the final usage chunk. A stream cut
after the first event reached the caller ends with an ``error`` event and no
``[DONE]`` (status ``truncated`` in the ledger); a caller that goes away
mid-stream leaves a row with status ``cancelled`` and the tokens seen so far.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from keepgoing import _tracing as tracing
from keepgoing._gateway.config import Target
from keepgoing._gateway.ledger import Caller, estimate_tokens, kept
from keepgoing._gateway.providers import ProviderError
from keepgoing._gateway.requests import ChatRequest
from keepgoing._sse import frame, raw_frame
from keepgoing._store.gateway_protocol import GatewayCall

if TYPE_CHECKING:
    from keepgoing._gateway.service import Gateway

__all__ = ["DONE", "Relay", "meaningful", "replayed", "sse"]

DONE = raw_frame("[DONE]")


def sse(payload: dict[str, Any]) -> bytes:
    """One chunk of the relayed stream, as an unnamed event."""
    return frame(payload)


def meaningful(chunk: dict[str, Any]) -> bool:
    """Whether ``chunk`` carries part of the answer (not just the opening role)."""
    if chunk.get("usage"):
        return True
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") or {}
        if choice.get("finish_reason") or delta.get("content") or delta.get("tool_calls"):
            return True
    return False


async def replayed(chunks: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for chunk in chunks:
        yield chunk


@dataclass
class Relay:
    gateway: Gateway
    request: ChatRequest
    caller: Caller
    target: Target
    iterator: AsyncIterator[dict[str, Any]]
    buffered: list[dict[str, Any]]
    tries: int
    t0: float
    created: float
    span: Any
    cassette_key: str | None
    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    model: str | None = None
    finish: str | None = None
    ttft: float | None = None
    seen: list[dict[str, Any]] = field(default_factory=list)

    def absorb(self, chunk: dict[str, Any]) -> None:
        if self.ttft is None and meaningful(chunk):
            self.ttft = time.perf_counter() - self.t0
        if self.cassette_key is not None:
            self.seen.append(chunk)
        self.model = self.model or chunk.get("model")
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            self.finish = choice.get("finish_reason") or self.finish
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                index = int(call.get("index", 0))
                gathered = self.calls.setdefault(
                    index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                gathered["id"] = call.get("id") or gathered["id"]
                function = call.get("function") or {}
                gathered["function"]["name"] += function.get("name") or ""
                gathered["function"]["arguments"] += function.get("arguments") or ""

    def _tokens(self) -> tuple[int, int]:
        usage = self.usage or {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            return prompt, completion
        answer = "".join(self.text) + json.dumps(list(self.calls.values()))
        return estimate_tokens(self.request.messages, answer)

    def row(self, status: str, error: str | None = None) -> GatewayCall:
        input_tokens, output_tokens = self._tokens()
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        prompts = self.gateway.config.prompts
        return GatewayCall(
            call_id=self.caller.row_id(),
            operation="chat",
            model_asked=self.request.model,
            model_answered=self.model or self.target.model,
            provider=self.target.provider.name,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost=self.target.price.cost(input_tokens, output_tokens),
            latency=time.perf_counter() - self.t0,
            ttft=self.ttft,
            status=status,
            created_at=self.created,
            error=error,
            streamed=True,
            tries=self.tries,
            prompt=kept(prompts, self.request.messages),
            answer=kept(prompts, message),
            **self.caller.stamp(),
        )

    def _end_span(self, row: GatewayCall) -> None:
        tracing.finish(
            self.span,
            {
                "gen_ai.provider.name": self.target.provider.type,
                "gen_ai.response.model": row.model_answered,
                "gen_ai.response.finish_reasons": [self.finish] if self.finish else None,
                "gen_ai.usage.input_tokens": row.input_tokens,
                "gen_ai.usage.output_tokens": row.output_tokens,
                "keepgoing.gateway.provider": row.provider,
                "keepgoing.gateway.cost_usd": row.cost,
                "keepgoing.gateway.ttft": row.ttft,
                "keepgoing.gateway.tries": row.tries,
            },
            row.error if row.status != "ok" else None,
        )

    async def events(self) -> AsyncIterator[bytes]:
        recorded = False
        status, error = "cancelled", "the caller went away mid-stream"
        try:
            for chunk in self.buffered:
                self.absorb(chunk)
                yield sse(chunk)
            try:
                async for chunk in self.iterator:
                    self.absorb(chunk)
                    yield sse(chunk)
            except ProviderError as exc:
                status, error = "truncated", str(exc)
                row = self.row(status, error)
                await self.gateway.record(row)
                recorded = True
                self._end_span(row)
                yield sse(
                    {
                        "error": {
                            "message": f"the stream from {self.target.label} was cut after "
                            f"the answer began, so no fallback could be tried: {exc}",
                            "type": "provider_error",
                            "code": "stream_truncated",
                            "param": None,
                        }
                    }
                )
                return
            if self.usage is None:
                prompt, completion = self._tokens()
                self.usage = {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                }
                yield sse(
                    {
                        "id": "chatcmpl-usage",
                        "object": "chat.completion.chunk",
                        "created": int(self.created),
                        "model": self.model or self.target.model,
                        "choices": [],
                        "usage": self.usage,
                    }
                )
            row = self.row("ok")
            await self.gateway.record(row)
            recorded = True
            self._end_span(row)
            if self.cassette_key is not None and self.gateway.cassette is not None:
                entry = {
                    "label": self.target.label,
                    "provider": self.target.provider.name,
                    "model": self.target.model,
                    "chunks": self.seen,
                }
                self.gateway.cassette.record(self.cassette_key, entry)
            yield DONE
        finally:
            if not recorded:
                row = self.row(status, error)
                self.gateway.record_later(row)
                self._end_span(row)
            closer = getattr(self.iterator, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):  # a cut stream has nothing to add
                    await closer()
