"""The server application: ``create_app(store)`` builds the FastAPI app.

At start-up the app opens the store and starts the orchestrator services
(timers, lease reaping); at shutdown it stops them and closes the store.
Routes live in :mod:`keepgoing._server.routes`, one module per resource.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from keepgoing import __version__
from keepgoing._clock import Clock, system_clock
from keepgoing._server.context import ServerContext
from keepgoing._server.defaults import DEFAULT_MAX_BODY
from keepgoing._server.errors import install_error_handlers
from keepgoing._server.middleware import AccessLog, BodyLimit
from keepgoing._server.routes import ROUTERS
from keepgoing._services.orchestrator import Orchestrator
from keepgoing._store.protocol import Store

__all__ = ["create_app"]

DESCRIPTION = """\
Start runs, read their state and history, wait for results, send messages,
publish events, cancel runs, and manage tokens.

Every call but `/healthz` needs `Authorization: Bearer <token>`; create the
first token with `keepgoing token create`. Errors are JSON
`{"code", "message", "details"}` with a stable `code`.
"""


def create_app(
    store: Store,
    *,
    auth: bool = True,
    services: bool = True,
    clock: Clock = system_clock,
    max_body: int = DEFAULT_MAX_BODY,
    long_poll_max: float = 30.0,
    services_interval: float = 0.25,
) -> FastAPI:
    """The keepgoing HTTP API on ``store``.

    Args:
        store: where runs live; opened at start-up and closed at shutdown.
        auth: require tokens. Without it every caller acts as ``anonymous``
            with every permission, so only ever serve that on loopback.
        services: run the orchestrator (timers, lease reaping) in this process.
        clock: injected time.
        max_body: the largest request body, in bytes (413 above).
        long_poll_max: the longest a result long poll waits, in seconds.
        services_interval: the longest the orchestrator sleeps between passes.
    """
    orchestrator = (
        Orchestrator(store, clock=clock, interval=services_interval) if services else None
    )
    ctx = ServerContext(
        store=store,
        auth=auth,
        clock=clock,
        max_body=max_body,
        long_poll_max=long_poll_max,
        orchestrator=orchestrator,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await store.open()
        running = asyncio.create_task(orchestrator.run()) if orchestrator else None
        try:
            yield
        finally:
            if orchestrator is not None and running is not None:
                orchestrator.request_stop()
                await running
            await store.close()

    app = FastAPI(
        title="keepgoing",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.keepgoing = ctx
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(AccessLog, ctx=ctx)
    app.add_middleware(BodyLimit, ctx=ctx)  # outermost: refuses before anything reads
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's spec, with its 422 validation responses replaced by our 400s."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            responses.pop("422", None)
            for status, response in responses.items():
                if status[0] in "45":  # errors are JSON even where success is text
                    response["content"] = error
    components = schema.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    app.openapi_schema = schema
    return schema
