"""Any OpenAI-compatible API (OpenAI, vLLM, Ollama, LM Studio, Together, Groq, ...)."""

from __future__ import annotations

import json
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

__all__ = ["OpenAIProvider"]


class OpenAIProvider(HttpProvider):
    def _headers(self) -> dict[str, str]:
        key = self.config.api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def chat(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self._post("/chat/completions", {**body, "model": model, "stream": False})
        if not isinstance(answer.get("choices"), list) or not answer["choices"]:
            raise ProviderError(f"{self.name} answered without choices")
        return answer

    async def stream(self, model: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        request = {
            **body,
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        finished = False
        try:
            async with self.client.stream(
                "POST",
                self.config.base_url + "/chat/completions",
                json=request,
                headers=self._headers(),
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise error_from(response, self)
                async for _, data in events(response.aiter_lines()):
                    if data.strip() == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        raise ProviderError(
                            f"{self.name} sent a stream event that is not JSON"
                        ) from None
                    if not isinstance(chunk, dict):
                        continue
                    if "error" in chunk:
                        raise ProviderError(f"{self.name} ended its stream with an error")
                    for choice in chunk.get("choices") or ():
                        if isinstance(choice, dict) and choice.get("finish_reason"):
                            finished = True
                    yield chunk
        except httpx.HTTPError as exc:
            raise transport_error(exc, self) from None
        if not finished:
            raise ProviderError(
                f"{self.name}'s stream ended before its finish reason (cut mid-answer)",
                kind="truncated",
            )

    async def embed(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self._post("/embeddings", {**body, "model": model})
        if not isinstance(answer.get("data"), list):
            raise ProviderError(f"{self.name} answered embeddings without data")
        return answer
