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
    recovery,
    retention,
    run_model,
    runs,
    schedules,
    stream,
    system,
    volumes,
    workers,
)

__all__ = ["ROUTERS"]

ROUTERS = (
    system.router,
    inspect.router,
    run_model.router,
    stream.router,
    migrate.router,
    batch.router,
    runs.router,
    recovery.router,
    messages.router,
    operations.router,
    workers.router,
    kill.router,
    volumes.router,
    groups.router,
    schedules.router,
    gateway_usage.router,
    retention.router,
    admin.router,
)
