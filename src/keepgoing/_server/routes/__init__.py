"""The API's routes, one module per resource; :data:`ROUTERS` lists them in mount order."""

from __future__ import annotations

from keepgoing._server.routes import (
    admin,
    batch,
    gateway_usage,
    groups,
    inspect,
    kill,
    messages,
    migrate,
    operations,
    retention,
    runs,
    stream,
    system,
    volumes,
    workers,
)

__all__ = ["ROUTERS"]

ROUTERS = (
    system.router,
    inspect.router,
    stream.router,
    migrate.router,
    batch.router,
    runs.router,
    messages.router,
    operations.router,
    workers.router,
    kill.router,
    volumes.router,
    groups.router,
    gateway_usage.router,
    retention.router,
    admin.router,
)
