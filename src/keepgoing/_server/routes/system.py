"""Health (no token needed) and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from keepgoing import __version__
from keepgoing._server import metrics
from keepgoing._server.auth import ReadsRuns
from keepgoing._server.context import context
from keepgoing._server.routes._common import STRICT, documented
from keepgoing._server.schemas import Health

__all__ = ["router"]

router = APIRouter(tags=["system"], dependencies=STRICT)


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    """Answers 200 while the server runs. Needs no token."""
    return Health(status="ok", version=__version__)


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
