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
from starlette.routing import Route

from keepgoing._clock import Clock, system_clock
from keepgoing._gateway import http as gateway_http
from keepgoing._gateway.config import GatewayConfig, load_config
from keepgoing._gateway.service import Gateway
from keepgoing._groups.service import group_autoscaler
from keepgoing._schedules.service import Scheduler
from keepgoing._server.apidocs import docs_page
from keepgoing._server.context import ServerContext
from keepgoing._server.defaults import (
    DEFAULT_LONG_POLL_MAX,
    DEFAULT_MAX_BODY,
    DEFAULT_SESSION_IDLE,
    DEFAULT_SESSION_LIFETIME,
    DEFAULT_STREAM_MAX,
)
from keepgoing._server.door import Door
from keepgoing._server.errors import install_error_handlers
from keepgoing._server.group_keys import GroupKeys
from keepgoing._server.middleware import AccessLog, BodyLimit, NoSniff
from keepgoing._server.routes import ROUTERS
from keepgoing._server.routing import RunPaths
from keepgoing._server.schemas import MAX_VERSION
from keepgoing._server.ui import Session, mount_ui
from keepgoing._store.protocol import Store
from keepgoing._version import __version__
from keepgoing._worker.orchestrator import Orchestrator
from keepgoing._worker.retention import RetentionPolicy, RetentionSweep

__all__ = ["create_app"]

DESCRIPTION = """\
Start runs, read their state and history, wait for results, send messages,
publish events, cancel runs, and manage tokens.

Every call but `/healthz` and `/readyz` needs `Authorization: Bearer <token>`; create the
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
    long_poll_max: float = DEFAULT_LONG_POLL_MAX,
    stream_max: float = DEFAULT_STREAM_MAX,
    services_interval: float = 0.25,
    groups: bool = True,
    ui: bool = True,
    gateway: GatewayConfig | None = None,
    session_idle: float = DEFAULT_SESSION_IDLE,
    session_lifetime: float = DEFAULT_SESSION_LIFETIME,
    replica_url: str | None = None,
    retention: RetentionPolicy | None = None,
) -> FastAPI:
    """The keepgoing HTTP API on ``store``.

    Args:
        store: where runs live; opened at start-up and closed at shutdown.
        auth: require tokens. Without it every caller acts as ``anonymous``
            with every permission, so only ever serve that on loopback: the app
            then answers only loopback ``Host`` names, refuses changes from
            another browser origin, and creates or revokes no tokens.
        services: run the orchestrator (timers, lease reaping) and fire schedules
            (:mod:`keepgoing._schedules.service`) in this process.
        clock: injected time.
        max_body: the largest request body, in bytes (413 above).
        long_poll_max: the longest a result long poll waits, in seconds.
        stream_max: the longest an event stream stays open, in seconds.
        services_interval: the longest the orchestrator sleeps between passes.
        groups: with ``services``, also run the worker-group autoscaler (local
            backend; not for a store in memory).
        ui: serve the web UI (:mod:`keepgoing._server.ui`) at ``/``.
        gateway: the model gateway's configuration (default: ``load_config()``, which
            reads ``KEEPGOING_CONFIG`` or ``./keepgoing.toml``); served under ``/v1``.
        session_idle: seconds a UI session may go unused before it ends.
        session_lifetime: seconds a UI session lasts after signing in, however used.
        replica_url: this server's URL as the replicas of its groups reach it; with it,
            each group revision's replicas get it and a gateway key of their own
            (:mod:`keepgoing._server.group_keys`), so their model calls come here.
        retention: with ``services``, the retention sweep's policy (default: no store
            default, so only workflows with their own ``retention=`` are swept).
    """
    sweep = RetentionSweep(store, retention or RetentionPolicy(), clock=clock)
    orchestrator = (
        Orchestrator(store, clock=clock, interval=services_interval, retention=sweep)
        if services
        else None
    )
    keys = GroupKeys(store, replica_url, clock=clock) if replica_url else None
    scaler = group_autoscaler(store, clock=clock, keys=keys) if services and groups else None
    scheduler = Scheduler(store, clock=clock) if services else None
    ctx = ServerContext(
        store=store,
        auth=auth,
        clock=clock,
        max_body=max_body,
        long_poll_max=long_poll_max,
        stream_max=stream_max,
        orchestrator=orchestrator,
        session_idle=session_idle,
        session_lifetime=session_lifetime,
    )

    models = Gateway(gateway if gateway is not None else load_config(), store, clock=clock)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await store.open()
        running = asyncio.create_task(orchestrator.run()) if orchestrator else None
        scaling = asyncio.create_task(scaler.run()) if scaler else None
        firing = asyncio.create_task(scheduler.run()) if scheduler else None
        try:
            yield
        finally:
            if scheduler is not None and firing is not None:
                scheduler.request_stop()
                await firing
            if scaler is not None and scaling is not None:
                scaler.request_stop()
                await scaling
            if orchestrator is not None and running is not None:
                orchestrator.request_stop()
                await running
            await models.aclose()
            await store.close()

    app = FastAPI(
        title="keepgoing",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # no documentation UI from a CDN: /docs is rendered here
        redoc_url=None,
    )
    app.state.keepgoing = ctx
    app.state.gateway = models
    install_error_handlers(app)
    app.add_api_route("/docs", lambda: docs_page(app), include_in_schema=False, methods=["GET"])
    # The gateway first: a model call is matched before the API's routes are tried.
    routers = (gateway_http.router, *ROUTERS)
    for router in routers:
        app.include_router(router)
    if ui:
        mount_ui(app)
    app.state.allow = [
        (route.path_regex, frozenset(route.methods or ()))
        for route in (*app.router.routes, *(r for router in routers for r in router.routes))
        if isinstance(route, Route)
    ]
    # Outermost last: the access log sees every answer; the UI's session turns its cookie
    # into the bearer token the door checks (and checks CSRF); the door refuses before the
    # body limit, routing or parsing; RunPaths hands the router ids that contain `/`.
    app.add_middleware(RunPaths)
    app.add_middleware(BodyLimit, ctx=ctx)
    app.add_middleware(Door, ctx=ctx)
    if ui:
        app.add_middleware(Session, ctx=ctx)  # the browser's cookie, before the door
    app.add_middleware(AccessLog, ctx=ctx)
    app.add_middleware(NoSniff)  # on every answer, the door's and the errors' too
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
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.get("responses", {})
            if "HTTPValidationError" in str(responses.get("422", "")):
                responses.pop("422")  # FastAPI's: validation errors are our 400s
            if path.startswith("/v1/"):
                continue  # the gateway's routes describe their own (OpenAI-shaped) errors
            for status, response in responses.items():
                if status[0] in "45":  # errors are JSON even where success is text
                    response["content"] = error
    components = schema.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    _integer_bounds(schema)
    app.openapi_schema = schema
    return schema


def _integer_bounds(node: Any) -> None:
    """Give integer bounds back as integers: FastAPI's model of a body schema holds
    them as floats, which turns the largest version id into 9.223372036854776e+18
    (and rounds it up past the 64-bit range)."""
    if isinstance(node, list):
        for item in node:
            _integer_bounds(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "integer":
        for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            value = node.get(bound)
            if isinstance(value, float):
                node[bound] = MAX_VERSION if value == float(MAX_VERSION) else int(value)
    for child in node.values():
        _integer_bounds(child)
