"""The OpenAI-compatible API under ``/v1``, mounted by ``keepgoing server``.

``POST /v1/chat/completions`` (plain, or ``stream: true`` as server-sent
events ending in ``data: [DONE]``), ``POST /v1/embeddings``, ``GET /v1/models``.
The caller needs a token with ``gateway.use``; its key limits are read from the
store on each call. Errors use OpenAI's shape, ``{"error": {"message", "type",
"code", "param"}}``; a limit answers 429 with ``limit`` and ``resets_at`` in
the error and a ``Retry-After`` header.

A task's call carries ``X-Keepgoing-Run-Id``, ``-Step``, ``-Attempt`` and
``-Operation-Id``, which tie its ledger row to the step.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from keepgoing._gateway.ledger import Caller
from keepgoing._gateway.requests import MAX_DIMENSIONS, parse_body
from keepgoing._gateway.service import Gateway
from keepgoing._store.gateway_protocol import GatewayCall
from keepgoing.errors import BudgetExceededError, GatewayError

__all__ = ["PERMISSION", "error_body", "router"]

PERMISSION = "gateway.use"

# The OpenAPI description of the routes (they read their bodies themselves, so that
# every error is OpenAI-shaped). The door's 401 and the body limit's 413 keep the
# server's own error shape (``ErrorBody``).
_OPENAI_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": {"type": ["string", "null"]},
                "param": {"type": ["string", "null"]},
                "limit": {"type": "string"},
                "resets_at": {"type": ["number", "null"]},
            },
        }
    },
}
_ERROR_CONTENT = {
    "application/json": {
        "schema": {"anyOf": [_OPENAI_ERROR, {"$ref": "#/components/schemas/ErrorBody"}]}
    }
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": text, "content": _ERROR_CONTENT}
    for status, text in (
        (400, "A malformed body (the message names the field)"),
        (401, "No valid token"),
        (403, "The token lacks gateway.use, or the key may not use the model"),
        (404, "No such model"),
        (413, "The body is over the server's limit"),
        (429, "Over one of the key's limits, or every provider rate limited the call"),
        (500, "A replayed cassette has no recording of the call"),
        (502, "Every provider tried failed"),
        (503, "The store is unreachable"),
    )
}
_JSON_OBJECT = {"type": "object", "additionalProperties": True}
_MESSAGE = {
    "type": "object",
    "required": ["role"],
    "properties": {
        "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {
            "anyOf": [
                {"type": "string"},
                {"type": "null"},
                {"type": "array", "items": {"type": "object", "required": ["type"]}},
            ]
        },
        "tool_call_id": {"type": "string"},
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["function"],
                "properties": {
                    "function": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "arguments": {"type": "string"},
                        },
                    }
                },
            },
        },
    },
}
_INT = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
_CHAT_BODY = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "\\S"},
        "messages": {"type": "array", "minItems": 1, "maxItems": 10000, "items": _MESSAGE},
        "stream": {"type": "boolean"},
        "max_tokens": _INT,
        "max_completion_tokens": _INT,
        "n": _INT,
        "seed": _INT,
        "top_logprobs": _INT,
        "dimensions": _INT,
        "temperature": {"type": "number"},
        "top_p": {"type": "number"},
        "presence_penalty": {"type": "number"},
        "frequency_penalty": {"type": "number"},
        "stop": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["function"],
                "properties": {
                    "function": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "parameters": _JSON_OBJECT},
                    }
                },
            },
        },
    },
}
_EMBED_BODY = {
    "type": "object",
    "required": ["model", "input"],
    "properties": {
        "model": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "\\S"},
        "dimensions": {"type": "integer", "minimum": 1, "maximum": MAX_DIMENSIONS},
        "input": {
            "anyOf": [
                {"type": "string", "minLength": 1},
                {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 2048,
                    "items": {"type": "string", "minLength": 1},
                },
            ]
        },
    },
}


def _spec(body: dict[str, Any] | None, *, stream: bool = False) -> dict[str, Any]:
    ok: dict[str, Any] = {"application/json": {"schema": _JSON_OBJECT}}
    if stream:
        ok["text/event-stream"] = {"schema": {"type": "string"}}
    spec: dict[str, Any] = {"responses": {"200": {"description": "OK", "content": ok}}}
    if body is not None:
        spec["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    return spec


router = APIRouter(prefix="/v1", tags=["gateway"])
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error"}


def error_body(error: GatewayError) -> dict[str, Any]:
    status = error.status
    kind = _TYPES.get(status) or (
        "rate_limit_error"
        if status == 429
        else "not_found_error"
        if status == 404
        else "provider_error"
    )
    body: dict[str, Any] = {
        "message": str(error),
        "type": kind,
        "code": error.error_code,
        "param": error.param,
    }
    if isinstance(error, BudgetExceededError):
        body["limit"] = error.limit
        body["resets_at"] = error.resets_at
    return {"error": body}


def _answer(error: GatewayError, now: float) -> JSONResponse:
    headers = {}
    if isinstance(error, BudgetExceededError) and error.resets_at is not None:
        headers["Retry-After"] = str(max(1, math.ceil(error.resets_at - now)))
    status = error.status if 400 <= error.status < 600 else 502
    return JSONResponse(error_body(error), status_code=status, headers=headers)


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


def _int_header(request: Request, name: str) -> int | None:
    value = request.headers.get(name)
    if value is None or not value.isdigit() or len(value) > 12:
        return None
    return int(value)


async def _caller(request: Request) -> Caller:
    principal = getattr(request.state, "principal", None)
    if principal is None or not principal.allows(PERMISSION):
        raise GatewayError(
            f"this token lacks the {PERMISSION!r} permission",
            status=403 if principal is not None else 401,
            error_code="permission_denied",
        )
    gateway = _gateway(request)
    # A group's minted key is metered as ``group:<name>``: its limits span revisions.
    token_id = getattr(principal, "gateway_key", None) or principal.token_id or ""
    key = None
    if token_id and gateway.store is not None:
        key = await gateway.store.get_gateway_key(token_id)
    run_id = request.headers.get("x-keepgoing-run-id")
    step = _int_header(request, "x-keepgoing-step")
    attempt = _int_header(request, "x-keepgoing-attempt")
    if run_id is not None:
        await _may_attach(gateway, principal, run_id, step, attempt)
    operation = request.headers.get("x-keepgoing-operation-id")
    parent = {
        name: value[:512]
        for name in ("traceparent", "tracestate")
        if (value := request.headers.get(name)) is not None
    }
    return Caller(
        trace_parent=parent or None,
        key_id=token_id,
        key=key,
        run_id=run_id,
        step=step,
        attempt=attempt,
        operation_id=operation[:300] if operation else None,
    )


#: Who may attach a call to a run (``X-Keepgoing-Run-Id``): a token that may read runs,
#: for a run that exists, at a step attempt that is running now when one is named.
ATTACH_PERMISSION = "runs.read"


async def _may_attach(
    gateway: Gateway, principal: Any, run_id: str, step: int | None, attempt: int | None
) -> None:
    """Refuse (403) a call that would charge its usage to a run its key may not reach.

    A call tied to a run is counted in that run's cost and settled with its step, so
    the header is a claim the server checks rather than a label it takes."""

    def refused(why: str) -> GatewayError:
        return GatewayError(
            f"this key may not attach its calls to run {run_id[:200]!r}: {why}",
            status=403,
            error_code="run_not_allowed",
        )

    if not principal.allows(ATTACH_PERMISSION):
        raise refused(
            f"it lacks {ATTACH_PERMISSION!r}, so it reaches no run (call without "
            "X-Keepgoing-Run-Id, or use a key that may read runs)"
        )
    store = gateway.store
    if store is None:
        return
    if len(run_id) > 200 or await store.get_run(run_id) is None:
        raise refused("there is no such run")
    if step is None and attempt is None:
        return
    running = [
        t
        for t in await store.run_tasks(run_id)
        if t.status == "running" and (step is None or t.cmd == step)
        if attempt is None or t.attempt == attempt
    ]
    if not running:
        raise refused(f"it has no running attempt {attempt} of step {step}")


async def _body(request: Request) -> Any:
    return parse_body(await request.body())


def _headers(row: GatewayCall) -> dict[str, str]:
    return {
        "x-keepgoing-call-id": row.call_id,
        "x-keepgoing-provider": row.provider or "",
        "x-keepgoing-cost": repr(row.cost),
    }


@router.post(
    "/chat/completions",
    summary="A chat completion (OpenAI-compatible)",
    responses=_ERRORS,
    openapi_extra=_spec(_CHAT_BODY, stream=True),
)
async def chat_completions(request: Request) -> Any:
    gateway = _gateway(request)
    try:
        caller = await _caller(request)
        body = await _body(request)
        if isinstance(body, dict) and body.get("stream") is True:
            events = await gateway.stream(body, caller)
            return StreamingResponse(
                events,
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        answer, row = await gateway.chat(body, caller)
    except GatewayError as exc:
        return _answer(exc, gateway.clock.now())
    return JSONResponse(answer, headers=_headers(row))


@router.post(
    "/embeddings",
    summary="Embeddings (OpenAI-compatible)",
    responses=_ERRORS,
    openapi_extra=_spec(_EMBED_BODY),
)
async def embeddings(request: Request) -> Any:
    gateway = _gateway(request)
    try:
        caller = await _caller(request)
        answer, row = await gateway.embed(await _body(request), caller)
    except GatewayError as exc:
        return _answer(exc, gateway.clock.now())
    # Up to MAX_EMBEDDING_VALUES numbers: rendered on a thread, off the event loop.
    return await asyncio.to_thread(JSONResponse, answer, headers=_headers(row))


@router.get(
    "/models",
    summary="The models this key may use (OpenAI-compatible)",
    responses={k: v for k, v in _ERRORS.items() if k in (401, 403, 503)},
    openapi_extra=_spec(None),
)
async def models(request: Request) -> Any:
    gateway = _gateway(request)
    try:
        caller = await _caller(request)
    except GatewayError as exc:
        return _answer(exc, gateway.clock.now())
    return JSONResponse({"object": "list", "data": gateway.models(caller)})
