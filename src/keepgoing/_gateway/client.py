"""What ``keepgoing.gateway.chat`` and ``embed`` run: over HTTP, or in this process.

* With ``KEEPGOING_URL`` set, the call goes to that server's ``/v1`` API with
  ``KEEPGOING_TOKEN`` (a token with ``gateway.use``), and the server keeps the
  ledger and applies the key's limits.
* Otherwise the gateway runs in this process on the configuration of
  ``keepgoing.toml`` (``KEEPGOING_CONFIG``) and records into the task's store
  (outside a task, ``KEEPGOING_STORE``); no key, so no key limits.

Inside a task attempt each call carries the run id, step, attempt and
``operation_id()``: its ledger row is settled with the attempt's outcome.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import httpx

from keepgoing import _tracing as tracing
from keepgoing._gateway.config import load_config
from keepgoing._gateway.ledger import Caller
from keepgoing._gateway.service import Gateway
from keepgoing._portal import Portal
from keepgoing._runtime.context import current_task_context
from keepgoing._store.protocol import Store
from keepgoing._volumes import access
from keepgoing._volumes.staging import current_attempt
from keepgoing.errors import BudgetExceededError, GatewayError

__all__ = ["ChatResponse", "EmbedResponse", "achat", "aembed", "chat", "embed"]

_lock = threading.Lock()
_portal: Portal | None = None
_gateways: dict[int, tuple[Store, Gateway]] = {}
_pid = os.getpid()
#: One kept-alive connection pool per process for calls through a server (a new
#: connection per call would cost a TCP handshake each), and one per event loop for
#: the async calls (an async client belongs to the loop it was made on).
_http: httpx.Client | None = None
_ahttp: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class ChatResponse:
    """A chat answer. ``message`` is the assistant message to append to the
    conversation; ``text`` its content, ``tool_calls`` its tool calls (OpenAI's shape)."""

    text: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    model: str
    input_tokens: int
    output_tokens: int
    cost: float
    call_id: str
    provider: str
    raw: dict[str, Any] = field(repr=False)

    @property
    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


@dataclass(frozen=True)
class EmbedResponse:
    """Embedding vectors, one per input, in input order."""

    vectors: list[list[float]]
    model: str
    input_tokens: int
    cost: float
    call_id: str
    raw: dict[str, Any] = field(repr=False)


def _step() -> dict[str, Any]:
    ctx = current_task_context()
    if ctx is None:
        return {}
    return {
        "run_id": ctx.run_id,
        "step": ctx.cmd,
        "attempt": ctx.attempt,
        "operation_id": ctx.operation_id,
    }


def _headers(step: dict[str, Any]) -> dict[str, str]:
    headers = {}
    token = os.environ.get("KEEPGOING_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if step:
        headers["X-Keepgoing-Run-Id"] = str(step["run_id"])
        headers["X-Keepgoing-Step"] = str(step["step"])
        headers["X-Keepgoing-Attempt"] = str(step["attempt"])
        headers["X-Keepgoing-Operation-Id"] = str(step["operation_id"])
    tracing.inject(headers)  # the server's model-call span continues the step's trace
    return headers


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        error = response.json().get("error") or {}
        if not isinstance(error, dict):
            error = {"message": str(error)}
    except (ValueError, AttributeError):
        error = {"message": response.text[:500]}
    message = str(error.get("message") or f"the gateway answered {response.status_code}")
    code = str(error.get("code") or "")
    if response.status_code == 429 and error.get("limit"):
        raise BudgetExceededError(
            message, limit=str(error["limit"]), resets_at=error.get("resets_at")
        )
    raise GatewayError(
        message, status=response.status_code, error_code=code, param=error.get("param")
    )


def _post(path: str, body: dict[str, Any], timeout: float) -> tuple[dict[str, Any], httpx.Headers]:
    url = os.environ["KEEPGOING_URL"].rstrip("/") + "/v1" + path
    try:
        response = _sync_client().post(url, json=body, headers=_headers(_step()), timeout=timeout)
    except httpx.HTTPError as exc:
        raise GatewayError(
            f"cannot reach the gateway at {url}: {exc}", status=503, error_code="unreachable"
        ) from None
    _raise_for(response)
    answer: dict[str, Any] = response.json()
    return answer, response.headers


async def _apost(
    path: str, body: dict[str, Any], timeout: float
) -> tuple[dict[str, Any], httpx.Headers]:
    url = os.environ["KEEPGOING_URL"].rstrip("/") + "/v1" + path
    try:
        response = await _async_client().post(
            url, json=body, headers=_headers(_step()), timeout=timeout
        )
    except httpx.HTTPError as exc:
        raise GatewayError(
            f"cannot reach the gateway at {url}: {exc}", status=503, error_code="unreachable"
        ) from None
    _raise_for(response)
    answer: dict[str, Any] = response.json()
    return answer, response.headers


def _forked() -> None:
    """Forget what a parent process made (called under ``_lock``)."""
    global _portal, _pid, _http
    if os.getpid() != _pid:  # a forked child starts afresh
        _portal, _pid, _http = None, os.getpid(), None
        _gateways.clear()
        _ahttp.clear()


def _sync_client() -> httpx.Client:
    global _http
    with _lock:
        _forked()
        if _http is None:
            _http = httpx.Client()
        return _http


def _async_client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    with _lock:
        _forked()
        client = _ahttp.get(loop)
        if client is None:
            client = _ahttp[loop] = httpx.AsyncClient()
        return client


def _the_portal() -> Portal:
    global _portal
    with _lock:
        _forked()
        if _portal is None:
            _portal = Portal("keepgoing-gateway")
        return _portal


def _local_gateway() -> Gateway:
    attempt = current_attempt()
    store = attempt.store if attempt is not None else access.shared_store(None)
    with _lock:
        found = _gateways.get(id(store))
        if found is None or found[0] is not store:
            found = _gateways[id(store)] = (store, Gateway(load_config(), store))
        return found[1]


async def _local(operation: str, body: dict[str, Any], step: dict[str, Any]) -> Any:
    gateway = _local_gateway()
    if gateway.store is not None:
        await gateway.store.open()
    caller = Caller(**step)
    if operation == "chat":
        return await gateway.chat(body, caller)
    return await gateway.embed(body, caller)


def _chat_response(
    answer: dict[str, Any], call_id: str, provider: str, cost: float
) -> ChatResponse:
    choice = (answer.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    usage = answer.get("usage") or {}
    return ChatResponse(
        text=message.get("content"),
        tool_calls=list(message.get("tool_calls") or []),
        finish_reason=choice.get("finish_reason"),
        model=str(answer.get("model", "")),
        input_tokens=int(usage.get("prompt_tokens", 0)),
        output_tokens=int(usage.get("completion_tokens", 0)),
        cost=cost,
        call_id=call_id,
        provider=provider,
        raw=answer,
    )


def _embed_response(answer: dict[str, Any], call_id: str, cost: float) -> EmbedResponse:
    data = sorted(answer.get("data") or [], key=lambda d: d.get("index", 0))
    usage = answer.get("usage") or {}
    return EmbedResponse(
        vectors=[list(d.get("embedding") or []) for d in data],
        model=str(answer.get("model", "")),
        input_tokens=int(usage.get("prompt_tokens", 0)),
        cost=cost,
        call_id=call_id,
        raw=answer,
    )


def _chat_body(model: str, messages: Any, tools: Any, params: dict[str, Any]) -> dict[str, Any]:
    if params.get("stream"):
        raise GatewayError(
            "keepgoing.gateway.chat returns the whole answer; stream through the /v1 API "
            "with an OpenAI client instead",
            status=400,
            error_code="invalid_request_error",
            param="stream",
        )
    body: dict[str, Any] = {**params, "model": model, "messages": messages}
    if tools is not None:
        body["tools"] = tools
    return body


def _from_headers(answer: dict[str, Any], headers: httpx.Headers, *, chat: bool) -> Any:
    call_id = headers.get("x-keepgoing-call-id", "")
    try:
        cost = float(headers.get("x-keepgoing-cost", "0"))
    except ValueError:
        cost = 0.0
    if chat:
        return _chat_response(answer, call_id, headers.get("x-keepgoing-provider", ""), cost)
    return _embed_response(answer, call_id, cost)


def chat(
    *,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    timeout: float = 120.0,
    **params: Any,
) -> ChatResponse:
    """See :func:`keepgoing.gateway.chat`."""
    body = _chat_body(model, messages, tools, params)
    if os.environ.get("KEEPGOING_URL"):
        answer, headers = _post("/chat/completions", body, timeout)
        response: ChatResponse = _from_headers(answer, headers, chat=True)
        return response
    answer, row = _the_portal().call(_local("chat", body, _step()))
    return _chat_response(answer, row.call_id, row.provider or "", row.cost)


async def achat(
    *,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    timeout: float = 120.0,
    **params: Any,
) -> ChatResponse:
    """See :func:`keepgoing.gateway.achat`."""
    body = _chat_body(model, messages, tools, params)
    if os.environ.get("KEEPGOING_URL"):
        answer, headers = await _apost("/chat/completions", body, timeout)
        response: ChatResponse = _from_headers(answer, headers, chat=True)
        return response
    step = _step()
    future = asyncio.run_coroutine_threadsafe(_local("chat", body, step), _the_portal().loop)
    answer, row = await asyncio.wrap_future(future)
    return _chat_response(answer, row.call_id, row.provider or "", row.cost)


def embed(
    *, model: str, input: str | list[str], timeout: float = 120.0, **params: Any
) -> EmbedResponse:
    """See :func:`keepgoing.gateway.embed`."""
    body = {**params, "model": model, "input": input}
    if os.environ.get("KEEPGOING_URL"):
        answer, headers = _post("/embeddings", body, timeout)
        response: EmbedResponse = _from_headers(answer, headers, chat=False)
        return response
    answer, row = _the_portal().call(_local("embeddings", body, _step()))
    return _embed_response(answer, row.call_id, row.cost)


async def aembed(
    *,
    model: str,
    input: str | list[str],
    timeout: float = 120.0,
    **params: Any,
) -> EmbedResponse:
    """See :func:`keepgoing.gateway.aembed`."""
    body = {**params, "model": model, "input": input}
    if os.environ.get("KEEPGOING_URL"):
        answer, headers = await _apost("/embeddings", body, timeout)
        response: EmbedResponse = _from_headers(answer, headers, chat=False)
        return response
    step = _step()
    future = asyncio.run_coroutine_threadsafe(_local("embeddings", body, step), _the_portal().loop)
    answer, row = await asyncio.wrap_future(future)
    return _embed_response(answer, row.call_id, row.cost)
