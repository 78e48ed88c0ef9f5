"""The API's routes, one module per resource; :data:`ROUTERS` lists them in mount order."""

from __future__ import annotations

from keepgoing._server.routes import admin, messages, runs, system, volumes, workers

__all__ = ["ROUTERS"]

ROUTERS = (
    system.router,
    runs.router,
    messages.router,
    workers.router,
    volumes.router,
    admin.router,
)
