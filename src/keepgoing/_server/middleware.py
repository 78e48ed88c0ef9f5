"""ASGI middleware: the request-size limit, the access log, and ``nosniff`` on every answer.

Both are plain ASGI (not ``BaseHTTPMiddleware``) so a long poll or a large
body streams through them untouched.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keepgoing._clock import system_clock
from keepgoing._server.context import ServerContext
from keepgoing._server.errors import TOO_LARGE, ApiError, error_response

__all__ = ["AccessLog", "BodyLimit", "NoSniff"]

access_log = logging.getLogger("keepgoing.server.access")


class BodyLimit:
    """Refuse bodies over ``ctx.max_body`` bytes with 413 ``payload_too_large``.

    A declared ``Content-Length`` over the limit is refused before reading; a
    chunked body is counted as it arrives and refused when it crosses the limit.
    """

    def __init__(self, app: ASGIApp, ctx: ServerContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.ctx.max_body
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and not (
            declared.isascii() and declared.isdigit() and int(declared) <= limit
        ):
            response = error_response(413, "payload_too_large", _too_large(limit))
            await response(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # FastAPI turns any error while reading the body into a 400; the
                    # flag lets the error handler answer 413 instead.
                    scope.setdefault("state", {})[TOO_LARGE] = _too_large(limit)
                    raise ApiError(413, "payload_too_large", _too_large(limit))
            return message

        await self.app(scope, counted, send)


class NoSniff:
    """``X-Content-Type-Options: nosniff`` on every response, so a browser never runs a
    JSON error or a log text it guessed to be a script or a page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if not any(k.lower() == b"x-content-type-options" for k, _ in headers):
                    headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


def _too_large(limit: int) -> str:
    return f"the request body is over the server's limit of {limit:,} bytes"


class AccessLog:
    """One log line per request, with the caller, and the per-status request counter."""

    def __init__(self, app: ASGIApp, ctx: ServerContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = system_clock.monotonic()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.ctx.counters.count_request(status)
            _log(scope, status, started)


def _log(scope: Scope, status: int, started: float) -> None:
    principal: Any = scope.get("state", {}).get("principal")
    actor = f"{principal.kind}:{principal.id}" if principal is not None else None
    fields = {
        "event": "request",
        "method": scope.get("method"),
        "path": scope.get("path"),
        "status": status,
        "duration_ms": round((system_clock.monotonic() - started) * 1000, 2),
        "actor": actor,
    }
    access_log.info(
        "%s %s %s %.1fms",
        fields["method"],
        fields["path"],
        status,
        fields["duration_ms"],
        extra={"fields": fields},
    )
