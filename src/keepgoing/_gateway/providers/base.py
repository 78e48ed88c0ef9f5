"""What every provider does, in OpenAI's chat format (the gateway's own format).

A provider answers a chat completion as OpenAI's ``chat.completion`` object,
streams it as ``chat.completion.chunk`` objects (the last one carrying
``usage``), and computes embeddings as OpenAI's ``list`` of embeddings.
Failures are :class:`ProviderError`: ``retryable`` ones (429, 5xx, timeouts,
a connection that failed, a stream cut before its end) move the gateway on to
the next fallback.
"""

from __future__ import annotations

import abc
import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from keepgoing._gateway.config import ProviderConfig

__all__ = ["HttpProvider", "Provider", "ProviderError", "http_client", "scrub"]


class ProviderError(Exception):
    """A provider call failed. ``status`` is the provider's HTTP status (None when no
    answer came); ``retryable`` says whether a fallback may be tried."""

    def __init__(
        self, message: str, *, status: int | None = None, retryable: bool = True, kind: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.kind = kind or ("truncated" if status is None and retryable else "error")


def retryable_status(status: int) -> bool:
    return status == 429 or status >= 500


class Provider(abc.ABC):
    def __init__(self, config: ProviderConfig) -> None:
        self.config = config

    @property
    def name(self) -> str:
        return self.config.name

    @abc.abstractmethod
    async def chat(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        """A ``chat.completion`` for ``body`` (OpenAI's request shape) from ``model``."""

    @abc.abstractmethod
    def stream(self, model: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects of the answer; raises
        :class:`ProviderError` if the stream ends before its finish reason."""

    @abc.abstractmethod
    async def embed(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        """OpenAI's embeddings answer for ``body``."""

    async def aclose(self) -> None:
        return None

    def secrets(self) -> list[str]:
        """Texts that must never leave the gateway (the provider's key)."""
        key = self.config.api_key()
        return [key] if key else []


class HttpProvider(Provider):
    """A provider over HTTP: one lazily opened client, the provider's own headers, and
    JSON answers checked the same way for every such provider."""

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = http_client(self.config)
        return self._client

    @abc.abstractmethod
    def _headers(self) -> dict[str, str]:
        """The headers of every request (the provider's key, its API version)."""

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``base_url + path``; the answer, a JSON object."""
        try:
            response = await self.client.post(
                self.config.base_url + path, json=body, headers=self._headers()
            )
        except httpx.HTTPError as exc:
            raise transport_error(exc, self) from None
        if response.status_code >= 400:
            raise error_from(response, self)
        try:
            # An embeddings answer may hold millions of numbers: parsed off the event loop.
            # A small answer is parsed here: a thread hop would cost more than the parse.
            if len(response.content) <= INLINE_JSON:
                answer = response.json()
            else:
                answer = await asyncio.to_thread(response.json)
        except ValueError:
            raise ProviderError(f"{self.name} answered with something that is not JSON") from None
        if not isinstance(answer, dict):
            raise ProviderError(f"{self.name} answered with JSON that is not an object")
        return answer

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


#: Answers up to this many bytes are parsed on the event loop (well under a millisecond).
INLINE_JSON = 64 * 1024


def http_client(config: ProviderConfig) -> httpx.AsyncClient:
    timeout = httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0))
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    return httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every secret replaced (a provider may echo its key in an error)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def error_from(response: httpx.Response, provider: Provider) -> ProviderError:
    """A :class:`ProviderError` describing a provider's error answer (key scrubbed)."""
    try:
        body = response.json()
        detail = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
        text = str(detail)
    except (json.JSONDecodeError, ValueError):
        text = response.text
    message = f"{provider.name} answered {response.status_code}: {text[:500]}"
    return ProviderError(
        scrub(message, provider.secrets()),
        status=response.status_code,
        retryable=retryable_status(response.status_code),
        kind="rate_limited" if response.status_code == 429 else "http_error",
    )


def transport_error(exc: httpx.HTTPError, provider: Provider) -> ProviderError:
    kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection"
    message = f"{provider.name}: {kind} ({type(exc).__name__}: {exc})"
    return ProviderError(scrub(message, provider.secrets()), retryable=True, kind=kind)
