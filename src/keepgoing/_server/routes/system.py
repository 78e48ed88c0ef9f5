"""Health (no token needed) and Prometheus metrics."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict

from keepgoing._server import metrics
from keepgoing._server.auth import ReadsRuns
from keepgoing._server.context import context
from keepgoing._server.routes._common import STRICT, documented
from keepgoing._server.schemas import Health
from keepgoing._version import __version__

__all__ = ["router"]

router = APIRouter(tags=["system"], dependencies=STRICT)


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    """Answers 200 while the server runs. Needs no token."""
    return Health(status="ok", version=__version__)


class Readiness(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["ready"]


@router.get("/readyz", response_model=Readiness, summary="Readiness")
async def readyz() -> Readiness:
    """Answers 200 once the server has opened its store and serves the API; while
    `keepgoing server` waits at start-up for a store it cannot reach yet, 503
    (every other call but `/healthz` then answers 503 too). Needs no token."""
    return Readiness(status="ready")


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses=documented(ok={"content": {metrics.CONTENT_TYPE: {"schema": {"type": "string"}}}}),
    summary="Prometheus metrics",
)
async def get_metrics(request: Request, _: ReadsRuns) -> PlainTextResponse:
    """Runs by status, queue depth, workers, step latency histogram, lease expiries,
    and this process's timers fired, leases reaped and requests."""
    text = await metrics.render(context(request))
    return PlainTextResponse(text, media_type=metrics.CONTENT_TYPE)
